// SPDX-License-Identifier: GPL-2.0

//! Scheduling points and waits that the `kernel` crate does not offer.
//!
//! C headers: [`include/linux/sched.h`](srctree/include/linux/sched.h),
//! [`include/linux/delay.h`](srctree/include/linux/delay.h),
//! [`include/linux/rcupdate.h`](srctree/include/linux/rcupdate.h).
//!
//! Process context only: each of these may sleep.

use super::ffi;

/// `cond_resched()`, between steps of a loop whose length a user controls.
/// Process context without spinlocks held (a mutex may be held).
pub(crate) fn cond_resched() {
    // SAFETY: Called in process context without spinlocks held; the
    // macro has no other precondition.
    unsafe { ffi::sframe_cond_resched() };
}

/// Sleeps for at least `ms` milliseconds.  Process context, no lock held
/// that a waker needs.
pub(crate) fn msleep(ms: u32) {
    // SAFETY: `msleep()` has no preconditions beyond process context.
    unsafe { ffi::sframe_msleep(ms) };
}

/// `synchronize_rcu_tasks()`: waits until every task has switched
/// voluntarily (or run in user space) since the call.  Without
/// `CONFIG_TASKS_RCU` (kernels without preemption) it is
/// `synchronize_rcu()`, which then suffices: a task can only leave a CPU
/// in module text by switching voluntarily.  Sleeps.
pub(crate) fn synchronize_rcu_tasks() {
    // SAFETY: No preconditions; process context.
    unsafe { ffi::sframe_synchronize_rcu_tasks() };
}
