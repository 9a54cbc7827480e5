// SPDX-License-Identifier: GPL-2.0

//! Frame row entries and the unwind rows they describe.
//!
//! An FRE is a start offset (1, 2 or 4 bytes as the FDE's FRE type says,
//! relative to the function start), an info byte, and `count` data words of
//! `size` bytes. Info byte: bit 0 CFA base (0 FP, 1 SP; DEFAULT FDEs only),
//! bits 1-4 data word count, bits 5-6 data word size (0/1/2 = 1/2/4 bytes,
//! 3 undefined), bit 7 mangled RA (AArch64).
//!
//! DEFAULT FDEs: word 0 is the signed CFA offset from the base register;
//! then the RA offset from the CFA, present only when the header has no fixed
//! RA offset (x86-64 has a fixed -8, AArch64 none); then the FP offset from
//! the CFA, present only when the header has no fixed FP offset. No data
//! words at all marks the outermost frame (RA undefined).
//!
//! FLEX FDEs (V3): for CFA, then RA, then FP, an unsigned control word
//! `regnum << 3 | deref_p << 1 | reg_p` (bit 2 reserved, zero) followed by
//! a signed offset. The CFA is `reg + offset`, dereferenced when `deref_p`.
//! RA and FP are at `*(base + offset)` when `deref_p`, else they are the
//! value `base + offset`, where the base is the register when `reg_p` else
//! the CFA (so `CFA + offset` as a value cannot be expressed: its control
//! word would be zero). A single zero control word is padding: that entity keeps its
//! default rule (the header's fixed offset, else unchanged), which lets an
//! FRE describe FP without RA. Only the CFA pair is mandatory.

use core::marker::PhantomData;

use super::bytes::{array_at, Be, ByteOrder, Bytes, Le};
use super::fde::{Fde, FdeType, FreType};
use super::header::{Abi, Section};
use super::Error;

/// A register an unwind rule refers to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reg {
    /// The stack pointer.
    Sp,
    /// The frame pointer (x86-64 `rbp`, AArch64 `x29`).
    Fp,
    /// Another register, by DWARF number (only from V3 FLEX FDEs).
    Dwarf(u16),
}

/// How to compute the canonical frame address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CfaRule {
    /// The register the CFA is computed from.
    pub base: Reg,
    /// Added to the register's value.
    pub offset: i32,
    /// When set, the CFA is the 8-byte value loaded from `base + offset`.
    pub deref: bool,
}

/// How to recover the caller's value of a register (RA or FP).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegRule {
    /// Not tracked: the register still holds the caller's value (for the
    /// AArch64 RA: it is still in the link register).
    Unchanged,
    /// Saved at `CFA + offset`.
    AtCfa(i32),
    /// No value: the outermost frame.
    Undefined,
    /// The value is in this register.
    InReg(Reg),
    /// Saved at `reg + offset` (FLEX FDEs).
    AtReg {
        /// Base register of the address.
        reg: Reg,
        /// Added to the register's value.
        offset: i32,
    },
    /// The value is `reg + offset` itself, not loaded (FLEX FDEs, non-zero offset).
    ValReg {
        /// The register.
        reg: Reg,
        /// Added to the register's value.
        offset: i32,
    },
}

/// The unwind rules that apply at one PC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Row {
    /// How to compute the CFA.
    pub cfa: CfaRule,
    /// How to recover the return address.
    pub ra: RegRule,
    /// How to recover the caller's frame pointer.
    pub fp: RegRule,
    /// The outermost frame: nothing to unwind to.
    pub outermost: bool,
    /// The function is a signal trampoline (V3 FDE signal-frame bit).
    pub signal_frame: bool,
    /// AArch64: the return address is signed (pointer authentication).
    pub mangled_ra: bool,
}

/// One frame row entry, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fre {
    /// Absolute address where the row starts to apply: the function start
    /// plus the FRE's offset (for PCMASK FDEs, in the first repetition).
    pub start: u64,
    /// The unwind rules.
    pub row: Row,
}

