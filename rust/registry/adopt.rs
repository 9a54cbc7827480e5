// SPDX-License-Identifier: GPL-2.0

//! Fork: a child starts with its parent's registrations.
//!
//! [`snapshot`] runs in the fork path (the `sched_process_fork` probe,
//! preemption off): it takes the parent's live sections lock-free, as
//! references to their copies with no use counted, into one sorted
//! array (`GFP_ATOMIC`; it lives until the child's first return to user
//! space).  [`Registry::adopt`] runs in the child's task work before then,
//! in process context: it builds the child's own set, charged to the
//! child's memory cgroup and held by the child's account, and under the
//! child's `mmap_lock` and the registry lock counts each copy's use,
//! checks the limits and that the text is mapped in the child, and
//! publishes the set in one step.

use super::{
    bound::BoundCopy,
    copy::SectionCopy,
    counters::{
        Failure,
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
        cred::current_account,
        ratelimit::pr_warn_ratelimited, //
    },
    uapi::SFRAME_SECTION_INHERITED,
};
use core::sync::atomic::Ordering;
use kernel::{
    bindings,
    mm::{
        MmWithUser,
        MmapReadGuard, //
    },
    prelude::*,
    sync::Arc,
};

/// A parent's live registrations at fork, for the child: sorted by text
/// (a register and an unregister racing with the snapshot may leave two
/// overlapping: the child keeps the first).  Their copies are referenced,
/// but their uses not counted: the child counts them when it adopts them,
/// under the lock.
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
        let _ = sections.push_within_capacity(s.inherit(
            s.copy.clone(),
            s.holder.clone(),
            SFRAME_SECTION_INHERITED,
        ));
    };
    state.for_each_in_order(&guard, |s| take(&mut sections, s));
    Some(Inherited { sections })
}

impl Registry {
    /// Gives `mm`, a fork child's on its first way to user space, the
    /// registrations `inherited` its parent had at the fork: the same
    /// copies (a copy the parent has let go of since is taken again from
    /// its bytes), the same handles, held by the child's account and
    /// charged to its limits.  A section that cannot be adopted is left
    /// out, said in the log; the child then falls back to frame pointers
    /// there, as an unregistered task would.  The sections become the
    /// child's adopted set in one step: one allocation, no tree store per
    /// section; the child's state is published whole, after its last
    /// section.
    pub(crate) fn adopt(&self, mm: &MmWithUser, inherited: Inherited) {
        let entries = inherited.sections;
        let n = entries.len();
        // Outside the lock: the copies the parent let go of since the
        // fork, revived (their bytes copied), and the child's own array.
        // (No maintenance first: an exited process's sections count
        // against nobody from its teardown on.)
        let Some(revived) = self.revive_dead(&entries) else {
            self.adopt_failed(n as u32);
            return;
        };
        let Ok(kept) = KVec::with_capacity(n, GFP_KERNEL_ACCOUNT) else {
            self.adopt_failed(n as u32);
            return;
        };
        let mmap = mm.mmap_read_lock();
        let mut w = self.writer();
        let dropped = w.adopt_locked(mm, &mmap, entries, revived, kept);
        drop(w);
        drop(mmap);
        self.adopt_failed(dropped);
    }

