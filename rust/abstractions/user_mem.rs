// SPDX-License-Identifier: GPL-2.0

//! Reading the current task's user stack for the unwinder, in the two
//! contexts it runs in.
//!
//! C header: [`include/linux/uaccess.h`](srctree/include/linux/uaccess.h).
//!
//! - [`UserWindow`] and its [`NmiUserMemory`] readers: perf's sampling
//!   path (NMI or IRQ). Page faults disabled for the whole walk, words read
//!   one by one (`get_user()`, `unsafe_get_user()`), as perf's own
//!   frame-pointer walk reads them (and
//!   the few bytes of an instruction the walk checks, from one or two
//!   words); a page that is not resident reads as a fault.
//! - [`FaultingUserMemory`]: the deferred path (task context on the way back
//!   to user space). `copy_from_user()`, which may sleep to fault a page in.
//!
//! And the bound of every user address, which depends on the machine.

use crate::{
    abstractions::ffi,
    sframe::unwind::Memory, //
};
use core::{
    marker::PhantomData,
    mem::MaybeUninit, //
};
use kernel::{
    types::NotThreadSafe,
    uaccess::{
        UserPtr,
        UserSlice, //
    },
};

/// The sample path's access to the current task's user memory (any
/// context, NMI included): page faults stay disabled from
/// [`UserWindow::open`] to the drop, as around perf's own frame-pointer
/// walk, and its readers ([`UserWindow::reader`]) read without faulting
/// (a page that is not resident reads as a fault).
///
/// Opening checks once whether user memory may be read with plain reads:
/// on x86-64 an NMI may land while the CPU switches `mm`
/// (`nmi_uaccess_okay()`, which a module can ask only through
/// `copy_from_user_nmi()`: a one-byte read at the sample's user SP).  The
/// state it checks cannot change before the window closes (the walk runs
/// with interrupts or preemption off); where the check fails, every read
/// goes through `copy_from_user_nmi()`, which checks it again.
///
/// Not `Send`: it reads the memory of the task it was opened on, and page
/// faults are disabled for that CPU's current task.
pub(crate) struct UserWindow {
    okay: bool,
    _not_send: NotThreadSafe,
}

impl UserWindow {
    /// Disables page faults until the window is dropped; `probe` is a
    /// user address the task has just used (its SP).
    pub(crate) fn open(probe: u64) -> Self {
        // SAFETY: The probe read checks its address (`access_ok()`) and
        // does not fault; the drop below re-enables page faults.
        let okay = unsafe { ffi::sframe_user_window_open(probe as usize) };
        Self {
            okay,
            _not_send: NotThreadSafe,
        }
    }

    /// A reader of the current task's user memory, valid while the window
    /// is open.
    pub(crate) fn reader(&self) -> NmiUserMemory<'_> {
        NmiUserMemory { window: self }
    }
}

impl Drop for UserWindow {
    fn drop(&mut self) {
        // SAFETY: Pairs with the `pagefault_disable()` of `open`.
        unsafe { ffi::sframe_user_window_close() }
    }
}

/// Reads the current task's user memory inside a [`UserWindow`].
pub(crate) struct NmiUserMemory<'w> {
    window: &'w UserWindow,
}

impl NmiUserMemory<'_> {
    /// The word at `addr` through [`Memory::read`], which checks the
    /// window again for every read.
    #[cold]
    fn checked_word(&mut self, addr: u64) -> Option<u64> {
        let mut word = [0u8; 8];
        self.read(addr, &mut word).then(|| u64::from_le_bytes(word))
    }
}

impl NmiUserMemory<'_> {
    /// Fills `buf`, at most [`WORDS_READ`] bytes, from the word at `addr`
    /// and, past one word, the word that ends where `buf` does: read as a
    /// frame's words are, one by one, at about a tenth of what a
    /// copy costs here (the copy routine, and the hardened usercopy checks
    /// of its destination).  `false` for a longer `buf`, or where a word
    /// cannot be read: it may reach past `buf`'s bytes, to a page that is
    /// not mapped or not resident, so the caller then copies the bytes
    /// themselves.  Only inside a window that said plain reads may go
    /// ahead.
    #[inline(always)]
    fn read_by_words(&mut self, addr: u64, buf: &mut [u8]) -> bool {
        let words = match buf.len() {
            1..=8 => self.read_u64(addr).map(|w| (w, w)),
            9..=WORDS_READ => addr
                .checked_add(buf.len() as u64 - 8)
                .and_then(|last| self.read_pair(addr, last)),
            _ => None,
        };
        words.is_some_and(|(first, last)| fill_from_words(buf, first, last))
    }

    /// [`Memory::read`] by a copy of the bytes.
    #[inline(never)]
    fn copy(&mut self, addr: u64, buf: &mut [u8]) -> bool {
        let Ok(addr) = usize::try_from(addr) else {
            return false;
        };
        let (dst, len) = (buf.as_mut_ptr().cast(), buf.len());
        // SAFETY: `buf` is writable for `len` bytes. Both helpers read only
        // a user range (`access_ok()`) and never sleep: page faults are
        // disabled for as long as `self.window` is open. The plain read
        // only where the window said user memory may be read. They return
        // the bytes not read.
        let left = unsafe {
            if self.window.okay {
                ffi::sframe_read_user_inatomic(dst, addr, len)
            } else {
                ffi::sframe_read_user_checked(dst, addr, len)
            }
        };
        left == 0
    }
}

/// The most bytes [`NmiUserMemory::read`] takes from words: two.
const WORDS_READ: usize = 16;

