// SPDX-License-Identifier: GPL-2.0

//! One registration ([`Section`]) and a fork child's adopted set of them
//! ([`AdoptedSet`]).
//!
//! A section is immutable once made but for its state, which goes one
//! way: live, then retired (unregistered, or its text unmapped: readers in
//! any context skip it, but its memory is still held and counted against
//! its holder's limits), then released (its counts given back; its memory
//! goes when the tree or set holding it lets go).  Any context but NMI may
//! retire or release a section.

use super::{
    account::UserAccount,
    bound::BoundCopy, //
};
use crate::{
    abstractions::rcu_maple::TreeValue,
    uapi::SframeSectionInfo, //
};
use core::sync::atomic::{
    AtomicU8,
    Ordering, //
};
use kernel::{
    prelude::*,
    sync::Arc, //
};

/// A section in use: readers see it.
const LIVE: u8 = 0;
/// Retired: readers skip it; still counted against its holder.
const RETIRED: u8 = 1;
/// Released: no longer counted; gone once its tree or set lets go.
const RELEASED: u8 = 2;

/// One registration.
pub(super) struct Section {
    pub(super) handle: u64,
    pub(super) text_start: u64,
    pub(super) text_end: u64,
    pub(super) sframe_addr: u64,
    /// The bytes, and the rows a walk searches in them, parsed at
    /// `sframe_addr` for the registration (a fork child's sections share
    /// their parent's); a use of the copy is counted for the section
    /// until it is erased (`put_copy`).
    pub(super) copy: Arc<BoundCopy>,
    /// The user whose process holds the section, charged for it: the
    /// process's own account, whoever registered the copy (a daemon
    /// registers for every user's processes).
    pub(super) holder: Arc<UserAccount>,
    /// `SFRAME_SECTION_*`: where the registration came from.
    pub(super) flags: u32,
    /// `LIVE`, `RETIRED` or `RELEASED`, in that order only.
    state: AtomicU8,
}

// SAFETY: A section's drop releases its `Arc<BoundCopy>` (and through it
// an `Arc<SectionCopy>`) and its `Arc<UserAccount>`, whose last
// references free memory with `kvfree()`/`kfree()` only (a copy leaves
// `Registry::copies`, and an account `Registry::users`, under the
// registry lock, in process context, before that): safe in an RCU
// callback.
#[expect(unsafe_code, reason = "a section's drop frees memory only")]
unsafe impl TreeValue for Section {
    const DROP_AT_ERASE: bool = false;
}

impl Section {
    /// A live section of `copy` (bound to `sframe_addr` and `text`) for
    /// `text`, held by `holder`.
    pub(super) fn new(
        handle: u64,
        text: (u64, u64),
        sframe_addr: u64,
        copy: Arc<BoundCopy>,
        holder: Arc<UserAccount>,
        flags: u32,
    ) -> Self {
        Self {
            handle,
            text_start: text.0,
            text_end: text.1,
            sframe_addr,
            copy,
            holder,
            flags,
            state: AtomicU8::new(LIVE),
        }
    }

    /// The same registration, live, for another state (a fork child's),
    /// with `copy`, bound to the same addresses (its own, or a revived
    /// copy's), held by `holder`; `flags` added.
    pub(super) fn inherit(
        &self,
        copy: Arc<BoundCopy>,
        holder: Arc<UserAccount>,
        flags: u32,
    ) -> Self {
        Self::new(
            self.handle,
            (self.text_start, self.text_end),
            self.sframe_addr,
            copy,
            holder,
            self.flags | flags,
        )
    }

    pub(super) fn covers(&self, pc: u64) -> bool {
        (self.text_start..self.text_end).contains(&pc)
    }

    /// Whether the section is live.
    pub(super) fn is_live(&self) -> bool {
        self.state.load(Ordering::Acquire) == LIVE
    }

