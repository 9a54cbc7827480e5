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
use core::marker::PhantomData;

/// The callchain being built for one sample.
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
pub(crate) struct CallchainEntry<'a> {
    ctx: *mut ffi::perf_callchain_entry_ctx,
    _ctx: PhantomData<&'a mut ffi::perf_callchain_entry_ctx>,
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
        // INVARIANT: By the safety requirements.
        Self {
            ctx,
            _ctx: PhantomData,
        }
    }

    /// Appends `ip`; `false` when the chain is full (`max_stack` reached,
    /// or the contexts limit), so the walk should stop.
    ///
    /// What `perf_callchain_store()` does, in line: through a C helper it
    /// was a call and 15 instructions a frame (perf's own walk inlines it).
    #[inline(always)]
    pub(crate) fn store(&mut self, ip: u64) -> bool {
        // SAFETY: `ctx` is valid and ours (type invariant).
        let ctx = unsafe { &mut *self.ctx };
        if ctx.nr >= ctx.max_stack || ctx.contexts_maxed {
            return false;
        }
        let entry = ctx.entry;
        // SAFETY: `entry` is valid and ours, and has room for the entry at
        // its `nr`: `ctx.nr < ctx.max_stack` (type invariant).
        unsafe {
            let nr = (*entry).nr;
            (*entry).ip.as_mut_ptr().add(nr as usize).write(ip);
            (*entry).nr = nr + 1;
        }
        ctx.nr += 1;
        true
    }

    /// How many more user entries fit (`max_stack` minus those stored).
    pub(crate) fn room(&self) -> u32 {
        // SAFETY: `ctx` is valid and ours (type invariant).
        let (max, nr) = unsafe { ((*self.ctx).max_stack, (*self.ctx).nr) };
        max.saturating_sub(nr)
    }
}
