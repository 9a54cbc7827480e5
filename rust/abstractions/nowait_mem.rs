// SPDX-License-Identifier: GPL-2.0

//! Reading an address space's memory in process context without ever
//! sleeping in a page fault: for exec registration's task work, which
//! unload must be able to wait out whatever user space does.
//!
//! C header: [`include/linux/mm.h`](srctree/include/linux/mm.h)
//! (`get_user_pages_remote()`, `FOLL_NOWAIT`).
//!
//! A page that must come from its file has its read started and the
//! reader polls for it, up to a deadline, giving up at once when unload
//! calls [`abandon_waits`].  A task blocked in a page fault would be in
//! module code that unload cannot wait out (a FUSE server that stopped
//! answering, a hung NFS mount); one polling here leaves it within a few
//! milliseconds.  FUSE still reads in the caller even so (without async
//! reads its readahead is synchronous), waiting for a server that user
//! space runs: a try that touches a FUSE file pins the module, so that
//! rmmod meanwhile is refused at once ("in use") rather than left waiting
//! for that server.

use super::{
    ffi,
    sched::msleep, //
};
use crate::sframe::unwind::Memory;
use core::sync::atomic::{
    AtomicBool,
    Ordering, //
};
use kernel::{
    alloc::{
        Allocator,
        Flags, //
    },
    bindings,
    mm::MmWithUser,
    prelude::*, //
};

/// Set at unload: reads of [`NowaitUserMemory`] waiting for I/O give up.
static ABANDON: AtomicBool = AtomicBool::new(false);

/// Makes every [`NowaitUserMemory`] read that waits for I/O, now or later,
/// give up: for unload, which must not wait for user space (a file system
/// whose server stopped answering).
pub(crate) fn abandon_waits() {
    ABANDON.store(true, Ordering::Release);
}

/// Lets [`NowaitUserMemory`] reads wait again (at load).
pub(crate) fn allow_waits() {
    ABANDON.store(false, Ordering::Release);
}

/// How long a read waits for the pages it needs to be read in.
const NOWAIT_DEADLINE_MS: u32 = 2000;
/// How long it sleeps between two tries.
const NOWAIT_POLL_MS: u32 = 2;

/// The memory of an address space, read in process context without ever
/// sleeping in a page fault: a page that must come from its file has its
/// read started, and the read polls for it, up to a deadline, giving up at
/// once when unload calls [`abandon_waits`].  A task blocked in a page
/// fault would be in module code that unload cannot wait out (a FUSE
/// server that stopped answering, a hung NFS mount); one polling here
/// leaves it within a few milliseconds.
pub(crate) struct NowaitUserMemory<'a> {
    mm: &'a MmWithUser,
}

impl<'a> NowaitUserMemory<'a> {
    /// A reader of `mm`, for process context (a task work).
    pub(crate) fn new(mm: &'a MmWithUser) -> Self {
        Self { mm }
    }

    /// Reads `buf.len()` bytes at `addr`; `Err(EAGAIN)` if the pages did not
    /// arrive in time or unload came, `Err(EFAULT)` if they are not mapped.
    pub(crate) fn read_all(&mut self, addr: u64, buf: &mut [u8]) -> Result {
        // SAFETY: `buf` is writable for its length.
        unsafe { self.read_raw(addr, buf.as_mut_ptr(), buf.len()) }
    }

    /// Reads `len` bytes at `addr` into a new vector allocated with
    /// `flags`, not zeroed first (the program headers and the section of a
    /// program are read this way at every exec, and a zeroing loop cost as
    /// much as the read); errors as [`Self::read_all`], or `ENOMEM`.
    pub(crate) fn read_to_vec<A: Allocator>(
        &mut self,
        addr: u64,
        len: usize,
        flags: Flags,
    ) -> Result<Vec<u8, A>> {
        let mut buf = Vec::<u8, A>::with_capacity(len, flags)?;
        let spare = buf.spare_capacity_mut().get_mut(..len).ok_or(ENOMEM)?;
        // SAFETY: `spare` is the vector's unused capacity, writable for
        // `len` bytes.
        unsafe { self.read_raw(addr, spare.as_mut_ptr().cast(), len) }?;
        // SAFETY: `read_raw` succeeded: it wrote all `len` bytes after the
        // (empty) vector's length, within its capacity.
        unsafe { buf.inc_len(len) };
        Ok(buf)
    }

    /// [`Self::read_all`] into `len` bytes at `buf`.
    ///
    /// # Safety
    ///
    /// `buf` is valid for writes of `len` bytes (which need not be
    /// initialised) for the call.
    unsafe fn read_raw(&mut self, addr: u64, buf: *mut u8, len: usize) -> Result {
        let addr = usize::try_from(addr).map_err(|_| EFAULT)?;
        let mut waited = 0u32;
        loop {
            // SAFETY: `mm` is a live address space (the reader's borrow);
            // `buf` is writable for `len` bytes (the caller's promise); the
            // helper takes the `mmap_lock` itself, never waits for I/O and
            // writes only within `len` bytes.
            let ret = unsafe {
                ffi::sframe_read_user_nowait(self.mm.as_raw().cast(), addr, buf.cast(), len)
            };
            if usize::try_from(ret).is_ok_and(|n| n == len) {
                return Ok(());
            }
            let pending = ret == -(bindings::EAGAIN as isize);
            if !pending {
                return Err(EFAULT);
            }
            if waited >= NOWAIT_DEADLINE_MS || ABANDON.load(Ordering::Acquire) {
                return Err(EAGAIN);
            }
            msleep(NOWAIT_POLL_MS);
            waited += NOWAIT_POLL_MS;
        }
    }
}

impl Memory for NowaitUserMemory<'_> {
    fn read_u64(&mut self, addr: u64) -> Option<u64> {
        let mut word = [0u8; 8];
        self.read(addr, &mut word).then(|| u64::from_le_bytes(word))
    }

    fn read(&mut self, addr: u64, buf: &mut [u8]) -> bool {
        self.read_all(addr, buf).is_ok()
    }
}
