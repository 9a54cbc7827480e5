// SPDX-License-Identifier: GPL-2.0

//! `sframectl daemon`: registers every executable object of every process,
//! system-wide, so that `perf record -a -g` needs no wrapper.
//!
//! At start it registers what every process already maps (as `register
//! --pid` does, one process at a time), then it follows new executable
//! mappings through perf's own side-band records ([`mmap_events`]) and
//! registers each mapped object for its process.  Objects without `.sframe`
//! get a generated section, generated once per object and held in memory
//! ([`section_lru`]), bounded by `--cache-mb`.
//!
//! Each process is opened through `/proc/PID/mem`, whose open is where the
//! kernel checks that we may ptrace it, and which names the process to the
//! module: a process we may not act on is counted and left alone.
//! Processes that exit or exec while we look at them are normal.  Unmapping
//! and exit need nothing from us: the module drops those registrations.
//!
//! When a ring buffer overflowed (`PERF_RECORD_LOST`), some mappings went
//! unseen: every process is scanned again, at most once per
//! `RESCAN_INTERVAL`, so an exec storm costs bounded work.
//!
//! [`mmap_events`]: crate::mmap_events
//! [`section_lru`]: crate::section_lru
//!
//! The parts: [`intake`] (the descriptors the loop waits on: signals, the
//! ring buffers, the generator's wake-up), [`registrar`] (each process's
//! objects registered, the per-process bookkeeping), [`generation`] (the
//! mappings waiting for a generated section), [`overload`] (what a lost
//! record costs: a bounded rescan) and [`stats`] (the counters and the
//! state file).

/// `eprintln!` with one `write(2)`: standard error is not buffered, and
/// `eprintln!` writes each piece of its format apart (15 system calls for
/// the line of each object registered under `-v`), each a trip through
/// the kernel that the main loop waits for.
macro_rules! log {
    ($($arg:tt)*) => {
        $crate::daemon::log_line(format_args!($($arg)*))
    };
}

mod generation;
mod intake;
mod overload;
mod registrar;
mod stats;

use crate::generator_thread::GeneratorThread;
use crate::kernel;
use crate::mmap_events::MmapEvents;
use crate::register::DiskSections;
use crate::register::Fallback;
use crate::run_dir;
use crate::section_lru::SectionLru;
use anyhow::anyhow;
use anyhow::Context;
use anyhow::Result;
use intake::Epoll;
use intake::Signals;
use intake::GENERATED_TOKEN;
use intake::SIGNAL_TOKEN;
use overload::Rescan;
use sframe_audit::device::Device;
use stats::Counters;
use stats::Latency;
use std::collections::HashMap;
use std::collections::HashSet;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::time::Duration;
use std::time::Instant;

/// Writes `args` and a newline to standard error at once.
fn log_line(args: std::fmt::Arguments<'_>) {
    let mut line = args.to_string();
    line.push('\n');
    // Nowhere to say that standard error failed.
    let _ = std::io::stderr().write_all(line.as_bytes());
}

/// How often the state file is refreshed, at most, when the loop has
/// nothing else to do.  Writing it (a new file, then a rename) and
/// reading our own memory use for it take the loop away from the
/// registrations: in the arm64 guest, a third of the main thread's time
/// while a new program waited for its section.
const PUBLISH_INTERVAL: Duration = Duration::from_secs(1);
/// How stale the state file may get while records keep the loop busy.
const PUBLISH_STALE: Duration = Duration::from_secs(5);

/// `sframectl daemon`'s options.
pub(crate) struct Options {
    /// Cap on the generated sections held in memory, in MiB.
    pub(crate) cache_mb: u64,
    /// Pages of ring buffer per CPU (a power of two).
    pub(crate) ring_pages: usize,
    /// Where the lock and the state file live.
    pub(crate) run_dir: PathBuf,
    /// Generate sections for objects without `.sframe`.
    pub(crate) synth: bool,
    /// Log every object registered.
    pub(crate) verbose: bool,
}

struct Daemon {
    dev: Device,
    sections: SectionLru,
    counters: Counters,
    latency: Latency,
    verbose: bool,
    /// Our own process, which we leave alone.
    own_pid: i32,
    /// Processes whose vDSO is registered (it has no mmap record).
    vdso_done: HashSet<i32>,
    /// The mmap times of processes waiting for a generated section, for
    /// the delay once it is registered.
    deferred: HashMap<i32, Vec<u64>>,
    /// Whether a scan of every process is owed after losses.
    rescan: Rescan,
    last_publish: Instant,
    started: Instant,
}

