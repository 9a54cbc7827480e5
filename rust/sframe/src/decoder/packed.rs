// SPDX-License-Identifier: GPL-2.0

//! Rows packed into 64 bits, as the row table ([`super::table`]) keeps
//! them, and the forms a walk steps on without unpacking them into a
//! [`Row`] in memory ([`PackedRow::form`]).
//!
//! Layout of a value: bits 0-1 the entry's kind (no row, a row, ask the
//! decoder), then the row's flags, the RA and FP rule kinds, whether one
//! read gets both (bit 10), and the CFA, RA and FP offsets, signed.

use super::fre::{CfaRule, Reg, RegRule, Row};
use super::unwind::in_one_read;

/// Entry kinds, bits 0-1 of a value.
pub(super) const KIND_NONE: u64 = 0;
pub(super) const KIND_ROW: u64 = 1;
pub(super) const KIND_DECODER: u64 = 2;
pub(super) const KIND_MASK: u64 = 3;
/// Row flags.
const CFA_FP: u64 = 1 << 2;
const OUTERMOST: u64 = 1 << 3;
const SIGNAL_FRAME: u64 = 1 << 4;
const MANGLED_RA: u64 = 1 << 5;
/// Rule kinds of RA (bits 6-7) and FP (bits 8-9).
const RA_SHIFT: u32 = 6;
const FP_SHIFT: u32 = 8;
const RULE_UNCHANGED: u64 = 0;
const RULE_AT_CFA: u64 = 1;
const RULE_UNDEFINED: u64 = 2;
/// RA and FP both saved at the CFA, at different offsets within
/// [`super::unwind::PAIR_SPAN`] bytes ([`in_one_read`]): one read gets
/// both.  Decided when the row is packed, so a step on
/// [`PackedForm::FpSaved`] does not check it.
const PAIR: u64 = 1 << 10;
/// Offsets: the CFA's in bits 16-39, RA's in 40-51, FP's in 52-63, signed.
const CFA_OFF_SHIFT: u32 = 16;
const CFA_OFF_BITS: u32 = 24;
const RA_OFF_SHIFT: u32 = 40;
const FP_OFF_SHIFT: u32 = 52;
const REG_OFF_BITS: u32 = 12;

/// `value` as a signed field of `bits` bits, if it fits.
fn pack_signed(value: i32, bits: u32) -> Option<u64> {
    let limit = 1i64 << (bits - 1);
    let v = i64::from(value);
    (-limit..limit)
        .contains(&v)
        .then(|| (v as u64) & ((1u64 << bits) - 1))
}

/// The signed field of `bits` bits at `shift` in `value`.
fn unpack_signed(value: u64, shift: u32, bits: u32) -> i32 {
    // Shift the field to the top, then back with the sign.
    let top = (value << (64 - shift - bits)) as i64;
    (top >> (64 - bits)) as i32
}

/// The kind bits of a rule, and its offset for `AtCfa`.
fn pack_rule(rule: RegRule) -> Option<(u64, i32)> {
    match rule {
        RegRule::Unchanged => Some((RULE_UNCHANGED, 0)),
        RegRule::AtCfa(off) => Some((RULE_AT_CFA, off)),
        RegRule::Undefined => Some((RULE_UNDEFINED, 0)),
        _ => None,
    }
}

fn unpack_rule(kind: u64, offset: i32) -> RegRule {
    match kind {
        RULE_AT_CFA => RegRule::AtCfa(offset),
        RULE_UNDEFINED => RegRule::Undefined,
        _ => RegRule::Unchanged,
    }
}

/// `row` packed into an entry value, if it fits.
pub(super) fn pack_row(row: &Row) -> Option<u64> {
    let cfa_fp = match (row.cfa.base, row.cfa.deref) {
        (Reg::Sp, false) => 0,
        (Reg::Fp, false) => CFA_FP,
        _ => return None,
    };
    let (ra_kind, ra_off) = pack_rule(row.ra)?;
    let (fp_kind, fp_off) = pack_rule(row.fp)?;
    let flag = |set: bool, bit: u64| if set { bit } else { 0 };
    let pair =
        matches!((row.ra, row.fp), (RegRule::AtCfa(ra), RegRule::AtCfa(fp)) if in_one_read(ra, fp));
    Some(
        KIND_ROW
            | cfa_fp
            | flag(row.outermost, OUTERMOST)
            | flag(row.signal_frame, SIGNAL_FRAME)
            | flag(row.mangled_ra, MANGLED_RA)
            | flag(pair, PAIR)
            | ra_kind << RA_SHIFT
            | fp_kind << FP_SHIFT
            | pack_signed(row.cfa.offset, CFA_OFF_BITS)? << CFA_OFF_SHIFT
            | pack_signed(ra_off, REG_OFF_BITS)? << RA_OFF_SHIFT
            | pack_signed(fp_off, REG_OFF_BITS)? << FP_OFF_SHIFT,
    )
}

