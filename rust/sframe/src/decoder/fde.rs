// SPDX-License-Identifier: GPL-2.0

//! Function descriptor entries.
//!
//! V2 FDE (20 bytes): `i32 start`, `u32 size`, `u32 start_fre_off`,
//! `u32 num_fres`, `u8 info`, `u8 rep_size`, `u16 padding`.
//!
//! V3 FDE index entry (16 bytes): `i64 start`, `u32 size`,
//! `u32 start_fre_off`; at `start_fre_off` in the FRE area a 5-byte
//! attribute `u16 num_fres`, `u8 info`, `u8 info2`, `u8 rep_size` precedes
//! the function's FREs.
//!
//! `info`: bits 0-3 FRE type, bit 4 PC type (1 = PCMASK), bit 5 AArch64
//! pauth key, bit 7 signal frame (V3 only). `info2` (V3): bits 0-4 FDE type
//! (0 DEFAULT, 1 FLEX).
//!
//! The start is relative to the start of the section, or with
//! `SFRAME_F_FDE_FUNC_START_PCREL` to the address of the start field itself.

use super::bytes::{array_at, usize_from, Be, ByteOrder, Le};
use super::header::{
    Section, Version, FLAG_FDE_FUNC_START_PCREL, V2_FDE_LEN, V3_ATTR_LEN, V3_FDE_LEN,
};
use super::Error;

/// How FRE start offsets are matched against a PC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PcType {
    /// FRE `n` applies from `start + offset(n)` up to the next FRE.
    Inc,
    /// The function is a block of `rep_size` bytes repeated (PLT entries):
    /// FREs are matched against `(pc - start) % rep_size`.
    Mask,
}

/// How the data words of the FREs are interpreted (V3 `info2`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FdeType {
    /// CFA offset, then RA and FP offsets as the ABI tracks them.
    Default,
    /// Pairs of control word and offset per tracked entity (V3 only).
    Flex,
}

/// Size of an FRE's start offset field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FreType {
    /// 1-byte start offsets.
    Addr1,
    /// 2-byte start offsets.
    Addr2,
    /// 4-byte start offsets.
    Addr4,
}

impl FreType {
    /// Size in bytes of the start offset field.
    pub fn addr_size(self) -> usize {
        match self {
            FreType::Addr1 => 1,
            FreType::Addr2 => 2,
            FreType::Addr4 => 4,
        }
    }
}

/// One function descriptor entry, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fde {
    /// Absolute address of the function's first byte.
    pub start: u64,
    /// Size of the function in bytes.
    pub size: u32,
    /// How FRE starts are matched.
    pub pc_type: PcType,
    /// Size of the repeated block for [`PcType::Mask`].
    pub rep_size: u8,
    /// Number of FREs of the function.
    pub num_fres: u32,
    /// How FRE data words are interpreted.
    pub fde_type: FdeType,
    /// The function is a signal trampoline (V3 signal-frame bit).
    pub signal_frame: bool,
    /// AArch64 pointer authentication key (0 = A, 1 = B).
    pub pauth_key: u8,
    /// Offset of the first FRE from the start of the FRE area.
    pub(super) fre_off: usize,
    pub(super) fre_type: FreType,
}

impl Fde {
    /// The FRE start offset encoding.
    pub fn fre_type(&self) -> FreType {
        self.fre_type
    }

    /// One past the function's last byte (validated not to overflow).
    pub fn end(&self) -> u64 {
        self.start.saturating_add(u64::from(self.size))
    }

    /// Whether `pc` lies inside the function.
    pub fn contains(&self, pc: u64) -> bool {
        pc >= self.start && pc.wrapping_sub(self.start) < u64::from(self.size)
    }
}

/// Where one version keeps the fields of an FDE that the binary search
/// reads, so that the search can be compiled once per version.
pub(super) trait FdeLayout {
    /// Size of one FDE (index entry) in the FDE array.
    const LEN: usize;

    /// The raw start field and the size of the FDE at `off` in `fdes`,
    /// with one bounds check.
    fn start_size<E: ByteOrder>(fdes: &[u8], off: usize) -> Option<(i64, u32)>;
}

/// V2: `i32 start`, `u32 size`, ...
pub(super) struct V2Layout;