pub(crate) fn run(opts: Options) -> Result<()> {
    if !opts.ring_pages.is_power_of_two() {
        return Err(anyhow!("--ring-pages must be a power of two"));
    }
    let dev = kernel::open()?;
    dev.check_version()
        .map_err(|err| kernel::explain(err, "version", None))?;
    let lock = run_dir::Lock::acquire(&opts.run_dir)?;
    let signals = Signals::open(&[libc::SIGTERM, libc::SIGINT, libc::SIGUSR1])
        .context("cannot set up signal handling")?;
    // Before the scan, so that nothing mapped meanwhile is missed.
    let events = MmapEvents::open(opts.ring_pages).map_err(|err| match err.raw_os_error() {
        Some(libc::EACCES | libc::EPERM) => anyhow!(
            "perf_event_open: {err}: following every process needs CAP_PERFMON \
             (or CAP_SYS_ADMIN, or kernel.perf_event_paranoid <= -1)"
        ),
        _ => anyhow::Error::new(err).context("perf_event_open"),
    })?;
    let epoll = Epoll::new()?;
    epoll.add(signals.fd.as_raw_fd(), SIGNAL_TOKEN)?;
    for (i, fd) in events.fds().enumerate() {
        epoll.add(fd, i as u64)?;
    }
    let fallback = Fallback {
        synth: opts.synth,
        cache: true,
    };
    let cap = opts.cache_mb.saturating_mul(1 << 20);
    // After the signals are blocked: the thread inherits the mask.
    let generator = if opts.synth {
        let thread = GeneratorThread::spawn(DiskSections::new(fallback))
            .context("cannot start the generator thread")?;
        epoll.add(thread.wake_fd(), GENERATED_TOKEN)?;
        Some(thread)
    } else {
        None
    };
    let now = Instant::now();
    let mut d = Daemon {
        dev,
        sections: SectionLru::new(cap, generator),
        counters: Counters::default(),
        latency: Latency::default(),
        verbose: opts.verbose,
        own_pid: std::process::id() as i32,
        vdso_done: HashSet::new(),
        deferred: HashMap::new(),
        rescan: Rescan::new(now),
        last_publish: now,
        started: now,
    };
    log!(
        "sframectl daemon: pid {}, following {} CPUs; registering existing processes",
        std::process::id(),
        events.cpus()
    );
    d.scan_all();
    log!(
        "sframectl daemon: {} processes scanned: {} objects registered, {} already, {} without .sframe, {} waiting for generation; following new mappings",
        d.counters.processes_scanned,
        d.counters.objects_registered,
        d.counters.objects_already,
        d.counters.objects_without,
        d.counters.objects_deferred
    );
    let publish = |d: &Daemon| {
        if let Err(err) = lock.publish(&d.render()) {
            log!("sframectl daemon: cannot write the state file: {err}");
        }
    };
    publish(&d);
    let mut ready = Vec::new();
    let mut records = Vec::new();
    let mut dirty = false;
    loop {
        // Wake for a due rescan, or to publish what changed.
        let timeout = if let Some(t) = d.rescan.timeout() {
            Some(t)
        } else if dirty {
            Some(PUBLISH_INTERVAL.saturating_sub(d.last_publish.elapsed()))
        } else {
            None
        };
        epoll.wait(timeout, &mut ready).context("epoll_wait")?;
        if ready.contains(&SIGNAL_TOKEN) {
            while let Some(signo) = signals.next() {
                if signo == libc::SIGUSR1 {
                    eprint!("{}", d.render());
                    publish(&d);
                    continue;
                }
                log!("sframectl daemon: signal {signo}: exiting");
                eprint!("{}", d.render());
                publish(&d);
                return Ok(());
            }
        }
        if ready.contains(&GENERATED_TOKEN) {
            d.generated();
            dirty = true;
        }
        records.clear();
        events.drain(&mut records);
        if !records.is_empty() {
            d.handle(&records);
            dirty = true;
        }
        if d.rescan.due() {
            log!(
                "sframectl daemon: {} records lost so far: scanning every process again",
                d.counters.lost_records
            );
            d.scan_all();
        }
        let idle = ready.is_empty() && records.is_empty();
        let age = d.last_publish.elapsed();
        if dirty && (idle && age >= PUBLISH_INTERVAL || age >= PUBLISH_STALE) {
            publish(&d);
            d.last_publish = Instant::now();
            dirty = false;
        }
    }
}
