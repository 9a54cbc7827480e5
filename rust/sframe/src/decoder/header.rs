// SPDX-License-Identifier: GPL-2.0

//! The SFrame header and the [`Section`] it describes.
//!
//! Layout (28 bytes, target byte order, packed): `u16 magic`, `u8 version`,
//! `u8 flags`, `u8 abi_arch`, `i8 cfa_fixed_fp_offset`,
//! `i8 cfa_fixed_ra_offset`, `u8 auxhdr_len`, `u32 num_fdes`,
//! `u32 num_fres`, `u32 fre_len`, `u32 fdeoff`, `u32 freoff`; the two
//! offsets count from the end of the header plus the auxiliary header.

use super::bytes::{usize_from, Bytes};
use super::index::Index;
use super::table::Table;
use super::Error;

/// Size of the fixed SFrame header.
pub(super) const HEADER_LEN: usize = 28;
/// The magic number, in the target byte order.
const MAGIC: u16 = 0xdee2;

/// Function descriptor entries are sorted by start address.
pub const FLAG_FDE_SORTED: u8 = 0x1;
/// Functions preserve the frame pointer (defined in V2 only).
pub const FLAG_FRAME_POINTER: u8 = 0x2;
/// FDE function starts are relative to the FDE's own start field.
pub const FLAG_FDE_FUNC_START_PCREL: u8 = 0x4;
const V2_FLAGS: u8 = FLAG_FDE_SORTED | FLAG_FRAME_POINTER | FLAG_FDE_FUNC_START_PCREL;
const V3_FLAGS: u8 = FLAG_FDE_SORTED | FLAG_FDE_FUNC_START_PCREL;

/// Size of one V2 FDE.
pub(super) const V2_FDE_LEN: usize = 20;
/// Size of one V3 FDE index entry.
pub(super) const V3_FDE_LEN: usize = 16;
/// Size of the V3 per-function attribute at the head of its FREs.
pub(super) const V3_ATTR_LEN: usize = 5;
/// Smallest possible FRE: a 1-byte start offset and the info byte.
const MIN_FRE_LEN: usize = 2;

/// The SFrame format versions this decoder accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    /// Version 2 (binutils 2.41 to 2.45): 20-byte FDEs.
    V2,
    /// Version 3 (binutils 2.46 and later): 16-byte FDE index entries plus a
    /// 5-byte attribute in the FRE area, FLEX FDEs, signal-frame bit.
    V3,
}

/// The ABI/arch identifier of a section.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Abi {
    /// AArch64, big endian (identifier 1).
    Aarch64Be,
    /// AArch64, little endian (identifier 2).
    Aarch64Le,
    /// x86-64, little endian (identifier 3).
    Amd64Le,
    /// s390x, big endian (identifier 4). Parsed and validated; rows are not decoded.
    S390xBe,
}

impl Abi {
    fn from_u8(v: u8) -> Result<Self, Error> {
        match v {
            1 => Ok(Abi::Aarch64Be),
            2 => Ok(Abi::Aarch64Le),
            3 => Ok(Abi::Amd64Le),
            4 => Ok(Abi::S390xBe),
            _ => Err(Error::UnsupportedAbi(v)),
        }
    }

    fn big_endian(self) -> bool {
        matches!(self, Abi::Aarch64Be | Abi::S390xBe)
    }
}

/// Where a parsed section's parts are ([`Section::layout`]), to make it
/// again from the same bytes ([`Section::with_layout`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    version: Version,
    abi: Abi,
    flags: u8,
    fixed_fp: i8,
    fixed_ra: i8,
    num_fdes: u32,
    num_fres: u32,
    fde_area_off: usize,
    fde_area_len: usize,
    fre_area_off: usize,
    fre_area_len: usize,
    big_endian: bool,
}

