// SPDX-License-Identifier: GPL-2.0

//! Registrations that follow the process: `execve()` registers the new
//! program's and its interpreter's `PT_GNU_SFRAME` sections, and a `fork()`
//! child starts with its parent's registrations.
//!
//! C headers: [`include/trace/events/sched.h`](srctree/include/trace/events/sched.h),
//! [`include/linux/task_work.h`](srctree/include/linux/task_work.h).
//!
//! Both are seen through the `sched_process_exec` and `sched_process_fork`
//! tracepoints (found by name with the exported iterator; probes in
//! `rust/lifecycle.c`).  A probe runs with preemption off, so it only queues
//! a task work, which the task runs in its own context before it next
//! returns to user space, where reads may fault and locks may be taken:
//!
//! - exec: on the task that exec'd.  It reads its auxiliary vector and
//!   program headers from its own memory and registers as the ioctl would:
//!   same validation, limits and sharing, with `SFRAME_SECTION_EXEC`.  The
//!   exec itself never fails for it; a malformed object is just not
//!   registered, with a ratelimited line in the log.
//! - fork: on the child, which has not run yet.  The probe takes the
//!   parent's live sections at that instant (lock-free, references only)
//!   and the work gives them to the child's mm under the registry lock
//!   before the child's first instruction ([`registry::Registry::adopt`]).
//!   A sample taken before then finds no tree for the child and unwinds
//!   it as an unregistered task.  `CLONE_VM` children share the mm.
//!
//! Unload: a queued work runs module code, and the kernel exports no way
//! to cancel one.  But a work always runs soon: a forked child or an
//! exec'd task runs its works before returning to user space, before a
//! ptrace or job-control stop, and when it exits.  So unload removes the
//! probes (none queues a work after that), waits until no work is pending,
//! then waits with `synchronize_rcu_tasks()` for a task still in the last
//! instructions of one.

use crate::{
    exec_image::{
        ImageError,
        Layout, //
    },
    ffi, hooks,
    registry::{
        self,
        Failure,
        RegisterRequest,
        Registry, //
    },
    uapi::{
        SFRAME_CTL_EXEC,
        SFRAME_CTL_FORK,
        SFRAME_FAIL_FORMAT,
        SFRAME_SECTION_EXEC, //
    },
    user_mem::FaultingUserMemory,
};
use core::sync::atomic::{
    AtomicUsize,
    Ordering, //
};
use kernel::{
    bindings,
    mm::MmWithUser,
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

/// The exec and fork probes, for the module's lifetime.
pub(crate) struct Lifecycle {
    installed: bool,
}

impl Lifecycle {
    /// Installs the probes and turns both switches on.  A kernel without
    /// the tracepoints leaves them off, said once; loading still succeeds.
    pub(crate) fn new() -> Self {
        // SAFETY: Registers the C probes, which call the functions below;
        // `drop` unregisters them. No preconditions.
        let ret = unsafe { ffi::sframe_lifecycle_probes_register() };
        if ret != 0 {
            pr_warn!(
                "cannot follow exec and fork (error {}): programs register their sections themselves\n",
                ret
            );
            return Self { installed: false };
        }
        hooks::make_available(SFRAME_CTL_EXEC | SFRAME_CTL_FORK);
        Self { installed: true }
    }
}

impl Drop for Lifecycle {
    fn drop(&mut self) {
        hooks::withdraw(SFRAME_CTL_EXEC | SFRAME_CTL_FORK);
        if !self.installed {
            return;
        }
        // SAFETY: The probes were registered in `new`. Afterwards no probe
        // runs, so no work is queued.
        unsafe { ffi::sframe_lifecycle_probes_unregister() };
        let mut waited = 0u32;
        while PENDING.load(Ordering::Acquire) != 0 {
            if waited == 1000 {
                pr_warn!("unload waits for tasks that have not run their exec or fork work\n");
            }
            waited = waited.saturating_add(1);
            // SAFETY: Module exit is process context with no lock held.
            unsafe { ffi::sframe_msleep(10) };
        }
        // SAFETY: As above. A task between the count's decrement and the
        // return from the work has not switched voluntarily since.
        unsafe { ffi::sframe_synchronize_rcu_tasks() };
    }
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
    if !hooks::enabled(SFRAME_CTL_FORK) || !registry::mm_has_sections(parent_mm) {
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
    if !hooks::enabled(SFRAME_CTL_EXEC) {
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
    // SAFETY: Reads the current task's flags.
    if unsafe { ffi::sframe_current_exiting() } {
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

/// Registers what the exec'd program and its interpreter describe.
fn register_exec(reg: &Registry, mm: &MmWithUser) {
    // A 32-bit program's headers are ELF32, and the unwinder walks 64-bit
    // stacks only.
    if crate::current_task::addr32() {
        return;
    }
    let auxv = |t: u32| -> u64 {
        // SAFETY: `mm` is the current task's; `saved_auxv` was written at
        // exec and is read only.
        unsafe { ffi::sframe_mm_auxv(mm.as_raw().cast(), t as usize) as u64 }
    };
    let mut mem = FaultingUserMemory::new();
    let program = Layout::program(&mut mem, auxv(ffi::AT_PHDR), auxv(ffi::AT_PHNUM));
    register_object(reg, mm, program);
    let base = auxv(ffi::AT_BASE);
    if base != 0 {
        register_object(reg, mm, Layout::at_header(&mut mem, base));
    }
}

/// Registers `layout`'s section for each of its text segments, as the
/// audit library would; a failure is counted and logged, ratelimited.
fn register_object(reg: &Registry, mm: &MmWithUser, layout: Result<Layout, ImageError>) {
    let layout = match layout {
        Ok(layout) => layout,
        Err(e) => {
            registry::fail(Failure::new(EINVAL, SFRAME_FAIL_FORMAT, e.as_str()), "exec");
            return;
        }
    };
    let Some((addr, len)) = layout.sframe else {
        return;
    };
    for &(text_start, text_end) in layout.text() {
        let req = RegisterRequest {
            sframe_data: addr,
            sframe_len: len,
            sframe_addr: addr,
            text_start,
            text_end,
            flags: SFRAME_SECTION_EXEC,
        };
        if let Err(f) = reg.register(mm, &req) {
            registry::fail(f, "exec");
        }
    }
}
