// SPDX-License-Identifier: GPL-2.0

//! The walk-time lookup: which section, and which unwind row, covers a PC
//! of an address space.
//!
//! This is all of the registry that `rust/unwind/` uses.  Contexts: any,
//! NMI included: nothing here locks, sleeps, allocates or faults; the
//! index and the per-mm trees are read under RCU only.  A walk that may
//! sleep between lookups keeps the copies of the sections it uses by
//! counted references, and the sections parsed ([`SleepingWalkRows`]).

use super::{
    bound::BoundCopy,
    registry,
    section::Section,
    state::MmState, //
};
use crate::{
    abstractions::compat::rcu,
    sframe, //
};
use core::{
    cell::OnceCell,
    sync::atomic::Ordering, //
};
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
/// lock.
pub(crate) fn mm_has_sections(mm: *const bindings::mm_struct) -> bool {
    live_state(mm).is_some()
}

/// The state of `mm` if it has a live registration, as a hint for the
/// walk of the same call ([`StateHint`]).  Any context (NMI included), no
/// lock; for the sample hook's ftrace callback, on every sample.
pub(crate) fn live_state(mm: *const bindings::mm_struct) -> Option<StateHint> {
    let guard = rcu::Guard::new();
    indexed(mm, &guard)
        .filter(|state| state.live.load(Ordering::Relaxed) != 0)
        // INVARIANT: Held by the index, found under `guard`.
        .map(|state| StateHint(Arc::as_ptr(state) as usize))
}

/// An mm's state as the sample hook's ftrace callback found it, handed to
/// the walk its call goes on to ([`with_walk_rows`]), which then need not
/// look it up in the index again.
///
/// It is a word, passed in a register from the callback to the
/// replacement (`rust/abstractions/ftrace.rs`), and used only where the
/// context shows that the RCU read-side critical section it was found in
/// has lasted since: the replacement runs with preemption off.  7.3's
/// callers of `perf_callchain_user()` all hold it off (perf's samples,
/// and BPF's stack helpers); a preemptible caller would have its walk
/// look the state up again.
///
/// # Invariants
///
/// Zero, or the address of an [`MmState`] that the index held, found
/// under RCU in the ftrace callback of the hooked call now running on
/// this CPU, in which alone the hint is used (`from_word`'s safety
/// requirement, and `live_state`'s one caller).
#[derive(Clone, Copy)]
pub(crate) struct StateHint(usize);

impl StateHint {
    /// The hint as the word the callback passes on.
    pub(crate) fn into_word(self) -> usize {
        self.0
    }

    /// The hint the callback passed on as `word`.
    ///
    /// # Safety
    ///
    /// `word` is zero, or what [`StateHint::into_word`] gave, in the ftrace
    /// callback of the hooked call now running on this CPU, for a hint that
    /// [`live_state`] made there.
    #[expect(unsafe_code, reason = "a word trusted as this call's hint")]
    pub(crate) unsafe fn from_word(word: usize) -> StateHint {
        // INVARIANT: By the function's safety requirement.
        StateHint(word)
    }

    /// The state, if the hint names one and the context still holds it:
    /// not preemptible now, so not since the callback (nothing ran between
    /// them but ftrace's trampoline, which gives the call back the
    /// preemption count and interrupt flag its caller had).
    #[expect(unsafe_code, reason = "the state this call's callback found")]
    fn get<'g>(self, _guard: &'g rcu::Guard) -> Option<&'g MmState> {
        if self.0 == 0 || rcu::preemptible() {
            return None;
        }
        // SAFETY: By the type invariant, the address was that of an
        // `MmState` the index held, found under RCU in this call's ftrace
        // callback.  The context has not been preemptible since then, so
        // it has been an RCU read-side critical section all along, which
        // `_guard` continues: the index frees a state only after a grace
        // period (`RcuMaple`), which cannot have ended, nor end before
        // `'g` does.
        Some(unsafe { &*(self.0 as *const MmState) })
    }
}

