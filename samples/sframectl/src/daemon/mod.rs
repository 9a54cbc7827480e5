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

use crate::generator_thread::GeneratorThread;
use crate::kernel;
use crate::maps::Mapping;
use crate::mmap_events::MmapEvents;
use crate::mmap_events::Record;
use crate::register::DiskSections;
use crate::register::Fallback;
use crate::register::Process;
use crate::register::Report;
use crate::run_dir;
use crate::section_lru::SectionLru;
use anyhow::anyhow;
use anyhow::Context;
use anyhow::Result;
use sframe_audit::device::Device;
use std::collections::BTreeMap;
use std::collections::HashMap;
use std::collections::HashSet;
use std::collections::VecDeque;
use std::fmt::Write as _;
use std::io;
use std::ops::Range;
use std::os::fd::AsRawFd;
use std::os::fd::FromRawFd;
use std::os::fd::OwnedFd;
use std::os::fd::RawFd;
use std::path::PathBuf;
use std::time::Duration;
use std::time::Instant;

/// The shortest time between two scans of every process after losses.
const RESCAN_INTERVAL: Duration = Duration::from_secs(1);
/// How often the state file is refreshed while there is activity.
const PUBLISH_INTERVAL: Duration = Duration::from_secs(1);
/// Registration delays kept for the median and p99 (the most recent).
const LATENCIES: usize = 8192;
/// Messages about refused sections logged before they are only counted.
const MAX_REFUSED_LOGGED: u64 = 20;

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

/// What the daemon has done, printed on SIGUSR1, at exit, and in the
/// state file.
#[derive(Debug, Default)]
struct Counters {
    scans: u64,
    processes_scanned: u64,
    mmap_records: u64,
    exec_records: u64,
    exit_records: u64,
    lost_records: u64,
    lost_events: u64,
    objects_registered: u64,
    objects_already: u64,
    objects_without: u64,
    objects_deferred: u64,
    sections_registered: u64,
    sections_refused: u64,
    sections_unmapped: u64,
    processes_gone: u64,
    processes_denied: u64,
    errors: u64,
}

/// Delays from `mmap()` to registration, in ns.
#[derive(Debug, Default)]
struct Latency {
    recent: VecDeque<u64>,
    count: u64,
    max: u64,
}

impl Latency {
    fn add(&mut self, ns: u64) {
        if self.recent.len() == LATENCIES {
            self.recent.pop_front();
        }
        self.recent.push_back(ns);
        self.count += 1;
        self.max = self.max.max(ns);
    }

    /// The `q`-quantile (0..=1) of the recent delays, in µs.
    fn quantile_us(&self, q: f64) -> u64 {
        let mut v: Vec<u64> = self.recent.iter().copied().collect();
        if v.is_empty() {
            return 0;
        }
        v.sort_unstable();
        let i = ((v.len() - 1) as f64 * q).round() as usize;
        v.get(i).copied().unwrap_or(0) / 1000
    }
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

/// Peak and current resident memory of this process, in KiB.
fn memory_kib() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches(" kB").parse().ok())
            .unwrap_or(0)
    };
    (field("VmHWM:"), field("VmRSS:"))
}

/// CPU time this process has used, user and system, in ms.
fn cpu_ms() -> u64 {
    // SAFETY: an all-zero rusage is valid storage for getrusage().
    let mut ru: libc::rusage = unsafe { core::mem::zeroed() };
    // SAFETY: `ru` is a writable rusage.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let ms = |tv: libc::timeval| (tv.tv_sec as u64) * 1000 + (tv.tv_usec as u64) / 1000;
    ms(ru.ru_utime) + ms(ru.ru_stime)
}

/// Whether every byte of `text` is mapped executable in process `pid` now.
fn text_mapped(pid: i32, text: &Range<u64>) -> bool {
    let Ok(maps) = crate::maps::read(pid) else {
        return false;
    };
    let mut at = text.start;
    while at < text.end {
        match crate::maps::owner(&maps, at) {
            Some(m) if m.perms.contains('x') => at = m.range.end,
            _ => return false,
        }
    }
    true
}

