// SPDX-License-Identifier: GPL-2.0

//! `/dev/sframe` ioctl dispatch: each command's argument checks, and the
//! registry operation or switch it leads to.
//!
//! Contexts: process context (the caller's ioctl); may sleep.

#![deny(unsafe_code)]

use super::{
    permission::{
        self,
        Access, //
    },
    user_struct::{
        read_struct,
        write_struct,
        MAX_STRUCT_SIZE, //
    },
};
use crate::{
    abstractions::{
        compat::eopnotsupp,
        cred::{
            current_account,
            mm_account, //
        },
    },
    registry::{
        self,
        Failure,
        RegisterRequest,
        Tag,
        Which, //
    },
    switches,
    uapi::*,
    unwind,
};
use kernel::{
    mm::MmWithUser,
    prelude::*,
    transmute::AsBytes,
    uaccess::{
        UserPtr,
        UserSlice, //
    },
};

/// The module's version, `major << 16 | minor << 8 | patch`.
pub(crate) const MODULE_VERSION: u32 = 0x00_02_00;

fn version(arg: usize) -> Result<isize> {
    let mut s = read_struct::<SframeVersion>(arg, SFRAME_VERSION_SIZE_VER0)?;
    if s.value.reserved != 0 {
        return Err(EINVAL);
    }
    s.value.size = core::mem::size_of::<SframeVersion>() as u32;
    s.value.abi_version = SFRAME_ABI_VERSION;
    s.value.module_version = MODULE_VERSION;
    s.value.features = SFRAME_FEAT_V2 | SFRAME_FEAT_V3 | SFRAME_FEAT_STATS_SCOPE | SFRAME_FEAT_TAG;
    write_struct(&s)?;
    Ok(0)
}

/// Maps an error of [`read_struct`]/[`write_struct`] to its failure counter.
fn arg_failure(e: Error) -> Failure {
    if e == EFAULT {
        Failure::new(EFAULT, SFRAME_FAIL_FAULT, "argument unreadable")
    } else {
        Failure::new(e, SFRAME_FAIL_ARGUMENT, "bad argument structure")
    }
}

fn bad_arg(reason: &'static str) -> Failure {
    Failure::new(EINVAL, SFRAME_FAIL_ARGUMENT, reason)
}

/// Runs `f` on the target address space and the account of the process
/// that holds it: the caller's, or with `SFRAME_F_PROCFD` the one the
/// `/proc/PID/mem` (or, to read, `/proc/PID/auxv`) file `fd` was opened
/// on.  `SFRAME_F_PIDFD` is refused: the module has no exported way to
/// check ptrace permission from a pidfd.
fn with_target<R>(
    flags: u32,
    fd: i32,
    access: Access,
    f: impl FnOnce(&MmWithUser, u32) -> Result<R, Failure>,
) -> Result<R, Failure> {
    if flags & SFRAME_F_PIDFD != 0 {
        return Err(Failure::new(
            eopnotsupp(),
            SFRAME_FAIL_ARGUMENT,
            "pidfd targets unsupported, use SFRAME_F_PROCFD",
        ));
    }
    if flags & SFRAME_F_PROCFD != 0 {
        let mm = permission::mm_of_procfd(fd, access).map_err(|e| {
            if e == EPERM {
                Failure::new(e, SFRAME_FAIL_PERMISSION, "auxv file given to modify")
            } else if e == eopnotsupp() {
                Failure::new(e, SFRAME_FAIL_ARGUMENT, "procfs was not found at load")
            } else if e == ESRCH {
                Failure::new(e, SFRAME_FAIL_ARGUMENT, "target exited or executed")
            } else {
                Failure::new(e, SFRAME_FAIL_ARGUMENT, "not a /proc/PID/mem descriptor")
            }
        })?;
        return f(&mm, mm_account(&mm));
    }
    if fd != 0 {
        return Err(bad_arg("pidfd set without SFRAME_F_PROCFD"));
    }
    let task = kernel::current!();
    let mm = task.mm().ok_or(bad_arg("caller has no address space"))?;
    f(mm, current_account())
}

