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
use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::fd::FromRawFd;
use std::os::fd::OwnedFd;
use std::os::fd::RawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
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
/// the process stopped mapping the object meanwhile, which makes a read
/// error say nothing about the object).
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

/// Whether the job's process still maps its object: its link in
/// `/proc/PID/map_files` (gone with the mapping, and empty for a process
/// that has exited but is not yet reaped), else the process itself.
fn still_mapped(job: &Job) -> bool {
    match &job.link {
        Some(link) => Path::new(OsStr::from_bytes(link.as_bytes())).exists(),
        None => Path::new(&format!("/proc/{}", job.pid)).exists(),
    }
}

/// Whether the job's memory still reads the first byte of the object's
/// `.eh_frame_hdr`: not once the process has exited, or executed another
/// program (its descriptor then reads an address space that is gone).
fn still_readable(job: &Job) -> bool {
    let mut byte = [0u8; 1];
    job.layout
        .eh_frame_hdr
        .as_ref()
        .is_some_and(|hdr| matches!(job.mem.read_at(&mut byte, hdr.start), Ok(1)))
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
                        // A read error says nothing about the object once
                        // the process no longer maps it, or no longer has
                        // the address space the job reads; while it does,
                        // it does.
                        Some(Err(err)) => {
                            let read = matches!(&err, GenerateError::Read(_));
                            let gone = read && (!still_mapped(&job) || !still_readable(&job));
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

#[cfg(test)]
mod tests {
    use super::*;

    fn job(link: Option<String>) -> Job {
        let pid = std::process::id() as i32;
        let mem = File::open("/proc/self/mem").unwrap();
        let maps = crate::maps::read(pid).unwrap();
        let first = maps.iter().find(|m| m.maps_file_start()).unwrap();
        let layout = Layout::read_at_header(&mem, first.range.start).unwrap();
        Job {
            key: "test".into(),
            pid,
            mem,
            layout,
            link: link.map(|l| CString::new(l).unwrap()),
        }
    }

    #[test]
    fn a_mapping_is_still_mapped_until_it_is_gone() {
        let pid = std::process::id();
        let maps = crate::maps::read(pid as i32).unwrap();
        let m = maps.iter().find(|m| m.maps_file_start()).unwrap();
        let (start, end) = (m.range.start, m.range.end);
        let mapped = format!("/proc/{pid}/map_files/{start:x}-{end:x}");
        assert!(still_mapped(&job(Some(mapped))));
        // A range this process does not map, as after munmap() or exit.
        let unmapped = format!("/proc/{pid}/map_files/{:x}-{:x}", 0x1000, 0x2000);
        assert!(!still_mapped(&job(Some(unmapped))));
        // Without a link, the process itself.
        assert!(still_mapped(&job(None)));
    }

    /// A process that exited and is not reaped yet still has its /proc
    /// directory, but maps nothing: a read error then says nothing about
    /// the object (a short-lived `grep` must not spoil grep for good).
    #[test]
    fn an_exited_process_maps_nothing() {
        let mut child = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        let pid = child.id();
        let mut maps = Vec::new();
        for _ in 0..500 {
            maps = crate::maps::read(pid as i32).unwrap_or_default();
            if maps.iter().any(|m| m.path.ends_with("/sleep")) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let m = maps.iter().find(|m| m.maps_file_start()).unwrap();
        let link = format!(
            "/proc/{pid}/map_files/{:x}-{:x}",
            m.range.start, m.range.end
        );
        let mut job = job(Some(link));
        job.pid = pid as i32;
        assert!(still_mapped(&job));
        child.kill().unwrap();
        let zombie = || {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
                s.rsplit_once(')')
                    .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
            })
        };
        for _ in 0..500 {
            if zombie() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(zombie());
        assert!(Path::new(&format!("/proc/{pid}")).exists());
        assert!(!still_mapped(&job));
        child.wait().unwrap();
    }

    /// A process that executed another program still exists, and may map
    /// something at the same place, but the job's descriptor reads its old
    /// address space, which is gone: a read error then says nothing about
    /// the object either.
    #[test]
    fn a_process_that_executed_another_program_is_no_longer_readable() {
        use crate::test_process::{cue, exec_on_cue};
        let (mut child, pid, mem) = exec_on_cue();
        let maps = crate::maps::read(pid).unwrap();
        let m = maps
            .iter()
            .find(|m| m.maps_file_start() && m.path.ends_with("sh"))
            .unwrap();
        let layout = Layout::read_at_header(&mem, m.range.start).unwrap();
        assert!(layout.eh_frame_hdr.is_some());
        let job = Job {
            key: "test".into(),
            pid,
            mem,
            layout,
            link: None,
        };
        assert!(still_readable(&job));
        cue(&mut child);
        assert!(still_mapped(&job));
        assert!(!still_readable(&job));
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