/// The rows of one mm for one walk that does not sleep: the RCU read lock
/// is held for the whole walk, the mm's state is looked up once, each
/// section's rows were parsed when it was registered, and the section
/// last used stays current (consecutive frames are mostly in one object),
/// so a frame costs a range check and the row search.
///
/// A section is found live once, where the walk first reaches it, and used
/// for the walk's frames in its range from then on, as the RCU read lock
/// keeps it: the walk is a snapshot of the registrations as they were
/// when it reached that section, as it is of the stack.
pub(crate) struct WalkRows<'g> {
    guard: &'g rcu::Guard,
    state: Option<&'g MmState>,
    /// The text range of the section last used, empty where none was
    /// found.  Every address, with no rows, for a walk of an mm without
    /// state.
    range: (u64, u64),
    /// Its rows: its copy's bytes as the section parsed them when it was
    /// made, with the copy's row table and index
    /// ([`super::bound::BoundCopy::rows`]): a change of section makes
    /// nothing.
    parsed: Option<&'g sframe::Section<'g>>,
    /// The section last found (still kept where a frame without one
    /// came after it) and the one found before it: a walk that comes back
    /// to an object it left (a program, its C library, the program's
    /// `_start`) finds it here, not in the tree.
    current: Option<&'g Section>,
    previous: Option<&'g Section>,
    /// The hints of `parsed`'s row table for PCs in `range`
    /// ([`sframe::Hints::NONE`] for none): a frame they answer for costs
    /// no other check.
    hints: sframe::Hints<'g>,
}

impl<'g> WalkRows<'g> {
    /// The unwind row for `pc`, the search paid from the walk's `budget`:
    /// through the copy's row table, its bucket words and the entries
    /// probed; where the table sends the lookup to the decoder, through
    /// the index, its read and the probes among the FDEs it leaves, then
    /// the FREs decoded.
    ///
    /// Inlined into the walk: a frame in the section of the frame before
    /// whose hint slot holds it (nearly every frame of a walk) costs the
    /// hints' range check and the slot; another in that section, the
    /// range check and the table's probes; the change of section stays
    /// out of line.
    #[inline(always)]
    pub(crate) fn find_row(
        &mut self,
        pc: u64,
        budget: &mut sframe::Budget,
    ) -> Option<sframe::FoundRow> {
        if let Some(found) = self.hints.find(pc, budget) {
            return found.ok().flatten().map(sframe::FoundRow::Packed);
        }
        if !(self.range.0..self.range.1).contains(&pc) {
            self.switch(pc);
        }
        self.parsed?.find_within(pc, budget).ok().flatten()
    }