/// A parsed `.sframe` section, borrowing its bytes.
///
/// # Invariants
///
/// The header was read, the FDE array and the FRE area lie inside `data` and
/// do not overlap, and `num_fres` FREs of the smallest size fit the FRE area.
/// Nothing else is trusted: every later read is bounds checked, and
/// [`Section::validate`] checks the rest once.
#[derive(Clone, Copy, Debug)]
pub struct Section<'a> {
    pub(super) addr: u64,
    pub(super) version: Version,
    pub(super) abi: Abi,
    pub(super) flags: u8,
    pub(super) fixed_fp: i8,
    pub(super) fixed_ra: i8,
    pub(super) num_fdes: u32,
    pub(super) num_fres: u32,
    /// Offset of the FDE array from the start of the section.
    pub(super) fde_area_off: usize,
    /// Offset of the FRE area from the start of the section.
    pub(super) fre_area_off: usize,
    /// The FDE array, exactly `num_fdes` entries.
    pub(super) fdes: Bytes<'a>,
    /// The FRE area, exactly `fre_len` bytes.
    pub(super) fres: Bytes<'a>,
    /// The lookup index, if one was given ([`Section::with_index`]).
    pub(super) index: Option<Index<'a>>,
    /// The row table, if one was given ([`Section::with_table`]).
    pub(super) table: Option<Table<'a>>,
}

impl<'a> Section<'a> {
    /// Reads the header and checks the area bounds, in O(1).
    ///
    /// `section_addr` is the virtual address the first byte of `data` is
    /// mapped at: function start addresses are stored relative to it (or,
    /// with [`FLAG_FDE_FUNC_START_PCREL`], relative to each FDE's own field).
    pub fn parse(data: &'a [u8], section_addr: u64) -> Result<Self, Error> {
        if data.len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let le = Bytes::new(data, false);
        let big_endian = match le.u16(0) {
            Some(MAGIC) => false,
            Some(m) if m.swap_bytes() == MAGIC => true,
            _ => return Err(Error::BadMagic),
        };
        let b = Bytes::new(data, big_endian);
        let field = |off: usize| b.u8(off).ok_or(Error::Truncated);
        let word = |off: usize| b.u32(off).ok_or(Error::Truncated);

        let version = match field(2)? {
            2 => Version::V2,
            3 => Version::V3,
            v => return Err(Error::UnsupportedVersion(v)),
        };
        let flags = field(3)?;
        let allowed = match version {
            Version::V2 => V2_FLAGS,
            Version::V3 => V3_FLAGS,
        };
        if flags & !allowed != 0 {
            return Err(Error::BadFlags);
        }
        let abi = Abi::from_u8(field(4)?)?;
        if abi.big_endian() != big_endian {
            return Err(Error::EndianMismatch);
        }
        let fixed_fp = i8::from_ne_bytes([field(5)?]);
        let fixed_ra = i8::from_ne_bytes([field(6)?]);
        let auxhdr_len = usize::from(field(7)?);
        let num_fdes = word(8)?;
        let num_fres = word(12)?;
        let fre_len = usize_from(word(16)?);
        let fdeoff = usize_from(word(20)?);
        let freoff = usize_from(word(24)?);

        let header_end = HEADER_LEN
            .checked_add(auxhdr_len)
            .filter(|&end| end <= data.len())
            .ok_or(Error::AuxHeaderOutOfBounds)?;

        let fde_len = match version {
            Version::V2 => V2_FDE_LEN,
            Version::V3 => V3_FDE_LEN,
        };
        let fde_area_off = header_end
            .checked_add(fdeoff)
            .ok_or(Error::FdeAreaOutOfBounds)?;
        let fde_area_len = usize_from(num_fdes)
            .checked_mul(fde_len)
            .ok_or(Error::FdeAreaOutOfBounds)?;
        b.sub(fde_area_off, fde_area_len)
            .ok_or(Error::FdeAreaOutOfBounds)?;

        let fre_area_off = header_end
            .checked_add(freoff)
            .ok_or(Error::FreAreaOutOfBounds)?;
        b.sub(fre_area_off, fre_len)
            .ok_or(Error::FreAreaOutOfBounds)?;

        // Both areas are in bounds, so these sums cannot overflow.
        let fde_area_end = fde_area_off.saturating_add(fde_area_len);
        let fre_area_end = fre_area_off.saturating_add(fre_len);
        if fde_area_len != 0
            && fre_len != 0
            && fde_area_off < fre_area_end
            && fre_area_off < fde_area_end
        {
            return Err(Error::AreasOverlap);
        }

        // V3 keeps a 5-byte attribute per function in the FRE area.
        let attr_bytes = match version {
            Version::V2 => 0,
            Version::V3 => usize_from(num_fdes)
                .checked_mul(V3_ATTR_LEN)
                .filter(|&n| n <= fre_len)
                .ok_or(Error::FreAreaOutOfBounds)?,
        };
        let min_fre_bytes = usize_from(num_fres)
            .checked_mul(MIN_FRE_LEN)
            .ok_or(Error::TooManyFres)?;
        if min_fre_bytes > fre_len.saturating_sub(attr_bytes) {
            return Err(Error::TooManyFres);
        }

        // Both areas were checked to fit above: this makes the section.
        let layout = Layout {
            version,
            abi,
            flags,
            fixed_fp,
            fixed_ra,
            num_fdes,
            num_fres,
            fde_area_off,
            fde_area_len,
            fre_area_off,
            fre_area_len: fre_len,
            big_endian,
        };
        Self::with_layout(data, &layout, section_addr)
    }

