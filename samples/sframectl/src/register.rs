// SPDX-License-Identifier: GPL-2.0

//! `sframectl register --pid PID` and `unregister --pid PID`: profile a
//! process that was started without the audit library.
//!
//! Each object's ELF header is read where the process maps it, through
//! `/proc/PID/mem`, never by path: a path may name another file in our
//! mount namespace, or none.  The SFrame bytes are read the same way and
//! registered for the process, exactly as the audit library would have
//! registered them, through the same open `/proc/PID/mem`: that descriptor
//! is what names the process to the module, and opening it is where the
//! kernel checked that we may ptrace the process.
//!
//! An object without `.sframe` gets a section generated from its
//! `.eh_frame`, read through `/proc/PID/mem` too, exactly as the audit
//! library generates it (`sframe_audit::generated`), and through the same
//! per-user cache.

use crate::kernel;
use crate::maps;
use crate::maps::Mapping;
use anyhow::bail;
use anyhow::Result;
use sframe_audit::cache::Cache;
use sframe_audit::cache::CacheDir;
use sframe_audit::device::Device;
use sframe_audit::device::Registration;
use sframe_audit::device::Tag;
use sframe_audit::device::Unregister;
use sframe_audit::generated;
use sframe_audit::generated::GenerateError;
use sframe_audit::generated::Generated;
use sframe_audit::image::ImageError;
use sframe_audit::image::Layout;
use sframe_audit::image::Memory;
use sframe_audit::image::ReadAhead;
use sframe_uapi::SFRAME_FEAT_TAG;
use std::collections::HashSet;
use std::ffi::CStr;
use std::ffi::CString;
use std::fs::File;
use std::io;
use std::ops::Range;
use std::os::fd::AsFd;
use std::os::unix::fs::FileExt;

/// SFrame sections larger than this are not read (the module's default
/// limit is far below; a corrupt header must not make us allocate GiBs).
const MAX_SECTION: u64 = 256 << 20;

/// What became of one object.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    Registered,
    AlreadyRegistered,
    NoSframe,
    /// Its section is being generated.
    Later,
}

/// What to do for objects without `.sframe`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Fallback {
    /// Generate a section from `.eh_frame`.
    pub(crate) synth: bool,
    /// Through the cache.
    pub(crate) cache: bool,
}

/// One object of a process, for [`Sections`].
pub(crate) struct Object<'a> {
    pub(crate) pid: i32,
    /// The process's memory.
    pub(crate) mem: &'a File,
    /// Where the object's ELF header is mapped.
    pub(crate) start: u64,
    /// The file it is mapped from (`/proc/PID/map_files/...`).
    pub(crate) link: Option<&'a CStr>,
}

/// A generated section, or why there is none (yet).
pub(crate) enum Obtained {
    /// Generation is off.
    Off,
    Ready(Generated),
    Failed(String),
    /// Being generated: the caller registers the object again later.
    Later,
}

