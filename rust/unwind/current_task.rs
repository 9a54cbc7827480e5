// SPDX-License-Identifier: GPL-2.0

//! What the unwinder asks about the task it runs on.
//!
//! C headers: [`include/linux/sched.h`](srctree/include/linux/sched.h),
//! [`include/linux/preempt.h`](srctree/include/linux/preempt.h),
//! [`include/linux/uaccess.h`](srctree/include/linux/uaccess.h).
//!
//! Every query reads `current` only and is safe in any context, NMI
//! included: a task's own flags and `mm` do not change under it while it
//! runs here.

use crate::abstractions::ffi;
use kernel::bindings;

/// Whether the current task is a kernel thread (`PF_KTHREAD`).
pub(crate) fn is_kthread() -> bool {
    // SAFETY: Reads `current->flags`; no preconditions.
    unsafe { ffi::sframe_current_is_kthread() }
}

/// The current task's `mm` if the hooks may walk the task: not for a
/// kernel thread, inside a uprobe handler (for which
/// `perf_callchain_user()` has a rule of its own), or while the task is a
/// vCPU running a KVM guest (`PF_VCPU`).  Only used as a key, as [`mm`].
pub(crate) fn walkable_mm() -> Option<*const bindings::mm_struct> {
    // SAFETY: Reads `current->flags`, `current->utask`, which only the
    // task itself changes, and `current->mm`; no preconditions.
    let mm = unsafe { ffi::sframe_current_walkable_mm() };
    (!mm.is_null()).then_some(mm.cast_const().cast())
}

/// Whether the current context may take page faults: task context (not
/// NMI, hard or soft interrupt) without `pagefault_disable()`.
pub(crate) fn may_fault() -> bool {
    // SAFETY: Reads the preempt count and `current->pagefault_disabled`.
    unsafe { ffi::sframe_may_fault() }
}

/// The current task's `mm`, null for a kernel thread. Only used as a key:
/// the unwinder never dereferences it.
pub(crate) fn mm() -> *const bindings::mm_struct {
    // SAFETY: Reads `current->mm`; no preconditions.
    unsafe { ffi::sframe_current_mm() }.cast_const().cast()
}
