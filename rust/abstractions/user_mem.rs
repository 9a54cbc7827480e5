// SPDX-License-Identifier: GPL-2.0

//! Reading the current task's user stack for the unwinder, in the two
//! contexts it runs in.
//!
//! C header: [`include/linux/uaccess.h`](srctree/include/linux/uaccess.h).
//!
//! - [`NmiUserMemory`]: perf's sampling path (NMI or IRQ). The
//!   architecture's non-faulting read ([`arch::read_user_nmi`]; on x86-64
//!   `copy_from_user_nmi()`, which alone checks `nmi_uaccess_okay()`: the
//!   CPU may be switching `mm`). A page that is not resident reads as a
//!   fault.
//! - [`FaultingUserMemory`]: the deferred path (task context on the way back
//!   to user space). `copy_from_user()`, which may sleep to fault a page in.
//!
//! And the bound of every user address, which depends on the machine.

use crate::{
    abstractions::ffi,
    arch,
    sframe::unwind::Memory, //
};
use core::marker::PhantomData;
use kernel::{
    types::NotThreadSafe,
    uaccess::{
        UserPtr,
        UserSlice, //
    },
};

/// The current task's user memory, read without faulting (any context).
///
/// Not `Send`: it reads the memory of the task it was made on.
pub(crate) struct NmiUserMemory {
    _not_send: NotThreadSafe,
}

impl NmiUserMemory {
    /// A reader of the current task's user memory.
    pub(crate) fn new() -> Self {
        Self {
            _not_send: NotThreadSafe,
        }
    }
}

impl Memory for NmiUserMemory {
    fn read_u64(&mut self, addr: u64) -> Option<u64> {
        let mut word = [0u8; 8];
        self.read(addr, &mut word).then(|| u64::from_le_bytes(word))
    }

    fn read(&mut self, addr: u64, buf: &mut [u8]) -> bool {
        arch::read_user_nmi(addr, buf)
    }
}

/// The current task's user memory, read with page faults allowed.
///
/// For task context only, with no lock held that a page fault may take
/// (`mmap_lock` included) and outside RCU read-side sections: a read may
/// sleep. Elsewhere a read deadlocks or sleeps in atomic context, which
/// is a bug but not memory unsafety, as for [`UserSlice`] itself; every
/// read says `might_fault()`, so debugging kernels report such a caller
/// even when the read does not fault.
pub(crate) struct FaultingUserMemory<'a> {
    _not_send: PhantomData<&'a NotThreadSafe>,
}

impl FaultingUserMemory<'_> {
    /// A reader of the current task's user memory that may fault pages in.
    pub(crate) fn new() -> Self {
        Self {
            _not_send: PhantomData,
        }
    }
}

impl Memory for FaultingUserMemory<'_> {
    fn read_u64(&mut self, addr: u64) -> Option<u64> {
        let mut word = [0u8; 8];
        self.read(addr, &mut word).then(|| u64::from_le_bytes(word))
    }

    fn read(&mut self, addr: u64, buf: &mut [u8]) -> bool {
        // Before any early return: the context is checked on every read,
        // not only on those that reach `copy_from_user()`.
        might_fault();
        let Ok(addr) = usize::try_from(addr) else {
            return false;
        };
        // `UserSlice` checks the range and copies with `copy_from_user()`,
        // which may fault.
        UserSlice::new(UserPtr::from_addr(addr), buf.len())
            .reader()
            .read_slice(buf)
            .is_ok()
    }
}

/// Says that the caller may take a page fault: with
/// `CONFIG_DEBUG_ATOMIC_SLEEP` or lockdep, warns when it runs in atomic
/// context or holds `mmap_lock`.
fn might_fault() {
    // SAFETY: `might_fault()` has no preconditions; it only checks.
    unsafe { ffi::sframe_might_fault() }
}

/// One past the highest user address on this machine (`TASK_SIZE_MAX`):
/// 2^47 or 2^56 less a guard page, by whether the kernel runs with 5-level
/// paging, which is decided at boot.
pub(crate) fn user_addr_end() -> u64 {
    // SAFETY: `TASK_SIZE_MAX` reads a CPU feature bit; no preconditions.
    unsafe { ffi::sframe_task_size_max() as u64 }
}