/// The fixed-size part of an FRE, located but not yet interpreted.
#[derive(Clone, Copy, Debug)]
pub(super) struct RawFre {
    /// Start offset from the function start.
    pub(super) start_off: u32,
    pub(super) info: u8,
    /// Offset of the first data word in the FRE area.
    pub(super) words_off: usize,
    pub(super) word_size: usize,
    pub(super) word_count: usize,
    /// Offset of the next FRE in the FRE area.
    pub(super) next: usize,
}

impl RawFre {
    /// Reads the FRE at `pos` in the FRE area `fres`.
    pub(super) fn read(fres: &Bytes<'_>, pos: usize, fde: &Fde) -> Result<Self, Error> {
        let data = fres.as_slice();
        match (fres.big_endian(), fde.fre_type) {
            (false, FreType::Addr1) => Self::read_at::<Le, 1>(data, pos),
            (false, FreType::Addr2) => Self::read_at::<Le, 2>(data, pos),
            (false, FreType::Addr4) => Self::read_at::<Le, 4>(data, pos),
            (true, FreType::Addr1) => Self::read_at::<Be, 1>(data, pos),
            (true, FreType::Addr2) => Self::read_at::<Be, 2>(data, pos),
            (true, FreType::Addr4) => Self::read_at::<Be, 4>(data, pos),
        }
    }

    /// Reads the FRE at `pos` in the FRE area `fres`, whose start offsets
    /// are `N` bytes (1, 2 or 4) in byte order `E`.
    ///
    /// Specialised per byte order and start offset size, because the FRE
    /// scan of a lookup runs this once per FRE of the function.
    #[inline(always)]
    pub(super) fn read_at<E: ByteOrder, const N: usize>(
        fres: &[u8],
        pos: usize,
    ) -> Result<Self, Error> {
        let start_off = match N {
            1 => fres.get(pos).copied().map(u32::from),
            2 => array_at(fres, pos).map(|b| u32::from(E::u16(b))),
            4 => array_at(fres, pos).map(E::u32),
            _ => None,
        };
        let start_off = start_off.ok_or(Error::FreOutOfBounds)?;
        let info_off = pos.checked_add(N).ok_or(Error::FreOutOfBounds)?;
        let info = *fres.get(info_off).ok_or(Error::FreOutOfBounds)?;
        // Codes 0, 1, 2 are sizes 1, 2, 4 (a shift, not a jump table).
        let code = (info >> 5) & 0x3;
        if code == 3 {
            return Err(Error::BadDataWordSize);
        }
        let word_size = 1usize.wrapping_shl(u32::from(code));
        let word_count = usize::from((info >> 1) & 0xf);
        // `info_off` indexes a byte of `fres`, so this cannot overflow, and
        // at most 15 words of at most 4 bytes follow.
        let words_off = info_off.wrapping_add(1);
        let next = words_off
            .checked_add(word_count.wrapping_mul(word_size))
            .filter(|&next| next <= fres.len())
            .ok_or(Error::FreOutOfBounds)?;
        Ok(RawFre {
            start_off,
            info,
            words_off,
            word_size,
            word_count,
            next,
        })
    }
}

/// Reads the data words of one FRE in order, in byte order `E`.
struct Words<'s, E> {
    /// Exactly the FRE's data words.
    words: &'s [u8],
    size: usize,
    count: usize,
    used: usize,
    order: PhantomData<E>,
}

impl<'s, E: ByteOrder> Words<'s, E> {
    /// The data words of `raw`, which [`RawFre::read_at`] found inside
    /// `fres`.
    #[inline(always)]
    fn new(fres: &'s [u8], raw: &RawFre) -> Result<Self, Error> {
        Ok(Words {
            words: fres
                .get(raw.words_off..raw.next)
                .ok_or(Error::FreOutOfBounds)?,
            size: raw.word_size,
            count: raw.word_count,
            used: 0,
            order: PhantomData,
        })
    }

    #[inline(always)]
    fn left(&self) -> usize {
        self.count.saturating_sub(self.used)
    }

