// SPDX-License-Identifier: GPL-2.0

//! The walk: which calls of perf's two user-stack functions go to the
//! SFrame unwinder, and the unwinder's replacements for them.
//!
//! - `perf_callchain_user()` (sample context, NMI or IRQ): stores the
//!   sample's PC and walks with non-faulting reads (page faults disabled
//!   for the whole walk), inside one RCU read-side section, up to the
//!   event's `max_stack`.
//! - `unwind_user()` (deferred, `--call-graph fp,defer`; task context on the
//!   way back to user space): the same walk, with faulting reads; the
//!   registry returns copies of rows, so no RCU lock is held across a fault.
//!
//! The ftrace callback ([`SampleHook`], [`DeferredHook`]) decides per call:
//! only 64-bit user tasks whose mm has sections go to a replacement, and
//! the deferred one only where page faults are allowed; every other call
//! (kernel threads, compat, x32 or vm86 tasks, uprobe handlers, KVM
//! guests, tasks without sections, atomic callers) runs the original
//! untouched. A replacement cannot call the original (the hook would send
//! it back here), so it does the whole walk and fills its output as the
//! original does.
//!
//! The unwinding rules themselves (SFrame step, frame-pointer fallback,
//! entry rule, signal frames, CFA checks) are the decoder's, for the
//! architecture ([`arch::walk`]); this file supplies memory, rows and the
//! output. The raw C side (register frames, perf's callchain context, the
//! deferred trace, the replacements' `extern "C"` entry points) is in
//! `targets.rs` and the files it uses.

#![deny(unsafe_code)]

use super::{
    counters::{
        Path,
        Tally, //
    },
    current_task,
    deferred_trace::DeferredTrace,
    hooks,
    perf::CallchainEntry,
    targets::{
        DeferredUnwinder,
        PerfCallchainUser,
        SampleUnwinder,
        UnwindUser, //
    },
};
use crate::{
    abstractions::{
        fast_clock::now_ns,
        user_mem::{
            self,
            FaultingUserMemory,
            UserWindow, //
        },
    },
    arch::{
        self,
        follows_call,
        start_regs,
        Mode,
        UserRegs,
        CALL_WINDOW, //
    },
    registry::lookup::{
        self,
        KeptSections,
        SleepingWalkRows,
        StateHint,
        WalkRows, //
    },
    sframe::{
        unwind::{
            Lookup,
            Memory,
            WalkLimits, //
        },
        Budget,
        FoundRow,
        Row, //
    },
    switches,
    uapi::{
        SFRAME_CTL_HOOK_DEFERRED,
        SFRAME_CTL_HOOK_SAMPLE, //
    },
};
use core::sync::atomic::{
    AtomicBool,
    Ordering, //
};
use kernel::prelude::*;

/// Benchmarks only (module parameter `unwind_fp_only`): ignore SFrame rows,
/// so registered tasks are unwound by the frame-pointer fallback alone and
/// the two kinds of step can be timed by the same counters.
static FP_ONLY: AtomicBool = AtomicBool::new(false);

/// Sets the `unwind_fp_only` mode (at load).
pub(crate) fn set_fp_only(on: bool) {
    FP_ONLY.store(on, Ordering::Relaxed);
}

/// The mm whose rows a walk of the current task looks up: its own, or
/// none (a null pointer: the walk's rows then find nothing, without a
/// lookup) in the [`FP_ONLY`] mode, read once a walk, not on every frame.
fn rows_mm() -> *const kernel::bindings::mm_struct {
    if FP_ONLY.load(Ordering::Relaxed) {
        core::ptr::null()
    } else {
        current_task::mm()
    }
}

/// How far above the sampled SP (or the SP a signal frame restored) a
/// caller's frame may be: well beyond the default 8 MiB stack limit, and a
/// bound on the work of a walk through a corrupt stack.
const MAX_SPAN: u64 = 64 << 20;

