// SPDX-License-Identifier: GPL-2.0

//! A clock the unwinder may read in NMI context.
//!
//! C header: [`include/linux/timekeeping.h`](srctree/include/linux/timekeeping.h).
//!
//! `ktime_get()` may spin on the timekeeping sequence lock, which an NMI
//! may have interrupted; `ktime_get_mono_fast_ns()` never waits.

use crate::abstractions::ffi;

/// Monotonic nanoseconds, safe in any context (NMI included).
pub(crate) fn now_ns() -> u64 {
    // SAFETY: `ktime_get_mono_fast_ns()` has no preconditions and is
    // NMI-safe.
    unsafe { ffi::ktime_get_mono_fast_ns() }
}
