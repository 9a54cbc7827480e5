// SPDX-License-Identifier: GPL-2.0

//! A generated SFrame section for a loaded object that has none of its own:
//! its `.eh_frame_hdr` (`PT_GNU_EH_FRAME`) and `.eh_frame` are read from
//! the object as mapped (never from its file, which may be gone or another
//! one by now), converted by `sframe-synth`, and kept in the [`cache`] by
//! the object's [`Identity`].
//!
//! The section is encoded for link-time addresses, so one cache file
//! serves every process whatever its load bias: register it with
//! `sframe_addr = bias + base`.
//!
//! Shared by the audit library (its own memory) and `sframectl register
//! --pid` (`/proc/PID/mem`).
//!
//! [`cache`]: crate::cache

use crate::cache::section_digest;
use crate::cache::Cache;
use crate::cache::Entry;
use crate::cache::Miss;
use crate::cache::Stamp;
use crate::identity::Identity;
use crate::image::Layout;
use crate::image::Memory;
use crate::pages::Pages;
use core::fmt;
use core::ops::Deref;
use sframe_synth::Arch;
use sframe_synth::CfiSections;
use sframe_synth::Options;
use std::ffi::CStr;
use std::io;
use std::panic::catch_unwind;
use std::panic::AssertUnwindSafe;

/// The most CFI bytes we read for one object (libc has about 190 KiB of
/// `.eh_frame`; the largest C++ programs tens of MiB).
const MAX_CFI: u64 = 64 << 20;

/// Why an object got no generated section.
#[derive(Debug)]
pub enum GenerateError {
    /// No `PT_GNU_EH_FRAME`: no CFI to convert.
    NoEhFrame,
    /// `.eh_frame` is not inside a loaded segment.
    EhFrameNotLoaded,
    /// More CFI than `MAX_CFI` (64 MiB).
    TooLarge,
    /// The CFI could not be read.
    Read(io::Error),
    /// The generator found nothing usable, or refused the object.
    Synth(sframe_synth::Error),
    /// The generator panicked (a bug; caught, never crosses into the host).
    Panicked,
}

impl fmt::Display for GenerateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoEhFrame => f.write_str("no PT_GNU_EH_FRAME"),
            Self::EhFrameNotLoaded => f.write_str(".eh_frame is not in a loaded segment"),
            Self::TooLarge => write!(f, "more than {MAX_CFI} bytes of CFI"),
            Self::Read(err) => write!(f, "cannot read its CFI: {err}"),
            Self::Synth(err) => write!(f, "generator: {err}"),
            Self::Panicked => f.write_str("generator: internal error"),
        }
    }
}

impl std::error::Error for GenerateError {}

/// Where a section came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// Read from the system's cache.
    SystemCache,
    /// Read from the cache.
    Cache,
    /// Generated now, and stored in the cache.
    Stored,
    /// Generated now, not stored (no cache, or it failed).
    Generated,
}

/// A generated section for one object.
#[derive(Debug)]
pub struct Generated {
    /// The SFrame section (validated).
    pub section: Vec<u8>,
    /// The link-time address its function starts are relative to.
    pub base: u64,
    /// Its digest ([`section_digest`]), which names the module's copy of
    /// it in a registration by tag.
    pub digest: u64,
    /// Where it came from.
    pub source: Source,
    /// Why the cache was not used, if it was not.
    pub miss: Option<String>,
}

/// "section generated, cached (N bytes)", and why the cache was not used.
fn describe(
    f: &mut fmt::Formatter<'_>,
    source: Source,
    len: usize,
    miss: Option<&str>,
) -> fmt::Result {
    let how = match source {
        Source::SystemCache => "from the system cache",
        Source::Cache => "from the cache",
        Source::Stored => "generated, cached",
        Source::Generated => "generated",
    };
    write!(f, "section {how} ({len} bytes)")?;
    if let Some(miss) = miss {
        write!(f, " ({miss})")?;
    }
    Ok(())
}

impl fmt::Display for Generated {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        describe(f, self.source, self.section.len(), self.miss.as_deref())
    }
}

/// The bytes of a section held until the module has copied them.
#[derive(Debug)]
pub enum Bytes {
    /// Read from the cache into pages of their own.
    Pages(Pages),
    /// Generated, in the heap.
    Heap(Vec<u8>),
}

