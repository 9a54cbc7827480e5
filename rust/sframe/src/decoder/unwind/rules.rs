// SPDX-License-Identifier: GPL-2.0

//! Evaluating a row's rules: the CFA, the saved return address and frame
//! pointer (a pair of them in one read), and the frame-pointer step both
//! ABIs share.

use super::super::{CommonRow, Reg, RegRule, Row};
use super::{Memory, Regs, Stop};

pub(super) fn offset_addr(base: u64, offset: i32) -> Result<u64, Stop> {
    base.checked_add_signed(i64::from(offset))
        .ok_or(Stop::ReadFault)
}

pub(super) fn load(mem: &mut impl Memory, addr: u64) -> Result<u64, Stop> {
    mem.read_u64(addr).ok_or(Stop::ReadFault)
}

/// Evaluates an RA or FP rule; `Ok(None)` for an undefined value.
/// `reg_value` gives a register's value for this frame.
///
/// Inlined on x86-64: `mem` (the walk's meter, its budget inside) passed
/// out of line would keep the budget in memory for the whole walk.
/// (arm64's walk, with twice the registers, was 7 instructions a frame
/// dearer with it inlined.)
#[cfg_attr(target_arch = "x86_64", inline(always))]
pub(super) fn recover(
    rule: RegRule,
    cfa: u64,
    reg_value: impl Fn(Reg) -> Result<u64, Stop>,
    current: Option<u64>,
    mem: &mut impl Memory,
) -> Result<Option<u64>, Stop> {
    Ok(Some(match rule {
        RegRule::Undefined => return Ok(None),
        RegRule::Unchanged => current.ok_or(Stop::Unsupported)?,
        RegRule::AtCfa(off) => load(mem, offset_addr(cfa, off)?)?,
        RegRule::InReg(reg) => reg_value(reg)?,
        RegRule::AtReg { reg, offset } => load(mem, offset_addr(reg_value(reg)?, offset)?)?,
        RegRule::ValReg { reg, offset } => offset_addr(reg_value(reg)?, offset)?,
    }))
}

/// The most bytes apart (from the first byte of one to the last of the
/// other) a return address and a frame pointer may be saved for
/// [`Memory::read_pair`] to read them together.
pub const PAIR_SPAN: usize = 32;

/// Whether a return address and a frame pointer saved at CFA + `ra` and
/// CFA + `fp` are read together: apart, and within [`PAIR_SPAN`] bytes.
/// The walk's step and the row table's packing ask the same question.
#[inline(always)]
pub(crate) fn in_one_read(ra: i32, fp: i32) -> bool {
    // Two `i32`s: their difference fits an `i64`.
    ra != fp && i64::from(ra.max(fp)) - i64::from(ra.min(fp)) + 8 <= PAIR_SPAN as i64
}

/// The RA and FP rules of `row` evaluated as [`recover`] evaluates each,
/// RA first (an undefined RA leaves FP unread: `(None, None)`), but with
/// one read when both are saved at the CFA within [`PAIR_SPAN`] bytes of
/// each other, as a frame record or registers pushed together are: a
/// user-memory read costs far more than the bytes it moves, and the walk's
/// budget is charged per read.
#[inline(always)]
pub(super) fn recover_ra_fp(
    row: &Row,
    cfa: u64,
    reg_value: impl Fn(Reg) -> Result<u64, Stop> + Copy,
    ra_now: Option<u64>,
    fp_now: Option<u64>,
    mem: &mut impl Memory,
) -> Result<(Option<u64>, Option<u64>), Stop> {
    if let (RegRule::AtCfa(ra), RegRule::AtCfa(fp)) = (row.ra, row.fp) {
        if in_one_read(ra, fp) {
            let (ra, fp) = mem
                .read_pair(offset_addr(cfa, ra)?, offset_addr(cfa, fp)?)
                .ok_or(Stop::ReadFault)?;
            return Ok((Some(ra), Some(fp)));
        }
    }
    // The common row of a frame that keeps the caller's frame pointer in
    // its register, evaluated as `recover` would, without its generality.
    if let (RegRule::AtCfa(ra), RegRule::Unchanged, Some(fp)) = (row.ra, row.fp, fp_now) {
        return Ok((Some(load(mem, offset_addr(cfa, ra)?)?), Some(fp)));
    }
    let Some(ra) = recover(row.ra, cfa, reg_value, ra_now, mem)? else {
        return Ok((None, None));
    };
    Ok((Some(ra), recover(row.fp, cfa, reg_value, fp_now, mem)?))
}

