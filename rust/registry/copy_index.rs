// SPDX-License-Identifier: GPL-2.0

//! A copy's lookup index and row table: built once, when the copy is made,
//! kept and freed with the copy's bytes, and attached to the section at
//! every walk-time lookup.
//!
//! Without them a lookup binary-searches all of a section's FDEs, decodes
//! the function's FDE, scans its FREs and decodes the row: most of a
//! walk's cost.  The row table (the decoder's `table.rs`) holds every row
//! decoded and sorted by address: a lookup probes a few entries of one
//! bucket and unpacks one word.  It takes about 13 bytes per FRE; the
//! index (the decoder's `index.rs`, at most 2 bytes per FDE plus 36)
//! narrows the search of the lookups the table leaves to the decoder
//! (PCMASK functions, rows that do not pack) and of sections that get no
//! table (functions spanning 4 GiB or more).  Neither depends on the
//! section's address, so the copies that every registration of the same
//! bytes shares share them too.  Their bytes are charged with the copy's
//! ([`copy_charge`]): what a user makes the module hold stays within the
//! per-user and module-wide byte limits.
//!
//! Beside the table, its hints (the decoder's `table.rs`): 4 to 8192
//! words that remember, per hashed PC, the entry the table's search found
//! last, so that the return addresses a walk meets sample after sample
//! skip the search.  They are the one part of a copy written after it is
//! made: by lookups, in any context, each slot a whole 64-bit word stored
//! and loaded with relaxed atomics (single-copy atomic on x86-64 and
//! arm64); a slot is only ever written with what the search found for its
//! key in the same table, so whatever order CPUs see the stores in, a slot
//! whose key matches holds that key's entry.  Shared like the table, by
//! every registration of the same bytes (of one user: copies are not
//! shared across users).
//!
//! Contexts: built in process context (allocated with
//! `GFP_KERNEL_ACCOUNT`, charged to the caller's memory cgroup like the
//! bytes, rescheduling every 1024 FDEs); attached in any context, NMI
//! included (O(1), no allocation, no lock).

use crate::sframe;
use core::sync::atomic::AtomicU64;
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
/// `words` and `table` never change once built, nor does the length of
/// `hints` (only their slots' values): their capacities are what the
/// copy's owner is charged for them, from the copy's making to its last
/// use.  `hints` is empty where `table` is.
pub(super) struct CopyIndex {
    words: KVVec<u32>,
    /// The row table, empty where the section gets none.
    table: KVVec<u32>,
    /// The row table's hint slots, all zero when made.
    hints: KVVec<AtomicU64>,
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
        let (table, slots) = Self::build_table(section, resched)?;
        let hints = zeroed_hints(slots)?;
        // INVARIANT: built, `hints` empty where `table` is; nothing
        // changes `words`, `table` or the length of `hints` from here on.
        Ok(Self {
            words,
            table,
            hints,
        })
    }

    /// The row table of `section` and how many hint slots suit it, or none
    /// (empty, no slots) for a section whose functions span 4 GiB or more
    /// or whose rows are not decoded: its lookups then go to the decoder,
    /// through the index.
    fn build_table(
        section: &sframe::Section<'_>,
        resched: &mut dyn FnMut(),
    ) -> Result<(KVVec<u32>, usize), IndexError> {
        let shape = match section.table_shape(resched) {
            Ok(shape) => shape,
            Err(sframe::Error::TableSpan | sframe::Error::UnsupportedRows) => {
                return Ok((KVVec::new(), 0))
            }
            Err(e) => return Err(IndexError::Format(e)),
        };
        let mut table = KVVec::from_elem(0u32, shape.words(), GFP_KERNEL_ACCOUNT)
            .map_err(|_| IndexError::NoMemory)?;
        let written = match section.build_table_shaped(&shape, &mut table, resched) {
            Ok(written) => written,
            // Found only when the rows are decoded.
            Err(sframe::Error::UnsupportedRows) => return Ok((KVVec::new(), 0)),
            Err(e) => return Err(IndexError::Format(e)),
        };
        // The shape said how many; a shorter table would not attach.
        if written != table.len() {
            return Err(IndexError::Format(sframe::Error::IndexTooSmall));
        }
        Ok((table, shape.hint_slots()))
    }

    /// The same index, for a new copy of the same bytes (a fork child's
    /// revived copy): copied, not built again, with hints of its own (as
    /// many, all zero).  Process context.
    pub(super) fn try_clone(&self) -> Result<Self, IndexError> {
        let copy = |from: &KVVec<u32>| -> Result<KVVec<u32>, IndexError> {
            let mut words = KVVec::new();
            words
                .extend_from_slice(from, GFP_KERNEL_ACCOUNT)
                .map_err(|_| IndexError::NoMemory)?;
            Ok(words)
        };
        // INVARIANT: copies of built ones, `hints` as long as the
        // original's (empty where `table` is).
        Ok(Self {
            words: copy(&self.words)?,
            table: copy(&self.table)?,
            hints: zeroed_hints(self.hints.len())?,
        })
    }

    /// The kernel memory the index, the row table and its hints hold, in
    /// bytes.
    pub(super) fn kernel_bytes(&self) -> u64 {
        let words = self.words.capacity().saturating_add(self.table.capacity());
        (words as u64)
            .saturating_mul(u64::from(u32::BITS / 8))
            .saturating_add((self.hints.capacity() as u64).saturating_mul(8))
    }

    /// Gives `section`, parsed from the bytes this index was built for (at
    /// any address), lookups through the row table and the index: O(1),
    /// any context, in place.  One that does not fit (never the case for
    /// the copy's own bytes) leaves the section without it: slower
    /// lookups, the same rows.
    pub(super) fn attach<'a>(&'a self, section: &mut sframe::Section<'a>) {
        // An index that does not fit is not attached: the section stays
        // as it was.
        let _ = section.attach_index(&self.words);
        if !self.table.is_empty() && section.attach_table(&self.table).is_ok() {
            section.attach_hints(&self.hints);
        }
    }
}

/// `n` hint slots, all zero.  Process context.
fn zeroed_hints(n: usize) -> Result<KVVec<AtomicU64>, IndexError> {
    let mut hints =
        KVVec::with_capacity(n, GFP_KERNEL_ACCOUNT).map_err(|_| IndexError::NoMemory)?;
    for _ in 0..n {
        // Within the capacity just allocated: no allocation here.
        hints
            .push(AtomicU64::new(0), GFP_KERNEL_ACCOUNT)
            .map_err(|_| IndexError::NoMemory)?;
    }
    Ok(hints)
}

/// What a copy of `bytes_len` section bytes with `index` is charged
/// against its owner's and the module's byte limits, and counted in
/// `SFRAME_IOC_STATS`: the bytes, the index and the row table.
pub(super) fn copy_charge(bytes_len: usize, index: &CopyIndex) -> u64 {
    (bytes_len as u64).saturating_add(index.kernel_bytes())
}
