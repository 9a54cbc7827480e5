// SPDX-License-Identifier: GPL-2.0

//! Kept copies: a copy whose last user left stays in memory, validated and
//! indexed, so that the next registration of the same bytes by the same
//! user (the next start of the same program: its libc, its loader) takes
//! it back instead of validating the bytes and building their index and
//! row table again.  That work is most of what a registration costs, and
//! a short program's processes never overlap: without keeping, each of
//! them would pay it for every object it loads.
//!
//! A kept copy stays in [`Registry::copies`](super::Registry) under its
//! key, with no user, and in the kept list (oldest first).  It no longer
//! counts in what its owner and the module hold for registrations (the
//! `copies` and `bytes` of `SFRAME_IOC_STATS`), but in the kept figures.
//! The kept bytes are bounded: by `max_kept_bytes` module-wide, by a
//! quarter of that per user (so that one user's churn cannot push every
//! other user's copies out), and, with the bytes held, by
//! `max_total_bytes`.  When a bound is reached the oldest go first, and a
//! new copy that needs the room pushes kept ones out: keeping is a cache,
//! and a kept copy gone only costs the next registration a validation.
//! `max_kept_bytes=0` keeps nothing.  At most 1,024 copies are kept, 256
//! per account: the list is searched under the registry lock.
//!
//! A kept copy's memory stays charged to the memory cgroup that made it.
//! Its owner's account stays while it keeps copies, so a copy taken back
//! is charged to the account it was uncharged from.
//!
//! Contexts: process context, under the registry lock.

use super::{
    copy::SectionCopy,
    counters::COUNTERS,
    Writer, //
};
use core::sync::atomic::Ordering;
use kernel::{
    prelude::*,
    sync::Arc, //
};

/// Most kept copies, module-wide and per account: the kept list is
/// searched under the registry lock.
const MAX_KEPT: usize = 1024;
const MAX_KEPT_PER_USER: u32 = 256;

impl Writer<'_> {
    /// Keeps `copy`, whose last user has just left and which has been
    /// uncharged, if the bounds leave room for it (making room by letting
    /// the oldest kept copies go); `false` if it is not kept.  O(kept).
    pub(super) fn keep(&mut self, copy: &Arc<SectionCopy>) -> bool {
        let len = copy.charge();
        let max = self.limits.max_kept_bytes;
        let per_user = max / 4;
        if !copy.indexed || self.shared().shutting_down || len > per_user {
            return false;
        }
        // Counted as one of its owner's kept copies from here on: letting
        // the owner's older ones go must not forget the account this one
        // stays charged to (`forget_if_idle` looks at the count).
        copy.owner.kept.fetch_add(1, Ordering::Relaxed);
        if !self.make_room(copy, len, per_user, max)
            || self.shared().kept.push(copy.clone(), GFP_KERNEL).is_err()
        {
            copy.owner.kept.fetch_sub(1, Ordering::Relaxed);
            return false;
        }
        self.shared().kept_bytes += len;
        copy.owner.kept_bytes.fetch_add(len, Ordering::Relaxed);
        COUNTERS.kept_copies.fetch_add(1, Ordering::Relaxed);
        COUNTERS.kept_bytes.fetch_add(len, Ordering::Relaxed);
        true
    }

    /// Lets the oldest kept copies go until `copy`, of `len` bytes, fits:
    /// its owner's first, within `per_user` bytes and [`MAX_KEPT_PER_USER`]
    /// copies (`copy` counted already), then anyone's, within `max` bytes
    /// and [`MAX_KEPT`] copies and, with the bytes in use,
    /// `max_total_bytes`.  `false` if it cannot.
    fn make_room(&mut self, copy: &SectionCopy, len: u64, per_user: u64, max: u64) -> bool {
        while copy.owner.kept_bytes.load(Ordering::Relaxed) + len > per_user
            || copy.owner.kept.load(Ordering::Relaxed) > MAX_KEPT_PER_USER
        {
            if !self.let_go_oldest(Some(copy.owner.id)) {
                return false;
            }
        }
        let max_total = self.limits.max_total_bytes;
        loop {
            let s = self.shared();
            let kept = s.kept_bytes.saturating_add(len);
            if kept <= max && kept.saturating_add(s.bytes) <= max_total && s.kept.len() < MAX_KEPT {
                return true;
            }
            if !self.let_go_oldest(None) {
                return false;
            }
        }
    }

    /// Takes `copy` back into use if it is kept and its owner's byte limit
    /// allows (one user, charged again); `false` if not.  O(kept).
    pub(super) fn take_kept(&mut self, copy: &Arc<SectionCopy>) -> bool {
        let Some(i) = self.shared().kept.iter().position(|k| Arc::ptr_eq(k, copy)) else {
            return false;
        };
        let len = copy.charge();
        if copy.owner.bytes.load(Ordering::Relaxed).saturating_add(len)
            > self.limits.max_bytes_per_user
        {
            return false;
        }
        let Ok(kept) = self.shared().kept.remove(i) else {
            return false;
        };
        self.uncount_kept(&kept);
        copy.users.store(1, Ordering::Relaxed);
        self.charge_copy(copy);
        COUNTERS.kept_reused.fetch_add(1, Ordering::Relaxed);
        copy.owner.kept_reused.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// Lets the oldest kept copy go (of account `owner` only, if given):
    /// out of the table and of the kept figures, freed when the last
    /// RCU reader lets go.  `false` if there was none.
    pub(super) fn let_go_oldest(&mut self, owner: Option<u32>) -> bool {
        let found = self
            .shared()
            .kept
            .iter()
            .position(|k| owner.is_none_or(|id| k.owner.id == id));
        let Some(kept) = found.and_then(|i| self.shared().kept.remove(i).ok()) else {
            return false;
        };
        // A copy that cannot be erased now (no memory for the tree's
        // nodes) stays in the table, unused, until unload, as in
        // `put_copy`: with no user and not kept, nothing takes it.
        let _ = self.copies.erase(self.t, kept.key);
        self.uncount_kept(&kept);
        self.forget_if_idle(&kept.owner);
        true
    }

    /// Lets every kept copy go (unload).
    pub(super) fn let_go_all_kept(&mut self) {
        while self.let_go_oldest(None) {}
    }

    /// Takes `kept`, just out of the kept list, out of the kept figures.
    fn uncount_kept(&mut self, kept: &SectionCopy) {
        let len = kept.charge();
        self.shared().kept_bytes -= len;
        kept.owner.kept.fetch_sub(1, Ordering::Relaxed);
        kept.owner.kept_bytes.fetch_sub(len, Ordering::Relaxed);
        COUNTERS.kept_copies.fetch_sub(1, Ordering::Relaxed);
        COUNTERS.kept_bytes.fetch_sub(len, Ordering::Relaxed);
    }
}