/// The start of the object that maps `addr` in `maps`: its mapping of
/// file offset 0 (same file, the closest one below).
fn object_start(maps: &[Mapping], addr: u64) -> Option<u64> {
    let owner = crate::maps::owner(maps, addr)?;
    if owner.inode == 0 {
        return None;
    }
    maps.iter()
        .filter(|m| {
            m.maps_file_start()
                && m.inode == owner.inode
                && m.path == owner.path
                && m.range.start <= addr
        })
        .map(|m| m.range.start)
        .max()
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
    rescan_pending: bool,
    last_scan: Instant,
    last_publish: Instant,
    started: Instant,
}

/// Why a process was not registered, for the counters.
enum Miss {
    Gone,
    Denied,
    Error(io::Error),
}

fn classify(err: io::Error) -> Miss {
    match err.raw_os_error() {
        Some(libc::ENOENT | libc::ESRCH) => Miss::Gone,
        Some(libc::EACCES | libc::EPERM) => Miss::Denied,
        _ => Miss::Error(err),
    }
}

impl Daemon {
    /// Registers the objects of process `pid` that map `starts` (every
    /// object if `None`); the vDSO too the first time we see the process.
    /// Returns how many objects wait for a generated section.
    fn register(&mut self, pid: i32, starts: Option<&[u64]>) -> Result<u64, Miss> {
        if pid == self.own_pid {
            return Ok(0);
        }
        let process = Process::open(pid).map_err(classify)?;
        let vdso = !self.vdso_done.contains(&pid);
        let wanted: HashSet<u64> = match starts {
            Some(addrs) => addrs
                .iter()
                .filter_map(|&a| object_start(&process.maps, a))
                .collect(),
            None => HashSet::new(),
        };
        let all = starts.is_none();
        let Self {
            dev,
            sections,
            counters,
            verbose,
            ..
        } = self;
        let verbose = *verbose;
        let mut report = |r: Report<'_>| match r {
            Report::Registered(name, text, _) => {
                counters.sections_registered += 1;
                if verbose {
                    // The time is the one `perf record -k CLOCK_MONOTONIC`
                    // stamps samples with.
                    let now = monotonic_ns();
                    eprintln!(
                        "sframectl daemon: process {pid}: registered {name}: text {:#x}-{:#x} at {}.{:09}",
                        text.start,
                        text.end,
                        now / 1_000_000_000,
                        now % 1_000_000_000
                    );
                }
            }
            // The text is no longer mapped executable (dlclose(), exit):
            // the module said so, nothing went wrong.
            Report::Refused(_, text, _) if !text_mapped(pid, text) => {
                counters.sections_unmapped += 1;
            }
            Report::Refused(name, _, err) => {
                counters.sections_refused += 1;
                if counters.sections_refused <= MAX_REFUSED_LOGGED {
                    eprintln!(
                        "sframectl daemon: process {pid}: {name}: the module refused its section: {err}"
                    );
                }
            }
            Report::Generated(name, gen) if verbose => {
                eprintln!("sframectl daemon: {name}: no .sframe: {gen}");
            }
            Report::NotGenerated(name, err) if verbose => {
                eprintln!("sframectl daemon: {name}: no .sframe, none generated: {err}");
            }
            Report::Skipped(name, why) if verbose => {
                eprintln!("sframectl daemon: process {pid}: {name}: skipped: {why}");
            }
            _ => {}
        };
        let tally = process
            .register(
                dev,
                sections,
                &mut |m| all || wanted.contains(&m.range.start) || (vdso && m.path == "[vdso]"),
                &mut report,
            )
            .map_err(classify)?;
        self.vdso_done.insert(pid);
        self.counters.objects_registered += tally.registered;
        self.counters.objects_already += tally.already;
        self.counters.objects_without += tally.without.len() as u64;
        self.counters.objects_deferred += tally.later;
        Ok(tally.later)
    }

    fn count_miss(&mut self, pid: i32, miss: Miss) {
        match miss {
            Miss::Gone => self.counters.processes_gone += 1,
            Miss::Denied => self.counters.processes_denied += 1,
            Miss::Error(err) => {
                self.counters.errors += 1;
                eprintln!("sframectl daemon: process {pid}: {err}");
            }
        }
    }

    /// Registers every object of every process.
    fn scan_all(&mut self) {
        let pids = match crate::list::all_pids() {
            Ok(pids) => pids,
            Err(err) => {
                self.counters.errors += 1;
                eprintln!("sframectl daemon: {err:#}");
                return;
            }
        };
        // Start afresh: a process whose exit record was lost is gone here.
        self.vdso_done.clear();
        for pid in pids {
            self.counters.processes_scanned += 1;
            if let Err(miss) = self.register(pid, None) {
                self.count_miss(pid, miss);
            }
        }
        self.counters.scans += 1;
        self.rescan_pending = false;
        self.last_scan = Instant::now();
    }

    /// Acts on one batch of records.
    fn handle(&mut self, records: &[Record]) {
        let mut mapped: BTreeMap<i32, Vec<(u64, u64)>> = BTreeMap::new();
        for record in records {
            match *record {
                Record::Mmap {
                    pid, addr, time, ..
                } => {
                    self.counters.mmap_records += 1;
                    mapped.entry(pid).or_default().push((addr, time));
                }
                Record::Exec { pid } => {
                    self.counters.exec_records += 1;
                    self.vdso_done.remove(&pid);
                }
                Record::Exit { pid } => {
                    self.counters.exit_records += 1;
                    self.vdso_done.remove(&pid);
                    self.deferred.remove(&pid);
                }
                Record::Lost { count } => {
                    self.counters.lost_events += 1;
                    self.counters.lost_records += count;
                    self.rescan_pending = true;
                }
            }
        }
        for (pid, events) in mapped {
            if pid <= 0 {
                continue;
            }
            let addrs: Vec<u64> = events.iter().map(|&(a, _)| a).collect();
            let times = events.iter().map(|&(_, t)| t);
            match self.register(pid, Some(&addrs)) {
                Ok(0) => {
                    let now = monotonic_ns();
                    for time in times {
                        self.latency.add(now.saturating_sub(time));
                    }
                }
                Ok(_) => self.deferred.entry(pid).or_default().extend(times),
                Err(miss) => self.count_miss(pid, miss),
            }
        }
    }

    /// Registers the objects whose generated sections are now ready.
    fn generated(&mut self) {
        let mut waiting: BTreeMap<i32, Vec<u64>> = BTreeMap::new();
        for (pid, start) in self.sections.collect() {
            waiting.entry(pid).or_default().push(start);
        }
        for (pid, starts) in waiting {
            match self.register(pid, Some(&starts)) {
                Ok(0) => {
                    let now = monotonic_ns();
                    for time in self.deferred.remove(&pid).unwrap_or_default() {
                        self.latency.add(now.saturating_sub(time));
                    }
                }
                Ok(_) => {}
                Err(miss) => {
                    self.deferred.remove(&pid);
                    self.count_miss(pid, miss);
                }
            }
        }
    }

    /// The counters, `name: value` lines.
    fn render(&self) -> String {
        let c = &self.counters;
        let l = self.sections.stats();
        let (peak, rss) = memory_kib();
        let mut s = String::new();
        let mut line = |name: &str, value: u64| {
            let _ = writeln!(s, "{name}: {value}");
        };
        line("pid", u64::from(std::process::id()));
        line("uptime s", self.started.elapsed().as_secs());
        line("scans", c.scans);
        line("processes scanned", c.processes_scanned);
        line("mmap records", c.mmap_records);
        line("exec records", c.exec_records);
        line("exit records", c.exit_records);
        line("lost events", c.lost_events);
        line("lost records", c.lost_records);
        line("objects registered", c.objects_registered);
        line("objects already registered", c.objects_already);
        line("objects without sframe", c.objects_without);
        line("objects waiting for generation", c.objects_deferred);
        line("sections registered", c.sections_registered);
        line("sections refused", c.sections_refused);
        line("sections unmapped meanwhile", c.sections_unmapped);
        line("processes gone", c.processes_gone);
        line("processes denied", c.processes_denied);
        line("errors", c.errors);
        line("generated cache hits", l.hits);
        line("generated cache misses", l.misses);
        line("generated cache evictions", l.evictions);
        line("generated cache entries", l.entries);
        line("generated cache bytes", l.bytes);
        line("generation refused", l.failed);
        line("registration delays", self.latency.count);
        line(
            "registration delay median us",
            self.latency.quantile_us(0.5),
        );
        line("registration delay p99 us", self.latency.quantile_us(0.99));
        line("registration delay max us", self.latency.max / 1000);
        line("cpu ms", cpu_ms());
        line("rss kib", rss);
        line("peak rss kib", peak);
        s
    }
}

