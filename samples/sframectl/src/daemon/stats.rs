// SPDX-License-Identifier: GPL-2.0

//! What the daemon has done: counters, registration delays, its own CPU
//! time and memory, rendered as `name: value` lines (SIGUSR1, exit, and the
//! state file `sframectl status` reads).

use super::Daemon;
use std::collections::VecDeque;
use std::fmt::Write as _;

/// Registration delays kept for the median and p99 (the most recent).
const LATENCIES: usize = 8192;

/// What the daemon has done, printed on SIGUSR1, at exit, and in the
/// state file.
#[derive(Debug, Default)]
pub(super) struct Counters {
    pub(super) scans: u64,
    pub(super) processes_scanned: u64,
    pub(super) mmap_records: u64,
    pub(super) exec_records: u64,
    pub(super) exit_records: u64,
    pub(super) lost_records: u64,
    pub(super) lost_events: u64,
    pub(super) objects_registered: u64,
    pub(super) objects_already: u64,
    pub(super) objects_without: u64,
    pub(super) objects_deferred: u64,
    pub(super) sections_registered: u64,
    pub(super) sections_refused: u64,
    pub(super) sections_unmapped: u64,
    pub(super) processes_gone: u64,
    pub(super) processes_denied: u64,
    pub(super) errors: u64,
}

/// Delays from `mmap()` to registration, in ns.
#[derive(Debug, Default)]
pub(super) struct Latency {
    pub(super) recent: VecDeque<u64>,
    pub(super) count: u64,
    pub(super) max: u64,
}

impl Latency {
    pub(super) fn add(&mut self, ns: u64) {
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

pub(super) fn monotonic_ns() -> u64 {
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

impl Daemon {
    /// The counters, `name: value` lines.
    pub(super) fn render(&self) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

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
