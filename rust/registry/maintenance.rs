// SPDX-License-Identifier: GPL-2.0

//! Address-space lifetime: sections retired when their text is unmapped,
//! states forgotten when their mm is torn down or left with no live
//! section, and retired sections erased.
//!
//! Contexts: [`unmapped`] (the unmap watch, `mmap_lock` held) and
//! [`torn_down`] (the teardown probe, preemption off) run in atomic
//! context, take no lock and only mark sections retired and queue the
//! state; [`maintain`] (the maintenance work, and every writer before it
//! changes anything) runs in process context under the registry lock.

use super::{
    get,
    lookup::indexed,
    resched,
    state::MmState,
    Writer, //
};
use crate::{
    abstractions::{
        arc_list::ArcList,
        compat::rcu,
        ratelimit::pr_warn_ratelimited, //
    },
    lifecycle,
};
use core::sync::atomic::Ordering;
use kernel::{
    bindings,
    mm::Mm,
    prelude::*,
    sync::{
        aref::ARef,
        Arc, //
    },
};

/// States waiting for [`maintain`], each once.
static MAINTENANCE: ArcList<MmState> = ArcList::new();

/// Puts `state` on the maintenance list (once until the work takes it) and
/// schedules the work.  Any context but NMI.
fn queue_maintenance(state: &Arc<MmState>) {
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

/// The maintenance work: forgets the address spaces torn down, and those
/// an unmap left without a live section.  Process context.
pub(crate) fn maintain() {
    if let Some(reg) = get() {
        reg.writer().maintain();
    }
}

/// The teardown probe: `mm` has been torn down (`exit_mmap()`, preemption
/// off).  Its state, if any, is forgotten by the maintenance work, with
/// the `mm_struct` pinned until then.
pub(crate) fn torn_down(mm: &Mm) {
    let guard = rcu::Guard::new();
    let Some(state) = indexed(mm.as_raw(), &guard) else {
        return;
    };
    // An mm is torn down once: no reference can have been there.
    if let Some(old) = state.pin_exited(ARef::from(mm)) {
        core::mem::forget(old);
        pr_err!("an mm torn down twice: one reference to it is leaked\n");
    }
    queue_maintenance(state);
}

impl Writer<'_> {
    /// Erases `state`'s retired sections: one step of the RCU read lock
    /// per section, rescheduling between steps.  A section that cannot be
    /// erased now (no memory for the tree's nodes) stays, retired, for the
    /// next purge or the mm's teardown.
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
                    .map(|s| s.text_start as usize)
            };
            if let Some(start) = victim {
                match state.sections.erase(self.t, start) {
                    Ok(Some(s)) => self.put_copy(&s.copy),
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
            state.retire(s);
            self.put_copy(&s.copy);
            resched();
        });
        state.retired.store(0, Ordering::Relaxed);
    }

    /// Handles the states on the maintenance list.
    pub(super) fn maintain(&mut self) {
        for state in MAINTENANCE.take_all() {
            self.forget(&state);
            resched();
        }
    }

    /// Forgets `state` if its mm was torn down or it has no live section
    /// left: empties it and erases it from the index (unless another state
    /// took its place since), then drops the pin on a torn down mm.
    fn forget(&mut self, state: &Arc<MmState>) {
        let exit = state.take_exit_ref();
        if exit.is_none() && state.live.load(Ordering::Relaxed) != 0 {
            return;
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
                return;
            }
        }
        // The mm may go now: its address is out of the index.
        drop(exit);
    }

    /// Empties every state and the index, at unload.
    pub(super) fn empty_index(&mut self) {
        let (reg, t) = (self.reg, self.t);
        reg.index.clear(t, |erased| {
            let state: Arc<MmState> = (*erased).clone();
            self.drain(&state);
            drop(state.take_exit_ref());
            drop(erased);
        });
    }
}
