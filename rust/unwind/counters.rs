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
/// A frame costs an increment and a compare: the SFrame frames, most of
/// any walk, have a field of their own, the other sources share an array
/// in [`source_counter`]'s order.
#[derive(Default)]
pub(crate) struct Tally {
    frames: u64,
    sframe: u64,
    /// `FRAMES_FP`, `FRAMES_ENTRY` and `FRAMES_SIGNAL`.
    others: [u64; 3],
}

/// The first of the `unwind[]` slots [`Tally::others`] counts.
const OTHERS_FIRST: usize = SFRAME_UNWIND_FRAMES_FP;

impl Tally {
    /// Counts one emitted frame.
    ///
    /// A walk has at most `u32::MAX` frames: the counts cannot wrap, and
    /// the walk does not pay for overflow checks on every frame.
    #[inline(always)]
    pub(crate) fn frame(&mut self, source: FrameSource) {
        self.frames = self.frames.wrapping_add(1);
        match source {
            FrameSource::Sframe | FrameSource::LinkRegister => {
                self.sframe = self.sframe.wrapping_add(1);
            }
            FrameSource::Sample => {}
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

    /// The frames counted so far, the sample's included.
    #[inline(always)]
    pub(crate) fn frames(&self) -> u64 {
        self.frames
    }

    /// What this walk adds, as `(SFRAME_UNWIND_* index, count)` pairs.
    pub(crate) fn adds(&self, path: Path, stop: Stop, nanos: u64) -> [(usize, u64); 8] {
        let (walks, frames, ns) = match path {
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
        [
            (walks, 1),
            (frames, self.frames),
            (ns, nanos),
            (end_counter(stop), 1),
            (SFRAME_UNWIND_FRAMES_SFRAME, self.sframe),
            (SFRAME_UNWIND_FRAMES_FP, fp),
            (SFRAME_UNWIND_FRAMES_ENTRY, entry),
            (SFRAME_UNWIND_FRAMES_SIGNAL, signal),
        ]
    }

    /// Adds this walk to its CPU's counters: the slots it changes only.
    pub(crate) fn commit(&self, path: Path, stop: Stop, nanos: u64) {
        percpu_counters::add(&self.adds(path, stop, nanos));
    }
}