/// A row as the row table holds it: 64 bits a lookup returns as they
/// are, unpacked ([`PackedRow::row`]) where the walk's step uses the
/// rules, so that, inlined, the fields go to registers rather than into a
/// [`Row`] in memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PackedRow(pub(super) u64);

impl PackedRow {
    /// `row` as the row table packs it, if it packs (its CFA at SP or FP
    /// plus an offset, RA and FP unchanged, undefined or at the CFA, the
    /// offsets in range).
    pub fn pack(row: &Row) -> Option<Self> {
        pack_row(row).map(PackedRow)
    }

    /// The row.
    #[inline(always)]
    pub fn row(self) -> Row {
        unpack_row(self.0)
    }

    /// The row, told apart by the form nearly every row of compiled code
    /// has: the return address saved at the CFA, the caller's FP left in
    /// its register or saved at the CFA next to it, neither outermost nor
    /// a signal frame.  A walk that matches on it, with its step inlined
    /// in each arm, gets a step whose rules are constants but for the
    /// offsets; each form's [`PackedForm::row`] is [`PackedRow::row`].
    #[inline(always)]
    pub fn form(self) -> PackedForm {
        const SHAPE: u64 = OUTERMOST | SIGNAL_FRAME | PAIR | 3 << RA_SHIFT | 3 << FP_SHIFT;
        const FP_KEPT: u64 = RULE_AT_CFA << RA_SHIFT | RULE_UNCHANGED << FP_SHIFT;
        const FP_SAVED: u64 = RULE_AT_CFA << RA_SHIFT | RULE_AT_CFA << FP_SHIFT | PAIR;
        let v = self.0;
        let common = CommonRow {
            cfa_base: if v & CFA_FP != 0 { Reg::Fp } else { Reg::Sp },
            cfa_offset: unpack_signed(v, CFA_OFF_SHIFT, CFA_OFF_BITS),
            ra_offset: unpack_signed(v, RA_OFF_SHIFT, REG_OFF_BITS),
            mangled_ra: v & MANGLED_RA != 0,
        };
        match v & SHAPE {
            FP_KEPT => PackedForm::FpKept(common),
            FP_SAVED => PackedForm::FpSaved(common, unpack_signed(v, FP_OFF_SHIFT, REG_OFF_BITS)),
            _ => PackedForm::Other(self),
        }
    }
}

/// What the common forms of [`PackedForm`] share: the CFA, at a register
/// plus an offset, and the return address, at the CFA plus an offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CommonRow {
    /// The CFA's register.
    pub cfa_base: Reg,
    /// The CFA's offset from it.
    pub cfa_offset: i32,
    /// Where the return address is saved, from the CFA.
    pub ra_offset: i32,
    /// AArch64: the return address is signed.
    pub mangled_ra: bool,
}

/// A [`PackedRow`] by its form ([`PackedRow::form`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PackedForm {
    /// The caller's FP is still in its register.
    FpKept(CommonRow),
    /// The caller's FP is saved at the CFA plus the offset, apart from
    /// the return address and within [`super::unwind::PAIR_SPAN`] bytes
    /// of it: one read gets both.  (Saved farther apart, the row is
    /// [`PackedForm::Other`].)
    FpSaved(CommonRow, i32),
    /// Any other row.
    Other(PackedRow),
}

impl PackedForm {
    /// The row.  Inlined into a match on the form, its rules are
    /// constants.
    #[inline(always)]
    pub fn row(self) -> Row {
        let (common, fp) = match self {
            PackedForm::FpKept(common) => (common, RegRule::Unchanged),
            PackedForm::FpSaved(common, offset) => (common, RegRule::AtCfa(offset)),
            PackedForm::Other(packed) => return packed.row(),
        };
        Row {
            cfa: CfaRule {
                base: common.cfa_base,
                offset: common.cfa_offset,
                deref: false,
            },
            ra: RegRule::AtCfa(common.ra_offset),
            fp,
            outermost: false,
            signal_frame: false,
            mangled_ra: common.mangled_ra,
        }
    }
}

/// The row of an entry value of kind [`KIND_ROW`].
#[inline(always)]
fn unpack_row(v: u64) -> Row {
    Row {
        cfa: CfaRule {
            base: if v & CFA_FP != 0 { Reg::Fp } else { Reg::Sp },
            offset: unpack_signed(v, CFA_OFF_SHIFT, CFA_OFF_BITS),
            deref: false,
        },
        ra: unpack_rule(
            (v >> RA_SHIFT) & 3,
            unpack_signed(v, RA_OFF_SHIFT, REG_OFF_BITS),
        ),
        fp: unpack_rule(
            (v >> FP_SHIFT) & 3,
            unpack_signed(v, FP_OFF_SHIFT, REG_OFF_BITS),
        ),
        outermost: v & OUTERMOST != 0,
        signal_frame: v & SIGNAL_FRAME != 0,
        mangled_ra: v & MANGLED_RA != 0,
    }
}
