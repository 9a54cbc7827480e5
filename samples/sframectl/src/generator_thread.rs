// SPDX-License-Identifier: GPL-2.0

//! The daemon's sections generated beside its main loop: converting a
//! large library's `.eh_frame` takes long (perf's libraries, tens of
//! seconds under emulation), and meanwhile the main loop must go on
//! registering every other mapping within milliseconds.
//!
//! One thread takes jobs (an object to generate for, with its own
//! descriptor of the process's memory), goes through the on-disk cache,
//! and hands each result back, waking the main loop's `epoll` through an
//! `eventfd`.

use crate::register::DiskSections;
use sframe_audit::generated::GenerateError;
use sframe_audit::generated::Generated;
use sframe_audit::image::Layout;
use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::fd::FromRawFd;
use std::os::fd::OwnedFd;
use std::os::fd::RawFd;
use std::path::Path;
use std::sync::mpsc;
use std::sync::Arc;

/// An object to generate a section for.
pub(crate) struct Job {
    /// Its name in the in-memory cache.
    pub(crate) key: String,
    /// The process whose memory `mem` is.
    pub(crate) pid: i32,
    /// The memory of a process that maps it.
    pub(crate) mem: File,
    pub(crate) layout: Layout,
    pub(crate) link: Option<CString>,
}

/// What became of a job: the section, or why there is none (and whether
/// the process went away meanwhile, which says nothing about the object).
pub(crate) struct Done {
    pub(crate) key: String,
    pub(crate) result: Result<Generated, (String, bool)>,
}

/// The generator thread, seen from the main loop.
pub(crate) struct GeneratorThread {
    jobs: mpsc::Sender<Job>,
    done: mpsc::Receiver<Done>,
    wake: Arc<OwnedFd>,
}

fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: eventfd() has no memory arguments.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

impl GeneratorThread {
    /// Starts the thread, which generates through `disk`.
    pub(crate) fn spawn(disk: DiskSections) -> io::Result<Self> {
        let (jobs, job_rx) = mpsc::channel::<Job>();
        let (done_tx, done) = mpsc::channel();
        let wake = Arc::new(eventfd()?);
        let thread_wake = Arc::clone(&wake);
        std::thread::Builder::new()
            .name("sframe-generate".into())
            .spawn(move || {
                for job in job_rx {
                    let result = match disk.generate(&job.mem, &job.layout, job.link.as_deref()) {
                        Some(Ok(gen)) => Ok(gen),
                        // A read error says nothing about the object when
                        // the process has gone; while it lives, it does.
                        Some(Err(err)) => {
                            let read = matches!(&err, GenerateError::Read(_));
                            let gone = read && !Path::new(&format!("/proc/{}", job.pid)).exists();
                            Err((err.to_string(), gone))
                        }
                        None => Err(("generation is off".into(), false)),
                    };
                    if done_tx
                        .send(Done {
                            key: job.key,
                            result,
                        })
                        .is_err()
                    {
                        break;
                    }
                    let one = 1u64.to_ne_bytes();
                    // SAFETY: writes 8 bytes from `one` to our eventfd.
                    unsafe { libc::write(thread_wake.as_raw_fd(), one.as_ptr().cast(), 8) };
                }
            })?;
        Ok(Self { jobs, done, wake })
    }

    /// Queues a job; false if the thread is gone.
    pub(crate) fn submit(&self, job: Job) -> bool {
        self.jobs.send(job).is_ok()
    }

    /// The descriptor that is readable when jobs are done.
    pub(crate) fn wake_fd(&self) -> RawFd {
        self.wake.as_raw_fd()
    }

    /// The jobs done since the last call.
    pub(crate) fn finished(&self) -> Vec<Done> {
        let mut count = [0u8; 8];
        // SAFETY: reads at most 8 bytes into `count`; the eventfd is
        // non-blocking, so nothing to read is EAGAIN, not a wait.
        unsafe { libc::read(self.wake.as_raw_fd(), count.as_mut_ptr().cast(), 8) };
        self.done.try_iter().collect()
    }
}
