// SPDX-License-Identifier: GPL-2.0

//! Buffers of anonymous pages, mapped for one use and unmapped when
//! dropped.
//!
//! The audit library lives in every audited process.  Sections it reads
//! from the cache are hundreds of KiB, held only until the module has
//! copied them; allocated with `malloc` they would leave the process's
//! heap grown for good (freed chunks of an arena are rarely returned to
//! the system, and glibc raises its mmap threshold to the size of the
//! largest freed mapping, so the next ones come from the arena), and every
//! `fork()` would copy it.  A [`Pages`] buffer is returned to the system
//! as soon as it is dropped.

use core::ops::Deref;
use core::ops::DerefMut;
use core::ptr::NonNull;
use std::io;

/// `len` bytes of private anonymous memory, zero-filled when mapped.
///
/// # Invariants
///
/// `ptr` is the start of a mapping of `map_len` bytes (at least `len`, a
/// whole number of pages, never zero) that this value alone owns.
#[derive(Debug)]
pub struct Pages {
    ptr: NonNull<u8>,
    len: usize,
    map_len: usize,
}

impl Pages {
    /// Maps `len` bytes (at least one page), populated at once: the reads
    /// that fill them then take no page faults.
    pub fn new(len: usize) -> io::Result<Self> {
        // SAFETY: sysconf() has no preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
            .ok()
            .filter(|p| p.is_power_of_two())
            .unwrap_or(4096);
        let map_len = len
            .max(1)
            .checked_next_multiple_of(page)
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOMEM))?;
        // SAFETY: A new private anonymous mapping aliases nothing.
        let ptr = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = NonNull::new(ptr.cast::<u8>())
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOMEM))?;
        // INVARIANT: mmap() returned a new mapping of `map_len >= len` bytes.
        Ok(Self { ptr, len, map_len })
    }

    /// Shortens the buffer to its first `len` bytes (the mapping stays
    /// whole until dropped).
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }
}

impl Deref for Pages {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        // SAFETY: By the invariant the mapping holds `len` readable bytes,
        // owned by `self` and borrowed immutably here.
        unsafe { core::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl DerefMut for Pages {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: As for `deref`, borrowed mutably through `self`.
        unsafe { core::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for Pages {
    fn drop(&mut self) {
        // SAFETY: By the invariant the mapping is ours, and no borrow of it
        // outlives `self`.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.map_len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeroed_writable_and_truncated() {
        let mut pages = Pages::new(10_000).unwrap();
        assert_eq!(pages.len(), 10_000);
        assert!(pages.iter().all(|&b| b == 0));
        pages[9_999] = 7;
        pages.truncate(20_000);
        assert_eq!(pages.len(), 10_000);
        pages.truncate(100);
        assert_eq!(pages.len(), 100);
        assert_eq!(pages[99], 0);
        assert_eq!(Pages::new(0).unwrap().len(), 0);
    }
}