    /// Where this section's parts are, without its bytes or address:
    /// [`Section::with_layout`] makes the section again from them.
    pub fn layout(&self) -> Layout {
        Layout {
            version: self.version,
            abi: self.abi,
            flags: self.flags,
            fixed_fp: self.fixed_fp,
            fixed_ra: self.fixed_ra,
            num_fdes: self.num_fdes,
            num_fres: self.num_fres,
            fde_area_off: self.fde_area_off,
            fde_area_len: self.fdes.len(),
            fre_area_off: self.fre_area_off,
            fre_area_len: self.fres.len(),
            big_endian: self.fdes.big_endian(),
        }
    }

    /// The section [`Section::parse`] gives for `data` at `section_addr`,
    /// made from the `layout` of an earlier parse of the same bytes in
    /// O(1), without reading the header again: a walk that keeps a
    /// section's layout, not the section (which borrows its bytes), pays
    /// two bounds checks, not the header's parse.
    ///
    /// The layout's areas are checked to lie inside `data`, and its other
    /// fields were checked by that parse, so the section's invariants hold
    /// for any bytes; for bytes other than those parsed, lookups read
    /// whatever those bytes hold, never out of bounds.
    /// [`Error::Truncated`] if an area does not fit.
    #[inline]
    pub fn with_layout(data: &'a [u8], layout: &Layout, section_addr: u64) -> Result<Self, Error> {
        let b = Bytes::new(data, layout.big_endian);
        let fdes = b
            .sub(layout.fde_area_off, layout.fde_area_len)
            .ok_or(Error::Truncated)?;
        let fres = b
            .sub(layout.fre_area_off, layout.fre_area_len)
            .ok_or(Error::Truncated)?;
        Ok(Section {
            addr: section_addr,
            version: layout.version,
            abi: layout.abi,
            flags: layout.flags,
            fixed_fp: layout.fixed_fp,
            fixed_ra: layout.fixed_ra,
            num_fdes: layout.num_fdes,
            num_fres: layout.num_fres,
            fde_area_off: layout.fde_area_off,
            fre_area_off: layout.fre_area_off,
            fdes,
            fres,
            index: None,
            table: None,
        })
    }

    /// The format version.
    pub fn version(&self) -> Version {
        self.version
    }

    /// The ABI/arch identifier.
    pub fn abi(&self) -> Abi {
        self.abi
    }

    /// The raw header flags (`FLAG_*`).
    pub fn flags(&self) -> u8 {
        self.flags
    }

    /// Number of function descriptor entries.
    pub fn num_fdes(&self) -> u32 {
        self.num_fdes
    }

    /// Number of frame row entries, as the header states it.
    pub fn num_fres(&self) -> u32 {
        self.num_fres
    }

    /// The FP save slot relative to the CFA when fixed for the ABI, else 0.
    pub fn cfa_fixed_fp_offset(&self) -> i8 {
        self.fixed_fp
    }

    /// The RA save slot relative to the CFA when fixed (x86-64: -8), else 0.
    pub fn cfa_fixed_ra_offset(&self) -> i8 {
        self.fixed_ra
    }

    /// The virtual address the section was parsed at.
    pub fn section_addr(&self) -> u64 {
        self.addr
    }

    /// Length in bytes of the FRE area (`fre_len` in the header).
    pub fn fre_len(&self) -> u32 {
        u32::try_from(self.fres.len()).unwrap_or(u32::MAX)
    }
}
