// SPDX-License-Identifier: GPL-2.0

//! Exec registration: the new program's and its interpreter's
//! `PT_GNU_SFRAME` sections, registered in the task's own context as the
//! ioctl would (same validation, limits and sharing), flagged
//! `SFRAME_SECTION_EXEC`.
//!
//! Contexts: the task work of a task that has just exec'd, before it
//! returns to user space: process context, reads of its own memory may
//! fault.  The exec has succeeded already; a failure here is counted and
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
        ffi,
        user_mem::FaultingUserMemory, //
    },
    arch,
    registry::{
        self,
        Failure,
        RegisterRequest,
        Registry, //
    },
    uapi::{
        SFRAME_FAIL_FORMAT,
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
