// SPDX-License-Identifier: GPL-2.0

//! Address-space lifetime: sections retired when their text is unmapped,
//! states forgotten when their mm is torn down or left with no live
//! section, and retired sections erased (or compacted out of an adopted
//! set).
//!
//! Contexts: [`unmapped`] (the unmap watch, `mmap_lock` held) and
//! [`torn_down`] (the teardown probe, preemption off) run in atomic
//! context, take no lock and only retire or release sections and queue the
//! state; the maintenance work and the writers run the queue in process
//! context, taking the registry lock for one state at a time, so no lock
//! hold is longer than one address space's sections.
//!
//! Counting: a torn down address space's sections are released by the
//! probe itself, so they count against nobody's limits from then on,
//! whenever the work erases them.  A section an unmap retires stays
//! counted against its holder until the work erases it, and a retired
//! section of an adopted set until the set goes: memory held is memory
//! counted.

use super::{
    get,
    lookup::indexed,
    resched,
    state::MmState,
    Registry,
    Writer, //
};
use crate::{
    abstractions::{
        arc_list::ArcList,
        compat::rcu,
        ratelimit::pr_warn_ratelimited,
        sched::msleep, //
    },
    lifecycle,
};
use core::sync::atomic::{
    AtomicUsize,
    Ordering, //
};
use kernel::{
    bindings,
    mm::Mm,
    prelude::*,
    sync::{
        aref::ARef,
        Arc, //
    },
};

/// States waiting for the maintenance work, each once.
static MAINTENANCE: ArcList<MmState> = ArcList::new();

/// How many queued states a writer (a registration, an adoption) handles
/// before its own work: enough for the processes that exited just before,
/// bounded so that nobody pays for a storm of other processes' exits.
pub(super) const WRITER_MAINTENANCE: usize = 8;

/// Puts `state` on the maintenance list (once until the work takes it) and
/// schedules the work.  Any context but NMI.
pub(super) fn queue_maintenance(state: &Arc<MmState>) {
    if MAINTENANCE.push(state) {
        lifecycle::schedule_maintenance();
    }
}

/// The unmap watch: the mapping of `[start, end)` of `mm`, which still has
/// users, is being freed; `kept(lo, hi)` tells whether `[lo, hi)` is still
/// mapped as it was (the mapping was merged into another).  Process
/// context with `mmap_lock` held; must not sleep.
pub(crate) fn unmapped(
    mm: *const bindings::mm_struct,
    start: usize,
    end: usize,
    kept: impl Fn(usize, usize) -> bool,
) {
    let guard = rcu::Guard::new();
    let Some(state) = indexed(mm, &guard) else {
        return;
    };
    if state.unmap(start, end, kept, &guard) {
        queue_maintenance(state);
    }
}

/// The maintenance work: every queued state, the lock taken for each on
/// its own.  Process context.
pub(crate) fn maintain() {
    if let Some(reg) = get() {
        reg.maintain(usize::MAX);
        // A pass that took its states before this one (the work's, a
        // registration's) may still be handling them, one lock at a time:
        // wait for it, so that an exit just before counts as done.
        while PASSES.load(Ordering::Acquire) != 0 {
            msleep(1);
        }
    }
}

/// The maintenance passes under way: states taken from [`MAINTENANCE`] and
/// not all handled yet.
static PASSES: AtomicUsize = AtomicUsize::new(0);

/// The teardown probe: `mm` has been torn down (`exit_mmap()`, preemption
/// off).  Its sections are released at once; its state is forgotten by the
/// maintenance work, with the `mm_struct` pinned until then.
pub(crate) fn torn_down(mm: &Mm) {
    let guard = rcu::Guard::new();
    let Some(state) = indexed(mm.as_raw(), &guard) else {
        return;
    };
    state.release_all(&guard);
    // An mm is torn down once: no reference can have been there.
    if let Some(old) = state.pin_exited(ARef::from(mm)) {
        core::mem::forget(old);
        pr_err!("an mm torn down twice: one reference to it is leaked\n");
    }
    queue_maintenance(state);
}

