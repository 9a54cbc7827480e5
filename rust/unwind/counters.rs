// SPDX-License-Identifier: GPL-2.0

//! The unwinder's counters, `SFRAME_IOC_STATS.unwind[]`: walks per path,
//! frames by how they were found, walks by how they ended, and the time
//! spent (`ktime_get_mono_fast_ns()`, NMI-safe).
//!
//! A walk tallies locally and adds to the counters once at its end, in
//! one call, to its CPU's own set ([`percpu_counters`]): no atomic
//! instruction and no cache line shared with the walks of other CPUs.

use crate::{
    abstractions::percpu_counters,
    sframe::unwind::{
        FrameSource,
        Stop, //
    },
    uapi::*,
};

// Every `SFRAME_UNWIND_*` index has a counter.
const _: () = assert!(SFRAME_UNWIND_COUNT <= percpu_counters::SLOTS);

/// The counters, indexed by `SFRAME_UNWIND_*`: each the sum over every
/// CPU of what its walks added.
pub(crate) fn snapshot() -> [u64; SFRAME_UNWIND_COUNT] {
    percpu_counters::read()
}

/// Which of perf's paths a walk serves.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Path {
    /// `perf_callchain_user()`, in the sample's context.
    Sample,
    /// `unwind_user()`, deferred to task context.
    Deferred,
}

/// The `unwind[]` slot a walk's end is counted in.
pub(crate) fn end_counter(stop: Stop) -> usize {
    match stop {
        Stop::Outermost => SFRAME_UNWIND_END_OUTERMOST,
        // The consumer stops only when perf's chain is full.
        Stop::MaxFrames | Stop::Consumer => SFRAME_UNWIND_END_MAX_FRAMES,
        Stop::ReadFault => SFRAME_UNWIND_END_FAULT,
        Stop::NoCoverage => SFRAME_UNWIND_END_NO_COVERAGE,
        Stop::Budget => SFRAME_UNWIND_END_BUDGET,
        Stop::SignalLimit => SFRAME_UNWIND_END_SIGNAL_LIMIT,
        Stop::CfaNotIncreasing
        | Stop::Misaligned
        | Stop::SpanExceeded
        | Stop::BadReturnAddress
        | Stop::Unsupported => SFRAME_UNWIND_END_BAD_STEP,
    }
}

/// The `unwind[]` slot a frame found by `source` is counted in; the
/// sample's own PC is in no source slot.
pub(crate) fn source_counter(source: FrameSource) -> Option<usize> {
    match source {
        FrameSource::Sample => None,
        // A return address still in the link register (AArch64) is read
        // as its SFrame row (or the entry rule) says.
        FrameSource::Sframe | FrameSource::LinkRegister => Some(SFRAME_UNWIND_FRAMES_SFRAME),
        FrameSource::FramePointer => Some(SFRAME_UNWIND_FRAMES_FP),
        FrameSource::EntryRule => Some(SFRAME_UNWIND_FRAMES_ENTRY),
        FrameSource::SignalFrame => Some(SFRAME_UNWIND_FRAMES_SIGNAL),
    }
}

/// One walk's counts, added to the module-wide counters by [`Tally::commit`].
///
/// A frame an SFrame row gave (most of any walk) and the sample's own PC
/// cost nothing here: the walk's output counts its frames, and the SFrame
/// frames are those left when the sample's PC and the frames of other
/// sources ([`source_counter`]'s order) are taken off.
#[derive(Default)]
pub(crate) struct Tally {
    /// `FRAMES_FP`, `FRAMES_ENTRY` and `FRAMES_SIGNAL`.
    others: [u64; 3],
}

/// The first of the `unwind[]` slots [`Tally::others`] counts.
const OTHERS_FIRST: usize = SFRAME_UNWIND_FRAMES_FP;

impl Tally {
    /// Counts one emitted frame: only one of a source other than an SFrame
    /// row (or the link register its row names) or the sample's PC.
    ///
    /// A walk has at most `u32::MAX` frames: the counts cannot wrap.
    #[inline(always)]
    pub(crate) fn frame(&mut self, source: FrameSource) {
        match source {
            FrameSource::Sframe | FrameSource::LinkRegister | FrameSource::Sample => {}
            _ => self.other_frame(source),
        }
    }

    /// Counts a frame the frame-pointer step, the entry rule or a signal
    /// frame gave.
    #[inline(never)]
    fn other_frame(&mut self, source: FrameSource) {
        let slot = source_counter(source).and_then(|i| i.checked_sub(OTHERS_FIRST));
        if let Some(n) = slot.and_then(|i| self.others.get_mut(i)) {
            *n = n.wrapping_add(1);
        }
    }

    /// What this walk adds, as `(SFRAME_UNWIND_* index, count)` pairs;
    /// `frames` is how many it emitted, the sample's PC first.
    pub(crate) fn adds(
        &self,
        path: Path,
        stop: Stop,
        nanos: u64,
        frames: u64,
    ) -> [(usize, u64); 8] {
        let (walks, frames_slot, ns) = match path {
            Path::Sample => (
                SFRAME_UNWIND_WALKS_SAMPLE,
                SFRAME_UNWIND_FRAMES_SAMPLE,
                SFRAME_UNWIND_NS_SAMPLE,
            ),
            Path::Deferred => (
                SFRAME_UNWIND_WALKS_DEFERRED,
                SFRAME_UNWIND_FRAMES_DEFERRED,
                SFRAME_UNWIND_NS_DEFERRED,
            ),
        };
        let [fp, entry, signal] = self.others;
        let sframe = frames
            .saturating_sub(frames.min(1))
            .saturating_sub(fp)
            .saturating_sub(entry)
            .saturating_sub(signal);
        [
            (walks, 1),
            (frames_slot, frames),
            (ns, nanos),
            (end_counter(stop), 1),
            (SFRAME_UNWIND_FRAMES_SFRAME, sframe),
            (SFRAME_UNWIND_FRAMES_FP, fp),
            (SFRAME_UNWIND_FRAMES_ENTRY, entry),
            (SFRAME_UNWIND_FRAMES_SIGNAL, signal),
        ]
    }

    /// Adds this walk, which emitted `frames`, to its CPU's counters: the
    /// slots it changes only.
    pub(crate) fn commit(&self, path: Path, stop: Stop, nanos: u64, frames: u64) {
        percpu_counters::add(&self.adds(path, stop, nanos, frames));
    }
}