/// Where a walk's rows come from, the lookups paid from the walk's budget;
/// rows as found (packed in the copy's row table, or decoded), which the
/// walk unpacks where it steps.
trait Rows {
    fn find_row(&mut self, pc: u64, budget: &mut Budget) -> Option<FoundRow>;
}

/// The sample path: one RCU read-side section for the whole walk.
impl Rows for &mut WalkRows<'_> {
    #[inline]
    fn find_row(&mut self, pc: u64, budget: &mut Budget) -> Option<FoundRow> {
        WalkRows::find_row(self, pc, budget)
    }
}

/// The deferred path, whose reads may sleep: no RCU read lock held between
/// lookups, the sections used kept by counted references to their copies
/// and parsed once, the row copied out.
impl Rows for SleepingWalkRows<'_> {
    #[inline]
    fn find_row(&mut self, pc: u64, budget: &mut Budget) -> Option<FoundRow> {
        SleepingWalkRows::find_row(self, pc, budget)
    }
}

/// Rows from the registry for the current task's mm, plus the plausibility
/// check for return addresses that a frame-pointer step found.
struct RegistryLookup<R: Rows, M: Memory> {
    rows: R,
    mem: M,
    /// One past the highest user address on this machine.
    user_end: u64,
}

impl<R: Rows, M: Memory> RegistryLookup<R, M> {
    fn new(rows: R, mem: M) -> Self {
        Self {
            rows,
            mem,
            user_end: user_mem::user_addr_end(),
        }
    }
}

impl<R: Rows, M: Memory> Lookup for RegistryLookup<R, M> {
    fn row(&mut self, pc: u64) -> Option<Row> {
        self.row_within(pc, &mut Budget::unlimited())
    }

    fn row_within(&mut self, pc: u64, budget: &mut Budget) -> Option<Row> {
        self.found_within(pc, budget).map(FoundRow::row)
    }

    #[inline]
    fn found_within(&mut self, pc: u64, budget: &mut Budget) -> Option<FoundRow> {
        self.rows.find_row(pc, budget)
    }

    /// A return address is trusted when the instruction before it is a
    /// call: data or stack addresses a garbage frame pointer leads to
    /// almost never are. (The NMI path cannot look up VMAs.)
    fn is_text(&mut self, pc: u64) -> bool {
        let mut before = [0u8; CALL_WINDOW];
        match pc.checked_sub(CALL_WINDOW as u64) {
            Some(addr) => self.mem.read(addr, &mut before) && follows_call(&before),
            None => false,
        }
    }

    /// Without the pointer-authentication code (arm64), as the stock
    /// unwinder strips them.
    fn strip_return_address(&mut self, ra: u64) -> u64 {
        arch::strip_return_address(ra)
    }

    /// The running kernel's `TASK_SIZE_MAX`.
    fn user_addr_end(&mut self) -> u64 {
        self.user_end
    }
}

/// The current task's mm, if the task is a 64-bit user task (not x32)
/// with an mm, not in a uprobe handler and not running a guest, and
/// `regs` are its 64-bit user registers.
fn eligible_task(regs: &UserRegs) -> Option<*const kernel::bindings::mm_struct> {
    if regs.mode() != Mode::User64 {
        return None;
    }
    let mm = current_task::walkable_mm()?;
    (!arch::task_is_compat()).then_some(mm)
}

/// The SFrame unwinder, in place of perf's two user-stack functions.
pub(crate) struct SframeUnwinder;

/// The hook on `perf_callchain_user()`.
pub(crate) type SampleHook = PerfCallchainUser<SframeUnwinder>;

/// The hook on `unwind_user()`.
pub(crate) type DeferredHook = UnwindUser<SframeUnwinder>;

/// Replaces `perf_callchain_user()` (arch/x86/events/core.c): the sample's
/// PC, then its callers.
impl SampleUnwinder for SframeUnwinder {
    /// For a task whose mm has SFrame sections: their state, which the
    /// walk then takes from the hint.
    fn accept(regs: &UserRegs) -> Option<StateHint> {
        if !switches::enabled(SFRAME_CTL_HOOK_SAMPLE) {
            return None;
        }
        lookup::live_state(eligible_task(regs)?)
    }

