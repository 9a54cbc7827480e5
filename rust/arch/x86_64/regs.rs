// SPDX-License-Identifier: GPL-2.0

//! The user registers a walk starts from, and the mode they were saved in.
//!
//! C header: [`arch/x86/include/asm/ptrace.h`](srctree/arch/x86/include/asm/ptrace.h).
//!
//! perf passes the sample's `struct pt_regs` to `perf_callchain_user()`;
//! `unwind_user()` uses the frame saved at the task's entry to the kernel
//! (`task_pt_regs(current)`). Either is read once into a [`UserRegs`]
//! value, so nothing after the read holds a pointer into a register frame.

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
    /// Instruction pointer (`ip`).
    ip: u64,
    /// Stack pointer (`sp`).
    sp: u64,
    /// Frame pointer (`bp`).
    bp: u64,
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
        // helper only reads `cs` and `flags`.
        let mode = Mode::from_helper(unsafe { ffi::sframe_regs_mode(raw) });
        // SAFETY: As above.
        let r = unsafe { &*regs };
        Some(Self {
            mode,
            ip: r.ip as u64,
            sp: r.sp as u64,
            bp: r.bp as u64,
        })
    }

    /// The mode the registers were saved in.
    pub(crate) fn mode(&self) -> Mode {
        self.mode
    }
}

/// The register state a walk starts from.
pub(crate) fn start_regs(regs: &UserRegs) -> Regs {
    Regs {
        pc: regs.ip,
        sp: regs.sp,
        fp: regs.bp,
        lr: 0,
    }
}

/// x86-64 return addresses carry no signature: `ra` as it is.
pub(crate) fn strip_return_address(ra: u64) -> u64 {
    ra
}

/// Whether the current task has a 32-bit address space (`TIF_ADDR32`):
/// a compat task, or an x32 task, which runs in 64-bit mode with 32-bit
/// pointers.
pub(crate) fn task_is_compat() -> bool {
    // SAFETY: Reads the current thread's flags; no preconditions.
    unsafe { ffi::sframe_current_addr32() }
}
