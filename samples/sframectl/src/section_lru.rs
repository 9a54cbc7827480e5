// SPDX-License-Identifier: GPL-2.0

//! The daemon's generated sections, kept in memory by object identity
//! (build-id, else the mapped file's identity): libc is parsed and
//! converted once, then registered for every process that maps it.
//!
//! Bounded by bytes: when the sections held exceed the cap, the least
//! recently used go.  A miss goes to the [`generator_thread`], through the
//! on-disk cache (shared with `register --pid` and the audit library):
//! the object is registered once its section is ready, for every process
//! that mapped it meanwhile.  An object the generator refused is not tried
//! again (up to `MAX_FAILED` of them are remembered).
//!
//! [`generator_thread`]: crate::generator_thread

use crate::generator_thread::GeneratorThread;
use crate::generator_thread::Job;
use crate::register::Object;
use crate::register::Obtained;
use crate::register::Sections;
use sframe_audit::generated::Generated;
use sframe_audit::generated::Source;
use sframe_audit::identity::Identity;
use sframe_audit::image::Layout;
use std::collections::BTreeMap;
use std::collections::HashMap;

/// Objects the generator refused, remembered so as not to try again.
const MAX_FAILED: usize = 4096;

/// One section held: the bytes, their base and digest, and when it was
/// last used.
struct Held {
    section: Vec<u8>,
    base: u64,
    digest: u64,
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
    pub(crate) failed: u64,
}

/// Generated sections by identity, at most `cap` bytes of them.
pub(crate) struct SectionLru {
    cap: u64,
    held: HashMap<String, Held>,
    /// Keys by last use, oldest first.
    order: BTreeMap<u64, String>,
    clock: u64,
    stats: LruStats,
    /// `None`: generation is off.
    generator: Option<GeneratorThread>,
    /// Objects being generated, with the (process, object start) that
    /// wait for them.
    pending: HashMap<String, Vec<(i32, u64)>>,
    /// Objects the generator refused, with its reason.
    failed: HashMap<String, String>,
}

impl SectionLru {
    /// An empty cache of at most `cap` bytes, in front of `generator`.
    pub(crate) fn new(cap: u64, generator: Option<GeneratorThread>) -> Self {
        Self {
            cap,
            held: HashMap::new(),
            order: BTreeMap::new(),
            clock: 0,
            stats: LruStats::default(),
            generator,
            pending: HashMap::new(),
            failed: HashMap::new(),
        }
    }