/// V3: `i64 start`, `u32 size`, ...
pub(super) struct V3Layout;

impl FdeLayout for V2Layout {
    const LEN: usize = V2_FDE_LEN;

    #[inline(always)]
    fn start_size<E: ByteOrder>(fdes: &[u8], off: usize) -> Option<(i64, u32)> {
        let [s0, s1, s2, s3, z0, z1, z2, z3] = array_at(fdes, off)?;
        Some((
            i64::from(E::i32([s0, s1, s2, s3])),
            E::u32([z0, z1, z2, z3]),
        ))
    }
}

impl FdeLayout for V3Layout {
    const LEN: usize = V3_FDE_LEN;

    #[inline(always)]
    fn start_size<E: ByteOrder>(fdes: &[u8], off: usize) -> Option<(i64, u32)> {
        let [s0, s1, s2, s3, s4, s5, s6, s7, z0, z1, z2, z3] = array_at(fdes, off)?;
        Some((
            E::i64([s0, s1, s2, s3, s4, s5, s6, s7]),
            E::u32([z0, z1, z2, z3]),
        ))
    }
}

impl<'a> Section<'a> {
    #[inline(always)]
    fn fde_len(&self) -> usize {
        match self.version {
            Version::V2 => V2_FDE_LEN,
            Version::V3 => V3_FDE_LEN,
        }
    }

    /// Offset of FDE `index` within the FDE array.
    #[inline(always)]
    pub(super) fn fde_off(&self, index: u32) -> Result<usize, Error> {
        if index >= self.num_fdes {
            return Err(Error::FdeIndexOutOfRange);
        }
        usize_from(index)
            .checked_mul(self.fde_len())
            .ok_or(Error::FdeIndexOutOfRange)
    }

    /// Absolute start of the function of the FDE at `off` in the FDE array,
    /// from its raw start field; fails if the start or the end overflows.
    #[inline(always)]
    fn fde_start(&self, off: usize, raw: i64, size: u32) -> Result<u64, Error> {
        let mut base = self.addr;
        if self.flags & FLAG_FDE_FUNC_START_PCREL != 0 {
            // The start field is the FDE's first field.
            let field = self
                .fde_area_off
                .checked_add(off)
                .and_then(|o| u64::try_from(o).ok())
                .ok_or(Error::FunctionStartOverflow)?;
            base = base
                .checked_add(field)
                .ok_or(Error::FunctionStartOverflow)?;
        }
        let start = base
            .checked_add_signed(raw)
            .ok_or(Error::FunctionStartOverflow)?;
        start
            .checked_add(u64::from(size))
            .ok_or(Error::FunctionStartOverflow)?;
        Ok(start)
    }

    /// Start address and size of FDE `index`, reading only those fields
    /// (what the binary search needs).
    pub(super) fn fde_range(&self, index: u32) -> Result<(u64, u32), Error> {
        let off = self.fde_off(index)?;
        if self.fdes.big_endian() {
            self.fde_range_at::<Be>(off)
        } else {
            self.fde_range_at::<Le>(off)
        }
    }

    /// [`Section::fde_range`] of the FDE at `off` in the FDE array.
    #[inline(always)]
    pub(super) fn fde_range_at<E: ByteOrder>(&self, off: usize) -> Result<(u64, u32), Error> {
        let fdes = self.fdes.as_slice();
        let (raw, size) = match self.version {
            Version::V2 => V2Layout::start_size::<E>(fdes, off),
            Version::V3 => V3Layout::start_size::<E>(fdes, off),
        }
        .ok_or(Error::FdeAreaOutOfBounds)?;
        Ok((self.fde_start(off, raw, size)?, size))
    }

    /// Decodes FDE `index` (for V3 including its attribute in the FRE area).
    pub fn fde(&self, index: u32) -> Result<Fde, Error> {
        let off = self.fde_off(index)?;
        if self.fdes.big_endian() {
            self.fde_at::<Be>(off)
        } else {
            self.fde_at::<Le>(off)
        }
    }

