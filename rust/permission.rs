// SPDX-License-Identifier: GPL-2.0

//! Another process's address space, named by a pidfd, with ptrace's rules.
//!
//! C headers: [`include/linux/pid.h`](srctree/include/linux/pid.h),
//! [`include/linux/sched/mm.h`](srctree/include/linux/sched/mm.h)
//!
//! The kernel's own way is `pidfd_get_task()` then `mm_access()`, which
//! checks ptrace access under the target's `exec_update_lock` (so the
//! check and the mm belong to the same program image).  Neither function is
//! exported to modules, and the project does not use
//! `kallsyms_lookup_name()`: their addresses are resolved once, at the first
//! pidfd request (not at load: a kprobe costs code patching and an RCU grace
//! period, which every `insmod`/`rmmod` would pay), by registering (and at
//! once unregistering) a kprobe on each name, which reports the probed
//! address.  A kprobe lands after an `endbr64` under IBT,
//! so that instruction is stepped back over.  The function types are the
//! ones the kernel's own headers declare (checked by bindgen's output).  If
//! either name cannot be resolved, pidfd targets are refused with
//! `EOPNOTSUPP`.

use core::sync::atomic::{
    AtomicU8,
    AtomicUsize,
    Ordering, //
};
use kernel::{
    bindings,
    error::from_err_ptr,
    ffi::{
        c_int,
        c_uint, //
    },
    mm::MmWithUser,
    prelude::*,
    sync::aref::ARef, //
};

type PidfdGetTask = unsafe extern "C" fn(c_int, *mut c_uint) -> *mut bindings::task_struct;
type MmAccess =
    unsafe extern "C" fn(*mut bindings::task_struct, c_uint) -> *mut bindings::mm_struct;

/// Address of `pidfd_get_task()`, 0 if unresolved.
static PIDFD_GET_TASK: AtomicUsize = AtomicUsize::new(0);
/// Address of `mm_access()`, 0 if unresolved.
static MM_ACCESS: AtomicUsize = AtomicUsize::new(0);
/// Whether [`resolve_once`] ran: [`UNRESOLVED`], [`RESOLVED`] or
/// [`UNAVAILABLE`].
static STATE: AtomicU8 = AtomicU8::new(UNRESOLVED);
const UNRESOLVED: u8 = 0;
const RESOLVED: u8 = 1;
const UNAVAILABLE: u8 = 2;

/// What the caller wants to do with the target.
#[derive(Clone, Copy)]
pub(crate) enum Access {
    /// Register or unregister: ptrace attach permission, real credentials.
    Modify,
    /// List: ptrace read permission, filesystem credentials (as
    /// `/proc/PID/maps`).
    Read,
}

/// The address of the function `name`, found through a kprobe.
fn resolve(name: &'static CStr) -> usize {
    // SAFETY: All-zero is a valid `struct kprobe` (no handlers, no flags).
    let mut kp: crate::ffi::kprobe = unsafe { core::mem::zeroed() };
    kp.symbol_name = name.as_char_ptr();
    // SAFETY: `kp` is a valid kprobe with only a symbol name, alive until it
    // is unregistered below.
    if unsafe { crate::ffi::register_kprobe(&mut kp) } != 0 {
        return 0;
    }
    let addr = kp.addr as usize;
    // SAFETY: `kp` was registered above.
    unsafe { crate::ffi::unregister_kprobe(&mut kp) };
    if cfg!(CONFIG_X86_KERNEL_IBT) && addr >= 4 {
        const ENDBR64: [u8; 4] = [0xf3, 0x0f, 0x1e, 0xfa];
        // SAFETY: `addr` is inside a kernel function (kernel text is mapped
        // and readable); the four bytes before it are the function's first
        // instruction or the end of the preceding padding.
        let before: [u8; 4] = unsafe { core::ptr::read_unaligned((addr - 4) as *const [u8; 4]) };
        if before == ENDBR64 {
            return addr - 4;
        }
    }
    addr
}

/// Resolves the functions the first time a pidfd target is asked for.
/// Sleeps.  Two racing first callers both resolve: the results are equal.
fn resolve_once() {
    if STATE.load(Ordering::Acquire) != UNRESOLVED {
        return;
    }
    let task = resolve(c"pidfd_get_task");
    let mm = resolve(c"mm_access");
    if task == 0 || mm == 0 {
        if STATE.swap(UNAVAILABLE, Ordering::AcqRel) == UNRESOLVED {
            pr_info!("pidfd targets unsupported: pidfd_get_task or mm_access not found\n");
        }
        return;
    }
    PIDFD_GET_TASK.store(task, Ordering::Release);
    MM_ACCESS.store(mm, Ordering::Release);
    STATE.store(RESOLVED, Ordering::Release);
}

/// The address space of the process `pidfd` refers to, if the caller may
/// `access` it: `EPERM` (modify) or `EACCES` (read) if not, `ESRCH` if it
/// has exited or has no address space, `EBADF`/`EINVAL` for a bad pidfd.
pub(crate) fn mm_of_pidfd(pidfd: i32, access: Access) -> Result<ARef<MmWithUser>> {
    resolve_once();
    let task_fn = PIDFD_GET_TASK.load(Ordering::Acquire);
    let mm_fn = MM_ACCESS.load(Ordering::Acquire);
    if task_fn == 0 || mm_fn == 0 {
        return Err(EOPNOTSUPP);
    }
    // SAFETY: `resolve_once` stored the address of `pidfd_get_task`, whose C type is
    // `PidfdGetTask`; the kernel is not unloaded.
    let get_task: PidfdGetTask = unsafe { core::mem::transmute::<usize, PidfdGetTask>(task_fn) };
    // SAFETY: As above, for `mm_access`.
    let mm_access: MmAccess = unsafe { core::mem::transmute::<usize, MmAccess>(mm_fn) };
    // Negative pidfds other than the PIDFD_SELF_* constants are bad file
    // descriptors for fdget() anyway; refuse all of them.
    if pidfd < 0 {
        return Err(EBADF);
    }
    let mut flags: c_uint = 0;
    // SAFETY: Process context; `flags` is valid for writes.
    let task = from_err_ptr(unsafe { get_task(pidfd, &mut flags) })?;
    let mode = match access {
        Access::Modify => bindings::PTRACE_MODE_ATTACH_REALCREDS,
        Access::Read => bindings::PTRACE_MODE_READ_FSCREDS,
    };
    // SAFETY: `task` is a counted reference from `pidfd_get_task`.
    let mm = unsafe { mm_access(task, mode) };
    // SAFETY: Drops the reference `pidfd_get_task` took.
    unsafe { bindings::put_task_struct(task) };
    let mm = from_err_ptr(mm).map_err(|e| {
        if e == EACCES {
            match access {
                Access::Modify => EPERM,
                Access::Read => EACCES,
            }
        } else {
            e
        }
    })?;
    let mm = core::ptr::NonNull::new(mm.cast::<MmWithUser>()).ok_or(ESRCH)?;
    // SAFETY: `mm_access` returned an mm with `mm_users` raised (`mmget`),
    // which the `ARef<MmWithUser>` owns and drops with `mmput`.
    Ok(unsafe { ARef::from_raw(mm) })
}
