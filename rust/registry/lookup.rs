// SPDX-License-Identifier: GPL-2.0

//! The walk-time lookup: which section, and which unwind row, covers a PC
//! of an address space.
//!
//! This is all of the registry that `rust/unwind/` uses.  Contexts: any,
//! NMI included: nothing here locks, sleeps, allocates or faults; the
//! index and the per-mm trees are read under RCU only.  A walk that may
//! sleep between lookups keeps its current section's copy by a counted
//! reference ([`SleepingWalkRows`]).

use super::{
    copy::SectionCopy,
    registry,
    section::Section,
    state::MmState, //
};
use crate::{
    abstractions::compat::rcu,
    sframe, //
};
use core::sync::atomic::Ordering;
use kernel::{
    bindings,
    sync::Arc, //
};

/// The indexed state of `mm`, borrowed for as long as `guard` is held.
pub(super) fn indexed<'g>(
    mm: *const bindings::mm_struct,
    guard: &'g rcu::Guard,
) -> Option<&'g Arc<MmState>> {
    registry(guard).and_then(|reg| reg.index.load(mm as usize, guard))
}

/// Whether `mm` has a live registration.  Any context (NMI included), no
/// lock; for the ftrace callback, on every sample.
pub(crate) fn mm_has_sections(mm: *const bindings::mm_struct) -> bool {
    let guard = rcu::Guard::new();
    indexed(mm, &guard).is_some_and(|state| state.live.load(Ordering::Relaxed) != 0)
}

/// The rows of one mm for one walk that does not sleep: the RCU read lock
/// is held for the whole walk, the mm's state is looked up once and the
/// section last used stays parsed (consecutive frames are mostly in one
/// object), so a frame costs a range check and the row search.
pub(crate) struct WalkRows<'g> {
    guard: &'g rcu::Guard,
    state: Option<&'g MmState>,
    last: Option<(&'g Section, sframe::Section<'g>)>,
}

impl<'g> WalkRows<'g> {
    /// The live section of `state` that covers `pc`, parsed.
    fn lookup(
        state: &'g MmState,
        pc: u64,
        guard: &'g rcu::Guard,
    ) -> Option<(&'g Section, sframe::Section<'g>)> {
        let s = live_section(state, pc, guard)?;
        // The copy's row table answers this walk's lookups in the section,
        // its index narrows those the table leaves to the decoder.
        Some((s, s.copy.rows_at(s.sframe_addr)?))
    }

    /// The unwind row for `pc`, the search paid from the walk's `budget`:
    /// through the copy's row table, its bucket words and the entries
    /// probed; where the table sends the lookup to the decoder, through
    /// the index, its read and the probes among the FDEs it leaves, then
    /// the FREs decoded.
    ///
    /// Inlined into the walk: a frame in the section of the frame before
    /// costs the range check and the table's probes; the change of
    /// section stays out of line.
    #[inline(always)]
    pub(crate) fn find_row(
        &mut self,
        pc: u64,
        budget: &mut sframe::Budget,
    ) -> Option<sframe::FoundRow> {
        let hit = self
            .last
            .as_ref()
            .is_some_and(|(s, _)| s.covers(pc) && s.is_live());
        if !hit {
            self.switch(pc);
        }
        let (_, parsed) = self.last.as_ref()?;
        parsed.find_within(pc, budget).ok().flatten()
    }

    /// Makes the live section that covers `pc`, if any, the one
    /// [`WalkRows::find_row`] searches.
    #[inline(never)]
    fn switch(&mut self, pc: u64) {
        self.last = self
            .state
            .and_then(|state| Self::lookup(state, pc, self.guard));
    }
}

/// The live section of `state` that covers `pc`: in its tree, or in what
/// it adopted at fork.
fn live_section<'g>(state: &'g MmState, pc: u64, guard: &'g rcu::Guard) -> Option<&'g Section> {
    state
        .sections
        .load(usize::try_from(pc).ok()?, guard)
        .filter(|s| s.is_live())
        .or_else(|| state.adopted.get(guard)?.find(pc).filter(|s| s.is_live()))
}

/// The rows of one mm for a walk that may sleep between its lookups (the
/// deferred path, whose reads fault pages in): no RCU read lock is held
/// between them, so the section last used is kept by a counted reference
/// to its copy, with its text range and address.  A frame in that section
/// costs the range check, the section made again from its layout (two
/// bounds checks, [`SectionCopy::rows_at`]) and the row table's
/// search, without the trees; a frame elsewhere, one RCU read-side
/// section to find its section.
///
/// The copy kept may be that of a section retired since it was found (an
/// object unmapped while the walk slept): its rows are those the section
/// had, and its bytes stay allocated until the walk lets go of it, which
/// unload waits for (the deferred path holds it off).
pub(crate) struct SleepingWalkRows {
    mm: *const bindings::mm_struct,
    kept: Option<Kept>,
}

/// A section a [`SleepingWalkRows`] keeps.
struct Kept {
    text_start: u64,
    text_end: u64,
    sframe_addr: u64,
    copy: Arc<SectionCopy>,
}

impl SleepingWalkRows {
    /// The rows of `mm`, for one walk.
    pub(crate) fn new(mm: *const bindings::mm_struct) -> Self {
        Self { mm, kept: None }
    }

    /// The unwind row for `pc`, copied out, the search paid from the
    /// walk's `budget` as [`WalkRows::find_row`] pays it.
    pub(crate) fn find_row(
        &mut self,
        pc: u64,
        budget: &mut sframe::Budget,
    ) -> Option<sframe::FoundRow> {
        let hit = self
            .kept
            .as_ref()
            .is_some_and(|k| (k.text_start..k.text_end).contains(&pc));
        if !hit {
            self.kept = self.keep(pc);
        }
        let k = self.kept.as_ref()?;
        k.copy
            .rows_at(k.sframe_addr)?
            .find_within(pc, budget)
            .ok()
            .flatten()
    }

    /// The live section that covers `pc`, kept, if there is one.
    #[inline(never)]
    fn keep(&self, pc: u64) -> Option<Kept> {
        let guard = rcu::Guard::new();
        let s = live_section(indexed(self.mm, &guard)?, pc, &guard)?;
        // The section holds a reference to its copy until an RCU grace
        // period after it leaves the tree: the count is not zero here.
        Some(Kept {
            text_start: s.text_start,
            text_end: s.text_end,
            sframe_addr: s.sframe_addr,
            copy: s.copy.clone(),
        })
    }
}

/// Runs `f` with the rows of `mm`, under one RCU read-side critical
/// section: `f` must not sleep (the sample path, NMI included).
pub(crate) fn with_walk_rows<R>(
    mm: *const bindings::mm_struct,
    f: impl FnOnce(&mut WalkRows<'_>) -> R,
) -> R {
    let guard = rcu::Guard::new();
    let state = indexed(mm, &guard).map(|state| &**state);
    f(&mut WalkRows {
        guard: &guard,
        state,
        last: None,
    })
}
