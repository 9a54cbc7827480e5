// SPDX-License-Identifier: GPL-2.0

//! Registering a process's objects, and what the daemon keeps per process:
//! whose vDSO is registered (it has no mmap record), and which processes
//! it could not act on, counted by why.

use super::stats::monotonic_ns;
use super::Daemon;
use crate::maps::Mapping;
use crate::mmap_events::Record;
use crate::register::Process;
use crate::register::Report;
use std::collections::BTreeMap;
use std::collections::HashSet;
use std::io;
use std::ops::Range;

/// Messages about refused sections logged before they are only counted.
const MAX_REFUSED_LOGGED: u64 = 20;

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

/// Why a process was not registered, for the counters.
pub(super) enum Miss {
    Gone,
    Denied,
    Error(io::Error),
}

pub(super) fn classify(err: io::Error) -> Miss {
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
    pub(super) fn register(&mut self, pid: i32, starts: Option<&[u64]>) -> Result<u64, Miss> {
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
                    log!(
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
                    log!(
                        "sframectl daemon: process {pid}: {name}: the module refused its section: {err}"
                    );
                }
            }
            Report::Generated(name, gen) if verbose => {
                log!("sframectl daemon: {name}: no .sframe: {gen}");
            }
            Report::NotGenerated(name, err) if verbose => {
                log!("sframectl daemon: {name}: no .sframe, none generated: {err}");
            }
            Report::Skipped(name, why) if verbose => {
                log!("sframectl daemon: process {pid}: {name}: skipped: {why}");
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

    pub(super) fn count_miss(&mut self, pid: i32, miss: Miss) {
        match miss {
            Miss::Gone => self.counters.processes_gone += 1,
            Miss::Denied => self.counters.processes_denied += 1,
            Miss::Error(err) => {
                self.counters.errors += 1;
                log!("sframectl daemon: process {pid}: {err}");
            }
        }
    }

    /// Registers every object of every process.
    pub(super) fn scan_all(&mut self) {
        let pids = match crate::list::all_pids() {
            Ok(pids) => pids,
            Err(err) => {
                self.counters.errors += 1;
                log!("sframectl daemon: {err:#}");
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
        self.rescan.scanned();
    }

    /// Acts on one batch of records.
    pub(super) fn handle(&mut self, records: &[Record]) {
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
                    self.rescan.lost();
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
}
