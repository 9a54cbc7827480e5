// SPDX-License-Identifier: GPL-2.0

//! An address space's registrations ([`MmState`]): an RCU maple tree of
//! sections keyed by text range, and the set a fork child adopted.
//!
//! Contexts: readers (the unwinder, the fork probe) use RCU only, in any
//! context; sections are retired (marked dead) in any context but NMI, by
//! the unmap watch among others; everything else that changes a state runs
//! under the registry lock ([`Writer`](super::Writer)).

use super::{
    counters::COUNTERS,
    locked::{
        Locked,
        LockedSlot,
        WriteToken, //
    },
    section::{
        AdoptedSet,
        Section, //
    },
};
use crate::abstractions::{
    arc_list::{
        Link,
        Linked, //
    },
    atomic_aref::AtomicARef,
    compat::rcu,
    rcu_maple::TreeValue,
};
use core::sync::atomic::{
    AtomicU32,
    Ordering, //
};
use kernel::{
    mm::Mm,
    prelude::*,
    sync::{
        aref::ARef,
        Arc, //
    },
};

/// Where a section of the tree starts, in the handle index.
pub(super) struct TextStart(pub(super) usize);

// SAFETY: A plain number: its drop does nothing.
#[expect(unsafe_code, reason = "a number's drop does nothing")]
unsafe impl TreeValue for TextStart {
    const DROP_AT_ERASE: bool = false;
}

/// An address space's registrations.
///
/// # Invariants
///
/// - `exit_ref` is empty or holds an `mm_struct` reference (`mmgrab`) on
///   the mm at `mm`, taken when it was torn down: the maintenance work or
///   unload drops it after the state has left the index.
/// - A state leaves the index only with its tree and its adopted set
///   emptied (`drain`), and is then never inserted again: its last
///   reference, which may be dropped in an RCU callback, frees an empty
///   tree and nothing else.
/// - The live sections of the tree and of the adopted set do not overlap.
#[pin_data(PinnedDrop)]
pub(super) struct MmState {
    #[pin]
    pub(super) sections: Locked<Section>,
    /// The tree's sections by handle: handle → text start.
    #[pin]
    pub(super) handles: Locked<TextStart>,
    /// What a fork child adopted in one step, set before the state enters
    /// the index.
    pub(super) adopted: LockedSlot<AdoptedSet>,
    /// The address of the `mm_struct`: the state's key in the index.
    pub(super) mm: usize,
    /// Sections not retired.
    pub(super) live: AtomicU32,
    /// Sections retired since the last tidy-up, left in the tree or the
    /// set for it (an overcount only costs a tidy-up that finds nothing).
    pub(super) retired: AtomicU32,
    /// The torn down mm, pinned until the state leaves the index.
    exit_ref: AtomicARef<Mm>,
    /// On the maintenance list.
    link: Link<MmState>,
}

// SAFETY: `link` returns the same field every time.
#[expect(unsafe_code, reason = "the maintenance list's link")]
unsafe impl Linked for MmState {
    fn link(&self) -> &Link<Self> {
        &self.link
    }
}

// SAFETY: The last reference to a state frees an empty tree (the tree never
// takes its lock when dropped) and no `mm_struct` reference (type
// invariants): memory only, which an RCU callback may do.
#[expect(unsafe_code, reason = "a state's drop frees memory only")]
unsafe impl TreeValue for Arc<MmState> {
    const DROP_AT_ERASE: bool = false;
}

#[expect(unsafe_code, reason = "`#[pinned_drop]` implements an unsafe trait")]
#[pinned_drop]
impl PinnedDrop for MmState {
    fn drop(self: Pin<&mut Self>) {
        // Cannot happen (type invariants); dropping the reference here, in
        // what may be softirq context, could deadlock: keep the mm instead.
        if self.exit_ref.is_set() {
            pr_err!("a torn down mm's state freed with the mm still pinned: the mm is leaked\n");
        }
        // Cannot happen either: a set is taken out before the state leaves
        // the index.  Its release would be queued from here, an RCU
        // callback, at unload: say so rather than let it pass.
        let guard = rcu::Guard::new();
        if self.adopted.get(&guard).is_some() {
            pr_err!("a state freed with its adopted set: the set is released late\n");
        }
    }
}