    /// Retires a live section; whether this call did.
    pub(super) fn mark_retired(&self) -> bool {
        self.state
            .compare_exchange(LIVE, RETIRED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Releases a retired section; whether this call did.
    pub(super) fn mark_released(&self) -> bool {
        self.state
            .compare_exchange(RETIRED, RELEASED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Marks a section that was never counted (an adoption undone)
    /// released at once.
    pub(super) fn mark_uncounted(&self) {
        self.state.store(RELEASED, Ordering::Release);
    }

    /// What `SFRAME_IOC_LIST` says of the section to `viewer` (an
    /// account): how many other registrations share its bytes only if
    /// `viewer` owns the copy, whose uses are then its own registrations
    /// (a daemon's copies are used by every user's processes).
    pub(super) fn info(&self, viewer: u32) -> SframeSectionInfo {
        SframeSectionInfo {
            handle: self.handle,
            text_start: self.text_start,
            text_end: self.text_end,
            sframe_addr: self.sframe_addr,
            sframe_len: self.copy.bytes.len() as u64,
            kernel_bytes: (self.copy.bytes.capacity() as u64)
                .saturating_add(self.copy.index.kernel_bytes()),
            version: self.copy.info.version,
            num_fdes: self.copy.info.num_fdes,
            shared: if self.copy.owner.id == viewer {
                self.copy.users.load(Ordering::Relaxed).saturating_sub(1)
            } else {
                0
            },
            flags: self.flags,
        }
    }
}

/// The registrations a fork child took from its parent in one step
/// ([`Registry::adopt`](super::Registry::adopt)): sorted by text and not
/// overlapping, never changed once the state is published but for the
/// sections' states.  A retired section stays in the set, counted against
/// its holder, until the set goes with its state (which is forgotten once
/// nothing in it is live).
pub(super) struct AdoptedSet {
    pub(super) sections: KVec<Section>,
    /// Indices into `sections`, in the order of their handles.
    by_handle: KVec<u32>,
}

// SAFETY: Dropping the set drops its sections, which frees memory only (as
// for `Section`).
#[expect(unsafe_code, reason = "a set's drop frees memory only")]
unsafe impl TreeValue for AdoptedSet {
    const DROP_AT_ERASE: bool = false;
}

impl AdoptedSet {
    /// A set of `sections`, which are sorted by text and do not overlap,
    /// with its index by handle (charged to the caller's memory cgroup).
    /// Process context.
    pub(super) fn new(sections: KVec<Section>) -> Result<Self, KVec<Section>> {
        let Ok(mut by_handle) = KVec::with_capacity(sections.len(), GFP_KERNEL_ACCOUNT) else {
            return Err(sections);
        };
        for i in 0..sections.len() {
            let _ = by_handle.push_within_capacity(i as u32);
        }
        heapsort_by_key(&mut by_handle, |&i| {
            sections.get(i as usize).map_or(u64::MAX, |s| s.handle)
        });
        Ok(Self {
            sections,
            by_handle,
        })
    }

    /// The section whose text contains `pc`, retired or not.
    pub(super) fn find(&self, pc: u64) -> Option<&Section> {
        let i = self.sections.partition_point(|s| s.text_start <= pc);
        self.sections
            .get(i.checked_sub(1)?)
            .filter(|s| s.covers(pc))
    }

    /// The section with `handle`, retired or not: O(log n).
    pub(super) fn by_handle(&self, handle: u64) -> Option<&Section> {
        let at = |i: &u32| {
            self.sections
                .get(*i as usize)
                .map_or(u64::MAX, |s| s.handle)
        };
        let k = self.by_handle.partition_point(|i| at(i) < handle);
        let s = self.sections.get(*self.by_handle.get(k)? as usize)?;
        (s.handle == handle).then_some(s)
    }

    /// The sections whose text meets `[start, end)`, retired or not.
    pub(super) fn meeting(&self, start: u64, end: u64) -> impl Iterator<Item = &Section> {
        let i = self.sections.partition_point(|s| s.text_end <= start);
        self.sections
            .get(i..)
            .unwrap_or(&[])
            .iter()
            .take_while(move |s| s.text_start < end)
    }
}

/// Sorts `v` by `key`, in place: O(n log n) comparisons, no allocation,
/// no recursion.
fn heapsort_by_key<T, K: Ord>(v: &mut [T], key: impl Fn(&T) -> K) {
    let less = |v: &[T], a: usize, b: usize| match (v.get(a), v.get(b)) {
        (Some(x), Some(y)) => key(x) < key(y),
        _ => false,
    };
    let sift_down = |v: &mut [T], mut root: usize, end: usize| loop {
        let mut child = 2 * root + 1;
        if child >= end {
            break;
        }
        if child + 1 < end && less(v, child, child + 1) {
            child += 1;
        }
        if !less(v, root, child) {
            break;
        }
        v.swap(root, child);
        root = child;
    };
    let n = v.len();
    for root in (0..n / 2).rev() {
        sift_down(v, root, n);
    }
    for end in (1..n).rev() {
        v.swap(0, end);
        sift_down(v, 0, end);
    }
}