    fn callchain_user(entry: &mut CallchainEntry<'_>, regs: &UserRegs, hint: StateHint) {
        let t0 = now_ns();
        let start = start_regs(regs);
        // Non-null with sections (`accept` checked, and an mm cannot
        // change under its running task), unless the mode is FP only.
        let mm = rows_mm();
        // The original stores the PC even when the chain is full (and the
        // store fails): one frame at least, so the first store is tried. The
        // work budget bounds the time spent here, in NMI or IRQ context (or
        // an event's callback) under the RCU read lock.
        let limits = WalkLimits::sample(entry.room().max(1), MAX_SPAN);
        let mut tally = Tally::default();
        // Nothing here sleeps: page faults are disabled while the window
        // is open.
        let window = UserWindow::open(start.sp);
        let stop = lookup::with_walk_rows(mm, hint, |rows| {
            let mut lookup = RegistryLookup::new(rows, window.reader());
            let mut mem = window.reader();
            arch::walk(start, &limits, &mut lookup, &mut mem, &mut |pc, source| {
                if !entry.store(arch::sample_chain_entry(pc, source, entry.stored())) {
                    return false;
                }
                tally.frame(source);
                true
            })
        });
        tally.commit(
            Path::Sample,
            stop,
            now_ns().saturating_sub(t0),
            entry.stored(),
        );
    }
}

/// Replaces `unwind_user()` (kernel/unwind/user.c), with its output rules:
/// `trace->nr` restarts at zero (done by [`DeferredTrace`]), at most
/// `max_entries` entries, `-EINVAL` for none allowed, an empty trace for
/// kernel threads and when not entered from user mode.
impl DeferredUnwinder for SframeUnwinder {
    /// Only where page faults are allowed: `unwind_user()` is meant for
    /// `unwind_user_faultable()` (task context), but it is an ordinary
    /// function another caller could reach from an atomic context. The
    /// replacement's reads are made for a context that may sleep, so such
    /// a caller keeps the original.
    fn accept() -> bool {
        switches::enabled(SFRAME_CTL_HOOK_DEFERRED)
            && current_task::may_fault()
            && UserRegs::current()
                .and_then(|regs| eligible_task(&regs))
                .is_some_and(lookup::mm_has_sections)
    }

    fn unwind_user(trace: &mut DeferredTrace<'_>) -> Result {
        // Holds off unload while this task may sleep in a page fault.
        let Some(_guard) = hooks::enter_deferred() else {
            return Ok(());
        };
        let max_entries = trace.max_entries();
        if max_entries == 0 {
            return Err(EINVAL);
        }
        if current_task::is_kthread() {
            return Ok(());
        }
        let Some(regs) = UserRegs::current().filter(|r| r.mode() != Mode::Kernel) else {
            return Ok(());
        };
        let t0 = now_ns();
        let start = start_regs(&regs);
        // Non-null with sections (`accept` checked, and an mm cannot
        // change under its running task), unless the mode is FP only.
        let mm = rows_mm();
        // `accept` checked that faults are allowed here; the registry returns
        // rows by value, so no RCU read lock is held across a fault.
        // The sections the walk uses, kept (and parsed) until its end.
        let kept = KeptSections::new();
        let mut lookup =
            RegistryLookup::new(SleepingWalkRows::new(mm, &kept), FaultingUserMemory::new());
        let mut mem = FaultingUserMemory::new();
        let limits = WalkLimits::deferred(max_entries, MAX_SPAN);
        let mut tally = Tally::default();
        let stop = arch::walk(start, &limits, &mut lookup, &mut mem, &mut |pc, source| {
            if !trace.push(pc) {
                return false;
            }
            tally.frame(source);
            true
        });
        tally.commit(
            Path::Deferred,
            stop,
            now_ns().saturating_sub(t0),
            trace.stored(),
        );
        Ok(())
    }
}
