// SPDX-License-Identifier: GPL-2.0

//! x86-64's rules: the return address at CFA - 8 (no link register),
//! `rbp` frame records, `push %rbp` prologues, and glibc's `__restore_rt`
//! signal trampoline with the `ucontext` at SP.

use super::super::{CfaRule, Reg, RegRule, Row};
use super::rules::{cfa_of, load, recover_ra_fp};
use super::{walk_metered, Arch, FrameSource, Lookup, Memory, Regs, Stop, WalkLimits, Walked};

/// The x86-64 rule at a function's first instruction: the return address
/// is at SP, so CFA = SP + 8, RA at CFA - 8, FP untouched.
pub const ENTRY_ROW: Row = Row {
    cfa: CfaRule {
        base: Reg::Sp,
        offset: 8,
        deref: false,
    },
    ra: RegRule::AtCfa(-8),
    fp: RegRule::Unchanged,
    outermost: false,
    signal_frame: false,
    mangled_ra: false,
};

/// `mov $15,%rax; syscall`: glibc's (and the kernel's documented)
/// `__restore_rt`, the `rt_sigreturn` trampoline a signal handler returns to.
pub const RT_SIGRETURN_INSNS: [u8; 9] = [0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05];

/// Offset of `uc_mcontext` in `struct ucontext`: `uc_flags`, `uc_link`
/// and the 24-byte `stack_t` precede it (include/uapi/asm-generic/ucontext.h,
/// arch/x86/include/uapi/asm/signal.h). At the trampoline SP points at the
/// `ucontext`: the handler's `ret` popped `rt_sigframe.pretcode`
/// (arch/x86/include/asm/sigframe.h).
const UC_MCONTEXT: u64 = 40;
/// `rbp`, `rsp`, `rip` in the x86-64 `struct sigcontext`: the 11th, 16th
/// and 17th u64 (arch/x86/include/uapi/asm/sigcontext.h).
const SC_RBP: u64 = 10 * 8;
const SC_RSP: u64 = 15 * 8;
const SC_RIP: u64 = 16 * 8;

/// The value of `reg` in a frame whose SP and FP are `sp` and `fp`
/// (x86-64 DWARF 6 is `rbp`, 7 is `rsp`).  By value: a rule evaluated
/// out of line does not take the address of the walk's registers, which
/// then stay in machine registers from one frame to the next.
fn reg_value(reg: Reg, sp: u64, fp: u64) -> Result<u64, Stop> {
    match reg {
        Reg::Sp | Reg::Dwarf(7) => Ok(sp),
        Reg::Fp | Reg::Dwarf(6) => Ok(fp),
        Reg::Dwarf(_) => Err(Stop::Unsupported),
    }
}

/// One SFrame step on x86-64.
///
/// CFA = base register + offset (loaded from there when `deref`); the
/// return address and the caller's FP follow their rules; the caller's SP
/// is the CFA. Requires the CFA strictly above `regs.sp` and 8-byte
/// aligned, so an `Ok` result always moves the stack up. An undefined FP
/// becomes 0. The returned PC may be 0 (end of stack; the walker stops).
#[inline(always)]
pub fn step_amd64(row: &Row, regs: &Regs, mem: &mut impl Memory) -> Result<Regs, Stop> {
    if row.outermost {
        return Err(Stop::Outermost);
    }
    let (sp, fp) = (regs.sp, regs.fp);
    let value = move |r| reg_value(r, sp, fp);
    let cfa = cfa_of(row, value, mem)?;
    if cfa <= regs.sp {
        return Err(Stop::CfaNotIncreasing);
    }
    if cfa & 7 != 0 {
        return Err(Stop::Misaligned);
    }
    // x86-64 has no link register: an untracked RA is not recoverable.
    let (pc, fp) = recover_ra_fp(row, cfa, value, None, Some(regs.fp), mem)?;
    let pc = pc.ok_or(Stop::Outermost)?;
    let fp = fp.unwrap_or(0);
    Ok(Regs {
        pc,
        sp: cfa,
        fp,
        lr: 0,
    })
}

