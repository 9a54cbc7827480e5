// SPDX-License-Identifier: GPL-2.0

//! The current task's identity, as the registry charges it.
//!
//! C header: [`include/linux/cred.h`](srctree/include/linux/cred.h).

use super::ffi;

/// The current task's real user ID, as a number in the initial user
/// namespace (`__kuid_val(current_uid())`).  Any context with a current
/// task.
pub(crate) fn current_kuid() -> u32 {
    // SAFETY: Reads the current task's credentials; no preconditions.
    unsafe { ffi::sframe_current_kuid() }
}
