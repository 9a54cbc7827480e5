// SPDX-License-Identifier: GPL-2.0

//! arm64: the user registers (`pc`, `sp`, `x29`, `x30`), return addresses
//! signed by pointer authentication, branch-with-link instructions, the
//! vDSO's `__kernel_rt_sigreturn` (in the decoder's [`walk`]) and ftrace
//! without `SAVE_REGS`.
//!
//! C header: [`arch/arm64/include/asm/ptrace.h`](srctree/arch/arm64/include/asm/ptrace.h).
//!
//! arm64 has no deferred user unwinding (`CONFIG_UNWIND_USER`) in 7.3:
//! `perf_callchain_user()` is the only path, and the deferred hook finds
//! no target.

mod call_site;
mod regs;

pub(crate) use crate::sframe::unwind::walk_aarch64 as walk;
pub(crate) use call_site::{
    follows_call,
    CALL_WINDOW, //
};
pub(crate) use regs::{
    start_regs,
    strip_return_address,
    task_is_compat,
    UserRegs, //
};

use crate::sframe::Abi;

/// The ABI of the sections this architecture unwinds with.
pub(crate) const SFRAME_ABI: Abi = Abi::Aarch64Le;
/// Why a section of another ABI is refused.
pub(crate) const SFRAME_ABI_MISMATCH: &str = "not an AArch64 little-endian section";
/// `e_machine` of the ELF objects exec registration reads (`EM_AARCH64`).
pub(crate) const ELF_MACHINE: u16 = 183;
/// Why an object of another kind is refused.
pub(crate) const NOT_ELF: &str = "not an AArch64 ELF64 object";

/// How far below its return address the caller of a sampled function whose
/// return address is still in the link register is stored: one byte, inside
/// the call instruction, so it still symbolizes as the caller.
///
/// `perf record -g` on arm64 samples LR, and perf's tool inserts that
/// caller after the sample's PC (`get_leaf_frame_caller_aarch64()`), at
/// the address its DWARF unwinder reports for a return address, one below
/// it, unless the chain's next entry is that address already. Stored so,
/// the chain is complete without the tool (a perf without libdw, an object
/// the tool cannot read, BPF's stack helpers) and the tool adds nothing:
/// as the return address itself it would show twice. A caller found in the
/// link register after a signal frame is stored as is: the tool inserts
/// only the sample's.
pub(crate) const LR_CALLER_BIAS: u64 = 1;

/// The hooks read their target's arguments and may set its instruction
/// pointer: arm64 has `DYNAMIC_FTRACE_WITH_ARGS` only, whose
/// `ftrace_regs` hold the argument registers and the PC, which is all
/// that needs (`SAVE_REGS` is refused there, as for arm64's livepatch).
pub(crate) const FTRACE_OPS_FLAGS: u32 = 0;

/// The integer arguments a function receives in registers (`x0` to `x7`),
/// which ftrace's trampoline restores from its `ftrace_regs` after the
/// callback.
pub(crate) const FTRACE_ARG_REGISTERS: u32 = 8;
