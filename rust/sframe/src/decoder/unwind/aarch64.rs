// SPDX-License-Identifier: GPL-2.0

//! AArch64's rules (LP64, little endian).
//!
//! - The return address is tracked per row: saved at CFA + offset once the
//!   frame record is stored, else still in the link register (`x30`),
//!   which only a topmost frame (the sample's, or one a signal
//!   interrupted) knows. Such a frame may not have moved the SP yet, so
//!   its CFA may equal the SP.
//! - Return addresses may be signed (pointer authentication, the FRE's
//!   mangled-RA bit): every return address goes through
//!   [`Lookup::strip_return_address`].
//! - Frame records are `{x29, x30}` pairs at `x29`, 8-byte aligned; the
//!   caller's SP after a frame-pointer step is a lower bound (`x29 + 16`),
//!   as the record may sit anywhere in the frame.
//! - A signal handler returns to the vDSO's `__kernel_rt_sigreturn`
//!   (`mov x8, #139; svc #0`) with SP at the kernel's `struct rt_sigframe`
//!   (arch/arm64/kernel/signal.c).
//! - The CFA, the caller's SP, is 16-byte aligned (the ABI's and the
//!   hardware's SP alignment).

use super::super::{CfaRule, Reg, RegRule, Row};
use super::rules::{cfa_of, load, recover_ra_fp};
use super::{walk_metered, Arch, FrameSource, Lookup, Memory, Regs, Stop, WalkLimits, Walked};

/// The AArch64 rule at a function's first instruction: the return
/// address is in the link register, CFA = SP, FP untouched.
pub const AARCH64_ENTRY_ROW: Row = Row {
    cfa: CfaRule {
        base: Reg::Sp,
        offset: 0,
        deref: false,
    },
    ra: RegRule::Unchanged,
    fp: RegRule::Unchanged,
    outermost: false,
    signal_frame: false,
    mangled_ra: false,
};

/// `mov x8, #139` (`__NR_rt_sigreturn`); `svc #0`: the vDSO's
/// `__kernel_rt_sigreturn` (arch/arm64/kernel/vdso/sigreturn.S), the
/// trampoline a signal handler returns to, as little-endian bytes.
pub const AARCH64_RT_SIGRETURN_INSNS: [u8; 8] = [0x68, 0x11, 0x80, 0xd2, 0x01, 0x00, 0x00, 0xd4];

/// Offset of the interrupted registers from the SP at the trampoline: the
/// `struct rt_sigframe` there holds a 128-byte `siginfo`, then the
/// `ucontext`, whose `uc_mcontext` is at 176: `uc_flags`, `uc_link`, the
/// 24-byte `stack_t`, glibc's 1024-bit `sigset_t`, and 16-byte alignment
/// (arch/arm64/include/uapi/asm/ucontext.h). In the `sigcontext`,
/// `fault_address` comes first, then `regs[31]`, `sp` and `pc`
/// (arch/arm64/include/uapi/asm/sigcontext.h).
const SIGCONTEXT: u64 = 128 + 176;
const SC_X29: u64 = 8 + 29 * 8;
const SC_X30: u64 = 8 + 30 * 8;
const SC_SP: u64 = 8 + 31 * 8;
const SC_PC: u64 = 8 + 32 * 8;

/// AArch64 DWARF register numbers: `x29`, `x30`, `sp`.
const DWARF_FP: u16 = 29;
const DWARF_LR: u16 = 30;
const DWARF_SP: u16 = 31;

/// The value of `reg` in a frame whose SP and FP are `sp` and `fp`, and
/// whose link register is `lr` where known (a topmost frame only).  By
/// value: a rule evaluated out of line does not take the address of the
/// walk's registers, which then stay in machine registers from one frame
/// to the next.
fn reg_value(reg: Reg, sp: u64, fp: u64, lr: Option<u64>) -> Result<u64, Stop> {
    match reg {
        Reg::Sp | Reg::Dwarf(DWARF_SP) => Ok(sp),
        Reg::Fp | Reg::Dwarf(DWARF_FP) => Ok(fp),
        Reg::Dwarf(DWARF_LR) => lr.ok_or(Stop::Unsupported),
        Reg::Dwarf(_) => Err(Stop::Unsupported),
    }
}

/// One SFrame step on AArch64.
///
/// CFA = base register + offset (loaded from there when `deref`); the
/// return address and the caller's FP follow their rules; the caller's SP
/// is the CFA, 16-byte aligned. A return address still in the link
/// register (the RA not tracked, or tracked in `x30`) is known only when
/// `topmost`; then the CFA may equal `regs.sp` (a leaf that has not moved
/// the SP), otherwise it must be strictly above. An undefined FP becomes
/// 0. The returned PC may still be signed, and may be 0 (end of stack; the
/// walker stops).
#[inline(always)]
pub fn step_aarch64(
    row: &Row,
    regs: &Regs,
    topmost: bool,
    mem: &mut impl Memory,
) -> Result<Regs, Stop> {
    if row.outermost {
        return Err(Stop::Outermost);
    }
    let (sp, fp, lr) = (regs.sp, regs.fp, topmost.then_some(regs.lr));
    let value = move |r| reg_value(r, sp, fp, lr);
    let cfa = cfa_of(row, value, mem)?;
    let ra_in_lr = ra_in_lr(row);
    if cfa < regs.sp || (cfa == regs.sp && !(topmost && ra_in_lr)) {
        return Err(Stop::CfaNotIncreasing);
    }
    if cfa & 15 != 0 {
        return Err(Stop::Misaligned);
    }
    let (pc, fp) = recover_ra_fp(row, cfa, value, lr, Some(fp), mem)?;
    let pc = pc.ok_or(Stop::Outermost)?;
    let fp = fp.unwrap_or(0);
    Ok(Regs {
        pc,
        sp: cfa,
        fp,
        lr: 0,
    })
}

