// SPDX-License-Identifier: GPL-2.0

//! The daemon's generated sections, kept in memory by object identity
//! (build-id, else the mapped file's identity): libc is parsed and
//! converted once, then registered for every process that maps it.
//!
//! Bounded by bytes: when the sections held exceed the cap, the least
//! recently used go.  A miss falls back to the on-disk cache (shared with
//! `register --pid` and the audit library), then to generation.

use crate::register::DiskSections;
use crate::register::Sections;
use sframe_audit::generated::GenerateError;
use sframe_audit::generated::Generated;
use sframe_audit::generated::Source;
use sframe_audit::identity::Identity;
use sframe_audit::image::Layout;
use std::collections::BTreeMap;
use std::collections::HashMap;
use std::ffi::CStr;
use std::fs::File;

/// One section held: the bytes, their base, and when it was last used.
struct Held {
    section: Vec<u8>,
    base: u64,
    used: u64,
}

/// What the cache did, for the daemon's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct LruStats {
    pub(crate) hits: u64,
    pub(crate) misses: u64,
    pub(crate) evictions: u64,
    pub(crate) entries: u64,
    pub(crate) bytes: u64,
}

/// Generated sections by identity, at most `cap` bytes of them.
pub(crate) struct SectionLru {
    cap: u64,
    held: HashMap<String, Held>,
    /// Keys by last use, oldest first.
    order: BTreeMap<u64, String>,
    clock: u64,
    stats: LruStats,
    disk: DiskSections,
}

impl SectionLru {
    /// An empty cache of at most `cap` bytes, in front of `disk`.
    pub(crate) fn new(cap: u64, disk: DiskSections) -> Self {
        Self {
            cap,
            held: HashMap::new(),
            order: BTreeMap::new(),
            clock: 0,
            stats: LruStats::default(),
            disk,
        }
    }

    pub(crate) fn stats(&self) -> LruStats {
        LruStats {
            entries: self.held.len() as u64,
            ..self.stats
        }
    }

    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// The section held for `key`, now the most recently used.
    fn get(&mut self, key: &str) -> Option<(Vec<u8>, u64)> {
        let now = self.tick();
        let held = self.held.get_mut(key)?;
        self.order.remove(&held.used);
        held.used = now;
        self.order.insert(now, key.to_owned());
        Some((held.section.clone(), held.base))
    }

    /// Holds `section` for `key`, then drops the oldest until under the
    /// cap.  A section larger than the whole cap is not held.
    fn insert(&mut self, key: String, section: &[u8], base: u64) {
        let size = section.len() as u64;
        if size > self.cap {
            return;
        }
        let now = self.tick();
        if let Some(old) = self.held.insert(
            key.clone(),
            Held {
                section: section.to_vec(),
                base,
                used: now,
            },
        ) {
            self.order.remove(&old.used);
            self.stats.bytes -= old.section.len() as u64;
        }
        self.order.insert(now, key);
        self.stats.bytes += size;
        while self.stats.bytes > self.cap {
            let Some((_, oldest)) = self.order.pop_first() else {
                break;
            };
            if let Some(gone) = self.held.remove(&oldest) {
                self.stats.bytes -= gone.section.len() as u64;
                self.stats.evictions += 1;
            }
        }
    }
}

impl Sections for SectionLru {
    fn obtain(
        &mut self,
        mem: &File,
        layout: &Layout,
        link: Option<&CStr>,
    ) -> Option<Result<Generated, GenerateError>> {
        let key = Identity::build_id(mem, layout).or_else(|| Identity::file(link?));
        if let Some(key) = &key {
            if let Some((section, base)) = self.get(key.as_str()) {
                self.stats.hits += 1;
                return Some(Ok(Generated {
                    section,
                    base,
                    source: Source::Cache,
                    miss: None,
                }));
            }
        }
        self.stats.misses += 1;
        let generated = self.disk.obtain(mem, layout, link)?;
        if let (Some(key), Ok(gen)) = (key, &generated) {
            self.insert(key.as_str().to_owned(), &gen.section, gen.base);
        }
        Some(generated)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::register::Fallback;

    fn lru(cap: u64) -> SectionLru {
        let off = Fallback {
            synth: false,
            cache: false,
        };
        SectionLru::new(cap, DiskSections::new(off))
    }

    #[test]
    fn the_least_recently_used_goes_first() {
        let mut c = lru(300);
        c.insert("a".into(), &[1; 100], 1);
        c.insert("b".into(), &[2; 100], 2);
        c.insert("c".into(), &[3; 100], 3);
        assert_eq!(c.get("a").map(|(_, base)| base), Some(1));
        c.insert("d".into(), &[4; 100], 4);
        assert!(c.get("b").is_none(), "b was the oldest");
        assert!(c.get("a").is_some() && c.get("c").is_some() && c.get("d").is_some());
        let s = c.stats();
        assert_eq!((s.entries, s.bytes, s.evictions), (3, 300, 1));
    }

    #[test]
    fn memory_stays_under_the_cap() {
        let mut c = lru(1000);
        for i in 0..500u64 {
            c.insert(format!("k{i}"), &vec![0; 1 + (i as usize * 37) % 400], i);
            assert!(c.stats().bytes <= 1000);
            assert_eq!(c.held.len(), c.order.len());
        }
        c.insert("huge".into(), &[0; 1001], 0);
        assert!(c.get("huge").is_none());
    }

    #[test]
    fn replacing_a_key_keeps_the_count_right() {
        let mut c = lru(1000);
        c.insert("a".into(), &[0; 400], 1);
        c.insert("a".into(), &[0; 100], 2);
        assert_eq!(c.stats().bytes, 100);
        assert_eq!(c.get("a").map(|(s, b)| (s.len(), b)), Some((100, 2)));
    }
}