    /// For each entry whose copy is dead (its last use went since the
    /// fork), a live copy of its bytes with a use counted, by index (an
    /// empty list, allocating nothing, if none is); `None` if there was no
    /// memory for the list.  Process context, without the lock.
    fn revive_dead(&self, entries: &[Section]) -> Option<KVec<Option<Arc<SectionCopy>>>> {
        let dead = |e: &Section| e.copy.users.load(Ordering::Relaxed) == 0;
        if !entries.iter().any(dead) {
            return Some(KVec::new());
        }
        let mut revived = KVec::with_capacity(entries.len(), GFP_KERNEL).ok()?;
        for e in entries {
            let copy = (e.copy.users.load(Ordering::Relaxed) == 0)
                .then(|| self.revive(&e.copy).ok())
                .flatten();
            let _ = revived.push_within_capacity(copy);
            if !e.copy.bytes.is_empty() {
                resched();
            }
        }
        Some(revived)
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
    /// [`Registry::adopt`] under the lock and the child's `mmap_lock`:
    /// `revived` has the entries' revived copies, `kept` room for them all.
    /// The number of sections left out.
    fn adopt_locked(
        &mut self,
        mm: &MmWithUser,
        mmap: &MmapReadGuard<'_>,
        entries: KVec<Section>,
        mut revived: KVec<Option<Arc<SectionCopy>>>,
        mut kept: KVec<Section>,
    ) -> u32 {
        let n = entries.len() as u32;
        let unused = |w: &mut Self, revived: &mut KVec<Option<Arc<SectionCopy>>>| {
            for c in revived.iter_mut().filter_map(Option::take) {
                w.put_copy(&c);
            }
        };
        let holder = match self.account(current_account()) {
            Ok(holder) => holder,
            Err(_) => {
                unused(self, &mut revived);
                return n;
            }
        };
        let Ok((state, indexed)) = self.state_of(mm) else {
            unused(self, &mut revived);
            self.forget_if_idle(&holder);
            return n;
        };
        let (mut added, mut dropped) = (0u32, 0u32);
        let mut end = 0u64;
        for (i, e) in entries.iter().enumerate() {
            let revived = revived.get_mut(i).and_then(Option::take);
            // Sorted by start: overlapping the one before means a register
            // raced with the snapshot; the first is kept.
            let copy = if self.shared().shutting_down || e.text_start < end {
                if let Some(c) = revived {
                    self.put_copy(&c);
                }
                None
            } else {
                self.take_use(e, revived)
            };
            let Some(bound) = copy.and_then(|c| self.bind(e, c)) else {
                dropped += 1;
                continue;
            };
            let s = e.inherit(bound, holder.clone(), 0);
            if let Err(s) = self.adopt_one(mmap, &state, indexed, s, &mut kept) {
                self.put_copy(&s.copy);
                dropped += 1;
                continue;
            }
            end = e.text_end;
            added += 1;
            resched();
        }
        unused(self, &mut revived);
        // Nothing adopted: the child's account, if made for this, goes.
        self.forget_if_idle(&holder);
        if !indexed && added > 0 && !self.publish_set(&state, kept) {
            return n;
        }
        dropped
    }

    /// The use of `e`'s copy for the child: `revived` if it was revived,
    /// else one more use of its copy if that is still live.  Use counts
    /// change under the lock only.
    fn take_use(
        &mut self,
        e: &Section,
        revived: Option<Arc<SectionCopy>>,
    ) -> Option<Arc<SectionCopy>> {
        if let Some(c) = revived {
            return Some(c);
        }
        if e.copy.users.load(Ordering::Relaxed) == 0 {
            // Its last use went after `revive_dead` looked: taken back
            // from the kept copies if it is one, else gone.
            return self.take_kept(&e.copy).then(|| e.copy.copy().clone());
        }
        e.copy.users.fetch_add(1, Ordering::Relaxed);
        Some(e.copy.copy().clone())
    }

    /// The child's `copy` of `e`'s bytes (a use counted), bound to `e`'s
    /// addresses: `e`'s own, rows and all, where it is the same copy;
    /// a revived copy parsed there.  `None`, the use dropped, without
    /// memory.
    fn bind(&mut self, e: &Section, copy: Arc<SectionCopy>) -> Option<Arc<BoundCopy>> {
        if Arc::ptr_eq(&copy, e.copy.copy()) {
            return Some(e.copy.clone());
        }
        match BoundCopy::new_shared(copy.clone(), e.sframe_addr, (e.text_start, e.text_end)) {
            Ok(bound) => Some(bound),
            Err(_) => {
                self.put_copy(&copy);
                None
            }
        }
    }

    /// Adds `s` to the child's state, counted: into its tree if the state
    /// is published already (something registered for the child first: a
    /// daemon, through its PID), else into `kept`, the set to be.  Hands
    /// `s` back if it may not be adopted.
    fn adopt_one(
        &mut self,
        mmap: &MmapReadGuard<'_>,
        state: &MmState,
        indexed: bool,
        s: Section,
        kept: &mut KVec<Section>,
    ) -> Result<(), Section> {
        if self.may_adopt(mmap, state, &s).is_err() {
            return Err(s);
        }
        if indexed {
            return self.insert_section(state, s).map_err(|(s, _)| s);
        }
        kept.push_within_capacity(s).map_err(|e| e.0)?;
        if let Some(s) = kept.last() {
            state.admit(s);
        }
        Ok(())
    }

    /// Makes `kept`, the sections admitted into a new `state`, its adopted
    /// set, and publishes the state; undoes the adoption if either fails.
    fn publish_set(&mut self, state: &Arc<MmState>, kept: KVec<Section>) -> bool {
        let set = match AdoptedSet::new(kept) {
            Ok(set) => set,
            Err(kept) => {
                self.unadopt(state, &kept);
                return false;
            }
        };
        if let Err(set) = state.adopted.set(self.t, set) {
            self.unadopt(state, &set.sections);
            return false;
        }
        let key = state.mm;
        if let Err(e) = self.index.insert_range(self.t, key, key, state.clone()) {
            drop(e);
            if let Some(set) = state.adopted.take(self.t) {
                self.unadopt(state, &set.sections);
            }
            return false;
        }
        true
    }

    /// Undoes the adoption of `sections` into a state that never entered
    /// the index: uncounted, and their copies' uses dropped.
    fn unadopt(&mut self, state: &MmState, sections: &[Section]) {
        for s in sections {
            state.unadmit(s);
            self.put_copy(&s.copy);
            self.forget_if_idle(&s.holder);
        }
    }

    /// Whether the child's `state` may take `s`: its text is mapped in the
    /// child (text the parent marked `MADV_DONTFORK` is not), within the
    /// limits.  Under the child's `mmap_lock`.
    fn may_adopt(
        &self,
        mmap: &MmapReadGuard<'_>,
        state: &MmState,
        s: &Section,
    ) -> Result<(), Failure> {
        let start = usize::try_from(s.text_start).map_err(|_| FAIL_MEM)?;
        let end = usize::try_from(s.text_end).map_err(|_| FAIL_MEM)?;
        if end <= start {
            return Err(FAIL_MEM);
        }
        text_is_mapped(mmap, start, end)?;
        self.section_limits(state, &s.holder)
    }
}