impl Deref for Bytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Self::Pages(pages) => pages,
            Self::Heap(vec) => vec,
        }
    }
}

/// [`Generated`], as the audit library holds it: a section read from the
/// cache leaves no trace in the heap of the process it runs in.
#[derive(Debug)]
pub struct Held {
    /// The SFrame section.
    pub section: Bytes,
    /// The link-time address its function starts are relative to.
    pub base: u64,
    /// Its digest ([`section_digest`]), which names the module's copy of
    /// it in a registration by tag.
    pub digest: u64,
    /// Where it came from.
    pub source: Source,
    /// Why the cache was not used, if it was not.
    pub miss: Option<String>,
}

impl fmt::Display for Held {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        describe(f, self.source, self.section.len(), self.miss.as_deref())
    }
}

fn read_vec(mem: &impl Memory, addr: u64, len: u64) -> Result<Vec<u8>, GenerateError> {
    if len > MAX_CFI {
        return Err(GenerateError::TooLarge);
    }
    let mut buf = Vec::new();
    buf.try_reserve_exact(len as usize)
        .map_err(|_| GenerateError::Read(io::Error::from_raw_os_error(libc::ENOMEM)))?;
    buf.resize(len as usize, 0);
    mem.read(addr, &mut buf).map_err(GenerateError::Read)?;
    Ok(buf)
}

/// Generates the section of the object `layout` describes from its CFI
/// in `mem`.  The generator runs under `catch_unwind`.
pub fn generate(mem: &impl Memory, layout: &Layout) -> Result<Entry, GenerateError> {
    let hdr_range = layout
        .eh_frame_hdr
        .clone()
        .ok_or(GenerateError::NoEhFrame)?;
    let hdr = read_vec(mem, hdr_range.start, hdr_range.end - hdr_range.start)?;
    let bias = layout.bias;
    let hdr_link = hdr_range.start.wrapping_sub(bias);
    let eh_frame_link =
        sframe_synth::eh_frame_address(&hdr, hdr_link).map_err(GenerateError::Synth)?;
    let eh_frame_at = eh_frame_link.wrapping_add(bias);
    // `.eh_frame` has no program header of its own: it runs to its zero
    // terminator, at the latest to the end of the segment holding it.
    let load = layout
        .loads()
        .iter()
        .find(|r| r.contains(&eh_frame_at))
        .ok_or(GenerateError::EhFrameNotLoaded)?;
    let eh_frame = read_vec(mem, eh_frame_at, load.end - eh_frame_at)?;
    let exec_range = layout
        .text()
        .iter()
        .map(|t| (t.start.wrapping_sub(bias), t.end.wrapping_sub(bias)))
        .reduce(|a, b| (a.0.min(b.0), a.1.max(b.1)));
    let cfi = CfiSections {
        eh_frame: &eh_frame,
        eh_frame_addr: eh_frame_link,
        eh_frame_hdr: Some((&hdr, hdr_link)),
        text_addr: None,
        exec_range,
    };
    let gen = catch_unwind(AssertUnwindSafe(|| {
        // The process's own objects: the architecture it runs on.
        let opts = Options {
            arch: Arch::HOST,
            ..Options::default()
        };
        sframe_synth::synth(&cfi, &opts)
    }))
    .map_err(|_| GenerateError::Panicked)?
    .map_err(GenerateError::Synth)?;
    Ok(Entry {
        section: gen.section,
        base: gen.base,
    })
}

/// The caches [`obtain`] reads, in this order, before it generates.
#[derive(Clone, Copy, Debug, Default)]
pub struct Caches<'a> {
    /// The system's cache ([`crate::cache::CacheDir::system`]): read only.
    pub system: Option<&'a Cache>,
    /// The user's cache: read, and given what is generated.
    pub user: Option<&'a Cache>,
}

impl<'a> Caches<'a> {
    /// The user's cache alone.
    pub fn user(user: Option<&'a Cache>) -> Self {
        Self { system: None, user }
    }
}