fn register(reg: &registry::Registry, arg: usize) -> Result<isize, Failure> {
    let mut s =
        read_struct::<SframeRegister>(arg, SFRAME_REGISTER_SIZE_VER0).map_err(arg_failure)?;
    let v = s.value;
    if v.reserved != 0 || v.handle != 0 {
        return Err(bad_arg("reserved or output field not zero"));
    }
    if v.flags & !(SFRAME_F_PIDFD | SFRAME_F_PROCFD | SFRAME_F_TAGGED | SFRAME_F_BY_TAG) != 0 {
        return Err(bad_arg("unknown flags"));
    }
    let req = RegisterRequest {
        sframe_data: v.sframe_data,
        sframe_len: v.sframe_len,
        sframe_addr: v.sframe_addr,
        text_start: v.text_start,
        text_end: v.text_end,
        flags: 0,
        tag: register_tag(&v, s.user_size())?,
        holder: 0,
    };
    with_target(v.flags, v.pidfd, Access::Modify, |mm, holder| {
        let req = RegisterRequest { holder, ..req };
        let handle = reg.register(mm, &req)?;
        s.value.handle = handle;
        if let Err(e) = write_struct(&s) {
            // The caller cannot learn the handle: undo.
            let _ = reg.unregister(mm, Which::Handle(handle));
            return Err(arg_failure(e));
        }
        Ok(0)
    })
}

/// How the registration `v`, of a caller whose structure is `user_size`
/// bytes, names its copy.
fn register_tag(v: &SframeRegister, user_size: u32) -> Result<Tag, Failure> {
    let tagged = v.flags & SFRAME_F_TAGGED != 0;
    let by_tag = v.flags & SFRAME_F_BY_TAG != 0;
    if !tagged && !by_tag {
        return match v.tag {
            0 => Ok(Tag::None),
            _ => Err(bad_arg("tag without SFRAME_F_TAGGED or SFRAME_F_BY_TAG")),
        };
    }
    if user_size < SFRAME_REGISTER_SIZE_VER1 {
        return Err(bad_arg("tag flag in a structure without the tag"));
    }
    match (tagged, by_tag) {
        (true, true) => Err(bad_arg("both SFRAME_F_TAGGED and SFRAME_F_BY_TAG")),
        (false, _) if v.sframe_data != 0 => Err(bad_arg("bytes given with SFRAME_F_BY_TAG")),
        (false, _) => Ok(Tag::Find(v.tag)),
        (true, _) => Ok(Tag::File(v.tag)),
    }
}

fn unregister(reg: &registry::Registry, arg: usize) -> Result<isize, Failure> {
    let s =
        read_struct::<SframeUnregister>(arg, SFRAME_UNREGISTER_SIZE_VER0).map_err(arg_failure)?;
    let v = s.value;
    if v.reserved != 0 {
        return Err(bad_arg("reserved field not zero"));
    }
    if v.flags & !(SFRAME_F_PIDFD | SFRAME_F_PROCFD | SFRAME_F_BY_ADDR) != 0 {
        return Err(bad_arg("unknown flags"));
    }
    let which = if v.flags & SFRAME_F_BY_ADDR != 0 {
        if v.handle != 0 {
            return Err(bad_arg("handle set with SFRAME_F_BY_ADDR"));
        }
        Which::Addr(v.addr)
    } else {
        if v.addr != 0 {
            return Err(bad_arg("addr set without SFRAME_F_BY_ADDR"));
        }
        Which::Handle(v.handle)
    };
    with_target(v.flags, v.pidfd, Access::Modify, |mm, _| {
        reg.unregister(mm, which)
    })?;
    Ok(0)
}

