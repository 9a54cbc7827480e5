// SPDX-License-Identifier: GPL-2.0

//! The unwinder: perf's two user-stack paths, replaced for the tasks that
//! have SFrame sections.
//!
//! - `perf_callchain_user()` (sample context, NMI or IRQ): stores the
//!   sample's PC and walks with `copy_from_user_nmi()` reads, inside one
//!   RCU read-side section, up to the event's `max_stack`.
//! - `unwind_user()` (deferred, `--call-graph fp,defer`; task context on the
//!   way back to user space): the same walk, with faulting reads; the
//!   registry returns copies of rows, so no RCU lock is held across a fault.
//!
//! The ftrace callback ([`SampleHook`], [`DeferredHook`]) decides per call:
//! only 64-bit user tasks whose mm has sections go to a replacement; every
//! other call (kernel threads, compat or vm86 tasks, uprobe handlers, KVM
//! guests, tasks without sections) runs the original untouched. A
//! replacement cannot call the original (the hook would send it back here),
//! so it does the whole walk and fills its output as the original does.
//!
//! The unwinding rules themselves (SFrame step, frame-pointer fallback,
//! entry rule, signal frames, CFA checks) are the decoder's
//! [`walk_amd64`]; this file supplies memory, rows and the output.

use crate::{
    call_site::{
        follows_call,
        CALL_WINDOW, //
    },
    ffi,
    ftrace::{
        Args,
        Redirect, //
    },
    hooks,
    perf::CallchainEntry,
    registry,
    sframe::{
        unwind::{
            walk_amd64,
            Lookup,
            Memory,
            Regs,
            WalkLimits, //
        },
        Row,
    },
    uapi::{
        SFRAME_CTL_HOOK_DEFERRED,
        SFRAME_CTL_HOOK_SAMPLE, //
    },
    unwind_counters::{
        Path,
        Tally, //
    },
    user_mem::{
        FaultingUserMemory,
        NmiUserMemory, //
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

/// How far above the sampled SP (or the SP a signal frame restored) a
/// caller's frame may be: well beyond the default 8 MiB stack limit, and a
/// bound on the work of a walk through a corrupt stack.
const MAX_SPAN: u64 = 64 << 20;

/// Where a walk's rows come from.
trait Rows {
    fn find_row(&mut self, pc: u64) -> Option<Row>;
}

/// The sample path: one RCU read-side section for the whole walk.
impl Rows for &mut registry::WalkRows<'_> {
    fn find_row(&mut self, pc: u64) -> Option<Row> {
        registry::WalkRows::find_row(self, pc)
    }
}

/// The deferred path, whose reads may sleep: one RCU read-side section per
/// lookup, the row copied out.
struct MmRows(*const kernel::bindings::mm_struct);

impl Rows for MmRows {
    fn find_row(&mut self, pc: u64) -> Option<Row> {
        registry::find_row(self.0, pc)
    }
}

/// Rows from the registry for the current task's mm, plus the plausibility
/// check for return addresses that a frame-pointer step found.
struct RegistryLookup<R: Rows, M: Memory> {
    rows: R,
    mem: M,
}

impl<R: Rows, M: Memory> Lookup for RegistryLookup<R, M> {
    fn row(&mut self, pc: u64) -> Option<Row> {
        if FP_ONLY.load(Ordering::Relaxed) {
            return None;
        }
        self.rows.find_row(pc)
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
}

/// The current task's user registers, if it is a 64-bit user task whose
/// mm has SFrame sections, not in a uprobe handler and not running a guest.
fn eligible_task(regs: *mut ffi::pt_regs) -> Option<*const kernel::bindings::mm_struct> {
    // SAFETY: These read `current` only.
    let other = unsafe {
        ffi::sframe_current_is_kthread()
            || ffi::sframe_current_in_uprobe()
            || ffi::sframe_current_in_guest()
    };
    if other || regs.is_null() {
        return None;
    }
    // SAFETY: `regs` is the non-null `pt_regs` of the hooked call (the
    // sample's user registers or the task's own).
    let user64 = unsafe {
        ffi::sframe_user_mode(regs)
            && ffi::sframe_user_64bit_mode(regs)
            && !ffi::sframe_regs_vm86(regs)
    };
    if !user64 {
        return None;
    }
    // SAFETY: Reads `current->mm`.
    let mm: *const kernel::bindings::mm_struct = unsafe { ffi::sframe_current_mm() }.cast();
    (!mm.is_null() && registry::mm_has_sections(mm)).then_some(mm)
}

fn now_ns() -> u64 {
    // SAFETY: NMI-safe, no preconditions.
    unsafe { ffi::ktime_get_mono_fast_ns() }
}

/// The register state a walk starts from.
///
/// # Safety
///
/// `regs` is a valid `pt_regs`.
unsafe fn start_regs(regs: *const ffi::pt_regs) -> Regs {
    // SAFETY: By the function's safety requirements.
    let r = unsafe { &*regs };
    Regs {
        pc: r.ip as u64,
        sp: r.sp as u64,
        fp: r.bp as u64,
    }
}

/// The hook on `perf_callchain_user()`.
pub(crate) struct SampleHook;

// SAFETY: `redirect` returns only the address of
// `perf_callchain_user_sframe`, which has `perf_callchain_user()`'s
// signature and calling convention.
unsafe impl Redirect for SampleHook {
    const TARGET: &'static CStr = c"perf_callchain_user";

    fn redirect(args: &Args<'_>) -> Option<usize> {
        if !hooks::enabled(SFRAME_CTL_HOOK_SAMPLE) {
            return None;
        }
        // perf_callchain_user(struct perf_callchain_entry_ctx *, struct pt_regs *)
        let regs = args.get(1) as *mut ffi::pt_regs;
        eligible_task(regs)?;
        Some(perf_callchain_user_sframe as *const () as usize)
    }
}

/// Replaces `perf_callchain_user()` (arch/x86/events/core.c) for the calls
/// [`SampleHook`] redirects: the sample's PC, then its callers.
///
/// # Safety
///
/// Called only in place of `perf_callchain_user()`, with its arguments,
/// after [`SampleHook::redirect`] accepted them.
unsafe extern "C" fn perf_callchain_user_sframe(
    entry: *mut ffi::perf_callchain_entry_ctx,
    regs: *mut ffi::pt_regs,
) {
    let t0 = now_ns();
    // SAFETY: `entry` is this sample's callchain context, ours for the call.
    let mut entry = unsafe { CallchainEntry::from_raw(entry) };
    // SAFETY: `regs` is the valid `pt_regs` perf passed.
    let start = unsafe { start_regs(regs) };
    // SAFETY: Reads `current->mm`, checked non-null with sections by the hook.
    let mm = unsafe { ffi::sframe_current_mm() }.cast();
    let limits = WalkLimits {
        // The original stores the PC even when the chain is full (and the
        // store fails): one frame at least, so the first store is tried.
        max_frames: entry.room().max(1),
        max_span: MAX_SPAN,
    };
    let mut tally = Tally::default();
    // Nothing here sleeps: `copy_from_user_nmi()` reads do not fault pages in.
    let stop = registry::with_walk_rows(mm, |rows| {
        let mut lookup = RegistryLookup {
            rows,
            mem: NmiUserMemory::new(),
        };
        let mut mem = NmiUserMemory::new();
        walk_amd64(start, &limits, &mut lookup, &mut mem, &mut |pc, source| {
            if !entry.store(pc) {
                return false;
            }
            tally.frame(source);
            true
        })
    });
    tally.commit(Path::Sample, stop, now_ns().saturating_sub(t0));
}

/// The hook on `unwind_user()`.
pub(crate) struct DeferredHook;

// SAFETY: `redirect` returns only the address of `unwind_user_sframe`,
// which has `unwind_user()`'s signature and calling convention.
unsafe impl Redirect for DeferredHook {
    const TARGET: &'static CStr = c"unwind_user";

    /// Only where page faults are allowed: `unwind_user()` is meant for
    /// `unwind_user_faultable()` (task context), but it is an ordinary
    /// function another caller could reach from an atomic context. The
    /// replacement's reads are made for a context that may sleep, so such
    /// a caller keeps the original.
    fn redirect(_args: &Args<'_>) -> Option<usize> {
        if !hooks::enabled(SFRAME_CTL_HOOK_DEFERRED) {
            return None;
        }
        // SAFETY: Reads the preempt count and `current->pagefault_disabled`.
        if !unsafe { ffi::sframe_may_fault() } {
            return None;
        }
        // SAFETY: Reads `current`'s register frame pointer.
        let regs = unsafe { ffi::sframe_current_user_regs() };
        eligible_task(regs)?;
        Some(unwind_user_sframe as *const () as usize)
    }
}

/// Replaces `unwind_user()` (kernel/unwind/user.c) for the calls
/// [`DeferredHook`] redirects, with its output rules: `trace->nr` restarts
/// at zero, at most `max_entries` entries, `-EINVAL` for none allowed, an
/// empty trace for kernel threads and when not entered from user mode.
///
/// # Safety
///
/// Called only in place of `unwind_user()`, with its arguments, after
/// [`DeferredHook::redirect`] accepted the call.
unsafe extern "C" fn unwind_user_sframe(
    trace: *mut ffi::unwind_stacktrace,
    max_entries: u32,
) -> i32 {
    // Holds off unload while this task may sleep in a page fault.
    let Some(_guard) = hooks::enter_deferred() else {
        // SAFETY: `trace` is the caller's valid trace.
        unsafe { (*trace).nr = 0 };
        return 0;
    };
    // SAFETY: `trace` is the caller's valid trace, whose `entries` hold
    // `max_entries` words (`unwind_user_faultable()`).
    let trace = unsafe { &mut *trace };
    trace.nr = 0;
    if max_entries == 0 {
        return EINVAL.to_errno();
    }
    // SAFETY: These read `current`.
    let regs = unsafe {
        if ffi::sframe_current_is_kthread() {
            return 0;
        }
        ffi::sframe_current_user_regs()
    };
    // SAFETY: `regs` is the task's own register frame.
    if regs.is_null() || !unsafe { ffi::sframe_user_mode(regs) } {
        return 0;
    }
    let t0 = now_ns();
    // SAFETY: As above.
    let start = unsafe { start_regs(regs) };
    // SAFETY: Reads `current->mm`, checked non-null with sections by the hook.
    let mm = unsafe { ffi::sframe_current_mm() }.cast();
    // The hook checked that faults are allowed here; the registry returns
    // rows by value, so no RCU read lock is held across a fault.
    let mut lookup = RegistryLookup {
        rows: MmRows(mm),
        mem: FaultingUserMemory::new(),
    };
    let mut mem = FaultingUserMemory::new();
    let limits = WalkLimits {
        max_frames: max_entries,
        max_span: MAX_SPAN,
    };
    let entries = trace.entries;
    let mut nr: u32 = 0;
    let mut tally = Tally::default();
    let stop = walk_amd64(start, &limits, &mut lookup, &mut mem, &mut |pc, source| {
        if nr >= max_entries {
            return false;
        }
        // SAFETY: `entries` holds `max_entries` words and `nr < max_entries`.
        unsafe { *entries.add(nr as usize) = pc as usize };
        nr += 1;
        tally.frame(source);
        true
    });
    trace.nr = nr;
    tally.commit(Path::Deferred, stop, now_ns().saturating_sub(t0));
    0
}
