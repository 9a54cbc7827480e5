// SPDX-License-Identifier: GPL-2.0

//! Another process's address space, named by an open `/proc/PID/mem` or
//! `/proc/PID/auxv` file, with the permission the kernel checked when the
//! caller opened it.
//!
//! C headers: [`include/linux/fs.h`](srctree/include/linux/fs.h),
//! [`include/linux/sched/mm.h`](srctree/include/linux/sched/mm.h)
//!
//! The kernel checks ptrace permission over an address space in
//! `mm_access()`, under the target's `exec_update_lock` so that the check
//! and the address space belong to the same program image.  Neither it nor
//! `ptrace_may_access()`, `pidfd_pid()` or `pidfd_get_pid()` is exported to
//! modules, and a module must not reach unexported functions at all, so
//! the module cannot start from a pidfd.  Opening `/proc/PID/mem` runs
//! `mm_access()` with `PTRACE_MODE_ATTACH_FSCREDS` and keeps the address
//! space it checked in the file (`private_data`, with `mm_count` raised
//! until the file is released); `/proc/PID/auxv` does the same with
//! `PTRACE_MODE_READ_FSCREDS`.  The caller opens one of them and passes the
//! descriptor.  The module recognises the two kinds of file by their
//! `file_operations`, whose addresses it learns at load by opening
//! `/proc/self/mem` and `/proc/self/auxv` (the addresses are only compared,
//! never called), and takes the checked address space from the file if it
//! still has users.  A target that has since exited or run `execve()` has
//! none: the descriptor never reaches a later program image.

use crate::abstractions::compat::eopnotsupp;
use core::{
    ptr::NonNull,
    sync::atomic::{
        AtomicUsize,
        Ordering, //
    },
};
use kernel::{
    bindings,
    error::from_err_ptr,
    fs::{
        File,
        LocalFile, //
    },
    mm::{
        Mm,
        MmWithUser, //
    },
    prelude::*,
    sync::aref::ARef, //
};

/// Address of the `file_operations` of `/proc/PID/mem` files, 0 if unknown.
static MEM_FOPS: AtomicUsize = AtomicUsize::new(0);
/// Address of the `file_operations` of `/proc/PID/auxv` files, 0 if unknown.
static AUXV_FOPS: AtomicUsize = AtomicUsize::new(0);

/// What the caller wants to do with the target.
#[derive(Clone, Copy)]
pub(crate) enum Access {
    /// Register or unregister: ptrace attach permission (`/proc/PID/mem`).
    Modify,
    /// List: ptrace read permission (`/proc/PID/mem` or `/proc/PID/auxv`,
    /// as for `/proc/PID/maps`: the layout is ASLR-sensitive).
    Read,
}

/// The `file_operations` address of the procfs file `path`, which must be
/// the current process's own file named `name`, or 0.
fn fops_of(path: &CStr, name: &CStr) -> usize {
    // SAFETY: `path` is NUL-terminated; process context (module load).
    let file = unsafe { bindings::filp_open(path.as_char_ptr(), bindings::O_RDONLY as i32, 0) };
    let Some(file) = from_err_ptr(file).ok().and_then(NonNull::new) else {
        return 0;
    };
    // SAFETY: `filp_open` returned a file with a reference of its own, which
    // the `ARef` now owns and drops with `fput`.
    let file: ARef<File> = unsafe { ARef::from_raw(file.cast()) };
    // The path was looked up in the loader's mount namespace: make sure it
    // led to procfs's own file for this process, whose private data is the
    // process's address space.  Anything else (no procfs, a file mounted
    // over it) would make the comparison below accept the wrong files.
    // SAFETY: `file` is a live file and `name` is NUL-terminated.
    if !unsafe {
        crate::abstractions::ffi::sframe_proc_self_file(file.as_ptr().cast(), name.as_char_ptr())
    } {
        return 0;
    }
    // SAFETY: `file` is live; `f_op` is set when the file is opened.
    unsafe { (*file.as_ptr()).f_op as usize }
}

/// Learns which files are `/proc/PID/mem` and `/proc/PID/auxv`.  Runs at
/// load, before the device exists; sleeps.  Without procfs, targets other
/// than the caller are refused with `EOPNOTSUPP`.
pub(crate) fn init() {
    let mem = fops_of(c"/proc/self/mem", c"mem");
    let auxv = fops_of(c"/proc/self/auxv", c"auxv");
    if mem == 0 || auxv == 0 {
        pr_info!("other processes unsupported: /proc/self/mem or /proc/self/auxv not found\n");
        return;
    }
    MEM_FOPS.store(mem, Ordering::Release);
    AUXV_FOPS.store(auxv, Ordering::Release);
}

/// The address space the file `fd` was opened on, if it is a
/// `/proc/PID/mem` file (any `access`) or a `/proc/PID/auxv` file (`Read`
/// only; `EPERM` for `Modify`).  `EBADF` for a bad descriptor or another
/// kind of file, `ESRCH` if the address space has no users left (exit,
/// `execve()`), `EOPNOTSUPP` if [`init`] found no procfs.
pub(crate) fn mm_of_procfd(fd: i32, access: Access) -> Result<ARef<MmWithUser>> {
    let mem = MEM_FOPS.load(Ordering::Acquire);
    let auxv = AUXV_FOPS.load(Ordering::Acquire);
    if mem == 0 || auxv == 0 {
        return Err(eopnotsupp());
    }
    let fd = u32::try_from(fd).map_err(|_| EBADF)?;
    let file = LocalFile::fget(fd)?;
    // SAFETY: `file` holds a reference; `f_op` is set when a file is opened.
    let fops = unsafe { (*file.as_ptr()).f_op } as usize;
    match access {
        _ if fops == mem => {}
        Access::Read if fops == auxv => {}
        Access::Modify if fops == auxv => return Err(EPERM),
        _ => return Err(EBADF),
    }
    // SAFETY: Files with these operations were opened by procfs's
    // `__mem_open()`, which set `private_data` to the address space it
    // checked, with `mm_count` raised until the file is released, and never
    // changes it; `file` holds a reference, so the file is not released.
    let mm = unsafe { (*file.as_ptr()).private_data }.cast::<bindings::mm_struct>();
    if mm.is_null() {
        return Err(ESRCH);
    }
    // SAFETY: As above: `mm_count` stays raised while `file` lives, which is
    // longer than this reference is used.
    let mm = unsafe { Mm::from_raw(mm) };
    // The returned reference holds `mm_users` and does not need the file.
    mm.mmget_not_zero().ok_or(ESRCH)
}

/// Whether the caller may change the switches (`CAP_SYS_ADMIN`).
pub(crate) fn may_control() -> bool {
    // SAFETY: `capable()` checks the current task's credentials; no
    // preconditions in process context.
    unsafe { crate::abstractions::ffi::capable(crate::abstractions::ffi::CAP_SYS_ADMIN as i32) }
}

/// Whether the caller may see every user's figures: `CAP_PERFMON` (or
/// `CAP_SYS_ADMIN`), as perf asks of a system-wide event.
pub(crate) fn may_see_all() -> bool {
    // SAFETY: `capable()` checks the current task's credentials; no
    // preconditions in process context.
    unsafe {
        crate::abstractions::ffi::capable(crate::abstractions::ffi::CAP_PERFMON as i32)
            || crate::abstractions::ffi::capable(crate::abstractions::ffi::CAP_SYS_ADMIN as i32)
    }
}
