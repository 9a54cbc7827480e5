// SPDX-License-Identifier: GPL-2.0

//! Fork: a child starts with its parent's registrations.
//!
//! [`snapshot`] runs in the fork path (the `sched_process_fork` probe,
//! preemption off): it takes the parent's live sections lock-free, as
//! references to their copies with no count changed, into one sorted
//! array.  [`Registry::adopt`] runs in the child's task work before its
//! first return to user space, in process context: under the child's
//! `mmap_lock` and the registry lock it counts each copy's use, checks the
//! limits and that the text is mapped in the child, and makes the array
//! the child's adopted set in one step, published whole.

use super::{
    counters::{
        Failure,
        COUNTERS,
        FAIL_MEM, //
    },
    lookup::indexed,
    register::text_is_mapped,
    registry,
    resched,
    section::{
        AdoptedSet,
        Section, //
    },
    state::MmState,
    Registry,
    Writer, //
};
use crate::{
    abstractions::{
        compat::rcu,
        ratelimit::pr_warn_ratelimited, //
    },
    uapi::SFRAME_SECTION_INHERITED,
};
use core::sync::atomic::{
    AtomicBool,
    Ordering, //
};
use kernel::{
    bindings,
    mm::{
        MmWithUser,
        MmapReadGuard, //
    },
    prelude::*,
};

/// A parent's live registrations at fork, for the child: sorted by text.
/// Their copies are referenced, but their uses not counted: the child
/// counts them when it adopts them, under the lock.
pub(crate) struct Inherited {
    sections: KVec<Section>,
}

/// The live registrations of `parent` at this instant, or `None` if it has
/// none (or no memory could be had without sleeping).  Called in the fork
/// path with preemption off: no lock, no sleep.  A register or unregister
/// running in another thread of the parent is wholly in or wholly out (one
/// tree store each).  The references taken here are never the last ones
/// while the guard is held: the tree holds its own until a grace period
/// after the erase.
pub(crate) fn snapshot(parent: *const bindings::mm_struct) -> Option<Inherited> {
    let guard = rcu::Guard::new();
    let reg = registry(&guard)?;
    let state = indexed(parent, &guard)?;
    let n = state.live.load(Ordering::Relaxed) as usize;
    if n == 0 {
        return None;
    }
    let Ok(mut sections) = KVec::with_capacity(n, GFP_ATOMIC | __GFP_NOWARN) else {
        pr_warn_ratelimited!(
            reg.warn,
            "fork: no memory for the parent's {} sections: the child starts without\n",
            n
        );
        return None;
    };
    let take = |sections: &mut KVec<Section>, s: &Section| {
        if !s.is_live() {
            return;
        }
        // More sections than counted (a concurrent register): the rest
        // are left out, as if registered after the fork.
        let _ = sections.push_within_capacity(Section {
            handle: s.handle,
            text_start: s.text_start,
            text_end: s.text_end,
            sframe_addr: s.sframe_addr,
            copy: s.copy.clone(),
            flags: s.flags | SFRAME_SECTION_INHERITED,
            dead: AtomicBool::new(false),
        });
    };
    state.for_each_in_order(&guard, |s| take(&mut sections, s));
    Some(Inherited { sections })
}

impl Registry {
    /// Gives `mm`, a fork child's on its first way to user space, the
    /// registrations `inherited` its parent had at the fork: the same
    /// copies (a copy the parent has let go of since is taken again from
    /// its bytes), the same handles, charged to the same limits.  A section
    /// that cannot be adopted is left out, said in the log; the child then
    /// falls back to frame pointers there, as an unregistered task would.
    /// The sections become the child's adopted set, the snapshot's own
    /// array, in one step: no allocation or tree store per section.  The
    /// child's state is published whole, after its last section.
    pub(crate) fn adopt(&self, mm: &MmWithUser, inherited: Inherited) {
        let entries = inherited.sections;
        let mmap = mm.mmap_read_lock();
        let mut w = self.writer();
        w.maintain();
        let Ok((state, indexed)) = w.state_of(mm) else {
            drop(w);
            drop(mmap);
            self.adopt_failed(entries.len() as u32);
            return;
        };
        // A child's state is new but where something registered for it
        // first (a daemon, through its PID): then one section at a time.
        let (added, mut dropped) = if indexed {
            w.adopt_into_tree(&mmap, &state, entries)
        } else {
            w.adopt_as_set(&mmap, &state, entries)
        };
        if added > 0 && !indexed {
            let key = state.mm;
            if let Err(e) = w.index.insert_range(w.t, key, key, state) {
                // Unreachable without the index entry: empty the state.
                let state = e.value;
                let t = w.t;
                state.take_all(t, |s| w.unadmit(&state, s));
                dropped += added;
                drop(w);
                drop(mmap);
                drop(state);
                self.adopt_failed(dropped);
                return;
            }
        }
        w.count_registered(u64::from(added));
        drop(w);
        drop(mmap);
        self.adopt_failed(dropped);
    }