/// Where generated sections come from: `register --pid` asks the on-disk
/// cache each time, the daemon keeps them in memory too (`section_lru`)
/// and generates beside its main loop.
pub(crate) trait Sections {
    /// The generated section of `object`, whose layout is `layout`.
    fn obtain(&mut self, object: &Object<'_>, layout: &Layout) -> Obtained;
}

/// Generated sections through the on-disk caches only (or none at all).
pub(crate) struct DiskSections {
    synth: bool,
    /// The system's cache, read first; opened at each use, so that a
    /// long-running daemon sees it once `fill-cache` has made it.
    system: Option<CacheDir>,
    cache: Option<Cache>,
}

impl DiskSections {
    /// The user's cache, created if missing, unless `fallback` says not to.
    pub(crate) fn new(fallback: Fallback) -> Self {
        let cache = if fallback.synth && fallback.cache {
            CacheDir::from_env().and_then(|dir| match dir.create_and_open() {
                Ok(cache) => Some(cache),
                Err(err) => {
                    eprintln!(
                        "sframectl: cache {}: {err}: generating without it",
                        dir.path().display()
                    );
                    None
                }
            })
        } else {
            None
        };
        Self {
            synth: fallback.synth,
            system: (fallback.synth && fallback.cache)
                .then(CacheDir::system)
                .flatten(),
            cache,
        }
    }
}

impl DiskSections {
    /// The section from the cache, or generated (and stored); `None`:
    /// generation is off.
    pub(crate) fn generate(
        &self,
        mem: &File,
        layout: &Layout,
        link: Option<&CStr>,
    ) -> Option<Result<Generated, GenerateError>> {
        let system = self.synth.then_some(self.system.as_ref()).flatten();
        let system = system.and_then(|dir| dir.open_shared().ok());
        let caches = generated::Caches {
            system: system.as_ref(),
            user: self.cache.as_ref(),
        };
        self.synth
            .then(|| generated::obtain(mem, layout, link, caches))
    }
}

impl Sections for DiskSections {
    fn obtain(&mut self, object: &Object<'_>, layout: &Layout) -> Obtained {
        match self.generate(object.mem, layout, object.link) {
            None => Obtained::Off,
            Some(Ok(gen)) => Obtained::Ready(gen),
            Some(Err(err)) => Obtained::Failed(err.to_string()),
        }
    }
}

/// What happened to one object, for the caller to print or count.
pub(crate) enum Report<'a> {
    /// A text range registered, with its handle.
    Registered(&'a str, &'a Range<u64>, u64),
    /// A text range the process already had registered.
    Already(&'a str, &'a Range<u64>),
    /// The module refused the section for this text range.
    Refused(&'a str, &'a Range<u64>, io::Error),
    /// A section generated (or found in a cache) for an object without one.
    Generated(&'a str, &'a Generated),
    /// An object without `.sframe` for which none was generated.
    NotGenerated(&'a str, String),
    /// An object whose section is being generated.
    Later(&'a str),
    /// An object that was not looked at, and why.
    Skipped(&'a str, String),
}

/// How `register --pid` reports: one line per object, as before the
/// daemon existed.
fn print_report(report: Report<'_>) {
    match report {
        Report::Registered(name, text, handle) => println!(
            "registered {name}: text {:#x}-{:#x}, handle {handle}",
            text.start, text.end
        ),
        Report::Already(name, text) => println!(
            "already registered {name}: text {:#x}-{:#x}",
            text.start, text.end
        ),
        Report::Refused(name, _, err) => {
            eprintln!("sframectl: {name}: the module refused its SFrame section (see dmesg): {err}")
        }
        Report::Generated(name, gen) => println!("{name}: no .sframe, one from .eh_frame: {gen}"),
        Report::NotGenerated(name, err) => println!("{name}: no .sframe, none generated: {err}"),
        Report::Skipped(name, why) => eprintln!("sframectl: {name}: skipped: {why}"),
        Report::Later(name) => println!("{name}: no .sframe: being generated"),
    }
}

/// What became of the objects of one process.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    pub(crate) registered: u64,
    pub(crate) already: u64,
    /// The objects without `.sframe` and without a generated section.
    pub(crate) without: Vec<String>,
    /// The objects whose section is being generated.
    pub(crate) later: u64,
}

/// One process to register objects for: its `/proc/PID/mem`, opened once
/// (where the kernel checked that we may ptrace it), and its maps.
pub(crate) struct Process {
    pub(crate) pid: i32,
    pub(crate) mem: File,
    pub(crate) maps: Vec<Mapping>,
}

/// How often [`Process::open`] opens a process again that executed
/// another program while it was being opened.
const OPEN_TRIES: usize = 4;

/// Whether `mem` reads the address space `maps` describes: the first
/// byte of its first readable mapping of a file's start (an object's ELF
/// header, the program's as a rule; not a device's, whose memory
/// `/proc/PID/mem` may not read at all) can be read.
///
/// `/proc/PID/mem` reads the address space the process had when it was
/// opened.  A process that executes another program between that and the
/// read of its maps (a shell runs its last command in its own process)
/// leaves the descriptor on its old address space, which reads nothing
/// once the new one replaced it, while the maps describe the new one:
/// every object read through it would fail as if its CFI were unreadable.
fn mem_is_current(mem: &File, maps: &[Mapping]) -> bool {
    let Some(probe) = maps.iter().find(|m| {
        m.perms.starts_with('r')
            && m.maps_file_start()
            && m.path.starts_with('/')
            && !m.path.starts_with("/dev/")
    }) else {
        // Nothing to read: nothing will be.
        return true;
    };
    let mut byte = [0u8; 1];
    matches!(mem.read_at(&mut byte, probe.range.start), Ok(1))
}

impl Process {
    /// Opens process `pid`; errors are the kernel's, for the caller to tell
    /// a process that is gone from one we may not act on.  Its memory and
    /// maps are of one address space ([`mem_is_current`]): a process that
    /// executed another program meanwhile is opened again, up to
    /// [`OPEN_TRIES`] times, then taken for gone (`ESRCH`).
    pub(crate) fn open(pid: i32) -> io::Result<Self> {
        Self::open_with(pid, || File::open(format!("/proc/{pid}/mem")))
    }

    /// [`Process::open`], `/proc/PID/mem` opened by `open_mem`.
    fn open_with(pid: i32, mut open_mem: impl FnMut() -> io::Result<File>) -> io::Result<Self> {
        for _ in 0..OPEN_TRIES {
            let mem = open_mem()?;
            let maps = maps::read(pid)?;
            if mem_is_current(&mem, &maps) {
                return Ok(Self { pid, mem, maps });
            }
        }
        Err(io::Error::from_raw_os_error(libc::ESRCH))
    }

    /// Registers every object whose first mapping `wanted` accepts (each
    /// object once).  Errors other than the module refusing one section
    /// end the walk: the process has gone, or the module cannot do it.
    pub(crate) fn register(
        &self,
        dev: &Device,
        sections: &mut dyn Sections,
        wanted: &mut dyn FnMut(&Mapping) -> bool,
        report: &mut dyn FnMut(Report<'_>),
    ) -> io::Result<Tally> {
        let mut tally = Tally::default();
        let mut seen = HashSet::new();
        for mapping in self.maps.iter().filter(|m| m.maps_file_start()) {
            if !seen.insert((mapping.inode, mapping.path.as_str(), mapping.range.start))
                || !wanted(mapping)
            {
                continue;
            }
            match register_object(dev, self, mapping, sections, report)? {
                Some(Outcome::Registered) => tally.registered += 1,
                Some(Outcome::AlreadyRegistered) => tally.already += 1,
                Some(Outcome::NoSframe) => tally.without.push(mapping.path.clone()),
                Some(Outcome::Later) => tally.later += 1,
                None => {}
            }
        }
        Ok(tally)
    }
}

pub(crate) fn register(pid: i32, fallback: Fallback) -> Result<()> {
    let dev = kernel::open()?;
    // The kernel's refusal to open the memory, explained, before the rest.
    drop(kernel::open_proc(pid, "mem", "register")?);
    let process = Process::open(pid).map_err(|err| kernel::explain(err, "register", Some(pid)))?;
    let mut sections = DiskSections::new(fallback);
    let tally = process
        .register(&dev, &mut sections, &mut |_| true, &mut print_report)
        .map_err(|err| kernel::explain(err, "register", Some(pid)))?;
    let Tally {
        registered,
        already,
        without,
        ..
    } = tally;
    if !without.is_empty() {
        println!(
            "without .sframe (not unwound by SFrame): {}",
            without.join(", ")
        );
    }
    println!("process {pid}: {registered} objects registered, {already} already registered, {} without .sframe", without.len());
    if registered + already == 0 {
        if fallback.synth {
            bail!("no object mapped by process {pid} has an SFrame section or one generated from .eh_frame");
        }
        bail!("no object mapped by process {pid} has an SFrame section (build with -Wa,--gsframe, or drop --no-synth)");
    }
    Ok(())
}

/// Registers the object whose first mapping is `mapping`.  `Ok(None)`: not
/// an ELF object (a data file, a font), nothing to say.  An object without
/// `.sframe` gets a generated section from `sections`, if it gives one.
fn register_object(
    dev: &Device,
    process: &Process,
    mapping: &Mapping,
    sections: &mut dyn Sections,
    report: &mut dyn FnMut(Report<'_>),
) -> io::Result<Option<Outcome>> {
    let (pid, mem) = (process.pid, &process.mem);
    let name = mapping.path.as_str();
    // Its ELF header and program headers with one read of its first page.
    let layout = match Layout::read_at_header(&ReadAhead::new(mem), mapping.range.start) {
        Ok(layout) => layout,
        Err(ImageError::NotElf | ImageError::Foreign) => return Ok(None),
        Err(ImageError::Read(err)) if err.raw_os_error() == Some(libc::EIO) => return Ok(None),
        Err(err) => {
            report(Report::Skipped(name, err.to_string()));
            return Ok(None);
        }
    };
    // The digest a generated section is filed under, with a module that
    // registers by tag.
    let mut tag = None;
    let (bytes, sframe_addr) = match layout.sframe.clone() {
        Some(sframe) => {
            let len = sframe.end - sframe.start;
            if len > MAX_SECTION {
                report(Report::Skipped(
                    name,
                    format!("SFrame section of {len} bytes"),
                ));
                return Ok(None);
            }
            let mut bytes = vec![0u8; len as usize];
            if let Err(err) = mem.read(sframe.start, &mut bytes) {
                report(Report::Skipped(
                    name,
                    format!(
                        "cannot read its SFrame section at {:#x}: {err}",
                        sframe.start
                    ),
                ));
                return Ok(None);
            }
            (bytes, sframe.start)
        }
        None => {
            // Named in the cache by build-id, else by the file it maps
            // (the link in map_files is the mapped file itself, whatever
            // its path says now).
            let link = CString::new(format!(
                "/proc/{pid}/map_files/{:x}-{:x}",
                mapping.range.start, mapping.range.end
            ))
            .ok();
            let object = Object {
                pid,
                mem,
                start: mapping.range.start,
                link: link.as_deref(),
            };
            match sections.obtain(&object, &layout) {
                Obtained::Off => return Ok(Some(Outcome::NoSframe)),
                Obtained::Ready(gen) => {
                    report(Report::Generated(name, &gen));
                    let sframe_addr = layout.bias.wrapping_add(gen.base);
                    tag = Some(gen.digest).filter(|_| dev.supports(SFRAME_FEAT_TAG));
                    (gen.section, sframe_addr)
                }
                Obtained::Failed(err) => {
                    report(Report::NotGenerated(name, err));
                    return Ok(Some(Outcome::NoSframe));
                }
                Obtained::Later => {
                    report(Report::Later(name));
                    return Ok(Some(Outcome::Later));
                }
            }
        }
    };
    let mut outcome = Outcome::AlreadyRegistered;
    for text in layout.text() {
        match register_text(dev, mem, &bytes, sframe_addr, text, tag) {
            Ok(handle) => {
                report(Report::Registered(name, text, handle));
                outcome = Outcome::Registered;
            }
            Err(err) if err.raw_os_error() == Some(libc::EEXIST) => {
                report(Report::Already(name, text));
            }
            Err(err) if err.raw_os_error() == Some(libc::EINVAL) => {
                report(Report::Refused(name, text, err));
            }
            Err(err) => return Err(err),
        }
    }
    Ok(Some(outcome))
}

/// Registers `bytes`, which the process `mem` names maps at `sframe_addr`,
/// for its `text`: with a `tag` (the digest of a generated section), by
/// the tag if the module holds our copy under it, else with the bytes,
/// filed under the tag for the next process.
fn register_text(
    dev: &Device,
    mem: &File,
    bytes: &[u8],
    sframe_addr: u64,
    text: &Range<u64>,
    tag: Option<u64>,
) -> io::Result<u64> {
    let mut reg = Registration::from_slice(bytes, sframe_addr, text.clone());
    if let Some(tag) = tag {
        let by_tag = Registration {
            data: 0..bytes.len() as u64,
            tag: Tag::Find(tag),
            ..reg.clone()
        };
        match dev.register(&by_tag, Some(mem.as_fd())) {
            Err(err) if err.raw_os_error() == Some(libc::ENOENT) => {}
            result => return result,
        }
        reg.tag = Tag::File(tag);
    }
    dev.register(&reg, Some(mem.as_fd()))
}

pub(crate) fn unregister(pid: i32) -> Result<()> {
    let dev = kernel::open()?;
    let mem = kernel::open_proc(pid, "mem", "unregister")?;
    let sections = dev
        .list(Some(mem.as_fd()))
        .map_err(|err| kernel::explain(err, "list", Some(pid)))?;
    let mut removed = 0;
    for s in &sections {
        match dev.unregister(Unregister::Handle(s.handle), Some(mem.as_fd())) {
            Ok(()) => removed += 1,
            // Unmapped (or dlclose()d) meanwhile.
            Err(err) if err.raw_os_error() == Some(libc::ENOENT) => {}
            Err(err) => return Err(kernel::explain(err, "unregister", Some(pid))),
        }
    }
    println!("process {pid}: {removed} sections unregistered");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_own_objects_are_found_through_proc_mem() {
        // The same walk as `register`, minus the ioctl: every object this
        // test process maps is found, ours among them, and the layouts
        // agree with the program headers the loader used.
        let pid = std::process::id() as i32;
        let maps = maps::read(pid).unwrap();
        let mem = kernel::open_proc(pid, "mem", "register").unwrap();
        let here = our_own_objects_are_found_through_proc_mem as *const () as u64;
        let mut found_self = false;
        for m in maps.iter().filter(|m| m.maps_file_start()) {
            let layout = match Layout::read_at_header(&mem, m.range.start) {
                Ok(layout) => layout,
                Err(ImageError::NotElf) => continue,
                Err(ImageError::Read(_)) => continue,
                Err(err) => panic!("{}: {err}", m.path),
            };
            assert!(!layout.text().is_empty(), "{}", m.path);
            found_self |= layout.text().iter().any(|t| t.contains(&here));
        }
        assert!(found_self);
    }

    #[test]
    fn a_process_that_executed_another_program_is_opened_again() {
        use crate::test_process::{cue, exec_on_cue};
        // Opened on the shell's address space, then the shell executes
        // sleep: that descriptor reads nothing of the new one.
        let (mut child, pid, stale) = exec_on_cue();
        cue(&mut child);
        let maps = maps::read(pid).unwrap();
        assert!(!mem_is_current(&stale, &maps));
        // The first open gives the stale descriptor; the next, a new one.
        let mut stale = Some(stale);
        let mut opened = 0;
        let process = Process::open_with(pid, || {
            opened += 1;
            match stale.take() {
                Some(mem) => Ok(mem),
                None => File::open(format!("/proc/{pid}/mem")),
            }
        })
        .unwrap();
        assert_eq!(opened, 2);
        assert!(mem_is_current(&process.mem, &process.maps));
        assert!(process.maps.iter().any(|m| m.path.ends_with("/sleep")));
        // A descriptor that never reads the maps' address space (as if
        // the process executed again at every open) is taken for gone.
        let err = Process::open_with(pid, || File::open("/dev/null"))
            .err()
            .unwrap();
        assert_eq!(err.raw_os_error(), Some(libc::ESRCH));
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