/// Whether `row` leaves the return address in the link register: not
/// tracked, or tracked in `x30` itself.
fn ra_in_lr(row: &Row) -> bool {
    matches!(
        row.ra,
        RegRule::Unchanged | RegRule::InReg(Reg::Dwarf(DWARF_LR))
    )
}

/// Registers interrupted by a signal, from the `rt_sigframe` at `sp`: the
/// next frame is topmost again, its link register known.
fn step_signal_frame(sp: u64, mem: &mut impl Memory) -> Result<Regs, Stop> {
    if sp & 15 != 0 {
        return Err(Stop::Misaligned);
    }
    let sc = sp.checked_add(SIGCONTEXT).ok_or(Stop::ReadFault)?;
    let field = |off: u64| sc.checked_add(off).ok_or(Stop::ReadFault);
    Ok(Regs {
        pc: load(mem, field(SC_PC)?)?,
        sp: load(mem, field(SC_SP)?)?,
        fp: load(mem, field(SC_X29)?)?,
        lr: load(mem, field(SC_X30)?)?,
    })
}

fn at_rt_sigreturn(mem: &mut impl Memory, pc: u64) -> bool {
    let mut insns = [0u8; 8];
    mem.read(pc, &mut insns) && insns == AARCH64_RT_SIGRETURN_INSNS
}

/// `paciasp`, `pacibsp`, `bti c`, `bti jc`: hints only a function's first
/// instructions carry (before anything is stored).
const ENTRY_HINTS: [u32; 4] = [0xd503_233f, 0xd503_237f, 0xd503_245f, 0xd503_24df];

/// Whether the instruction at `pc` starts a function's frame set-up: an
/// entry hint, or `stp x29, x30, [sp, #-N]!` (the frame record stored as
/// the SP moves down). Either way nothing is stored yet: the return
/// address is in the link register and the SP is the CFA.
fn at_frame_setup(mem: &mut impl Memory, pc: u64) -> bool {
    let mut insn = [0u8; 4];
    if !mem.read(pc, &mut insn) {
        return false;
    }
    let insn = u32::from_le_bytes(insn);
    // STP (64-bit, pre-index), Rt = x29, Rt2 = x30, Rn = sp, any imm7.
    ENTRY_HINTS.contains(&insn) || insn & 0xffc0_7fff == 0xa980_7bfd
}

/// AArch64 for the shared walk.
struct Aarch64;

impl Arch for Aarch64 {
    const ENTRY_ROW: Row = AARCH64_ENTRY_ROW;
    // `step_aarch64`'s where the return address is saved, not in the
    // link register.
    const CFA_ALIGN: u64 = 16;

    #[inline(always)]
    fn step(row: &Row, regs: &Regs, topmost: bool, mem: &mut impl Memory) -> Result<Regs, Stop> {
        step_aarch64(row, regs, topmost, mem)
    }

    fn at_rt_sigreturn(mem: &mut impl Memory, pc: u64) -> bool {
        at_rt_sigreturn(mem, pc)
    }

    fn step_signal_frame(sp: u64, mem: &mut impl Memory) -> Result<Regs, Stop> {
        step_signal_frame(sp, mem)
    }

    fn at_frame_setup(mem: &mut impl Memory, pc: u64) -> bool {
        at_frame_setup(mem, pc)
    }

    fn ra_in_lr(row: &Row) -> bool {
        ra_in_lr(row)
    }
}

/// Walks an AArch64 user stack from `regs` (`lr` set: the sample's link
/// register), with the contract of [`walk_amd64`](super::walk_amd64).
pub fn walk_aarch64(
    regs: Regs,
    limits: &WalkLimits,
    lookup: &mut impl Lookup,
    mem: &mut impl Memory,
    emit: &mut impl FnMut(u64, FrameSource) -> bool,
) -> Stop {
    walk_aarch64_metered(regs, limits, lookup, mem, emit).stop
}

/// [`walk_aarch64`], also returning the work spent and the frames emitted
/// (see [`walk_amd64_metered`](super::walk_amd64_metered)).
pub fn walk_aarch64_metered(
    regs: Regs,
    limits: &WalkLimits,
    lookup: &mut impl Lookup,
    mem: &mut impl Memory,
    emit: &mut impl FnMut(u64, FrameSource) -> bool,
) -> Walked {
    walk_metered::<Aarch64, _>(regs, limits, lookup, mem, emit)
}
