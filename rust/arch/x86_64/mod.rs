// SPDX-License-Identifier: GPL-2.0

//! x86-64: the user registers (`ip`, `sp`, `bp`), the return address at
//! CFA - 8, `call` instructions, the `__restore_rt` trampoline (in the
//! decoder's [`walk`]) and ftrace's `ftrace_regs`.
//!
//! C header: [`arch/x86/include/asm/ptrace.h`](srctree/arch/x86/include/asm/ptrace.h).

mod call_site;
mod regs;

pub(crate) use crate::sframe::unwind::walk_amd64 as walk;
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

#[cfg(not(CONFIG_HAVE_DYNAMIC_FTRACE_WITH_ARGS))]
use crate::abstractions::ffi;
use crate::sframe::Abi;

/// The ABI of the sections this architecture unwinds with.
pub(crate) const SFRAME_ABI: Abi = Abi::Amd64Le;
/// Why a section of another ABI is refused.
pub(crate) const SFRAME_ABI_MISMATCH: &str = "not an x86-64 section";
/// `e_machine` of the ELF objects exec registration reads (`EM_X86_64`).
pub(crate) const ELF_MACHINE: u16 = 62;
/// Why an object of another kind is refused.
pub(crate) const NOT_ELF: &str = "not an x86-64 ELF64 object";

/// x86-64 has no link register: no caller is found in one.
pub(crate) const LR_CALLER_BIAS: u64 = 0;

/// The hooks read their target's arguments and may set its instruction
/// pointer.  With `DYNAMIC_FTRACE_WITH_ARGS` (every x86-64 kernel of the
/// 7.x series) `ftrace_caller` saves the argument registers and restores
/// the instruction pointer a handler changed, which is all that needs: no
/// flag, as livepatch chooses, and the lighter trampoline.  Without it,
/// the whole register frame (`SAVE_REGS`).
#[cfg(CONFIG_HAVE_DYNAMIC_FTRACE_WITH_ARGS)]
pub(crate) const FTRACE_OPS_FLAGS: u32 = 0;
#[cfg(not(CONFIG_HAVE_DYNAMIC_FTRACE_WITH_ARGS))]
pub(crate) const FTRACE_OPS_FLAGS: u32 = ffi::FTRACE_OPS_FL_SAVE_REGS;

/// The integer arguments a function receives in registers (`rdi`, `rsi`,
/// `rdx`, `rcx`, `r8`, `r9`), which both of ftrace's trampolines restore
/// from the saved set after the callback.
pub(crate) const FTRACE_ARG_REGISTERS: u32 = 6;
