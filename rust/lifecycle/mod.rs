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
//! `lifecycle.c`).  A probe runs with preemption off, so it only queues
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
//! work (`registry::maintain`).  Without the teardown probe the module
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

//!
//! Files: `probes.rs` (the C side's entry points and the task works they
//! queue), `exec.rs` and `exec_image.rs` (what exec registers, read from
//! the new program's memory), `unmap.rs` (the `vm_area_free()` watch),
//! `lifecycle.c` (the tracepoint probes, the task work and the registry's
//! maintenance work item).

mod exec;
mod exec_image;
mod probes;
mod unmap;

pub(crate) use probes::schedule_maintenance;

use crate::{
    abstractions::{
        ffi,
        ftrace::{
            FtraceHook,
            Redirect, //
        },
        nowait_mem,
    },
    switches,
    uapi::{
        SFRAME_CTL_EXEC,
        SFRAME_CTL_FORK, //
    },
};
use kernel::prelude::*;
use unmap::UnmapWatch;

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
        nowait_mem::allow_waits();
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
            // SAFETY: Registers the C probes, which call the functions in
            // `probes.rs`; `drop` unregisters them. No preconditions.
            let ret = unsafe { ffi::sframe_lifecycle_probes_register() };
            if ret != 0 {
                pr_warn!(
                    "cannot follow exec and fork (error {}): programs register their sections themselves\n",
                    ret
                );
                return Ok(());
            }
            switches::make_available(SFRAME_CTL_EXEC | SFRAME_CTL_FORK);
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
        switches::withdraw(SFRAME_CTL_EXEC | SFRAME_CTL_FORK);
        // SAFETY: Nothing is moved out of `this`: it only reaches the
        // fields below, and the pinned one is pinned again.
        let this = unsafe { self.get_unchecked_mut() };
        if this.installed {
            // SAFETY: The probes were registered in `new`. Afterwards no
            // probe runs, so no work is queued.
            unsafe { ffi::sframe_lifecycle_probes_unregister() };
            // A work waiting for a page of its process's memory gives up
            // now: unload waits for no file system.
            nowait_mem::abandon_waits();
            probes::wait_for_works();
        }
        // SAFETY: `unmap` is a structurally pinned field of a pinned value.
        unsafe { Pin::new_unchecked(&mut this.unmap) }.uninstall();
        if this.teardown {
            // SAFETY: Registered in `new`.  Afterwards the probe does not
            // run.
            unsafe { ffi::sframe_teardown_probe_unregister() };
        }
        // Neither queues maintenance any more: let a queued one finish.
        probes::flush_maintenance();
    }
}
