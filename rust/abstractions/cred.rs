// SPDX-License-Identifier: GPL-2.0

//! The current task's identity, as the registry charges it.
//!
//! C header: [`include/linux/cred.h`](srctree/include/linux/cred.h).

use super::ffi;

/// The account the current task's registrations are charged to: its real
/// user ID, or, inside a user namespace, the real user who owns the
/// outermost namespace above it, so that the IDs mapped into a container
/// share their owner's limits.  Any context with a current task.
pub(crate) fn current_account() -> u32 {
    // SAFETY: Reads the current task's credentials; no preconditions.
    unsafe { ffi::sframe_current_account() }
}

/// The account of the process that holds `mm` (the mm's owner task's, by
/// the same rule as [`current_account`]), or the current task's if the
/// kernel keeps no owner.  Process context.
pub(crate) fn mm_account(mm: &kernel::mm::MmWithUser) -> u32 {
    // SAFETY: `mm` is a live address space (the caller's reference); the
    // helper reads its owner under RCU.
    unsafe { ffi::sframe_mm_account(mm.as_raw().cast()) }
}
