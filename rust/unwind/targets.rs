// SPDX-License-Identifier: GPL-2.0

//! The two kernel functions the unwinder replaces, seen from safe Rust.
//!
//! C sources: [`arch/x86/events/core.c`](srctree/arch/x86/events/core.c)
//! (`perf_callchain_user()`), [`kernel/unwind/user.c`](srctree/kernel/unwind/user.c)
//! (`unwind_user()`).
//!
//! Each target has a trait the unwinder implements in safe code and a
//! [`Redirect`] adapter that owns the raw side: it reads the hooked call's
//! arguments in the ftrace callback, and its `extern "C"` replacement,
//! which has the target's signature, turns the raw arguments into
//! [`CallchainEntry`], [`UserRegs`] and [`DeferredTrace`] before calling
//! the trait.

use super::{
    deferred_trace::DeferredTrace,
    perf::CallchainEntry, //
};
use crate::{
    abstractions::{
        ffi,
        ftrace::{
            Args,
            Redirect,
            Redirection, //
        },
    },
    arch::UserRegs,
    registry::lookup::StateHint,
};
use core::marker::PhantomData;
use kernel::prelude::*;

/// A replacement for `perf_callchain_user()` (perf's sampling path: NMI or
/// IRQ context).
pub(crate) trait SampleUnwinder {
    /// Whether this call goes to [`SampleUnwinder::callchain_user`], with
    /// the state of the task's mm it found; runs in the ftrace callback, so
    /// it must not sleep, lock or fault.
    fn accept(regs: &UserRegs) -> Option<StateHint>;

    /// Stores the user callchain of the sample whose user registers are
    /// `regs`, as `perf_callchain_user()` does; `hint` is what
    /// [`SampleUnwinder::accept`] returned in this call's callback.
    fn callchain_user(entry: &mut CallchainEntry<'_>, regs: &UserRegs, hint: StateHint);
}

/// A replacement for `unwind_user()` (the deferred path: task context on
/// the way back to user space).
pub(crate) trait DeferredUnwinder {
    /// Whether this call goes to [`DeferredUnwinder::unwind_user`]; runs
    /// in the ftrace callback, so it must not sleep, lock or fault.
    fn accept() -> bool;

    /// Fills `trace` with the current task's user callchain, as
    /// `unwind_user()` does; an error is returned as its errno.
    fn unwind_user(trace: &mut DeferredTrace<'_>) -> Result;
}

/// The hook on `perf_callchain_user()`, handing accepted calls to `T`.
pub(crate) struct PerfCallchainUser<T>(PhantomData<T>);

// SAFETY: `redirect` returns only the address of `perf_callchain_user_shim`,
// which has the signature and calling convention of
// `void perf_callchain_user(struct perf_callchain_entry_ctx *, struct pt_regs *)`
// followed by one `usize`, the hint; the target takes those two pointers.
unsafe impl<T: SampleUnwinder> Redirect for PerfCallchainUser<T> {
    const TARGET: &'static CStr = c"perf_callchain_user";
    const ARGS: u32 = 2;

    fn redirect(args: &Args<'_>) -> Option<Redirection> {
        let regs = args.get(1) as *const ffi::pt_regs;
        // SAFETY: At the target's entry the second argument is the
        // sample's `pt_regs` (`get_perf_callchain()` passes the sample's
        // or `task_pt_regs(current)`), valid for the call; it is only read.
        let regs = unsafe { UserRegs::read(regs) }?;
        T::accept(&regs).map(|hint| Redirection {
            to: perf_callchain_user_shim::<T> as *const () as usize,
            word: hint.into_word(),
        })
    }
}

/// Runs in place of `perf_callchain_user()` for the calls
/// [`PerfCallchainUser::redirect`] accepted.
///
/// # Safety
///
/// Called only by the redirected call, with `perf_callchain_user()`'s
/// arguments: `entry` is the sample's callchain context, used by nothing
/// else during the call, and `regs` a valid `pt_regs`; then `hint`, the
/// word [`PerfCallchainUser::redirect`] gave in this call's callback.
unsafe extern "C" fn perf_callchain_user_shim<T: SampleUnwinder>(
    entry: *mut ffi::perf_callchain_entry_ctx,
    regs: *mut ffi::pt_regs,
    hint: usize,
) {
    // SAFETY: `regs` is valid for the call by the function's requirements.
    let Some(regs) = (unsafe { UserRegs::read(regs) }) else {
        return;
    };
    // SAFETY: `entry` is valid and ours for the call by the function's
    // requirements; the wrapper does not outlive it.
    let mut entry = unsafe { CallchainEntry::from_raw(entry) };
    // SAFETY: `hint` is the word of a hint `T::accept` made in this call's
    // callback, on this CPU (the function's requirements): `accept` gets
    // its hints from `live_state`.
    let hint = unsafe { StateHint::from_word(hint) };
    T::callchain_user(&mut entry, &regs, hint);
}

/// The hook on `unwind_user()`, handing accepted calls to `T`.
pub(crate) struct UnwindUser<T>(PhantomData<T>);

// SAFETY: `redirect` returns only the address of `unwind_user_shim`, which
// has the signature and calling convention of
// `int unwind_user(struct unwind_stacktrace *, unsigned int)` (and leaves
// the word it is passed alone); the target takes those two arguments.
unsafe impl<T: DeferredUnwinder> Redirect for UnwindUser<T> {
    const TARGET: &'static CStr = c"unwind_user";
    const ARGS: u32 = 2;

    fn redirect(_args: &Args<'_>) -> Option<Redirection> {
        T::accept().then_some(Redirection {
            to: unwind_user_shim::<T> as *const () as usize,
            word: 0,
        })
    }
}

/// Runs in place of `unwind_user()` for the calls [`UnwindUser::redirect`]
/// accepted.
///
/// # Safety
///
/// Called only by the redirected call, with `unwind_user()`'s arguments:
/// `trace` is a valid trace used by nothing else during the call, whose
/// `entries` hold `max_entries` words (`unwind_user_faultable()`).
unsafe extern "C" fn unwind_user_shim<T: DeferredUnwinder>(
    trace: *mut ffi::unwind_stacktrace,
    max_entries: u32,
) -> i32 {
    // SAFETY: By the function's requirements.
    let mut trace = unsafe { DeferredTrace::from_raw(trace, max_entries) };
    match T::unwind_user(&mut trace) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}