/// Fills `buf` (at most [`WORDS_READ`] bytes) from `first`, the
/// little-endian word at its start, and past 8 bytes from `last`, the
/// word that ends where `buf` ends; `false` for a longer `buf`.
#[inline(always)]
pub(crate) fn fill_from_words(buf: &mut [u8], first: u64, last: u64) -> bool {
    let n = buf.len();
    if n > WORDS_READ {
        return false;
    }
    let (first, last) = (first.to_le_bytes(), last.to_le_bytes());
    for (i, b) in buf.iter_mut().enumerate() {
        // Byte `i` is `last`'s byte `i + 8 - n` from the ninth on.
        let byte = if i < 8 {
            first.get(i)
        } else {
            (i + 8).checked_sub(n).and_then(|j| last.get(j))
        };
        let Some(&byte) = byte else {
            return false;
        };
        *b = byte;
    }
    true
}

impl Memory for NmiUserMemory<'_> {
    #[inline(always)]
    fn read_u64(&mut self, addr: u64) -> Option<u64> {
        if !self.window.okay {
            return self.checked_word(addr);
        }
        let addr = usize::try_from(addr).ok()?;
        let mut word = 0u64;
        // SAFETY: `word` is writable. The helper reads only a user address
        // (`get_user()`'s check) and does not sleep: page faults are disabled
        // while `self.window` is open, and it said plain reads may go
        // ahead.
        let err = unsafe { ffi::sframe_read_user_word(addr, &mut word) };
        (err == 0).then_some(word)
    }

    /// The two words with `__get_user()`, as perf's own walk reads a frame
    /// record: cheaper than a copy of the bytes between them.
    #[inline(always)]
    fn read_pair(&mut self, a: u64, b: u64) -> Option<(u64, u64)> {
        if !self.window.okay {
            return Some((self.checked_word(a)?, self.checked_word(b)?));
        }
        let (a, b) = (usize::try_from(a).ok()?, usize::try_from(b).ok()?);
        // SAFETY: As for `read_u64`.
        unsafe { read_user_words(a, b) }
    }

    /// Up to two words' bytes (the walk's checks of instructions: the
    /// call before a return address, the signal trampoline, a frame's
    /// set-up) through [`NmiUserMemory::read_by_words`] first.  In line:
    /// each caller's length is a constant, and the bytes fold into the
    /// words' registers.
    #[inline(always)]
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> bool {
        if self.window.okay && self.read_by_words(addr, buf) {
            return true;
        }
        self.copy(addr, buf)
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
    /// The word with `get_user()`'s one load, not a copy: a fault pages
    /// it in.
    fn read_u64(&mut self, addr: u64) -> Option<u64> {
        might_fault();
        let addr = usize::try_from(addr).ok()?;
        let mut word = 0u64;
        // SAFETY: `word` is writable. The helper reads only a user address
        // (`get_user()`'s check); a fault sleeps to page it in, which this
        // reader's callers allow (task context, no lock a fault takes, see
        // the type).
        let err = unsafe { ffi::sframe_read_user_word(addr, &mut word) };
        (err == 0).then_some(word)
    }

    /// The two words with one load each, as [`Self::read_u64`] reads one.
    fn read_pair(&mut self, a: u64, b: u64) -> Option<(u64, u64)> {
        might_fault();
        let (a, b) = (usize::try_from(a).ok()?, usize::try_from(b).ok()?);
        // SAFETY: As for `read_u64`.
        unsafe { read_user_words(a, b) }
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

/// The words at user addresses `a` and `b`, read in one user access
/// section: `None` if either is not readable.  Not zeroed first: the
/// helper writes both when it returns 0, and nothing is read otherwise.
///
/// # Safety
///
/// The caller may read user memory with `__get_user()` here: inside an
/// open [`UserWindow`] that said plain reads may go ahead (page faults
/// disabled), or where a page fault may sleep.
#[inline(always)]
unsafe fn read_user_words(a: usize, b: usize) -> Option<(u64, u64)> {
    let mut words = MaybeUninit::<[u64; 2]>::uninit();
    // SAFETY: `words` is writable for two words. The helper reads only
    // user addresses (`access_ok()`), in a context the caller vouches
    // for.
    let err = unsafe { ffi::sframe_read_user_words(a, b, words.as_mut_ptr().cast()) };
    if err != 0 {
        return None;
    }
    // SAFETY: The helper returned 0: it wrote both words.
    let [first, second] = unsafe { words.assume_init() };
    Some((first, second))
}

/// Says that the caller may take a page fault: with
/// `CONFIG_DEBUG_ATOMIC_SLEEP` or lockdep, warns when it runs in atomic
/// context or holds `mmap_lock`.
///
/// Without either, the kernel's `might_fault()` is empty: the helper is
/// not called at all then (on Debian's kernels, a call per user read of
/// the deferred walk for nothing).
#[inline(always)]
fn might_fault() {
    #[cfg(any(CONFIG_PROVE_LOCKING, CONFIG_DEBUG_ATOMIC_SLEEP))]
    // SAFETY: `might_fault()` has no preconditions; it only checks.
    unsafe {
        ffi::sframe_might_fault()
    }
}

/// One past the highest user address on this machine (`TASK_SIZE_MAX`):
/// 2^47 or 2^56 less a guard page, by whether the kernel runs with 5-level
/// paging, which is decided at boot.
pub(crate) fn user_addr_end() -> u64 {
    // SAFETY: `TASK_SIZE_MAX` reads a CPU feature bit; no preconditions.
    unsafe { ffi::sframe_task_size_max() as u64 }
}
