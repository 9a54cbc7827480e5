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
/// The walk's entries go straight into `entries`; `trace.nr` is set once,
/// when this is dropped: a push is a bounds check and a write, as the
/// sample path's store is ([`super::perf::CallchainEntry`]).
///
/// # Invariants
///
/// `trace` is exclusively ours for `'a`; `entries` is its `entries`
/// array, `max_entries` words, which nothing else accesses for `'a`;
/// `stored <= entries.len()` and the first `stored` are this call's.
pub(crate) struct DeferredTrace<'a> {
    trace: *mut ffi::unwind_stacktrace,
    entries: &'a mut [usize],
    stored: usize,
}

impl DeferredTrace<'_> {
    /// Wraps the arguments of `unwind_user()`, the trace empty as the
    /// original makes it first (`nr` is written when this is dropped).
    ///
    /// # Safety
    ///
    /// `trace` points to a valid `struct unwind_stacktrace` that nothing
    /// else accesses while the returned value lives, and its `entries`
    /// holds at least `max_entries` words (a null `entries` is taken for
    /// no room).
    pub(crate) unsafe fn from_raw(trace: *mut ffi::unwind_stacktrace, max_entries: u32) -> Self {
        // SAFETY: `trace` is valid and ours by the function's requirements.
        let first = unsafe { (*trace).entries };
        let len = if first.is_null() {
            0
        } else {
            max_entries as usize
        };
        let entries = if len == 0 {
            &mut [][..]
        } else {
            // SAFETY: `entries` holds `max_entries` words, ours while the
            // returned value lives (the function's requirements), and is
            // not null; an `unsigned long` is a `usize`.
            unsafe { core::slice::from_raw_parts_mut(first.cast::<usize>(), len) }
        };
        // INVARIANT: By the function's requirements; nothing stored yet.
        Self {
            trace,
            entries,
            stored: 0,
        }
    }

    /// How many entries the trace may hold.
    pub(crate) fn max_entries(&self) -> u32 {
        // At most `max_entries`, a `u32`.
        u32::try_from(self.entries.len()).unwrap_or(u32::MAX)
    }

    /// How many entries this call has pushed.
    pub(crate) fn stored(&self) -> u64 {
        self.stored as u64
    }

    /// Appends `pc`; `false` when the trace is full.
    #[inline(always)]
    pub(crate) fn push(&mut self, pc: u64) -> bool {
        match self.entries.get_mut(self.stored) {
            Some(slot) => {
                *slot = pc as usize;
                // INVARIANT: `stored` stays within `entries`.
                self.stored += 1;
                true
            }
            None => false,
        }
    }
}

impl Drop for DeferredTrace<'_> {
    /// Counts the entries pushed in `trace.nr`, as each store of the
    /// original does.
    fn drop(&mut self) {
        // At most `max_entries`, a `u32`.
        let nr = u32::try_from(self.stored).unwrap_or(u32::MAX);
        // SAFETY: `trace` is valid and ours (type invariant); `nr` is
        // outside the `entries` array the slice borrows.
        unsafe { (*self.trace).nr = nr };
    }
}