    fn adopt_failed(&self, dropped: u32) {
        if dropped > 0 {
            pr_warn_ratelimited!(
                self.warn,
                "fork: {} of the parent's sections not given to child {} (limits or memory)\n",
                dropped,
                kernel::current!().pid()
            );
        }
    }
}

impl Writer<'_> {
    /// Gives the child's new `state` the `entries` as its adopted set, in
    /// one allocation whatever their number; the sections added and left
    /// out.  Under the child's `mmap_lock`.
    fn adopt_as_set(
        &mut self,
        mmap: &MmapReadGuard<'_>,
        state: &MmState,
        mut entries: KVec<Section>,
    ) -> (u32, u32) {
        let mut dropped = 0u32;
        // An entry left out is marked dead here, with no use of its copy
        // counted, and removed below.
        for e in entries.iter_mut() {
            let taken = !self.shared().shutting_down && self.take_use(e);
            if taken && self.may_adopt(mmap, state, e).is_ok() {
                state.admit(&e.copy.owner);
            } else {
                if taken {
                    self.put_copy(&e.copy);
                }
                *e.dead.get_mut() = true;
                dropped += 1;
            }
            resched();
        }
        entries.retain(|e| !e.dead.load(Ordering::Relaxed));
        let added = entries.len() as u32;
        if added == 0 {
            return (0, dropped);
        }
        match state.adopted.set(self.t, AdoptedSet { sections: entries }) {
            Ok(()) => (added, dropped),
            Err(set) => {
                for s in set.sections.iter() {
                    self.unadmit(state, s);
                }
                (0, dropped + added)
            }
        }
    }

    /// Inserts the `entries` one by one into the tree of the child's
    /// `state`; the sections added and left out.  Under the child's
    /// `mmap_lock`.
    fn adopt_into_tree(
        &mut self,
        mmap: &MmapReadGuard<'_>,
        state: &MmState,
        mut entries: KVec<Section>,
    ) -> (u32, u32) {
        let (mut added, mut dropped) = (0u32, 0u32);
        for mut e in entries.drain_all() {
            if self.shared().shutting_down || !self.take_use(&mut e) {
                dropped += 1;
                continue;
            }
            let copy = e.copy.clone();
            let t = self.t;
            let inserted = self.may_adopt(mmap, state, &e).and_then(|()| {
                let (start, end) = (e.text_start as usize, e.text_end as usize);
                state
                    .sections
                    .insert_range(t, start, end - 1, e)
                    .map_err(|_| FAIL_MEM)
            });
            if inserted.is_err() {
                self.put_copy(&copy);
                dropped += 1;
                continue;
            }
            state.admit(&copy.owner);
            added += 1;
            resched();
        }
        (added, dropped)
    }

    /// Counts a use of `e`'s copy for the child.  Use counts change under
    /// the lock only: a copy still used is used once more; a dead one (the
    /// parent let go of it since the fork) is taken again, and replaces
    /// `e`'s.  False if it could not be.
    fn take_use(&mut self, e: &mut Section) -> bool {
        if e.copy.users.load(Ordering::Relaxed) != 0 {
            e.copy.users.fetch_add(1, Ordering::Relaxed);
            return true;
        }
        match self.revive(&e.copy) {
            Ok(c) => {
                e.copy = c;
                true
            }
            Err(_) => false,
        }
    }

    /// Whether the child's `state` may take `e`: its text is mapped in the
    /// child (text the parent marked `MADV_DONTFORK` is not), within the
    /// limits.  Under the child's `mmap_lock`.
    fn may_adopt(
        &self,
        mmap: &MmapReadGuard<'_>,
        state: &MmState,
        e: &Section,
    ) -> Result<(), Failure> {
        let start = usize::try_from(e.text_start).map_err(|_| FAIL_MEM)?;
        let end = usize::try_from(e.text_end).map_err(|_| FAIL_MEM)?;
        if end <= start {
            return Err(FAIL_MEM);
        }
        text_is_mapped(mmap, start, end)?;
        self.section_limits(state, &e.copy.owner)
    }

    /// Undoes the adoption of `s` into a state that never entered the
    /// index: retired without counting it as unregistered (it was never
    /// counted as registered), and its copy's use dropped.
    fn unadmit(&mut self, state: &MmState, s: &Section) {
        state.retire(s);
        COUNTERS.unregistered.fetch_sub(1, Ordering::Relaxed);
        COUNTERS.sections.fetch_add(1, Ordering::Relaxed);
        self.put_copy(&s.copy);
    }
}