    /// Decodes the FDE at `off` in the FDE array.
    ///
    /// Reads the fields in the order, and with the errors, of
    /// [`Section::fde_range`] then the rest, but each group of fields with
    /// one bounds check and in byte order `E`.
    #[inline(always)]
    pub(super) fn fde_at<E: ByteOrder>(&self, off: usize) -> Result<Fde, Error> {
        let fdes = self.fdes.as_slice();
        let (start, size, num_fres, info, info2, rep_size, fre_off) = match self.version {
            Version::V2 => {
                let (raw, size) =
                    V2Layout::start_size::<E>(fdes, off).ok_or(Error::FdeAreaOutOfBounds)?;
                let start = self.fde_start(off, raw, size)?;
                let [f0, f1, f2, f3, n0, n1, n2, n3, info, rep_size] = off
                    .checked_add(8)
                    .and_then(|o| array_at(fdes, o))
                    .ok_or(Error::FdeAreaOutOfBounds)?;
                let fre_off = usize_from(E::u32([f0, f1, f2, f3]));
                let num_fres = E::u32([n0, n1, n2, n3]);
                (start, size, num_fres, info, 0, rep_size, fre_off)
            }
            Version::V3 => {
                let (raw, size) =
                    V3Layout::start_size::<E>(fdes, off).ok_or(Error::FdeAreaOutOfBounds)?;
                let start = self.fde_start(off, raw, size)?;
                let attr_off = off
                    .checked_add(12)
                    .and_then(|o| array_at(fdes, o))
                    .map(|b| usize_from(E::u32(b)))
                    .ok_or(Error::FdeAreaOutOfBounds)?;
                let [n0, n1, info, info2, rep_size] =
                    array_at::<V3_ATTR_LEN>(self.fres.as_slice(), attr_off)
                        .ok_or(Error::FreOutOfBounds)?;
                // The attribute is in bounds, so the sum is too.
                let fre_off = attr_off.saturating_add(V3_ATTR_LEN);
                let num_fres = u32::from(E::u16([n0, n1]));
                (start, size, num_fres, info, info2, rep_size, fre_off)
            }
        };
        let fre_type = match info & 0xf {
            0 => FreType::Addr1,
            1 => FreType::Addr2,
            2 => FreType::Addr4,
            _ => return Err(Error::BadFreType),
        };
        let pc_type = if info & 0x10 != 0 {
            PcType::Mask
        } else {
            PcType::Inc
        };
        if pc_type == PcType::Mask && rep_size == 0 {
            return Err(Error::BadRepSize);
        }
        let fde_type = match info2 & 0x1f {
            0 => FdeType::Default,
            1 => FdeType::Flex,
            _ => return Err(Error::BadFdeType),
        };
        Ok(Fde {
            start,
            size,
            pc_type,
            rep_size,
            num_fres,
            fde_type,
            signal_frame: self.version == Version::V3 && info & 0x80 != 0,
            pauth_key: (info >> 5) & 1,
            fre_off,
            fre_type,
        })
    }

    /// Iterates over all FDEs in section order; stops after the first error.
    pub fn fdes(&self) -> FdeIter<'a> {
        FdeIter {
            section: *self,
            next: 0,
            failed: false,
        }
    }

    /// `[lowest function start, highest function end)` over all FDEs, or
    /// `None` for a section without FDEs. O(number of FDEs).
    pub fn text_range(&self) -> Result<Option<(u64, u64)>, Error> {
        let mut range: Option<(u64, u64)> = None;
        for index in 0..self.num_fdes {
            let (start, size) = self.fde_range(index)?;
            // `fde_range` checked that this does not overflow.
            let end = start.saturating_add(u64::from(size));
            range = Some(match range {
                None => (start, end),
                Some((lo, hi)) => (lo.min(start), hi.max(end)),
            });
        }
        Ok(range)
    }
}

/// Iterator over the FDEs of a [`Section`], see [`Section::fdes`].
#[derive(Clone, Debug)]
pub struct FdeIter<'a> {
    section: Section<'a>,
    next: u32,
    failed: bool,
}

impl Iterator for FdeIter<'_> {
    type Item = Result<Fde, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.next >= self.section.num_fdes {
            return None;
        }
        let item = self.section.fde(self.next);
        self.next = self.next.saturating_add(1);
        self.failed = item.is_err();
        Some(item)
    }
}