/// A step on a row of the FP-saved form ([`super::super::PackedForm::FpSaved`]),
/// its rules known: the CFA (SP or FP plus the offset) strictly above SP
/// and a multiple of `align` (a power of two), the return address and the
/// caller's FP in one read, as the architecture's step on the form's row
/// gives them (neither leaves the return address in a register).
#[inline(always)]
pub(super) fn step_saved(
    common: &CommonRow,
    fp_offset: i32,
    regs: &Regs,
    align: u64,
    mem: &mut impl Memory,
) -> Result<Regs, Stop> {
    let base = match common.cfa_base {
        Reg::Fp => regs.fp,
        _ => regs.sp,
    };
    let cfa = base
        .checked_add_signed(i64::from(common.cfa_offset))
        .ok_or(Stop::CfaNotIncreasing)?;
    if cfa <= regs.sp {
        return Err(Stop::CfaNotIncreasing);
    }
    if cfa & align.wrapping_sub(1) != 0 {
        return Err(Stop::Misaligned);
    }
    let (ra_addr, fp_addr) = if cfa.wrapping_sub(NO_CARRY_LOW) < NO_CARRY_SPAN {
        // No `i32` offset carries such a CFA past either end: the two
        // checks of `offset_addr` cannot fail.
        (
            cfa.wrapping_add_signed(i64::from(common.ra_offset)),
            cfa.wrapping_add_signed(i64::from(fp_offset)),
        )
    } else {
        (
            offset_addr(cfa, common.ra_offset)?,
            offset_addr(cfa, fp_offset)?,
        )
    };
    let (pc, fp) = mem.read_pair(ra_addr, fp_addr).ok_or(Stop::ReadFault)?;
    Ok(Regs {
        pc,
        sp: cfa,
        fp,
        lr: 0,
    })
}

/// [`step_saved`] adds a row's offsets (`i32`) to a CFA in
/// `NO_CARRY_LOW .. NO_CARRY_LOW + NO_CARRY_SPAN` without checks: neither
/// can wrap there.  Every user stack is in it.
const NO_CARRY_LOW: u64 = 1 << 31;
const NO_CARRY_SPAN: u64 = 1 << 62;

/// The CFA a row gives: the base register's value plus the offset,
/// loaded from there when the rule dereferences.
#[inline(always)]
pub(super) fn cfa_of(
    row: &Row,
    reg_value: impl Fn(Reg) -> Result<u64, Stop>,
    mem: &mut impl Memory,
) -> Result<u64, Stop> {
    let cfa = reg_value(row.cfa.base)?
        .checked_add_signed(i64::from(row.cfa.offset))
        .ok_or(Stop::CfaNotIncreasing)?;
    if row.cfa.deref {
        load(mem, cfa)
    } else {
        Ok(cfa)
    }
}

/// One frame-pointer step: the saved FP at FP, the return address at
/// FP + 8, the caller's SP taken as FP + 16 (exact on x86-64, where the
/// record is pushed right after the call; the least it can be on AArch64,
/// where the record may sit anywhere in the frame).
pub(super) fn step_frame_record(regs: &Regs, mem: &mut impl Memory) -> Result<Regs, Stop> {
    let fp = regs.fp;
    if fp == 0 {
        return Err(Stop::NoCoverage);
    }
    if fp & 7 != 0 {
        return Err(Stop::Misaligned);
    }
    if fp < regs.sp {
        return Err(Stop::CfaNotIncreasing);
    }
    let sp = fp.checked_add(16).ok_or(Stop::CfaNotIncreasing)?;
    // The record, `{saved FP, RA}`, in one read; `fp + 16` did not wrap.
    let (saved_fp, ra) = mem
        .read_pair(fp, fp.wrapping_add(8))
        .ok_or(Stop::ReadFault)?;
    Ok(Regs {
        pc: ra,
        sp,
        fp: saved_fp,
        lr: 0,
    })
}
