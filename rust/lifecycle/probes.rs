// SPDX-License-Identifier: GPL-2.0

//! The entry points the C side (`lifecycle.c`) calls, and the task works
//! the exec and fork probes queue.
//!
//! C header: [`include/linux/task_work.h`](srctree/include/linux/task_work.h).
//!
//! Contexts: the probes run with preemption off and may neither sleep nor
//! fault: they only look up the index (RCU) and queue a work.  A work runs
//! in its task before the task next returns to user space, in process
//! context.  The teardown probe runs at the end of `exit_mmap()`
//! (preemption off, `mmap_lock` held); the maintenance work is an ordinary
//! work item.

use super::exec::register_exec;
use crate::{
    abstractions::{
        ffi,
        sched::{
            msleep,
            synchronize_rcu_tasks, //
        },
    },
    registry, switches,
    uapi::{
        SFRAME_CTL_EXEC,
        SFRAME_CTL_FORK, //
    },
};
use core::sync::atomic::{
    AtomicUsize,
    Ordering, //
};
use kernel::{
    bindings,
    mm::{
        Mm,
        MmWithUser, //
    },
    prelude::*, //
};

/// Task works queued and not finished: unload waits for them.
static PENDING: AtomicUsize = AtomicUsize::new(0);

/// A queued task work.  `head` comes first: the callback gets its address.
#[repr(C)]
struct Work {
    head: ffi::callback_head,
    job: Job,
}

enum Job {
    /// Register the exec'd program and interpreter.
    Exec,
    /// Give the child these of its parent's registrations.
    Fork(Option<registry::Inherited>),
}

/// Schedules the registry's maintenance work.  Any context but NMI.
pub(crate) fn schedule_maintenance() {
    // SAFETY: Schedules a static work item; callable in atomic context.
    unsafe { ffi::sframe_maintenance_schedule() };
}

/// Waits until a maintenance work scheduled before has finished.  Process
/// context.
pub(super) fn flush_maintenance() {
    // SAFETY: Process context, no lock held.
    unsafe { ffi::sframe_maintenance_flush() };
}

/// Waits until no exec or fork work is pending, and then for a task still
/// in the last instructions of one.  For unload, after the probes are
/// gone: no work is queued any more.
pub(super) fn wait_for_works() {
    let mut waited = 0u32;
    while PENDING.load(Ordering::Acquire) != 0 {
        if waited == 1000 {
            pr_warn!("unload waits for tasks that have not run their exec or fork work\n");
        }
        waited = waited.saturating_add(1);
        msleep(10);
    }
    // A task between the count's decrement and the return from the work
    // has not switched voluntarily since.
    synchronize_rcu_tasks();
}

/// The value of `t` in the auxiliary vector `mm` saved at exec, or 0.
pub(super) fn saved_auxv(mm: &MmWithUser, t: u32) -> u64 {
    // SAFETY: `mm` is a live address space (the caller's reference);
    // `saved_auxv` was written at exec and is read only.
    unsafe { ffi::sframe_mm_auxv(mm.as_raw().cast(), t as usize) as u64 }
}

/// Whether the current task is exiting (`PF_EXITING`).
fn current_exiting() -> bool {
    // SAFETY: Reads the current task's flags.
    unsafe { ffi::sframe_current_exiting() }
}

/// `exit_mmap`, at the end of an address space's teardown.  Preemption is
/// off, `mmap_lock` held.
#[no_mangle]
extern "C" fn sframe_on_exit_mmap(mm: *mut bindings::mm_struct) {
    // SAFETY: `exit_mmap()` runs with a reference on the `mm_struct` that
    // its caller drops after it returns.
    let mm = unsafe { Mm::from_raw(mm) };
    registry::torn_down(mm);
}

/// The registry's maintenance work.  Process context.
#[no_mangle]
extern "C" fn sframe_on_maintenance() {
    registry::maintain();
}

/// Queues `job` to run in `task`; `None` if it could not be.  The work is
/// counted in [`PENDING`] until it has run.
///
/// # Safety
///
/// `task` is a live task that cannot exit meanwhile (the current task, or
/// a child being forked).
unsafe fn queue(task: *mut bindings::task_struct, job: Job) -> Option<*mut Work> {
    let work = KBox::new(
        Work {
            // SAFETY: An all-zero `callback_head` is a valid value; the C
            // helper initialises it before queueing.
            head: unsafe { core::mem::zeroed() },
            job,
        },
        GFP_ATOMIC | __GFP_NOWARN,
    )
    .ok()?;
    let raw = KBox::into_raw(work);
    PENDING.fetch_add(1, Ordering::AcqRel);
    // SAFETY: `task` is live (the caller's promise); `raw` is a leaked box
    // whose first field is the head, owned by the task's work list from
    // here until `sframe_on_task_work` takes it back.
    let ret = unsafe { ffi::sframe_task_work_add(task.cast(), &raw mut (*raw).head) };
    if ret != 0 {
        // SAFETY: Not queued: the box is still ours alone.
        drop(unsafe { KBox::from_raw(raw) });
        PENDING.fetch_sub(1, Ordering::AcqRel);
        return None;
    }
    Some(raw)
}

/// `sched_process_fork`, for a child with an mm of its own.  Preemption
/// is off; the child has not run.
#[no_mangle]
extern "C" fn sframe_on_fork(
    parent_mm: *mut bindings::mm_struct,
    child: *mut bindings::task_struct,
) {
    if !switches::enabled(SFRAME_CTL_FORK) || !registry::lookup::mm_has_sections(parent_mm) {
        return;
    }
    // SAFETY: The child is being forked: it exists and has not run.
    let Some(work) = (unsafe { queue(child, Job::Fork(None)) }) else {
        return;
    };
    let inherited = registry::snapshot(parent_mm);
    // SAFETY: The work is queued on a child that has not run yet (it is
    // woken after this probe returns) and only the child runs its works:
    // nothing else uses the box yet. The snapshot is taken after queueing
    // so that it never has to be released here, in atomic context.
    unsafe { (*work).job = Job::Fork(inherited) };
}

/// `sched_process_exec`, in the task that exec'd.  Preemption is off.
#[no_mangle]
extern "C" fn sframe_on_exec() {
    if !switches::enabled(SFRAME_CTL_EXEC) {
        return;
    }
    // SAFETY: The current task is live while it runs this.
    let _ = unsafe { queue(kernel::current!().as_ptr(), Job::Exec) };
}

/// The task work queued by [`queue`], in its task.
#[no_mangle]
extern "C" fn sframe_on_task_work(head: *mut ffi::callback_head) {
    // SAFETY: `head` is the first field of a `Work` that `queue` leaked and
    // queued once; the kernel runs a queued work once, here.
    let work = unsafe { KBox::from_raw(head.cast::<Work>()) };
    let Work { job, .. } = KBox::into_inner(work);
    run(job);
    PENDING.fetch_sub(1, Ordering::AcqRel);
}

fn run(job: Job) {
    if current_exiting() {
        // Killed before user space: nothing to register for.
        return;
    }
    let task = kernel::current!();
    let (Some(mm), Some(reg)) = (task.mm(), registry::get()) else {
        return;
    };
    match job {
        Job::Exec => register_exec(reg, mm),
        Job::Fork(Some(inherited)) => reg.adopt(mm, inherited),
        Job::Fork(None) => {}
    }
}