    /// Makes the live section that covers `pc`, if any, the one
    /// [`WalkRows::find_row`] searches.
    #[inline(never)]
    fn switch(&mut self, pc: u64) {
        // The section left for a frame without one, or the one before.
        let known = [self.current, self.previous]
            .into_iter()
            .flatten()
            .find(|s| s.covers(pc));
        let found = known.or_else(|| {
            self.state
                .and_then(|state| live_section(state, pc, self.guard))
        });
        // The copy's row table answers this walk's lookups in the section,
        // its index narrows those the table leaves to the decoder.
        match found {
            Some(s) => {
                if !self.current.is_some_and(|c| core::ptr::eq(c, s)) {
                    self.previous = self.current.replace(s);
                }
                self.range = (s.text_start, s.text_end);
                self.parsed = s.copy.rows();
                self.hints = s.copy.hints();
            }
            None => {
                self.range = (0, 0);
                self.parsed = None;
                self.hints = sframe::Hints::NONE;
            }
        }
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

/// How many sections a walk that may sleep keeps parsed ([`KeptSections`]):
/// a chain crosses the program, its C library and a few more objects.
const KEPT_SECTIONS: usize = 8;

/// The sections a walk that may sleep between its lookups (the deferred
/// path, whose reads fault pages in) has used, each kept by a counted
/// reference to its bound copy (its bytes and the rows parsed at its
/// registration) for the whole walk, so that the walk can borrow those
/// rows ([`SleepingWalkRows`]).  A slot is filled once and never changes
/// until the walk ends: what the walk borrows from it stays.
///
/// The copy kept may be that of a section retired since it was found (an
/// object unmapped while the walk slept): its rows are those the section
/// had, and its bytes stay allocated until the walk lets go of them, which
/// unload waits for (the deferred path holds it off).
pub(crate) struct KeptSections {
    slots: [OnceCell<Kept>; KEPT_SECTIONS],
}

impl KeptSections {
    /// No section kept yet.
    pub(crate) fn new() -> Self {
        Self {
            slots: core::array::from_fn(|_| OnceCell::new()),
        }
    }

    /// `kept`, in the first empty slot, for the rest of the walk;
    /// `Err(kept)` when every slot is full.  The walk asks only for a
    /// section no slot covers ([`KeptSections::covering`] first), so none
    /// holds it already.
    fn keep(&self, kept: Kept) -> Result<&Kept, Kept> {
        match self.slots.iter().find(|slot| slot.get().is_none()) {
            Some(slot) => Ok(slot.get_or_init(|| kept)),
            None => Err(kept),
        }
    }

    /// The kept section whose text covers `pc`, if any: the first, in the
    /// order they were kept (the sections of one walk may overlap only
    /// where an object was replaced while it slept).
    fn covering(&self, pc: u64) -> Option<&Kept> {
        self.slots
            .iter()
            .map_while(OnceCell::get)
            .find(|k| k.covers(pc))
    }
}

/// The rows of one mm for a walk that may sleep between its lookups (the
/// deferred path): no RCU read lock is held between them, so each section
/// used is kept by a counted reference to its bound copy
/// ([`KeptSections`]), whose rows the walk borrows: a frame in the section
/// of the frame before costs the range check and the row table's search,
/// as on the sample path; a frame in a section the walk has kept, the
/// slots' range checks; a frame elsewhere, one RCU read-side section to
/// find its section (the mm's state found at the first).  Where a walk
/// crosses more sections than there are slots, the section of the latest
/// frame is kept here, and its rows borrowed for each lookup.
pub(crate) struct SleepingWalkRows<'k> {
    mm: *const bindings::mm_struct,
    /// The mm's registrations, from the first lookup on: found in the
    /// index once per walk, not at every change of section.  A state
    /// that leaves the index while the walk sleeps has been emptied, and
    /// stays empty: the walk then finds no section in it, as it would
    /// find no state.
    state: Option<Arc<MmState>>,
    kept: &'k KeptSections,
    /// The text range of the section last used where one was kept;
    /// empty otherwise.  Every address, with no rows, for a null mm.
    current: (u64, u64),
    /// Its rows, parsed when the section was registered.
    parsed: Option<&'k sframe::Section<'k>>,
    /// The section last used where no slot was left.
    spilled: Option<Kept>,
    /// The hints of `parsed`'s row table for PCs in `current`, as
    /// [`WalkRows`] keeps them.
    hints: sframe::Hints<'k>,
}

/// A section a walk keeps.
struct Kept {
    text_start: u64,
    text_end: u64,
    copy: Arc<BoundCopy>,
}

impl Kept {
    fn covers(&self, pc: u64) -> bool {
        (self.text_start..self.text_end).contains(&pc)
    }
}

impl<'k> SleepingWalkRows<'k> {
    /// The rows of `mm`, for one walk, its sections kept in `kept`.
    /// A null `mm` has no rows: no lookup is made.
    pub(crate) fn new(mm: *const bindings::mm_struct, kept: &'k KeptSections) -> Self {
        Self {
            mm,
            state: None,
            kept,
            current: initial_range(mm.is_null()),
            parsed: None,
            spilled: None,
            hints: sframe::Hints::NONE,
        }
    }