    /// Holds the sections generated since the last call; the objects
    /// (process, start) that waited for them, to be registered again.
    pub(crate) fn collect(&mut self) -> Vec<(i32, u64)> {
        let Some(generator) = &self.generator else {
            return Vec::new();
        };
        let mut waiting = Vec::new();
        for done in generator.finished() {
            waiting.extend(self.pending.remove(&done.key).unwrap_or_default());
            match done.result {
                Ok(gen) => self.insert(done.key, gen.section, gen.base, gen.digest),
                // The process went away: another one that waits asks again.
                Err((_, true)) => {}
                Err((why, false)) => {
                    self.stats.failed += 1;
                    if self.failed.len() >= MAX_FAILED {
                        self.failed.clear();
                    }
                    self.failed.insert(done.key, why);
                }
            }
        }
        waiting
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

    /// The section held for `key`, its base and digest, now the most
    /// recently used.
    fn get(&mut self, key: &str) -> Option<(Vec<u8>, u64, u64)> {
        let now = self.tick();
        let held = self.held.get_mut(key)?;
        self.order.remove(&held.used);
        held.used = now;
        self.order.insert(now, key.to_owned());
        Some((held.section.clone(), held.base, held.digest))
    }

    /// Holds `section` (`base`, `digest`) for `key`, then drops the oldest
    /// until under the cap.  A section larger than the whole cap is not
    /// held.
    fn insert(&mut self, key: String, section: Vec<u8>, base: u64, digest: u64) {
        let size = section.len() as u64;
        if size > self.cap {
            return;
        }
        let now = self.tick();
        if let Some(old) = self.held.insert(
            key.clone(),
            Held {
                section,
                base,
                digest,
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

/// The name of `object`'s section in the cache: its build-id, else its
/// file; an object with neither is generated for its process alone.
fn key_of(object: &Object<'_>, layout: &Layout) -> String {
    Identity::build_id(object.mem, layout)
        .or_else(|| Identity::file(object.link?))
        .map_or_else(
            || format!("p-{}-{:x}", object.pid, object.start),
            |id| id.as_str().to_owned(),
        )
}

impl Sections for SectionLru {
    fn obtain(&mut self, object: &Object<'_>, layout: &Layout) -> Obtained {
        if self.generator.is_none() {
            return Obtained::Off;
        }
        let key = key_of(object, layout);
        if let Some((section, base, digest)) = self.get(&key) {
            self.stats.hits += 1;
            return Obtained::Ready(Generated {
                section,
                base,
                digest,
                source: Source::Cache,
                miss: None,
            });
        }
        if let Some(why) = self.failed.get(&key) {
            return Obtained::Failed(format!("the generator refused it before: {why}"));
        }
        let waiting = self.pending.entry(key.clone()).or_default();
        waiting.push((object.pid, object.start));
        if waiting.len() > 1 {
            return Obtained::Later;
        }
        self.stats.misses += 1;
        let job = object.mem.try_clone().map(|mem| Job {
            pid: object.pid,
            key: key.clone(),
            mem,
            layout: layout.clone(),
            link: object.link.map(ToOwned::to_owned),
        });
        let submitted = match (job, &self.generator) {
            (Ok(job), Some(generator)) => generator
                .submit(job)
                .then_some(())
                .ok_or_else(|| "the generator thread is gone".to_owned()),
            (Err(err), _) => Err(format!("cannot hand it to the generator: {err}")),
            (Ok(_), None) => Err("generation is off".to_owned()),
        };
        match submitted {
            Ok(()) => Obtained::Later,
            Err(why) => {
                self.pending.remove(&key);
                Obtained::Failed(why)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::register::DiskSections;
    use crate::register::Fallback;
    use std::ffi::CString;
    use std::fs::File;

    fn lru(cap: u64) -> SectionLru {
        SectionLru::new(cap, None)
    }

    /// A cache in front of a generator thread.
    fn generating() -> SectionLru {
        let synth = Fallback {
            synth: true,
            cache: false,
        };
        let generator = GeneratorThread::spawn(DiskSections::new(synth)).unwrap();
        SectionLru::new(64 << 20, Some(generator))
    }

    /// This test program's own object: its memory, where it starts, its
    /// layout and a link to its file.
    fn this_object() -> (File, u64, Layout, CString) {
        let pid = std::process::id() as i32;
        let mem = File::open("/proc/self/mem").unwrap();
        let maps = crate::maps::read(pid).unwrap();
        let here = this_object as *const () as u64;
        let owner = crate::maps::owner(&maps, here).unwrap();
        let start = maps
            .iter()
            .filter(|m| m.maps_file_start() && m.inode == owner.inode && m.range.start <= here)
            .map(|m| m.range.start)
            .max()
            .unwrap();
        let layout = Layout::read_at_header(&mem, start).unwrap();
        (mem, start, layout, CString::new("/proc/self/exe").unwrap())
    }

    #[test]
    fn a_miss_is_generated_beside_and_served_after() {
        let mut c = generating();
        let pid = std::process::id() as i32;
        let (mem, start, layout, link) = this_object();
        let object = Object {
            pid,
            mem: &mem,
            start,
            link: Some(&link),
        };
        assert!(matches!(c.obtain(&object, &layout), Obtained::Later));
        assert!(matches!(c.obtain(&object, &layout), Obtained::Later));
        let mut waiting = Vec::new();
        for _ in 0..600 {
            waiting = c.collect();
            if !waiting.is_empty() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        assert_eq!(waiting, [(pid, start), (pid, start)]);
        assert!(matches!(c.obtain(&object, &layout), Obtained::Ready(_)));
        let s = c.stats();
        assert_eq!((s.misses, s.hits, s.entries), (1, 1, 1));
    }

    /// An object the generator refused is not sent to it again, and
    /// whoever asks for it is told why it was refused.
    #[test]
    fn a_refusal_is_remembered_with_its_reason() {
        let mut c = generating();
        let (mem, start, layout, link) = this_object();
        let object = Object {
            pid: std::process::id() as i32,
            mem: &mem,
            start,
            link: Some(&link),
        };
        c.failed
            .insert(key_of(&object, &layout), "no PT_GNU_EH_FRAME".into());
        match c.obtain(&object, &layout) {
            Obtained::Failed(why) => {
                assert_eq!(why, "the generator refused it before: no PT_GNU_EH_FRAME");
            }
            _ => panic!("not refused"),
        }
        assert_eq!(c.stats().misses, 0);
    }

    #[test]
    fn the_least_recently_used_goes_first() {
        let mut c = lru(300);
        c.insert("a".into(), vec![1; 100], 1, 11);
        c.insert("b".into(), vec![2; 100], 2, 0);
        c.insert("c".into(), vec![3; 100], 3, 0);
        assert_eq!(
            c.get("a").map(|(_, base, digest)| (base, digest)),
            Some((1, 11))
        );
        c.insert("d".into(), vec![4; 100], 4, 0);
        assert!(c.get("b").is_none(), "b was the oldest");
        assert!(c.get("a").is_some() && c.get("c").is_some() && c.get("d").is_some());
        let s = c.stats();
        assert_eq!((s.entries, s.bytes, s.evictions), (3, 300, 1));
    }

    #[test]
    fn memory_stays_under_the_cap() {
        let mut c = lru(1000);
        for i in 0..500u64 {
            c.insert(format!("k{i}"), vec![0; 1 + (i as usize * 37) % 400], i, 0);
            assert!(c.stats().bytes <= 1000);
            assert_eq!(c.held.len(), c.order.len());
        }
        c.insert("huge".into(), vec![0; 1001], 0, 0);
        assert!(c.get("huge").is_none());
    }

    #[test]
    fn replacing_a_key_keeps_the_count_right() {
        let mut c = lru(1000);
        c.insert("a".into(), vec![0; 400], 1, 0);
        c.insert("a".into(), vec![0; 100], 2, 0);
        assert_eq!(c.stats().bytes, 100);
        assert_eq!(c.get("a").map(|(s, b, _)| (s.len(), b)), Some((100, 2)));
    }
}
