// SPDX-License-Identifier: GPL-2.0

//! Exec registration: the new program's and its interpreter's
//! `PT_GNU_SFRAME` sections, registered in the task's own context as the
//! ioctl would (same validation, limits and sharing), flagged
//! `SFRAME_SECTION_EXEC`.
//!
//! Contexts: the task work of a task that has just exec'd, before it
//! returns to user space: process context.  Its reads of its own memory
//! never sleep in a page fault (`NowaitUserMemory`): a page that must come
//! from its file is read in while the work polls, up to a deadline, and
//! unload makes it give up at once, so that no file system can make unload
//! wait.  The exec has succeeded already; a failure here is counted and
//! said in the log, ratelimited.

#![deny(unsafe_code)]

use super::{
    exec_image::{
        ImageError,
        Layout, //
    },
    probes::saved_auxv,
};
use crate::{
    abstractions::{
        cred::current_account,
        ffi,
        nowait_mem::NowaitUserMemory, //
    },
    arch,
    registry::{
        self,
        Failure,
        RegisterRequest,
        Registry, //
        Tag,
    },
    uapi::{
        SFRAME_FAIL_FAULT,
        SFRAME_FAIL_FORMAT,
        SFRAME_FAIL_NOMEM,
        SFRAME_SECTION_EXEC, //
    },
};
use kernel::{
    mm::MmWithUser,
    prelude::*, //
};

/// Registers what the exec'd program and its interpreter describe.
pub(super) fn register_exec(reg: &Registry, mm: &MmWithUser) {
    // A 32-bit program's headers are ELF32, and the unwinder walks 64-bit
    // stacks only.
    if arch::task_is_compat() {
        return;
    }
    let auxv = |t: u32| saved_auxv(mm, t);
    // Never asleep in a page fault: unload must not wait for a file system.
    let mut mem = NowaitUserMemory::new(mm);
    let program = Layout::program(&mut mem, auxv(ffi::AT_PHDR), auxv(ffi::AT_PHNUM));
    register_object(reg, mm, &mut mem, program);
    let base = auxv(ffi::AT_BASE);
    if base != 0 {
        let interpreter = Layout::at_header(&mut mem, base);
        register_object(reg, mm, &mut mem, interpreter);
    }
}

/// Registers `layout`'s section for each of its text segments, as the
/// audit library would; a failure is counted and logged, ratelimited.
fn register_object(
    reg: &Registry,
    mm: &MmWithUser,
    mem: &mut NowaitUserMemory<'_>,
    layout: Result<Layout, ImageError>,
) {
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
    let holder = current_account();
    let req = |(text_start, text_end): (u64, u64)| RegisterRequest {
        sframe_data: addr,
        sframe_len: len,
        sframe_addr: addr,
        text_start,
        text_end,
        flags: SFRAME_SECTION_EXEC,
        tag: Tag::None,
        holder,
    };
    let texts = layout.text();
    let Some(&first) = texts.first() else {
        return;
    };
    // The bytes are read once; each segment's registration gets them (and
    // all share the kernel's copy).
    let mut bytes = match read_section(reg, &req(first), mem) {
        Ok(bytes) => bytes,
        Err(f) => {
            registry::fail(f, "exec");
            return;
        }
    };
    for (i, &text) in texts.iter().enumerate() {
        let these = if i + 1 == texts.len() {
            core::mem::replace(&mut bytes, KVVec::new())
        } else {
            match copy_bytes(&bytes) {
                Ok(copy) => copy,
                Err(f) => {
                    registry::fail(f, "exec");
                    return;
                }
            }
        };
        if let Err(f) = reg.register_bytes(mm, &req(text), these) {
            registry::fail(f, "exec");
        }
    }
}

/// The section `req` names, read without waiting for I/O: up to the
/// registry's size limit, checked before anything is read.
fn read_section(
    reg: &Registry,
    req: &RegisterRequest,
    mem: &mut NowaitUserMemory<'_>,
) -> Result<KVVec<u8>, Failure> {
    let len = reg.check_request(req)?;
    // Into a vector that is not zeroed first: a byte-at-a-time zeroing
    // loop cost more than the read.
    mem.read_to_vec(req.sframe_data, len, GFP_KERNEL_ACCOUNT)
        .map_err(|e| {
            if e == EAGAIN {
                Failure::new(
                    EAGAIN,
                    SFRAME_FAIL_FAULT,
                    "section not read in time (file system slow or unloading)",
                )
            } else if e == ENOMEM {
                Failure::new(ENOMEM, SFRAME_FAIL_NOMEM, "out of memory")
            } else {
                Failure::new(EFAULT, SFRAME_FAIL_FAULT, "section bytes unreadable")
            }
        })
}

/// A copy of `bytes`.
fn copy_bytes(bytes: &[u8]) -> Result<KVVec<u8>, Failure> {
    let mut copy = KVVec::new();
    copy.extend_from_slice(bytes, GFP_KERNEL_ACCOUNT)
        .map_err(|_| Failure::new(ENOMEM, SFRAME_FAIL_NOMEM, "out of memory"))?;
    Ok(copy)
}