/// The section for the object `layout` describes: from the system's cache
/// or the user's when one holds a valid one, else generated (and stored
/// in the user's).  `path`, a file the object was mapped from, names it in
/// the caches when it has no build-id.
pub fn obtain(
    mem: &impl Memory,
    layout: &Layout,
    path: Option<&CStr>,
    caches: Caches<'_>,
) -> Result<Generated, GenerateError> {
    let held = obtain_with(mem, layout, path, caches, |cache, key| {
        cache
            .load_stamped(key)
            .map(|(section, stamp)| (Bytes::Heap(section), stamp))
    })?;
    let section = match held.section {
        Bytes::Heap(vec) => vec,
        Bytes::Pages(pages) => pages.to_vec(),
    };
    Ok(Generated {
        section,
        base: held.base,
        digest: held.digest,
        source: held.source,
        miss: held.miss,
    })
}

/// [`obtain`] for the audit library: a section from the cache is read
/// into pages of its own ([`Cache::load_pages`]).
pub fn obtain_held(
    mem: &impl Memory,
    layout: &Layout,
    path: Option<&CStr>,
    caches: Caches<'_>,
) -> Result<Held, GenerateError> {
    obtain_with(mem, layout, path, caches, |cache, key| {
        cache
            .load_pages(key)
            .map(|(pages, stamp)| (Bytes::Pages(pages), stamp))
    })
}

/// What the caches' file for the object `layout` describes says of its
/// section, from its header alone (the system's cache first), and which
/// cache holds it; `None` if neither does.  `path` as for [`obtain`].
/// An object whose file `stamps` has read already is not read again.
pub fn cached_stamp(
    mem: &impl Memory,
    layout: &Layout,
    path: Option<&CStr>,
    caches: Caches<'_>,
    stamps: &mut Stamps,
) -> Option<(Stamp, Source)> {
    if caches.system.is_none() && caches.user.is_none() {
        return None;
    }
    let key = identity(mem, layout, path)?;
    if let Some(known) = stamps.find(&key) {
        return Some(known);
    }
    let (stamp, source) = [
        (caches.system, Source::SystemCache),
        (caches.user, Source::Cache),
    ]
    .into_iter()
    .find_map(|(cache, source)| Some((cache?.stamp(&key).ok()?, source)))?;
    stamps.add(key, stamp, source);
    Some((stamp, source))
}

/// Most files [`Stamps`] remembers: more than a program's start reads
/// (gzip's reads six, a desktop program's a few dozen); the others are
/// read each time they are asked for.
const MAX_STAMPS: usize = 64;

/// The stamps [`cached_stamp`] has read from the caches' files, by object,
/// for one use of the caches (the audit library: a program's start).
/// The same object loaded twice, as libc is (in the program's namespace
/// and in the audit library's), has its file read once.
///
/// A stamp only names the module's copy of a section, which the module
/// checked when it was given.  A file replaced since its stamp was
/// remembered (another process regenerated it) is then as a file replaced
/// after its header was read: the stamp names the copy of the bytes it
/// described, which the module holds or not; if not, the section is read.
#[derive(Debug, Default)]
pub struct Stamps(Vec<(Identity, Stamp, Source)>);

impl Stamps {
    fn find(&self, key: &Identity) -> Option<(Stamp, Source)> {
        self.0
            .iter()
            .find(|(k, ..)| k == key)
            .map(|&(_, stamp, source)| (stamp, source))
    }

    fn add(&mut self, key: Identity, stamp: Stamp, source: Source) {
        if self.0.len() < MAX_STAMPS {
            self.0.push((key, stamp, source));
        }
    }
}

/// The name of the object `layout` describes in the caches: its build-id,
/// or the file `path` names.
fn identity(mem: &impl Memory, layout: &Layout, path: Option<&CStr>) -> Option<Identity> {
    Identity::build_id(mem, layout).or_else(|| Identity::file(path?))
}