fn list(reg: &registry::Registry, arg: usize) -> Result<isize, Failure> {
    let mut s = read_struct::<SframeList>(arg, SFRAME_LIST_SIZE_VER0).map_err(arg_failure)?;
    let v = s.value;
    if v.flags & !(SFRAME_F_PIDFD | SFRAME_F_PROCFD) != 0 {
        return Err(bad_arg("unknown flags"));
    }
    if v.count != 0 {
        return Err(bad_arg("output field not zero"));
    }
    if v.entry_size < SFRAME_SECTION_INFO_SIZE_VER0 || v.entry_size > MAX_STRUCT_SIZE {
        return Err(bad_arg("entry_size out of range"));
    }
    let viewer = current_account();
    let infos = with_target(v.flags, v.pidfd, Access::Read, |mm, _| reg.list(mm, viewer))?;
    let n = infos.len().min(v.capacity as usize);
    let stride = v.entry_size as usize;
    let base = usize::try_from(v.entries)
        .map_err(|_| Failure::new(EFAULT, SFRAME_FAIL_FAULT, "entries out of range"))?;
    let total = n.checked_mul(stride).ok_or(Failure::new(
        EFAULT,
        SFRAME_FAIL_FAULT,
        "entries out of range",
    ))?;
    if n > 0 {
        let mut w = UserSlice::new(UserPtr::from_addr(base), total).writer();
        let zeros = [0u8; 64];
        for info in infos.iter().take(n) {
            let bytes = info.as_bytes();
            let known = bytes.len().min(stride);
            let part = bytes.get(..known).ok_or(bad_arg("entry_size"))?;
            w.write_slice(part).map_err(arg_failure)?;
            let mut rest = stride - known;
            while rest > 0 {
                let k = rest.min(zeros.len());
                w.write_slice(zeros.get(..k).ok_or(bad_arg("entry_size"))?)
                    .map_err(arg_failure)?;
                rest -= k;
            }
            // Up to `max_sections_per_mm` entries of up to 4 KiB each.
            registry::resched();
        }
    }
    s.value.count = u32::try_from(infos.len()).unwrap_or(u32::MAX);
    write_struct(&s).map_err(arg_failure)?;
    Ok(0)
}

fn stats(arg: usize) -> Result<isize, Failure> {
    let mut s = read_struct::<SframeStats>(arg, SFRAME_STATS_SIZE_VER0).map_err(arg_failure)?;
    if s.value.scope != 0 {
        return Err(bad_arg("scope field not zero"));
    }
    let mut out = SframeStats {
        size: core::mem::size_of::<SframeStats>() as u32,
        ..Default::default()
    };
    // Module-wide figures tell of every user's processes: for whoever may
    // watch the whole system (perf's own rule for system-wide events).
    if permission::may_see_all() {
        out.scope = SFRAME_STATS_SCOPE_MODULE;
        registry::fill_stats(&mut out);
        out.unwind = unwind::counters_snapshot();
    } else {
        out.scope = SFRAME_STATS_SCOPE_OWN;
        registry::fill_own_stats(&mut out, current_account());
    }
    s.value = out;
    write_struct(&s).map_err(arg_failure)?;
    Ok(0)
}

/// `SFRAME_IOC_CONTROL`: reads the unwinder's switches; changing one needs
/// `CAP_SYS_ADMIN`.
fn control(arg: usize) -> Result<isize> {
    let mut s = read_struct::<SframeControl>(arg, SFRAME_CONTROL_SIZE_VER0)?;
    if s.value.reserved != 0 {
        return Err(EINVAL);
    }
    let value = if s.value.mask != 0 {
        if !permission::may_control() {
            return Err(EPERM);
        }
        switches::set(s.value.mask, s.value.value)?
    } else {
        switches::current()
    };
    s.value.size = core::mem::size_of::<SframeControl>() as u32;
    s.value.value = value;
    write_struct(&s)?;
    Ok(0)
}

/// Runs a registry command, counting and logging its failure.
fn registry_cmd(
    what: &str,
    f: impl FnOnce(&registry::Registry) -> Result<isize, Failure>,
) -> Result<isize> {
    let reg = registry::get().ok_or(ENODEV)?;
    f(reg).map_err(|e| registry::fail(e, what))
}

/// Handles one ioctl on `/dev/sframe`.
pub(crate) fn dispatch(cmd: u32, arg: usize) -> Result<isize> {
    if sframe_ioc_type(cmd) != SFRAME_IOC_MAGIC {
        return Err(ENOTTY);
    }
    match sframe_ioc_nr(cmd) {
        SFRAME_NR_VERSION => version(arg),
        SFRAME_NR_REGISTER => registry_cmd("register", |r| register(r, arg)),
        SFRAME_NR_UNREGISTER => registry_cmd("unregister", |r| unregister(r, arg)),
        SFRAME_NR_LIST => registry_cmd("list", |r| list(r, arg)),
        SFRAME_NR_STATS => registry_cmd("stats", |_| stats(arg)),
        SFRAME_NR_CONTROL => control(arg),
        _ => Err(ENOTTY),
    }
}
