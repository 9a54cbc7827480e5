// SPDX-License-Identifier: GPL-2.0

//! One registration ([`Section`]) and a fork child's adopted set of them
//! ([`AdoptedSet`]).
//!
//! A section is immutable once made but for its `dead` flag, which any
//! context but NMI may set (retiring it); readers in any context skip dead
//! sections.

use super::copy::SectionCopy;
use crate::{
    abstractions::rcu_maple::TreeValue,
    uapi::SframeSectionInfo, //
};
use core::sync::atomic::{
    AtomicBool,
    Ordering, //
};
use kernel::{
    prelude::*,
    sync::Arc, //
};

/// One registration.
pub(super) struct Section {
    pub(super) handle: u64,
    pub(super) text_start: u64,
    pub(super) text_end: u64,
    pub(super) sframe_addr: u64,
    pub(super) copy: Arc<SectionCopy>,
    /// `SFRAME_SECTION_*`: where the registration came from.
    pub(super) flags: u32,
    /// Retired (unregistered, or its text unmapped): readers skip it, the
    /// next writer erases it.
    pub(super) dead: AtomicBool,
}

// SAFETY: A section's drop releases its `Arc<SectionCopy>`, whose last
// reference frees memory with `kvfree()`/`kfree()` only (the copy leaves
// `Registry::copies` under the registry lock, in process context, before
// that): safe in an RCU callback.
#[expect(unsafe_code, reason = "a section's drop frees memory only")]
unsafe impl TreeValue for Section {
    const DROP_AT_ERASE: bool = false;
}

impl Section {
    pub(super) fn covers(&self, pc: u64) -> bool {
        (self.text_start..self.text_end).contains(&pc)
    }

    /// Whether the section is not retired.
    pub(super) fn is_live(&self) -> bool {
        !self.dead.load(Ordering::Acquire)
    }

    /// What `SFRAME_IOC_LIST` says of the section.
    pub(super) fn info(&self) -> SframeSectionInfo {
        SframeSectionInfo {
            handle: self.handle,
            text_start: self.text_start,
            text_end: self.text_end,
            sframe_addr: self.sframe_addr,
            sframe_len: self.copy.bytes.len() as u64,
            kernel_bytes: self.copy.bytes.capacity() as u64,
            version: self.copy.info.version,
            num_fdes: self.copy.info.num_fdes,
            shared: self.copy.users.load(Ordering::Relaxed).saturating_sub(1),
            flags: self.flags,
        }
    }
}

/// The registrations a fork child took from its parent in one step
/// ([`Registry::adopt`](super::Registry::adopt)): sorted by text and not
/// overlapping, never changed once the state is published but for the
/// sections' `dead` flags.  Each section holds a use of its copy until the
/// set is emptied (`drain`), retired or not: its bytes stay charged while
/// the set holds them.
pub(super) struct AdoptedSet {
    pub(super) sections: KVec<Section>,
}

// SAFETY: Dropping the set drops its sections, which frees memory only (as
// for `Section`).
#[expect(unsafe_code, reason = "a set's drop frees memory only")]
unsafe impl TreeValue for AdoptedSet {
    const DROP_AT_ERASE: bool = false;
}

impl AdoptedSet {
    /// The section whose text contains `pc`, retired or not.
    pub(super) fn find(&self, pc: u64) -> Option<&Section> {
        let i = self.sections.partition_point(|s| s.text_start <= pc);
        self.sections
            .get(i.checked_sub(1)?)
            .filter(|s| s.covers(pc))
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
