// SPDX-License-Identifier: GPL-2.0

//! What the daemon's loop waits on: signals (as a descriptor), the perf
//! ring buffers of [`crate::mmap_events`], and the generator thread's
//! wake-up, in one epoll instance, each descriptor with its token.

use std::io;
use std::os::fd::AsRawFd;
use std::os::fd::FromRawFd;
use std::os::fd::OwnedFd;
use std::os::fd::RawFd;
use std::time::Duration;

/// The token of the signal descriptor.
pub(super) const SIGNAL_TOKEN: u64 = u64::MAX;
/// The token of the generator thread's wake-up descriptor.
pub(super) const GENERATED_TOKEN: u64 = u64::MAX - 1;

/// SIGTERM, SIGINT and SIGUSR1 as a descriptor to wait on.
pub(super) struct Signals {
    pub(super) fd: OwnedFd,
}

impl Signals {
    pub(super) fn open(signals: &[i32]) -> io::Result<Self> {
        // SAFETY: an all-zero sigset_t is valid storage for sigemptyset().
        let mut set: libc::sigset_t = unsafe { core::mem::zeroed() };
        // SAFETY: `set` is a valid sigset_t; the signal numbers are valid.
        unsafe {
            libc::sigemptyset(&mut set);
            for &s in signals {
                libc::sigaddset(&mut set, s);
            }
        }
        // Blocked, so they queue for the descriptor instead of killing us.
        // SAFETY: `set` is initialised; the old mask is not wanted.
        if unsafe { libc::sigprocmask(libc::SIG_BLOCK, &set, core::ptr::null_mut()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `set` is initialised; -1 asks for a new descriptor.
        let fd = unsafe { libc::signalfd(-1, &set, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: signalfd() returned a new descriptor we own.
        Ok(Self {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    /// The next pending signal, if any.
    pub(super) fn next(&self) -> Option<i32> {
        // SAFETY: an all-zero signalfd_siginfo is valid storage.
        let mut info: libc::signalfd_siginfo = unsafe { core::mem::zeroed() };
        let len = core::mem::size_of::<libc::signalfd_siginfo>();
        // SAFETY: `info` is writable for `len` bytes.
        let n = unsafe {
            libc::read(
                self.fd.as_raw_fd(),
                core::ptr::from_mut(&mut info).cast(),
                len,
            )
        };
        (usize::try_from(n).ok() == Some(len)).then_some(info.ssi_signo as i32)
    }
}

/// An epoll instance; each descriptor is added with its own token.
pub(super) struct Epoll {
    fd: OwnedFd,
}

impl Epoll {
    pub(super) fn new() -> io::Result<Self> {
        // SAFETY: epoll_create1() has no memory arguments.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a new descriptor we own.
        Ok(Self {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    pub(super) fn add(&self, fd: RawFd, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: token,
        };
        // SAFETY: `ev` is a valid epoll_event, read by the kernel.
        if unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Waits up to `timeout` (forever if `None`); the tokens ready.
    pub(super) fn wait(&self, timeout: Option<Duration>, ready: &mut Vec<u64>) -> io::Result<()> {
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; 64];
        let ms = timeout.map_or(-1, |t| i32::try_from(t.as_millis()).unwrap_or(i32::MAX));
        // SAFETY: `events` is writable for the count given.
        let n = unsafe {
            libc::epoll_wait(
                self.fd.as_raw_fd(),
                events.as_mut_ptr(),
                events.len() as i32,
                ms,
            )
        };
        ready.clear();
        if n < 0 {
            let err = io::Error::last_os_error();
            return if err.kind() == io::ErrorKind::Interrupted {
                Ok(())
            } else {
                Err(err)
            };
        }
        ready.extend(events.iter().take(n as usize).map(|e| e.u64));
        Ok(())
    }
}