    /// Offset of the next word in `words`.
    #[inline(always)]
    fn pos(&self) -> Result<usize, Error> {
        if self.used >= self.count {
            return Err(Error::BadDataWordCount);
        }
        // At most 15 words of at most 4 bytes.
        Ok(self.used.wrapping_mul(self.size))
    }

    #[inline(always)]
    fn signed(&mut self) -> Result<i32, Error> {
        let pos = self.pos()?;
        let v = match self.size {
            1 => self
                .words
                .get(pos)
                .map(|&b| i32::from(i8::from_ne_bytes([b]))),
            2 => array_at(self.words, pos)
                .map(|b| i32::from(i16::from_ne_bytes(E::u16(b).to_ne_bytes()))),
            4 => array_at(self.words, pos).map(E::i32),
            _ => None,
        }
        .ok_or(Error::FreOutOfBounds)?;
        self.used = self.used.saturating_add(1);
        Ok(v)
    }

    #[inline(always)]
    fn unsigned(&mut self) -> Result<u32, Error> {
        let pos = self.pos()?;
        let v = match self.size {
            1 => self.words.get(pos).map(|&b| u32::from(b)),
            2 => array_at(self.words, pos).map(|b| u32::from(E::u16(b))),
            4 => array_at(self.words, pos).map(E::u32),
            _ => None,
        }
        .ok_or(Error::FreOutOfBounds)?;
        self.used = self.used.saturating_add(1);
        Ok(v)
    }
}

/// Maps a DWARF register number to a [`Reg`] for `abi`.
fn dwarf_reg(abi: Abi, regnum: u32) -> Result<Reg, Error> {
    match (abi, regnum) {
        // x86-64 DWARF: 6 is %rbp, 7 is %rsp.
        (Abi::Amd64Le, 6) => Ok(Reg::Fp),
        (Abi::Amd64Le, 7) => Ok(Reg::Sp),
        // AArch64 DWARF: 29 is x29 (FP), 31 is SP.
        (Abi::Aarch64Le | Abi::Aarch64Be, 29) => Ok(Reg::Fp),
        (Abi::Aarch64Le | Abi::Aarch64Be, 31) => Ok(Reg::Sp),
        _ => u16::try_from(regnum)
            .map(Reg::Dwarf)
            .map_err(|_| Error::BadRegister),
    }
}

/// A decoded FLEX control word.
struct Control {
    regnum: u32,
    deref: bool,
    reg_p: bool,
}

impl Control {
    fn decode(word: u32) -> Result<Self, Error> {
        if word & 0x4 != 0 {
            return Err(Error::BadControlWord);
        }
        let c = Control {
            regnum: word >> 3,
            deref: word & 0x2 != 0,
            reg_p: word & 0x1 != 0,
        };
        if !c.reg_p && c.regnum != 0 {
            return Err(Error::BadControlWord);
        }
        Ok(c)
    }
}

impl<'a> Section<'a> {
    /// The rule for RA or FP when the FRE does not track it.
    fn default_rule(fixed: i8) -> RegRule {
        if fixed != 0 {
            RegRule::AtCfa(i32::from(fixed))
        } else {
            RegRule::Unchanged
        }
    }

    /// Interprets the data words of `raw`, an FRE of `fde`.
    pub(super) fn decode_row(&self, fde: &Fde, raw: RawFre) -> Result<Row, Error> {
        if self.fres.big_endian() {
            self.decode_row_in::<Be>(fde, raw)
        } else {
            self.decode_row_in::<Le>(fde, raw)
        }
    }