    /// The unwind row for `pc`, copied out, the search paid from the
    /// walk's `budget` as [`WalkRows::find_row`] pays it.
    ///
    /// Inlined into the walk, as on the sample path: a frame in the
    /// section of the frame before costs the range check and the row
    /// table's search; any other, a call to find its section.  Every
    /// path ends in the one search, so the row found goes to the step
    /// as it is, not through a copy where two paths' rows join.
    #[inline(always)]
    pub(crate) fn find_row(
        &mut self,
        pc: u64,
        budget: &mut sframe::Budget,
    ) -> Option<sframe::FoundRow> {
        if let Some(found) = self.hints.find(pc, budget) {
            return found.ok().flatten().map(sframe::FoundRow::Packed);
        }
        let rows = if (self.current.0..self.current.1).contains(&pc) || self.switch(pc) {
            self.parsed
        } else {
            // More sections than slots: the spilled one's rows, borrowed
            // for this lookup.
            self.spilled.as_ref().and_then(|k| k.copy.rows())
        };
        rows?.find_within(pc, budget).ok().flatten()
    }

    /// Makes the live section that covers `pc`, if any, the one
    /// [`SleepingWalkRows::find_row`] searches: kept and parsed (`true`),
    /// or, with no slot left, spilled (`false`, and `false` for no
    /// section).  A spilled section that covers `pc` stays.  The hints
    /// are the kept section's (none for a spilled one).
    #[inline(never)]
    fn switch(&mut self, pc: u64) -> bool {
        if self.spilled.as_ref().is_some_and(|k| k.covers(pc)) {
            return false;
        }
        self.current = (0, 0);
        self.parsed = None;
        self.hints = sframe::Hints::NONE;
        self.spilled = None;
        // A section this walk has kept is used again without a lookup:
        // the walk is a snapshot of each section as it was when the walk
        // reached it, as it is for the frames of the current one.
        let kept = match self.kept.covering(pc) {
            Some(k) => k,
            None => {
                let Some(found) = self.find(pc) else {
                    return false;
                };
                match self.kept.keep(found) {
                    Ok(k) => k,
                    Err(found) => {
                        self.spilled = Some(found);
                        return false;
                    }
                }
            }
        };
        // A section whose parse failed (never the case for a validated
        // copy) is current with no rows.
        self.current = (kept.text_start, kept.text_end);
        self.parsed = kept.copy.rows();
        self.hints = kept.copy.hints();
        true
    }

    /// The live section that covers `pc`, with a counted reference to its
    /// copy, if there is one.
    fn find(&mut self, pc: u64) -> Option<Kept> {
        let guard = rcu::Guard::new();
        if self.state.is_none() {
            self.state = Some(indexed(self.mm, &guard)?.clone());
        }
        let s = live_section(self.state.as_deref()?, pc, &guard)?;
        // The section holds a reference to its copy until an RCU grace
        // period after it leaves the tree: the count is not zero here.
        Some(Kept {
            text_start: s.text_start,
            text_end: s.text_end,
            copy: s.copy.clone(),
        })
    }
}

/// The range a walk's rows start with: empty, so that the first lookup
/// finds its section; or, for a walk that can find none (no state, no
/// mm), every address, with no rows, so that no lookup ever looks.
fn initial_range(finds_nothing: bool) -> (u64, u64) {
    if finds_nothing {
        (0, u64::MAX)
    } else {
        (0, 0)
    }
}

/// Runs `f` with the rows of `mm`, under one RCU read-side critical
/// section: `f` must not sleep (the sample path, NMI included).  `hint`
/// is `mm`'s state as the hook's callback found it; a null `mm` has no
/// rows.
pub(crate) fn with_walk_rows<R>(
    mm: *const bindings::mm_struct,
    hint: StateHint,
    f: impl FnOnce(&mut WalkRows<'_>) -> R,
) -> R {
    let guard = rcu::Guard::new();
    let state = if mm.is_null() {
        None
    } else {
        hint.get(&guard)
            .or_else(|| indexed(mm, &guard).map(|state| &**state))
    };
    f(&mut WalkRows {
        guard: &guard,
        state,
        range: initial_range(state.is_none()),
        parsed: None,
        current: None,
        previous: None,
        hints: sframe::Hints::NONE,
    })
}
