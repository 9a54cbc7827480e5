// SPDX-License-Identifier: GPL-2.0

//! Registrations that follow the process: `execve()` registers the new
//! program's and its interpreter's `PT_GNU_SFRAME` sections, a `fork()`
//! child starts with its parent's registrations, an unmapped text loses its
//! registration and a torn down address space all of them.
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
//! Lifetime: the `exit_mmap` tracepoint reports every address space torn
//! down, and a watch on `vm_area_free()` (an ftrace hook that redirects
//! nothing) every mapping freed while the address space has users.  That
//! is an unmap (`munmap()`, `mremap()`'s source, a mapping replaced) unless
//! the same file is still mapped there at the same offsets (the mapping was
//! merged into a neighbour, as `mprotect()` does): a registration whose
//! text met an unmapped range is retired.  (`remove_vma()`, which only
//! unmaps call, is inlined into its caller in some builds.)  Both run in
//! atomic context and leave the locked part to the registry's maintenance
//! work ([`registry::maintain`]).  Without the teardown probe the module
//! does not load: it could not tell when an mm's address is free again.
//! Without the watch (a kernel that renamed `vm_area_free()`) it loads,
//! said in the log, and an unmapped text's registration stays until it is
//! unregistered or the process exits.
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
    ffi,
    ftrace::{
        Args,
        FtraceHook,
        Redirect, //
    },
    hooks,
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

/// The probes and the unmap watch, for the module's lifetime.
#[pin_data(PinnedDrop)]
pub(crate) struct Lifecycle {
    #[pin]
    unmap: FtraceHook<UnmapWatch>,
    /// The teardown probe is registered.
    teardown: bool,
    /// The exec and fork probes are registered.
    installed: bool,
}

impl Lifecycle {
    /// Installs the teardown probe (loading fails without it), the unmap
    /// watch, and the exec and fork probes, and turns the exec and fork
    /// switches on.  A kernel without the exec and fork tracepoints leaves
    /// them off, and one without a traceable `vm_area_free()` goes without
    /// the watch, each said once; loading still succeeds.
    pub(crate) fn new() -> impl PinInit<Self, Error> {
        // SAFETY: Registers the C probe, which calls `sframe_on_exit_mmap`;
        // `drop` (or the error path below) unregisters it.
        let ret = unsafe { ffi::sframe_teardown_probe_register() };
        if ret != 0 {
            pr_err!(
                "cannot follow address-space teardown (exit_mmap tracepoint, error {})\n",
                ret
            );
        }
        try_pin_init!(Self {
            unmap <- FtraceHook::new(),
            teardown: ret == 0,
            installed: false,
        }? Error)
        .pin_chain(move |mut this| {
            if ret != 0 {
                return Err(Error::from_errno(ret));
            }
            // SAFETY: `unmap` is a structurally pinned field (`#[pin]`): the
            // projection keeps it pinned and moves nothing.
            let unmap = unsafe { this.as_mut().map_unchecked_mut(|l| &mut l.unmap) };
            if let Err(e) = unmap.install() {
                pr_warn!(
                    "cannot watch {} ({:?}): a registration stays after its text is unmapped, until unregistered or exit\n",
                    UnmapWatch::TARGET,
                    e
                );
            }
            // SAFETY: Registers the C probes, which call the functions
            // below; `drop` unregisters them. No preconditions.
            let ret = unsafe { ffi::sframe_lifecycle_probes_register() };
            if ret != 0 {
                pr_warn!(
                    "cannot follow exec and fork (error {}): programs register their sections themselves\n",
                    ret
                );
                return Ok(());
            }
            hooks::make_available(SFRAME_CTL_EXEC | SFRAME_CTL_FORK);
            // SAFETY: Nothing is moved out: `installed` is not structurally
            // pinned.
            unsafe { this.get_unchecked_mut() }.installed = true;
            Ok(())
        })
    }
}

#[pinned_drop]
impl PinnedDrop for Lifecycle {
    fn drop(self: Pin<&mut Self>) {
        hooks::withdraw(SFRAME_CTL_EXEC | SFRAME_CTL_FORK);
        // SAFETY: Nothing is moved out of `this`: it only reaches the
        // fields below, and the pinned one is pinned again.
        let this = unsafe { self.get_unchecked_mut() };
        if this.installed {
            // SAFETY: The probes were registered in `new`. Afterwards no
            // probe runs, so no work is queued.
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
            // SAFETY: As above. A task between the count's decrement and
            // the return from the work has not switched voluntarily since.
            unsafe { ffi::sframe_synchronize_rcu_tasks() };
        }
        // SAFETY: `unmap` is a structurally pinned field of a pinned value.
        unsafe { Pin::new_unchecked(&mut this.unmap) }.uninstall();
        if this.teardown {
            // SAFETY: Registered in `new`.  Afterwards the probe does not
            // run.
            unsafe { ffi::sframe_teardown_probe_unregister() };
        }
        // Neither queues maintenance any more: let a queued one finish.
        // SAFETY: Process context, no lock held.
        unsafe { ffi::sframe_maintenance_flush() };
    }
}

/// The unmap watch on `vm_area_free()`, which frees a mapping taken out of
/// its address space: unmapped, merged into a neighbour, or never inserted
/// (an error path), under `mmap_lock`; or torn down by `exit_mmap()` (the
/// address space has no user left then, and the teardown probe does the
/// rest).
struct UnmapWatch;

// SAFETY: `redirect` always returns `None`, and `REDIRECTS` is false.
unsafe impl Redirect for UnmapWatch {
    const TARGET: &'static CStr = c"vm_area_free";
    const REDIRECTS: bool = false;

    fn redirect(args: &Args<'_>) -> Option<usize> {
        let vma = args.get(0) as *const ffi::vm_area_struct;
        if vma.is_null() {
            return None;
        }
        let mut mm = core::ptr::null_mut();
        let (mut start, mut end) = (0, 0);
        // SAFETY: `vm_area_free()`'s argument is a VMA its caller owns and
        // frees in this call; its fields are stable until then.
        if unsafe { ffi::sframe_vma_freed(vma, &mut mm, &mut start, &mut end) } {
            registry::unmapped(mm.cast(), start, end, |lo, hi| {
                // SAFETY: As above; the caller holds the mm's `mmap_lock`
                // (the helper checks that it is locked at all).
                unsafe { ffi::sframe_vma_range_kept(vma, lo, hi) }
            });
        }
        None
    }
}

/// `exit_mmap`, at the end of an address space's teardown.  Preemption is
/// off, `mmap_lock` held.
#[no_mangle]
extern "C" fn sframe_on_exit_mmap(mm: *mut bindings::mm_struct) {
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