/// [`obtain`], reading the caches with `load`.
fn obtain_with(
    mem: &impl Memory,
    layout: &Layout,
    path: Option<&CStr>,
    caches: Caches<'_>,
    load: impl Fn(&Cache, &Identity) -> Result<(Bytes, Stamp), Miss>,
) -> Result<Held, GenerateError> {
    let any = caches.system.is_some() || caches.user.is_some();
    let key = any.then(|| identity(mem, layout, path)).flatten();
    let mut miss = None;
    let readers = [
        (caches.system, Source::SystemCache),
        (caches.user, Source::Cache),
    ];
    if let Some(key) = &key {
        for (cache, source) in readers {
            let Some(cache) = cache else {
                continue;
            };
            match load(cache, key) {
                Ok((section, stamp)) => {
                    return Ok(Held {
                        section,
                        base: stamp.base,
                        digest: stamp.digest,
                        source,
                        miss: None,
                    })
                }
                Err(Miss::Absent) => {}
                Err(err) if source == Source::SystemCache => miss = Some(format!("system {err}")),
                Err(err) => miss = Some(err.to_string()),
            }
        }
    } else if any {
        miss = Some("no build-id nor file to name it by".into());
    }
    let cache = caches.user;
    let entry = generate(mem, layout)?;
    let mut source = Source::Generated;
    if let (Some(cache), Some(key)) = (cache, &key) {
        match cache.store(key, &entry) {
            Ok(()) => source = Source::Stored,
            Err(err) => miss = Some(format!("not stored: {err}")),
        }
    }
    Ok(Held {
        digest: section_digest(&entry.section, entry.base),
        section: Bytes::Heap(entry.section),
        base: entry.base,
        source,
        miss,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::this_program as own_layout;
    use crate::image::OwnMemory;
    use crate::image::Snapshot;

    #[test]
    fn generates_for_this_test_binary_and_finds_this_function() {
        let layout = own_layout();
        let entry = generate(&OwnMemory, &layout).unwrap();
        let section = sframe::Section::parse(&entry.section, entry.base + layout.bias).unwrap();
        let here = generates_for_this_test_binary_and_finds_this_function as *const () as u64;
        assert!(section.find_row(here).is_ok_and(|r| r.is_some()));
    }

    #[test]
    fn the_cache_serves_the_second_time() {
        let dir = std::env::temp_dir().join(format!("sframe-gen-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let cache = crate::cache::CacheDir::at(&dir)
            .unwrap()
            .create_and_open()
            .unwrap();
        let layout = own_layout();
        let caches = Caches::user(Some(&cache));
        let first = obtain(&OwnMemory, &layout, Some(c"/proc/self/exe"), caches).unwrap();
        assert_eq!(first.source, Source::Stored);
        let second = obtain(&OwnMemory, &layout, Some(c"/proc/self/exe"), caches).unwrap();
        assert_eq!(second.source, Source::Cache);
        assert_eq!((&first.section, first.base), (&second.section, second.base));
        // The audit library's reader: the same bytes, in pages of its own.
        let held = obtain_held(&OwnMemory, &layout, Some(c"/proc/self/exe"), caches).unwrap();
        assert_eq!(held.source, Source::Cache);
        assert!(matches!(held.section, Bytes::Pages(_)));
        assert_eq!(
            (&held.section[..], held.base),
            (&first.section[..], first.base)
        );
        let none = obtain(&OwnMemory, &layout, None, Caches::default()).unwrap();
        assert_eq!(none.source, Source::Generated);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_file_gives_the_section_its_loaded_object_gives() {
        let loaded = own_layout();
        let file = std::fs::File::open("/proc/self/exe").unwrap();
        let (image, layout) = crate::image::FileImage::new(file).unwrap();
        assert_eq!(layout.bias, 0);
        let from_file = generate(&image, &layout).unwrap();
        let from_memory = generate(&OwnMemory, &loaded).unwrap();
        assert_eq!(from_file, from_memory);
        assert_eq!(
            Identity::build_id(&image, &layout),
            Identity::build_id(&OwnMemory, &loaded)
        );
        // Outside the segments' file bytes: an error, not a read of
        // whatever the file holds there.
        let mut word = [0u8; 8];
        assert!(image.read(u64::MAX - 4, &mut word).is_err());
        let past = layout.loads().iter().map(|r| r.end).max().unwrap();
        assert!(image.read(past + (1 << 30), &mut word).is_err());
    }

    #[test]
    fn the_system_cache_is_read_first_and_never_written() {
        let base = std::env::temp_dir().join(format!("sframe-sys-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let open = |name: &str, shared: bool| {
            let dir = crate::cache::CacheDir::at(&base.join(name)).unwrap();
            if shared {
                dir.create_shared_and_open().unwrap()
            } else {
                dir.create_and_open().unwrap()
            }
        };
        let (system, user) = (open("system", true), open("user", false));
        let files = |name: &str| std::fs::read_dir(base.join(name)).unwrap().count();
        let layout = own_layout();
        let exe = Some(c"/proc/self/exe");
        let both = Caches {
            system: Some(&system),
            user: Some(&user),
        };
        // Not in the system's cache: generated into the user's only.
        let first = obtain(&OwnMemory, &layout, exe, both).unwrap();
        assert_eq!(first.source, Source::Stored);
        assert_eq!((files("system"), files("user")), (0, 1));
        // Filled as `fill-cache` fills it: now read from there first.
        std::fs::remove_dir_all(base.join("user")).unwrap();
        let user = open("user", false);
        let both = Caches {
            system: Some(&system),
            user: Some(&user),
        };
        let filled = obtain(&OwnMemory, &layout, exe, Caches::user(Some(&system))).unwrap();
        assert_eq!(filled.source, Source::Stored);
        let second = obtain(&OwnMemory, &layout, exe, both).unwrap();
        assert_eq!(second.source, Source::SystemCache);
        assert_eq!((second.section, second.base), (first.section, first.base));
        assert_eq!((files("system"), files("user")), (1, 0));
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn the_stamp_names_what_obtain_gives() {
        let base = std::env::temp_dir().join(format!("sframe-stamp-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let open = |name: &str| {
            crate::cache::CacheDir::at(&base.join(name))
                .unwrap()
                .create_and_open()
                .unwrap()
        };
        let (system, user) = (open("system"), open("user"));
        let layout = own_layout();
        let exe = Some(c"/proc/self/exe");
        let both = Caches {
            system: Some(&system),
            user: Some(&user),
        };
        let stamp_of =
            |caches| cached_stamp(&OwnMemory, &layout, exe, caches, &mut Stamps::default());
        assert!(stamp_of(both).is_none(), "nothing cached yet");
        assert!(stamp_of(Caches::default()).is_none());
        // Stored in the user's cache: its stamp is what the next obtain
        // gives, the digest that of the section.
        let stored = obtain(&OwnMemory, &layout, exe, Caches::user(Some(&user))).unwrap();
        let (stamp, source) = stamp_of(both).unwrap();
        assert_eq!(source, Source::Cache);
        assert_eq!(
            (stamp.base, stamp.len, stamp.digest),
            (stored.base, stored.section.len(), stored.digest)
        );
        assert_eq!(stored.digest, section_digest(&stored.section, stored.base));
        let held = obtain_held(&OwnMemory, &layout, exe, both).unwrap();
        assert_eq!((held.source, held.digest), (Source::Cache, stamp.digest));
        // In the system's cache too: read from there first.
        obtain(&OwnMemory, &layout, exe, Caches::user(Some(&system))).unwrap();
        let mut stamps = Stamps::default();
        let mut remembered = |caches| cached_stamp(&OwnMemory, &layout, exe, caches, &mut stamps);
        assert_eq!(remembered(both), Some((stamp, Source::SystemCache)));
        // Remembered: the files are not read again.
        std::fs::remove_dir_all(&base).unwrap();
        assert_eq!(remembered(both), Some((stamp, Source::SystemCache)));
        assert!(stamp_of(both).is_none());
        // Without a cache, nothing is answered, remembered or not.
        assert!(remembered(Caches::default()).is_none());
    }

    #[test]
    fn hostile_cfi_is_an_error_not_a_crash() {
        let mut layout = own_layout();
        // Headers that point at garbage: a snapshot of random-ish bytes.
        let bytes: Vec<u8> = (0..4096u32)
            .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
            .collect();
        let mem = Snapshot {
            base: 0x1000,
            bytes: &bytes,
        };
        layout.eh_frame_hdr = Some(0x1000..0x1100);
        assert!(generate(&mem, &layout).is_err());
        layout.eh_frame_hdr = None;
        assert!(matches!(
            generate(&mem, &layout),
            Err(GenerateError::NoEhFrame)
        ));
    }
}