/// SIGTERM, SIGINT and SIGUSR1 as a descriptor to wait on.
struct Signals {
    fd: OwnedFd,
}

impl Signals {
    fn open(signals: &[i32]) -> io::Result<Self> {
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
    fn next(&self) -> Option<i32> {
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
struct Epoll {
    fd: OwnedFd,
}

impl Epoll {
    fn new() -> io::Result<Self> {
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

    fn add(&self, fd: RawFd, token: u64) -> io::Result<()> {
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
    fn wait(&self, timeout: Option<Duration>, ready: &mut Vec<u64>) -> io::Result<()> {
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

const SIGNAL_TOKEN: u64 = u64::MAX;
const GENERATED_TOKEN: u64 = u64::MAX - 1;

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
        rescan_pending: false,
        last_scan: now,
        last_publish: now,
        started: now,
    };
    eprintln!(
        "sframectl daemon: pid {}, following {} CPUs; registering existing processes",
        std::process::id(),
        events.cpus()
    );
    d.scan_all();
    eprintln!(
        "sframectl daemon: {} processes scanned: {} objects registered, {} already, {} without .sframe, {} waiting for generation; following new mappings",
        d.counters.processes_scanned,
        d.counters.objects_registered,
        d.counters.objects_already,
        d.counters.objects_without,
        d.counters.objects_deferred
    );
    let publish = |d: &Daemon| {
        if let Err(err) = lock.publish(&d.render()) {
            eprintln!("sframectl daemon: cannot write the state file: {err}");
        }
    };
    publish(&d);
    let mut ready = Vec::new();
    let mut records = Vec::new();
    let mut dirty = false;
    loop {
        // Wake for a due rescan, or to publish what changed.
        let timeout = if d.rescan_pending {
            Some(RESCAN_INTERVAL.saturating_sub(d.last_scan.elapsed()))
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
                eprintln!("sframectl daemon: signal {signo}: exiting");
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
        if d.rescan_pending && d.last_scan.elapsed() >= RESCAN_INTERVAL {
            eprintln!(
                "sframectl daemon: {} records lost so far: scanning every process again",
                d.counters.lost_records
            );
            d.scan_all();
        }
        if dirty && d.last_publish.elapsed() >= PUBLISH_INTERVAL {
            publish(&d);
            d.last_publish = Instant::now();
            dirty = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::maps;

    #[test]
    fn an_address_finds_its_object_start() {
        let m = maps::parse(
            "\
1000-2000 r--p 00000000 fe:01 7 /lib/a.so
2000-3000 r-xp 00001000 fe:01 7 /lib/a.so
3000-4000 r--p 00000000 fe:01 8 /lib/b.so
4000-5000 r-xp 00001000 fe:01 8 /lib/b.so
5000-6000 rwxp 00000000 00:00 0
",
        );
        assert_eq!(object_start(&m, 0x2800), Some(0x1000));
        assert_eq!(object_start(&m, 0x4000), Some(0x3000));
        assert_eq!(object_start(&m, 0x5800), None, "anonymous");
        assert_eq!(object_start(&m, 0x9000), None, "unmapped");
    }

    #[test]
    fn text_mapped_now() {
        let pid = std::process::id() as i32;
        let here = text_mapped_now as *const () as u64;
        assert!(text_mapped(pid, &(here..here + 16)));
        let data = &pid as *const i32 as u64;
        assert!(!text_mapped(pid, &(data..data + 4)), "the stack");
        assert!(!text_mapped(pid, &(0x1000..0x2000)), "unmapped");
    }

    #[test]
    fn latency_quantiles() {
        let mut l = Latency::default();
        for i in 1..=100 {
            l.add(i * 1000);
        }
        assert_eq!(l.quantile_us(0.5), 51);
        assert_eq!(l.quantile_us(0.99), 99);
        assert_eq!(l.max, 100_000);
        for _ in 0..LATENCIES {
            l.add(1);
        }
        assert_eq!(l.recent.len(), LATENCIES);
    }
}
