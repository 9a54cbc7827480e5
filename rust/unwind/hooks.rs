// SPDX-License-Identifier: GPL-2.0

//! The unwinder's two hooks: installed at load, switched at run time by
//! `SFRAME_IOC_CONTROL`, removed safely at unload.
//!
//! Unload must not free code or data a task is still using:
//!
//! - ftrace's unregistration waits for callbacks and trampolines, not for
//!   the replacements a callback sent a task to;
//! - the sample replacement runs where perf takes samples: NMI, IRQ, or a
//!   software event's or a BPF program's callback in task context, with
//!   preemption off or inside an RCU read-side section; its walk holds the
//!   RCU read lock itself.  An RCU grace period covers all of it, and
//!   `synchronize_rcu_tasks()` whatever of it a task could be preempted in;
//! - the deferred replacement may sleep in a page fault: its body holds an
//!   SRCU read lock ([`enter_deferred`]);
//! - between the callback and that lock, and after the unlock until the
//!   return, a task is in module text without a lock: a task preempted
//!   there has not switched voluntarily, which `synchronize_rcu_tasks()`
//!   waits for.
//!
//! Hence at unload: switch off, unregister both hooks, `synchronize_rcu_tasks`,
//! `synchronize_rcu`, `synchronize_srcu`, `synchronize_rcu_tasks` again.
//! The registry is freed only after that (it is declared after the hooks in
//! the module, so dropped later).

use crate::{
    abstractions::{
        compat::{
            new_srcu,
            srcu,
            Srcu, //
        },
        ffi,
        ftrace::{
            FtraceHook,
            Redirect, //
        },
    },
    switches::{
        make_available,
        withdraw, //
    },
    uapi::{
        SFRAME_CTL_HOOK_DEFERRED,
        SFRAME_CTL_HOOK_SAMPLE, //
    },
};
use core::sync::atomic::{
    AtomicPtr,
    Ordering, //
};
use kernel::prelude::*;

/// The deferred replacement's guard, in the installed [`Hooks`]; null
/// outside the hooks' lifetime.
static DEFERRED_SRCU: AtomicPtr<Srcu> = AtomicPtr::new(core::ptr::null_mut());

/// The control bits of the two unwinder hooks, which [`Hooks`] owns.
const CTL_HOOKS: u32 = SFRAME_CTL_HOOK_SAMPLE | SFRAME_CTL_HOOK_DEFERRED;

/// The deferred replacement's guard: while it is held, unload waits.
/// `None` when the hooks are gone (the replacement then reports an empty
/// trace).
pub(crate) fn enter_deferred() -> Option<srcu::Guard<'static>> {
    let srcu = DEFERRED_SRCU.load(Ordering::Acquire);
    if srcu.is_null() {
        return None;
    }
    // SAFETY: A non-null `DEFERRED_SRCU` points at the `srcu` field of the
    // pinned `Hooks`, from before the hooks are registered until
    // `Hooks::drop` clears it, which is after that drop waited for every
    // task a callback redirected: `synchronize_rcu_tasks()` for a task
    // between the callback and this lock, then `synchronize_srcu()` for
    // the guard. So the `Srcu` outlives every guard taken here.
    let srcu: &'static Srcu = unsafe { &*srcu };
    Some(srcu.read_lock())
}

/// The two hooks and the guard of the deferred replacement.
///
/// `S` redirects `perf_callchain_user()` and `D` redirects `unwind_user()`;
/// the module root names them, so this file knows nothing of the
/// unwinder.
#[pin_data(PinnedDrop)]
pub(crate) struct Hooks<S: Redirect, D: Redirect> {
    #[pin]
    sample: FtraceHook<S>,
    #[pin]
    deferred: FtraceHook<D>,
    #[pin]
    srcu: Srcu,
}

impl<S: Redirect, D: Redirect> Hooks<S, D> {
    /// Installs both hooks and turns on those that installed. A target
    /// this kernel lacks leaves that hook off, said once in the log;
    /// loading still succeeds. Without `CONFIG_UNWIND_USER` (arm64 in
    /// 7.3) the deferred hook is not tried: perf has no deferred path.
    pub(crate) fn new() -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            sample <- FtraceHook::new(),
            deferred <- FtraceHook::new(),
            srcu <- new_srcu!("sframe_unwind_deferred"),
        })
        .pin_chain(|mut this| {
            DEFERRED_SRCU.store(
                core::ptr::from_ref::<Srcu>(&this.srcu).cast_mut(),
                Ordering::Release,
            );
            let mut available = 0;
            // SAFETY: `sample` is a structurally pinned field (`#[pin]`):
            // the projection keeps it pinned and moves nothing.
            let sample = unsafe { this.as_mut().map_unchecked_mut(|h| &mut h.sample) };
            available |= install(sample, SFRAME_CTL_HOOK_SAMPLE, "sampled (-g)");
            #[cfg(CONFIG_UNWIND_USER)]
            {
                // SAFETY: As above, for `deferred`.
                let deferred = unsafe { this.as_mut().map_unchecked_mut(|h| &mut h.deferred) };
                available |= install(deferred, SFRAME_CTL_HOOK_DEFERRED, "deferred (fp,defer)");
            }
            // arm64 in 7.3, for one: perf falls back to the sampled path.
            #[cfg(not(CONFIG_UNWIND_USER))]
            pr_info!("no deferred user unwinding in this kernel (CONFIG_UNWIND_USER): fp,defer callchains are taken as -g ones\n");
            make_available(available);
            Ok(())
        })
    }
}

/// Installs `hook`; returns `bit` if it is in place, 0 if not. A failure
/// (the target missing, or `EBUSY` from another `IPMODIFY` user such as
/// a livepatch on the same function) is said once, here.
fn install<T: Redirect>(hook: Pin<&mut FtraceHook<T>>, bit: u32, what: &str) -> u32 {
    match hook.install() {
        Ok(()) => bit,
        Err(e) => {
            pr_warn!(
                "cannot hook {} ({:?}): {} callchains are not unwound with SFrame\n",
                T::TARGET,
                e,
                what
            );
            0
        }
    }
}

#[pinned_drop]
impl<S: Redirect, D: Redirect> PinnedDrop for Hooks<S, D> {
    fn drop(self: Pin<&mut Self>) {
        withdraw(CTL_HOOKS);
        // SAFETY: Nothing is moved out of `this`: it only reaches the
        // fields below, and the pinned ones are pinned again.
        let this = unsafe { self.get_unchecked_mut() };
        // SAFETY: `sample` is a structurally pinned field of a pinned value.
        unsafe { Pin::new_unchecked(&mut this.sample) }.uninstall();
        // SAFETY: As above, for `deferred`.
        unsafe { Pin::new_unchecked(&mut this.deferred) }.uninstall();
        // SAFETY: These have no preconditions; they sleep, which the
        // module's exit (process context, no locks held) allows.
        unsafe {
            // Tasks between a callback and a replacement's first instruction.
            ffi::sframe_synchronize_rcu_tasks();
            // Sample replacements (preemption off, or the RCU read lock).
            ffi::synchronize_rcu();
        }
        // Deferred replacements asleep in a fault.
        this.srcu.synchronize();
        // SAFETY: As above. Tasks after the guard, before the return.
        unsafe { ffi::sframe_synchronize_rcu_tasks() };
        DEFERRED_SRCU.store(core::ptr::null_mut(), Ordering::Release);
    }
}