impl MmState {
    pub(super) fn new(mm: usize) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            sections <- Locked::new(),
            handles <- Locked::new(),
            adopted: LockedSlot::new(),
            mm,
            live: AtomicU32::new(0),
            retired: AtomicU32::new(0),
            exit_ref: AtomicARef::new(),
            link: Link::new(),
        }? Error)
    }

    /// Counts `s`, just inserted into the tree or the adopted set: a
    /// live registration held by its holder.  Under the registry lock.
    pub(super) fn admit(&self, s: &Section) {
        if self.live.fetch_add(1, Ordering::Relaxed) == 0 {
            COUNTERS.mms.fetch_add(1, Ordering::Relaxed);
        }
        s.holder.sections.fetch_add(1, Ordering::Relaxed);
        s.holder.registered.fetch_add(1, Ordering::Relaxed);
        COUNTERS.sections.fetch_add(1, Ordering::Relaxed);
        COUNTERS.registered.fetch_add(1, Ordering::Relaxed);
    }

    /// The reverse of [`MmState::admit`], for a section taken back out
    /// before its state was published: as if it had never been counted.
    pub(super) fn unadmit(&self, s: &Section) {
        s.mark_uncounted();
        if self.live.fetch_sub(1, Ordering::Relaxed) == 1 {
            COUNTERS.mms.fetch_sub(1, Ordering::Relaxed);
        }
        s.holder.sections.fetch_sub(1, Ordering::Relaxed);
        s.holder.registered.fetch_sub(1, Ordering::Relaxed);
        COUNTERS.sections.fetch_sub(1, Ordering::Relaxed);
        COUNTERS.registered.fetch_sub(1, Ordering::Relaxed);
    }

    /// Retires `s` if it is live: readers skip it from now on; it stays
    /// counted against its holder until released.  Whether this call
    /// retired it.  Any context but NMI.
    pub(super) fn retire(&self, s: &Section) -> bool {
        let first = s.mark_retired();
        if first {
            if self.live.fetch_sub(1, Ordering::Relaxed) == 1 {
                COUNTERS.mms.fetch_sub(1, Ordering::Relaxed);
            }
            s.holder.unregistered.fetch_add(1, Ordering::Relaxed);
            COUNTERS.unregistered.fetch_add(1, Ordering::Relaxed);
        }
        first
    }

    /// Retires `s` and gives its counts back: it is about to be erased, or
    /// its address space is gone.  Any context but NMI.
    pub(super) fn release(&self, s: &Section) {
        self.retire(s);
        if s.mark_released() {
            s.holder.sections.fetch_sub(1, Ordering::Relaxed);
            COUNTERS.sections.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Releases every section: the address space has been torn down, so
    /// none counts against its holder any more, whenever the maintenance
    /// work erases them.  Atomic context (the teardown probe), no lock.
    pub(super) fn release_all(&self, guard: &rcu::Guard) {
        self.sections
            .for_each(0, usize::MAX, guard, |s| self.release(s));
        if let Some(set) = self.adopted.get(guard) {
            set.sections.iter().for_each(|s| self.release(s));
        }
    }

    /// Retires the sections whose text meets `[start, end)`, being
    /// unmapped, unless `kept` says the part they meet is still mapped
    /// as it was; whether it retired any (the maintenance work then erases
    /// them).  Any context but NMI; no lock, no sleep.
    pub(super) fn unmap(
        &self,
        start: usize,
        end: usize,
        kept: impl Fn(usize, usize) -> bool,
        guard: &rcu::Guard,
    ) -> bool {
        if end <= start {
            return false;
        }
        let mut retired = false;
        let mut visit = |s: &Section| {
            if !s.is_live() {
                return;
            }
            let lo = start.max(s.text_start as usize);
            let hi = end.min(s.text_end as usize);
            if kept(lo, hi) {
                return;
            }
            // Left in the tree (or the set) for the maintenance work.
            if self.retire(s) {
                self.retired.fetch_add(1, Ordering::Relaxed);
                retired = true;
            }
        };
        self.sections.for_each(start, end - 1, guard, &mut visit);
        if let Some(set) = self.adopted.get(guard) {
            set.meeting(start as u64, end as u64).for_each(visit);
        }
        retired
    }

    /// Calls `f` with every section of the tree and of the adopted set,
    /// retired or not, in the order of their text: a merge of the two,
    /// each sorted.  One RCU read-side section: for the fork path, which
    /// may not sleep anyway.
    pub(super) fn for_each_in_order<'g>(
        &'g self,
        guard: &'g rcu::Guard,
        mut f: impl FnMut(&'g Section),
    ) {
        let set: &[Section] = self.adopted.get(guard).map_or(&[], |set| &set.sections);
        let mut rest = set.iter().peekable();
        self.sections.for_each(0, usize::MAX, guard, |t| {
            while let Some(a) = rest.next_if(|a| a.text_start < t.text_start) {
                f(a);
            }
            f(t);
        });
        rest.for_each(f);
    }

    /// Empties the tree, the handle index and the adopted set, calling `f`
    /// with each section taken out, retired or not; cannot fail.  Process
    /// context, under the registry lock.
    pub(super) fn take_all(&self, t: WriteToken<'_>, mut f: impl FnMut(&Section)) {
        self.handles.clear(t, drop);
        self.sections.clear(t, |s| f(&s));
        if let Some(set) = self.adopted.take(t) {
            set.sections.iter().for_each(f);
        }
    }

    /// Pins the torn down mm until the state leaves the index; returns a
    /// reference that was there already (there never is: an mm is torn
    /// down once).  Atomic context allowed.
    pub(super) fn pin_exited(&self, mm: ARef<Mm>) -> Option<ARef<Mm>> {
        self.exit_ref.replace(mm)
    }

    /// Takes the reference to the torn down mm, if any.
    pub(super) fn take_exit_ref(&self) -> Option<ARef<Mm>> {
        self.exit_ref.take()
    }
}
