// SPDX-License-Identifier: GPL-2.0

//! Mappings waiting for a generated section: the generator thread works
//! through a queue ([`crate::section_lru`]); when it wakes the loop, the
//! objects whose sections are ready are registered for the processes that
//! wait for them, and the delay since their `mmap()` is counted then.

use super::stats::monotonic_ns;
use super::Daemon;
use std::collections::BTreeMap;

impl Daemon {
    /// Registers the objects whose generated sections are now ready.
    pub(super) fn generated(&mut self) {
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
}
