// SPDX-License-Identifier: GPL-2.0

//! A copy's lookup index: built once, when the copy is made, kept and
//! freed with the copy's bytes, and attached to the section at every
//! walk-time lookup.
//!
//! Without it a lookup binary-searches all of a section's FDEs; with it,
//! only the few that start in one bucket of the text (the decoder's
//! `index.rs`).  It takes at most 2 bytes per FDE plus 36, nothing per
//! FRE, and does not depend on the section's address, so the copies that
//! every registration of the same bytes shares share it too.  Its bytes
//! are charged with the copy's ([`copy_charge`]): what a user makes the
//! module hold stays within the per-user and module-wide byte limits.
//!
//! Contexts: built in process context (it allocates with
//! `GFP_KERNEL_ACCOUNT`, charged to the caller's memory cgroup like the
//! bytes, and reschedules every 1024 FDEs); attached in any context, NMI
//! included (O(1), no allocation, no lock).

use crate::sframe;
use kernel::prelude::*;

/// Why an index could not be built.
pub(super) enum IndexError {
    /// The section breaks a rule the index relies on (validation checks
    /// them all first, so a validated section never does).
    Format(sframe::Error),
    /// No memory for the index.
    NoMemory,
}

/// The lookup index of one copy's bytes, for every address they are
/// registered at.
///
/// # Invariants
///
/// `words` never changes once built: its capacity is what the copy's
/// owner is charged for it, from the copy's making to its last use.
pub(super) struct CopyIndex {
    words: KVVec<u32>,
}

impl CopyIndex {
    /// Builds the index of `section` (validated), calling `resched` about
    /// every 1024 FDEs.  Process context.
    pub(super) fn build(
        section: &sframe::Section<'_>,
        resched: &mut dyn FnMut(),
    ) -> Result<Self, IndexError> {
        let n = section.index_words().map_err(IndexError::Format)?;
        let mut words =
            KVVec::from_elem(0u32, n, GFP_KERNEL_ACCOUNT).map_err(|_| IndexError::NoMemory)?;
        let written = section
            .build_index(&mut words, resched)
            .map_err(IndexError::Format)?;
        // `index_words` said how many; a shorter index would not attach.
        if written != words.len() {
            return Err(IndexError::Format(sframe::Error::IndexTooSmall));
        }
        // INVARIANT: built; nothing changes `words` from here on.
        Ok(Self { words })
    }

    /// The same index, for a new copy of the same bytes (a fork child's
    /// revived copy): copied, not built again.  Process context.
    pub(super) fn try_clone(&self) -> Result<Self, IndexError> {
        let mut words = KVVec::new();
        words
            .extend_from_slice(&self.words, GFP_KERNEL_ACCOUNT)
            .map_err(|_| IndexError::NoMemory)?;
        Ok(Self { words })
    }

    /// The kernel memory the index holds, in bytes.
    pub(super) fn kernel_bytes(&self) -> u64 {
        (self.words.capacity() as u64).saturating_mul(u64::from(u32::BITS / 8))
    }

    /// `section`, parsed from the bytes this index was built for (at any
    /// address), with lookups through the index: O(1), any context.  An
    /// index that does not fit (never the case for the copy's own bytes)
    /// leaves the section as it was: slower lookups, the same rows.
    pub(super) fn attach<'a>(&'a self, section: sframe::Section<'a>) -> sframe::Section<'a> {
        section.with_index(&self.words).unwrap_or(section)
    }
}

/// What a copy of `bytes_len` section bytes with `index` is charged
/// against its owner's and the module's byte limits, and counted in
/// `SFRAME_IOC_STATS`: the bytes and the index.
pub(super) fn copy_charge(bytes_len: usize, index: &CopyIndex) -> u64 {
    (bytes_len as u64).saturating_add(index.kernel_bytes())
}