/// Registers interrupted by a signal, from the `ucontext` at `sp`.
///
/// Inlined, as `rules::recover` is on x86-64: the walk's meter passed out
/// of line would keep its budget in memory for the whole walk.
#[inline(always)]
fn step_signal_frame(sp: u64, mem: &mut impl Memory) -> Result<Regs, Stop> {
    if sp & 7 != 0 {
        return Err(Stop::Misaligned);
    }
    let sc = sp.checked_add(UC_MCONTEXT).ok_or(Stop::ReadFault)?;
    let field = |off: u64| sc.checked_add(off).ok_or(Stop::ReadFault);
    Ok(Regs {
        pc: load(mem, field(SC_RIP)?)?,
        sp: load(mem, field(SC_RSP)?)?,
        fp: load(mem, field(SC_RBP)?)?,
        lr: 0,
    })
}

fn at_rt_sigreturn(mem: &mut impl Memory, pc: u64) -> bool {
    let mut insns = [0u8; 9];
    mem.read(pc, &mut insns) && insns == RT_SIGRETURN_INSNS
}

/// `push %rbp`, optionally after `endbr64`, at `pc`: the frame is not set up.
fn at_frame_setup(mem: &mut impl Memory, pc: u64) -> bool {
    let mut first = [0u8; 1];
    if !mem.read(pc, &mut first) {
        return false;
    }
    if first == [0x55] {
        return true;
    }
    let mut insns = [0u8; 5];
    mem.read(pc, &mut insns) && insns == [0xf3, 0x0f, 0x1e, 0xfa, 0x55]
}

/// x86-64 for the shared walk.
struct Amd64;

impl Arch for Amd64 {
    const ENTRY_ROW: Row = ENTRY_ROW;
    // `step_amd64`'s.
    const CFA_ALIGN: u64 = 8;

    #[inline(always)]
    fn step(row: &Row, regs: &Regs, _topmost: bool, mem: &mut impl Memory) -> Result<Regs, Stop> {
        step_amd64(row, regs, mem)
    }

    fn at_rt_sigreturn(mem: &mut impl Memory, pc: u64) -> bool {
        at_rt_sigreturn(mem, pc)
    }

    #[inline(always)]
    fn step_signal_frame(sp: u64, mem: &mut impl Memory) -> Result<Regs, Stop> {
        step_signal_frame(sp, mem)
    }

    fn at_frame_setup(mem: &mut impl Memory, pc: u64) -> bool {
        at_frame_setup(mem, pc)
    }
}

/// Walks an x86-64 user stack from `regs`.
///
/// Calls `emit(pc, source)` for the sample's PC and then for each caller,
/// at most `limits.max_frames` times in all; `emit` returns `false` to stop
/// the walk ([`Stop::Consumer`]). Returns why the walk ended; a clean end of
/// the stack is [`Stop::Outermost`].
pub fn walk_amd64(
    regs: Regs,
    limits: &WalkLimits,
    lookup: &mut impl Lookup,
    mem: &mut impl Memory,
    emit: &mut impl FnMut(u64, FrameSource) -> bool,
) -> Stop {
    walk_amd64_metered(regs, limits, lookup, mem, emit).stop
}

/// [`walk_amd64`], also returning the work spent and the frames emitted.
///
/// A step that fails because the budget ran out (a read or a lookup it
/// could not pay for) ends the walk with [`Stop::Budget`], whatever check
/// the missing value made fail; the frames emitted before stay valid.
pub fn walk_amd64_metered(
    regs: Regs,
    limits: &WalkLimits,
    lookup: &mut impl Lookup,
    mem: &mut impl Memory,
    emit: &mut impl FnMut(u64, FrameSource) -> bool,
) -> Walked {
    walk_metered::<Amd64, _>(regs, limits, lookup, mem, emit)
}
