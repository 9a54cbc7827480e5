// SPDX-License-Identifier: GPL-2.0

//! The output of `unwind_user()`: a `struct unwind_stacktrace` with room
//! for `max_entries` user addresses.
//!
//! C header: [`include/linux/unwind_user_types.h`](srctree/include/linux/unwind_user_types.h).
//!
//! `unwind_user_faultable()` points `entries` at the task's cache of
//! `UNWIND_MAX_ENTRIES` words and calls `unwind_user()` with that many.

use crate::abstractions::ffi;

/// The trace being filled by one `unwind_user()` call.
///
/// # Invariants
///
/// `trace` is exclusively ours for `'a`; `trace.entries` points to at
/// least `max_entries` writable words, and `trace.nr <= max_entries`.
pub(crate) struct DeferredTrace<'a> {
    trace: &'a mut ffi::unwind_stacktrace,
    max_entries: u32,
}

impl DeferredTrace<'_> {
    /// Wraps the arguments of `unwind_user()` and empties the trace, as
    /// the original does first.
    ///
    /// # Safety
    ///
    /// `trace` points to a valid `struct unwind_stacktrace` that nothing
    /// else accesses while the returned value lives, and its `entries`
    /// holds at least `max_entries` words.
    pub(crate) unsafe fn from_raw(trace: *mut ffi::unwind_stacktrace, max_entries: u32) -> Self {
        // SAFETY: `trace` is valid and ours by the function's requirements.
        let trace = unsafe { &mut *trace };
        trace.nr = 0;
        // INVARIANT: `entries` holds `max_entries` words by the function's
        // requirements, and `nr` is 0.
        Self { trace, max_entries }
    }

    /// How many entries the trace may hold.
    pub(crate) fn max_entries(&self) -> u32 {
        self.max_entries
    }

    /// Appends `pc`; `false` when the trace is full.
    pub(crate) fn push(&mut self, pc: u64) -> bool {
        let nr = self.trace.nr;
        if nr >= self.max_entries {
            return false;
        }
        // SAFETY: `entries` holds `max_entries` words and `nr` is below
        // that (type invariant, checked above).
        unsafe { *self.trace.entries.add(nr as usize) = pc as usize };
        // INVARIANT: `nr + 1 <= max_entries`.
        self.trace.nr = nr + 1;
        true
    }
}
