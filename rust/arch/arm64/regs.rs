// SPDX-License-Identifier: GPL-2.0

//! The user registers a walk starts from, and the mode they were saved in.
//!
//! C header: [`arch/arm64/include/asm/ptrace.h`](srctree/arch/arm64/include/asm/ptrace.h).
//!
//! perf passes the sample's `struct pt_regs` to `perf_callchain_user()`.
//! It is read once into a [`UserRegs`] value, so nothing after the read
//! holds a pointer into a register frame. The link register (`x30`) is
//! kept: a leaf function's return address is still there.

use crate::{
    abstractions::ffi,
    arch::Mode,
    sframe::unwind::Regs, //
};

/// A copy of the registers an unwind starts from.
#[derive(Clone, Copy, Debug)]
pub(crate) struct UserRegs {
    /// The mode the registers were saved in.
    mode: Mode,
    /// `pc`, `sp`, `x29` and `x30`, as the walk starts from them.
    regs: Regs,
}

impl UserRegs {
    /// Copies the registers of `regs`; `None` if `regs` is null.
    ///
    /// # Safety
    ///
    /// `regs` is null or points to a `struct pt_regs` that is valid and
    /// not written concurrently for the duration of the call.
    pub(crate) unsafe fn read(regs: *const ffi::pt_regs) -> Option<Self> {
        if regs.is_null() {
            return None;
        }
        let raw = regs.cast_mut();
        // SAFETY: `regs` is valid by the function's requirements; the
        // helper only reads `pstate`.
        let mode = Mode::from_helper(unsafe { ffi::sframe_regs_mode(raw) });
        let mut out = ffi::sframe_arm64_regs::default();
        // SAFETY: As above; the helper reads four fields of `regs` and
        // writes `out`, a local.
        unsafe { ffi::sframe_arm64_read_regs(raw, &mut out) };
        let regs = Regs {
            pc: out.pc as u64,
            sp: out.sp as u64,
            fp: out.fp as u64,
            lr: out.lr as u64,
        };
        Some(Self { mode, regs })
    }

    /// The mode the registers were saved in.
    pub(crate) fn mode(&self) -> Mode {
        self.mode
    }
}

/// The register state a walk starts from, the link register included.
pub(crate) fn start_regs(regs: &UserRegs) -> Regs {
    regs.regs
}

/// Whether the current task has a 32-bit (AArch32) address space.
pub(crate) fn task_is_compat() -> bool {
    // SAFETY: Reads the current thread's flags; no preconditions.
    unsafe { ffi::sframe_current_compat() }
}

/// `ra` without its pointer-authentication code, as
/// `arch_stack_walk_user()` strips them (`ptrauth_strip_user_insn_pac()`:
/// `xpaclri` where the kernel supports pointer authentication, else the
/// value as it is).  Any context.
///
/// One instruction, inlined into the walk, not a C call per frame:
/// `xpaclri` (`hint #7`, a no-op on a CPU without pointer authentication)
/// strips the code of the address in x30.
#[inline(always)]
pub(crate) fn strip_return_address(ra: u64) -> u64 {
    #[cfg(CONFIG_ARM64_PTR_AUTH)]
    {
        let mut lr = ra;
        // SAFETY: `hint #7` changes x30 only, which is the operand (the
        // compiler saves and restores the link register around it as
        // needed); it reads and writes no memory and no flags.
        unsafe {
            core::arch::asm!(
                "hint #7",
                inout("x30") lr,
                options(pure, nomem, nostack, preserves_flags)
            );
        }
        lr
    }
    #[cfg(not(CONFIG_ARM64_PTR_AUTH))]
    {
        ra
    }
}
