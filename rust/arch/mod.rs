// SPDX-License-Identifier: GPL-2.0

//! What differs between architectures, behind one interface.
//!
//! The walk's rules, the registry, the hooks and the lifecycle are shared;
//! an architecture supplies, in `rust/arch/<arch>/`:
//!
//! - [`UserRegs`]: a copy of the user registers a walk starts from, read
//!   from a `pt_regs` ([`UserRegs::read`], the sample's) or from the frame
//!   the current task entered the kernel with ([`UserRegs::current`]),
//!   with the [`Mode`] they were saved in; [`start_regs`] turns them into
//!   the decoder's start state.
//! - [`strip_return_address`]: a return address without the code pointer
//!   authentication signed it with (AArch64; x86-64 returns it as is).
//! - [`task_is_compat`]: whether the current task's address space is not
//!   a 64-bit one of this architecture's ABI (32-bit or x32 tasks), whose
//!   stacks the stock unwinder keeps.
//! - [`CALL_WINDOW`] and [`follows_call`]: whether the bytes before a
//!   candidate return address end with a call instruction.
//! - [`walk`]: the decoder's walk for this ABI (where the return address
//!   and the frame pointer live, the signal-return trampoline).
//! - [`SFRAME_ABI`], [`ELF_MACHINE`] and the log's words for a mismatch.
//! - [`LR_CALLER_BIAS`]: how far below its return address perf's
//!   callchain holds the caller of a sampled function whose return
//!   address is still in the link register ([`sample_chain_entry`]).
//! - [`FTRACE_OPS_FLAGS`]: the register-saving flags of an ftrace ops
//!   whose callback reads its target's arguments and may move its
//!   instruction pointer, and [`FTRACE_ARG_REGISTERS`]: how many argument
//!   registers the callback may set for the replacement.
//! - `helpers.c`: the C side of the above (static inlines), and `arch.mk`:
//!   what `Kbuild` needs for this architecture (its objects, bindgen's
//!   target and the GCC-only flags to drop).
//!
//! Contexts: everything here is safe in any context, NMI included, but
//! [`UserRegs::current`], which task context and the sample path both
//! call on the current task's own frame.
//!
//! Each item's type is spelled out below, so an architecture's folder
//! compiles only if it supplies the same interface.

// The running kernel's architecture, one folder each.
#[cfg(CONFIG_X86_64)]
#[path = "x86_64/mod.rs"]
mod imp;
#[cfg(CONFIG_ARM64)]
#[path = "arm64/mod.rs"]
mod imp;
pub(crate) use imp::{
    follows_call,
    start_regs,
    strip_return_address,
    task_is_compat,
    walk,
    UserRegs,
    CALL_WINDOW,
    ELF_MACHINE,
    FTRACE_ARG_REGISTERS,
    FTRACE_OPS_FLAGS,
    LR_CALLER_BIAS,
    NOT_ELF,
    SFRAME_ABI,
    SFRAME_ABI_MISMATCH, //
};

use crate::{
    abstractions::ffi,
    sframe::{
        unwind::{
            FrameSource,
            Regs, //
        },
        Abi, //
    },
};

/// The mode a register frame was saved in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Kernel mode: there is no user stack to walk.
    Kernel,
    /// The architecture's 64-bit user mode.  x32 tasks run in it too on
    /// x86-64 (see [`task_is_compat`]).
    User64,
    /// A 32-bit (compat) user mode (x86's ia32, arm64's AArch32), or
    /// x86's vm86 mode.
    UserOther,
}

impl Mode {
    /// The mode `sframe_regs_mode()` (the architecture's `helpers.c`)
    /// returned.
    fn from_helper(mode: core::ffi::c_int) -> Mode {
        match u32::try_from(mode) {
            Ok(ffi::SFRAME_REGS_USER64) => Mode::User64,
            Ok(ffi::SFRAME_REGS_USER_OTHER) => Mode::UserOther,
            _ => Mode::Kernel,
        }
    }
}

impl UserRegs {
    /// The registers the current task entered the kernel with
    /// (`task_pt_regs(current)`): its user registers, unless it is a
    /// kernel thread.
    pub(crate) fn current() -> Option<Self> {
        // SAFETY: `task_pt_regs()` has no preconditions; it returns the
        // frame at the top of the current task's kernel stack.
        let regs = unsafe { ffi::sframe_current_user_regs() };
        // SAFETY: That frame lies on the stack this code runs on, so it is
        // valid for the call, and only the task itself writes it (on
        // kernel entry and exit, not while it runs here).
        unsafe { Self::read(regs) }
    }
}

/// What the sample's callchain stores for a frame at `pc` that `source`
/// found, after `stored` frames: the caller of the sampled function whose
/// return address is still in the link register goes [`LR_CALLER_BIAS`]
/// below it, where perf's tool looks for it on arm64; every other frame as
/// found.
pub(crate) fn sample_chain_entry(pc: u64, source: FrameSource, stored: u64) -> u64 {
    if source == FrameSource::LinkRegister && stored == 1 {
        // The walk emits no zero PC after the sample's: this cannot wrap.
        pc.wrapping_sub(LR_CALLER_BIAS)
    } else {
        pc
    }
}

// The interface, item by item.
const _: unsafe fn(*const ffi::pt_regs) -> Option<UserRegs> = UserRegs::read;
const _: fn() -> Option<UserRegs> = UserRegs::current;
const _: fn(&UserRegs) -> Mode = UserRegs::mode;
const _: fn(&UserRegs) -> Regs = start_regs;
const _: fn(u64) -> u64 = strip_return_address;
const _: fn() -> bool = task_is_compat;
const _: fn(&[u8; CALL_WINDOW]) -> bool = follows_call;
const _: Abi = SFRAME_ABI;
const _: &str = SFRAME_ABI_MISMATCH;
const _: u16 = ELF_MACHINE;
const _: &str = NOT_ELF;
const _: u32 = FTRACE_OPS_FLAGS;
const _: u32 = FTRACE_ARG_REGISTERS;
const _: u64 = LR_CALLER_BIAS;
