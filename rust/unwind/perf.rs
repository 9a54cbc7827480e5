// SPDX-License-Identifier: GPL-2.0

//! Where perf's sampling path collects a user callchain.
//!
//! C header: [`include/linux/perf_event.h`](srctree/include/linux/perf_event.h).
//!
//! `perf_callchain_user()` receives a `struct perf_callchain_entry_ctx`
//! that `get_perf_callchain()` set up for this sample; entries are added
//! with `perf_callchain_store()`, which enforces the event's `max_stack`
//! and the contexts limit.

use crate::abstractions::ffi;

/// The callchain being built for one sample.
///
/// The walk's entries go straight into the room the entry has for them;
/// the two counts (`ctx.nr` and `entry->nr`) are updated once, when this
/// is dropped: a store is a bounds check and a write, as in perf's own
/// walk, where `perf_callchain_store()` is in line.
///
/// # Invariants
///
/// `ctx` points to the live `perf_callchain_entry_ctx` of the sample being
/// taken, exclusively ours for `'a` (the duration of the
/// `perf_callchain_user()` call), and its `entry` has room for
/// `max_stack - nr` more entries after its own `nr`: what
/// `get_perf_callchain()` sets up (an entry of `sysctl_perf_event_max_stack`
/// entries plus the contexts, `max_stack` no more than that sysctl, and
/// each context stored, counted in `contexts`, within its own part).
/// `ips` is that room (none when `contexts_maxed`), of which the first
/// `stored` entries are this walk's, not yet counted in either `nr`.
pub(crate) struct CallchainEntry<'a> {
    ctx: *mut ffi::perf_callchain_entry_ctx,
    ips: &'a mut [u64],
    stored: usize,
}

impl CallchainEntry<'_> {
    /// Wraps the `entry` argument of `perf_callchain_user()`.
    ///
    /// # Safety
    ///
    /// `ctx` is a valid `perf_callchain_entry_ctx` that nothing else
    /// accesses while the returned value lives, whose `entry` has room for
    /// `max_stack - nr` more entries after its own `nr` (as perf's).
    pub(crate) unsafe fn from_raw(ctx: *mut ffi::perf_callchain_entry_ctx) -> Self {
        // SAFETY: `ctx` is valid and ours (the safety requirements).
        let c = unsafe { &*ctx };
        // `perf_callchain_store()` stores nothing once the contexts are
        // maxed, nor beyond `max_stack`.
        let room = if c.contexts_maxed {
            0
        } else {
            c.max_stack.saturating_sub(c.nr)
        };
        let entry = c.entry;
        // SAFETY: `entry` is valid, ours, and has room for `room` entries
        // after its `nr` (the safety requirements): the slice is within
        // its `ip` array, which nothing else accesses while it lives. Its
        // pointer is not null even for no room.
        let ips = unsafe {
            let first = (*entry).ip.as_mut_ptr().add((*entry).nr as usize);
            core::slice::from_raw_parts_mut(first, room as usize)
        };
        // INVARIANT: By the safety requirements; nothing stored yet.
        Self {
            ctx,
            ips,
            stored: 0,
        }
    }

    /// Appends `ip`; `false` when the chain is full (`max_stack` reached,
    /// or the contexts limit), so the walk should stop.
    #[inline(always)]
    pub(crate) fn store(&mut self, ip: u64) -> bool {
        match self.ips.get_mut(self.stored) {
            Some(slot) => {
                *slot = ip;
                self.stored += 1;
                true
            }
            None => false,
        }
    }

    /// How many entries this walk has stored.
    #[inline(always)]
    pub(crate) fn stored(&self) -> u64 {
        self.stored as u64
    }

    /// How many more user entries fit (`max_stack` minus those stored).
    pub(crate) fn room(&self) -> u32 {
        // At most `max_stack`, a `u32`.
        u32::try_from(self.ips.len().saturating_sub(self.stored)).unwrap_or(u32::MAX)
    }
}

impl Drop for CallchainEntry<'_> {
    /// Counts the walk's entries in both `nr`s, as each
    /// `perf_callchain_store()` would have.
    fn drop(&mut self) {
        // At most `max_stack`, a `u32` (the room).
        let n = self.stored as u32;
        // SAFETY: `ctx` and its `entry` are valid and ours (type
        // invariant); `nr` is outside the `ip` array `ips` borrows.
        unsafe {
            let ctx = &mut *self.ctx;
            (*ctx.entry).nr += u64::from(n);
            ctx.nr += n;
        }
    }
}
