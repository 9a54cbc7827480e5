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
use anyhow::Context;
use anyhow::Result;
use sframe_audit::cache::Cache;
use sframe_audit::cache::CacheDir;
use sframe_audit::device::Device;
use sframe_audit::device::Registration;
use sframe_audit::device::Unregister;
use sframe_audit::generated;
use sframe_audit::image::ImageError;
use sframe_audit::image::Layout;
use sframe_audit::image::Memory;
use std::collections::HashSet;
use std::ffi::CString;
use std::fs::File;
use std::os::fd::AsFd;

/// SFrame sections larger than this are not read (the module's default
/// limit is far below; a corrupt header must not make us allocate GiBs).
const MAX_SECTION: u64 = 256 << 20;

/// What became of one object.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Registered,
    AlreadyRegistered,
    NoSframe,
}

/// What to do for objects without `.sframe`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Fallback {
    /// Generate a section from `.eh_frame`.
    pub(crate) synth: bool,
    /// Through the cache.
    pub(crate) cache: bool,
}

pub(crate) fn register(pid: i32, fallback: Fallback) -> Result<()> {
    let dev = kernel::open()?;
    let mem = kernel::open_proc(pid, "mem", "register")?;
    let maps = maps::read(pid).map_err(|err| kernel::explain(err, "register", Some(pid)))?;
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
    let generate = fallback.synth.then_some(cache.as_ref());
    let (mut registered, mut already, mut without) = (0, 0, Vec::new());
    let mut seen = HashSet::new();
    for mapping in maps.iter().filter(|m| m.maps_file_start()) {
        if !seen.insert((mapping.inode, mapping.path.as_str(), mapping.range.start)) {
            continue;
        }
        match register_object(&dev, pid, &mem, mapping, generate) {
            Ok(Some(Outcome::Registered)) => registered += 1,
            Ok(Some(Outcome::AlreadyRegistered)) => already += 1,
            Ok(Some(Outcome::NoSframe)) => without.push(mapping.path.as_str()),
            Ok(None) => {}
            Err(err) => return Err(err),
        }
    }
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
/// an ELF object (a data file, a font), nothing to say.  `generate`: an
/// object without `.sframe` gets a generated section, through the cache
/// if one is given.
fn register_object(
    dev: &Device,
    pid: i32,
    mem: &File,
    mapping: &Mapping,
    generate: Option<Option<&Cache>>,
) -> Result<Option<Outcome>> {
    let name = mapping.path.as_str();
    let layout = match Layout::read_at_header(mem, mapping.range.start) {
        Ok(layout) => layout,
        Err(ImageError::NotElf | ImageError::Foreign) => return Ok(None),
        Err(ImageError::Read(err)) if err.raw_os_error() == Some(libc::EIO) => return Ok(None),
        Err(err) => {
            eprintln!("sframectl: {name}: skipped: {err}");
            return Ok(None);
        }
    };
    let (bytes, sframe_addr) = match (layout.sframe.clone(), generate) {
        (Some(sframe), _) => {
            let len = sframe.end - sframe.start;
            if len > MAX_SECTION {
                eprintln!("sframectl: {name}: skipped: SFrame section of {len} bytes");
                return Ok(None);
            }
            let mut bytes = vec![0u8; len as usize];
            mem.read(sframe.start, &mut bytes).with_context(|| {
                format!(
                    "{name}: cannot read its SFrame section at {:#x}",
                    sframe.start
                )
            })?;
            (bytes, sframe.start)
        }
        (None, None) => return Ok(Some(Outcome::NoSframe)),
        (None, Some(cache)) => {
            // Named in the cache by build-id, else by the file it maps
            // (the link in map_files is the mapped file itself, whatever
            // its path says now).
            let link = CString::new(format!(
                "/proc/{pid}/map_files/{:x}-{:x}",
                mapping.range.start, mapping.range.end
            ))
            .ok();
            match generated::obtain(mem, &layout, link.as_deref(), cache) {
                Ok(gen) => {
                    println!("{name}: no .sframe: {gen} from .eh_frame");
                    (gen.section, layout.bias.wrapping_add(gen.base))
                }
                Err(err) => {
                    println!("{name}: no .sframe, none generated: {err}");
                    return Ok(Some(Outcome::NoSframe));
                }
            }
        }
    };
    let mut outcome = Outcome::AlreadyRegistered;
    for text in layout.text() {
        let reg = Registration::from_slice(&bytes, sframe_addr, text.clone());
        match dev.register(&reg, Some(mem.as_fd())) {
            Ok(handle) => {
                println!(
                    "registered {name}: text {:#x}-{:#x}, handle {handle}",
                    text.start, text.end
                );
                outcome = Outcome::Registered;
            }
            Err(err) if err.raw_os_error() == Some(libc::EEXIST) => {
                println!(
                    "already registered {name}: text {:#x}-{:#x}",
                    text.start, text.end
                );
            }
            Err(err) if err.raw_os_error() == Some(libc::EINVAL) => {
                eprintln!(
                    "sframectl: {name}: the module refused its SFrame section (see dmesg): {err}"
                );
            }
            Err(err) => return Err(kernel::explain(err, "register", Some(pid))),
        }
    }
    Ok(Some(outcome))
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
}