    /// [`Section::decode_row`] in byte order `E`.
    #[inline(always)]
    pub(super) fn decode_row_in<E: ByteOrder>(&self, fde: &Fde, raw: RawFre) -> Result<Row, Error> {
        if self.abi == Abi::S390xBe {
            return Err(Error::UnsupportedRows);
        }
        let base = if raw.info & 0x1 != 0 {
            Reg::Sp
        } else {
            Reg::Fp
        };
        let mut row = Row {
            cfa: CfaRule {
                base,
                offset: 0,
                deref: false,
            },
            ra: RegRule::Undefined,
            fp: RegRule::Unchanged,
            outermost: raw.word_count == 0,
            signal_frame: fde.signal_frame,
            mangled_ra: raw.info & 0x80 != 0,
        };
        if row.outermost {
            return Ok(row);
        }
        let mut words = Words::<E>::new(self.fres.as_slice(), &raw)?;
        match fde.fde_type {
            FdeType::Default => {
                row.cfa.offset = words.signed()?;
                row.ra = if self.fixed_ra == 0 && words.left() > 0 {
                    RegRule::AtCfa(words.signed()?)
                } else {
                    Self::default_rule(self.fixed_ra)
                };
                row.fp = if self.fixed_fp == 0 && words.left() > 0 {
                    RegRule::AtCfa(words.signed()?)
                } else {
                    Self::default_rule(self.fixed_fp)
                };
            }
            FdeType::Flex => {
                let cfa = Control::decode(words.unsigned()?)?;
                let offset = words.signed()?;
                if !cfa.reg_p {
                    return Err(Error::BadControlWord);
                }
                row.cfa = CfaRule {
                    base: dwarf_reg(self.abi, cfa.regnum)?,
                    offset,
                    deref: cfa.deref,
                };
                row.ra = self.flex_rule(&mut words, self.fixed_ra)?;
                row.fp = self.flex_rule(&mut words, self.fixed_fp)?;
            }
        }
        if words.left() != 0 {
            return Err(Error::BadDataWordCount);
        }
        Ok(row)
    }

    /// Reads the optional FLEX rule for RA or FP.
    fn flex_rule<E: ByteOrder>(
        &self,
        words: &mut Words<'_, E>,
        fixed: i8,
    ) -> Result<RegRule, Error> {
        if words.left() == 0 {
            return Ok(Self::default_rule(fixed));
        }
        let word = words.unsigned()?;
        if word == 0 {
            // Padding: nothing tracked for this entity.
            return Ok(Self::default_rule(fixed));
        }
        let control = Control::decode(word)?;
        let offset = words.signed()?;
        Ok(match (control.reg_p, control.deref) {
            (false, true) => RegRule::AtCfa(offset),
            // A zero control word is padding, handled above; with `reg_p`
            // clear, `decode` allows no register number, so this is only
            // reachable with the reserved bit, which `decode` rejects too.
            (false, false) => return Err(Error::BadControlWord),
            (true, true) => RegRule::AtReg {
                reg: dwarf_reg(self.abi, control.regnum)?,
                offset,
            },
            (true, false) => {
                let reg = dwarf_reg(self.abi, control.regnum)?;
                if offset == 0 {
                    RegRule::InReg(reg)
                } else {
                    RegRule::ValReg { reg, offset }
                }
            }
        })
    }

    /// Iterates over the FREs of `fde`; stops after the first error.
    ///
    /// The number of items is bounded by `fde.num_fres`, and every FRE
    /// consumes at least two bytes of the FRE area or ends the iteration.
    pub fn fres(&self, fde: &Fde) -> FreIter<'a> {
        FreIter {
            section: *self,
            fde: *fde,
            pos: fde.fre_off,
            index: 0,
            failed: false,
        }
    }
}

/// Iterator over the FREs of one function, see [`Section::fres`].
#[derive(Clone, Debug)]
pub struct FreIter<'a> {
    section: Section<'a>,
    fde: Fde,
    pos: usize,
    index: u32,
    failed: bool,
}

impl FreIter<'_> {
    fn decode(&mut self) -> Result<Fre, Error> {
        let raw = RawFre::read(&self.section.fres, self.pos, &self.fde)?;
        self.pos = raw.next;
        let row = self.section.decode_row(&self.fde, raw)?;
        let start = self
            .fde
            .start
            .checked_add(u64::from(raw.start_off))
            .ok_or(Error::FunctionStartOverflow)?;
        Ok(Fre { start, row })
    }
}

impl Iterator for FreIter<'_> {
    type Item = Result<Fre, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.index >= self.fde.num_fres {
            return None;
        }
        self.index = self.index.saturating_add(1);
        let item = self.decode();
        self.failed = item.is_err();
        Some(item)
    }
}