impl Registry {
    /// Handles up to `limit` queued states, each under the lock on its own,
    /// rescheduling between them; the rest stay queued for the work.
    /// Process context, without the registry lock.
    pub(super) fn maintain(&self, limit: usize) {
        let mut done = 0usize;
        let mut left = false;
        PASSES.fetch_add(1, Ordering::AcqRel);
        for state in MAINTENANCE.take_all() {
            if done >= limit {
                MAINTENANCE.push(&state);
                left = true;
                continue;
            }
            self.writer().tidy(&state);
            done += 1;
            resched();
        }
        PASSES.fetch_sub(1, Ordering::AcqRel);
        if left {
            lifecycle::schedule_maintenance();
        }
    }
}

impl Writer<'_> {
    /// What a queued state needs: forgotten if its mm was torn down or it
    /// has no live section left, else its retired sections erased.
    fn tidy(&mut self, state: &Arc<MmState>) {
        if !self.forget(state) {
            self.purge(state);
        }
    }

    /// Erases `state`'s retired sections from its tree: one step of the
    /// RCU read lock per section, rescheduling between steps.  A section
    /// that cannot be erased now (no memory for the tree's nodes) stays,
    /// retired and counted, for the next time.  (A retired section of the
    /// adopted set stays in it, counted, until the set goes with the
    /// state: the set is one allocation, never changed once published.)
    pub(super) fn purge(&mut self, state: &MmState) {
        if state.retired.swap(0, Ordering::Relaxed) == 0 {
            return;
        }
        let mut at = Some(0usize);
        while at.is_some() {
            let victim = {
                let guard = rcu::Guard::new();
                state
                    .sections
                    .next(&mut at, &guard)
                    .filter(|s| !s.is_live())
                    .map(|s| (s.text_start as usize, s.handle))
            };
            if let Some((start, handle)) = victim {
                match state.sections.erase(self.t, start) {
                    Ok(Some(s)) => {
                        let _ = state.handles.erase(self.t, handle as usize);
                        self.drop_section(state, &s);
                    }
                    Ok(None) => {}
                    Err(_) => {
                        state.retired.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            resched();
        }
    }

    /// Erases every section of `state`, of the tree and of the adopted
    /// set; cannot fail.
    pub(super) fn drain(&mut self, state: &MmState) {
        let t = self.t;
        state.take_all(t, |s| {
            self.drop_section(state, s);
            resched();
        });
        state.retired.store(0, Ordering::Relaxed);
    }

    /// Forgets `state` if its mm was torn down or it has no live section
    /// left: empties it and erases it from the index (unless another state
    /// took its place since), then drops the pin on a torn down mm.
    /// Whether it did.
    pub(super) fn forget(&mut self, state: &Arc<MmState>) -> bool {
        let exit = state.take_exit_ref();
        if exit.is_none() && state.live.load(Ordering::Relaxed) != 0 {
            return false;
        }
        let indexed = {
            let guard = rcu::Guard::new();
            self.index
                .load(state.mm, &guard)
                .is_some_and(|s| Arc::ptr_eq(s, state))
        };
        if indexed {
            self.drain(state);
            if self.index.erase(self.t, state.mm).is_err() {
                // The empty state stays indexed, with the torn down mm
                // pinned, until the next time or unload.
                pr_warn_ratelimited!(
                    self.warn,
                    "out of memory forgetting an address space: its empty entry stays\n"
                );
                if let Some(mm) = exit {
                    state.pin_exited(mm);
                }
                return true;
            }
        }
        // The mm may go now: its address is out of the index.
        drop(exit);
        true
    }

    /// Empties every state and the index, at unload.
    pub(super) fn empty_index(&mut self) {
        // What the maintenance work left: nothing queues more now.
        for state in MAINTENANCE.take_all() {
            self.tidy(&state);
        }
        let (reg, t) = (self.reg, self.t);
        reg.index.clear(t, |erased| {
            let state: Arc<MmState> = (*erased).clone();
            self.drain(&state);
            drop(state.take_exit_ref());
            drop(erased);
        });
    }
}
