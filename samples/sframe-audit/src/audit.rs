// SPDX-License-Identifier: GPL-2.0

//! The rtld-audit interface (`man 7 rtld-audit`): glibc's dynamic loader
//! calls [`la_objopen`] for every object it maps, in every namespace, and
//! [`la_objclose`] before it unmaps one.  We register the object's
//! `PT_GNU_SFRAME` section for its executable text and remove it again.
//! An object without one (nearly all of a distribution's) gets a section
//! generated from its `.eh_frame` ([`crate::generated`]), read from the
//! system's cache (`sframectl fill-cache`) or the per-user cache when it
//! was generated already;
//! `SFRAME_AUDIT_SYNTH=0` turns generation off, `SFRAME_AUDIT_SYNTH=nocache`
//! generates without the cache.
//!
//! Rules this file keeps, because it runs inside someone else's program:
//!
//! - It never changes what the program does: every failure means "do
//!   nothing", a missing or refusing `/dev/sframe` switches registration off
//!   for the life of the process, no panic crosses the FFI boundary, and
//!   nothing is printed unless `SFRAME_AUDIT_DEBUG=1`.
//! - It opens `/dev/sframe` per use (`O_CLOEXEC`) and closes it at once: a
//!   program that closes descriptors it does not know (`closefrom()`,
//!   `dup2()` over them) can never make us issue an ioctl on its own file,
//!   no descriptor leaks into the program's view or across `fork()`, and a
//!   long-running audited process does not hold the module busy (`rmmod`).
//! - It exports no `la_symbind*`/`la_pltenter`: they would send every PLT
//!   call through the auditing slow path.
//! - It reads headers with `process_vm_readv()` ([`OwnMemoryOf`]) wherever the
//!   address is a deduction rather than a loader fact, so a wrong guess is an
//!   error, not a crash; one read of an object's first kilobyte
//!   ([`ReadAhead`]) gives its ELF header, program headers and notes.

use crate::cache::Cache;
use crate::cache::CacheDir;
use crate::device::Device;
use crate::device::Registration;
use crate::device::Tag;
use crate::device::Unregister;
use crate::generated;
use crate::generated::Source;
use crate::image::ImageError;
use crate::image::Layout;
use crate::image::Memory;
use crate::image::OwnMemoryOf;
use crate::image::ProgramHeaders;
use crate::image::ReadAhead;
use crate::image::MAX_TEXT;
use core::ffi::c_char;
use core::ffi::c_long;
use core::ffi::c_uint;
use core::ffi::c_void;
use core::ffi::CStr;
use sframe_uapi::SFRAME_FEAT_TAG;
use std::fmt::Write as _;
use std::io;
use std::panic::catch_unwind;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::AtomicI32;
use std::sync::atomic::AtomicU8;
use std::sync::atomic::Ordering;
use std::sync::Mutex;
use std::sync::OnceLock;

/// The highest audit interface version we implement (`LAV_CURRENT` in
/// glibc 2.35 and later; older loaders offer 1, which we accept too).
const LAV_CURRENT: c_uint = 2;
/// `LM_ID_BASE`: the initial namespace.
const LM_ID_BASE: c_long = 0;
/// Our own namespace, in messages (the loader does not tell us its id).
const OWN_LMID: c_long = -1;

/// The public head of glibc's `struct link_map` (`<link.h>`), the part
/// shared with debuggers and stable across versions.
#[repr(C)]
pub struct LinkMap {
    /// Load bias: run-time minus link-time addresses.
    pub l_addr: usize,
    /// The object's path ("" for the main program).
    pub l_name: *const c_char,
    /// The object's dynamic section, in memory.
    pub l_ld: *const c_void,
    /// The next object in the namespace.
    pub l_next: *const LinkMap,
    /// The previous object in the namespace (null for its first).
    pub l_prev: *const LinkMap,
}

/// Is registration possible?  Decided at the first object with a section.
static DEVICE_STATE: AtomicU8 = AtomicU8::new(DEVICE_UNKNOWN);
const DEVICE_UNKNOWN: u8 = 0;
const DEVICE_READY: u8 = 1;
const DEVICE_OFF: u8 = 2;

static DEBUG: AtomicBool = AtomicBool::new(false);

/// Whether the module registers by tag (`SFRAME_FEAT_TAG`), decided with
/// the device.
static TAGS: AtomicBool = AtomicBool::new(false);

/// What to do for objects without `PT_GNU_SFRAME` (`SFRAME_AUDIT_SYNTH`).
static SYNTH: AtomicU8 = AtomicU8::new(SYNTH_CACHED);
const SYNTH_OFF: u8 = 0;
const SYNTH_CACHED: u8 = 1;
const SYNTH_UNCACHED: u8 = 2;

/// The cache directory (`None`: no usable one), decided at first use.  Only
/// its path is kept: the directory is opened once for the program's start
/// ([`START_KEPT`]) and then per object, so that no descriptor of ours
/// lives in the program between calls once its code runs.
static CACHE_DIR: OnceLock<Option<CacheDir>> = OnceLock::new();

/// The system's cache directory, read before the user's (`None`: none
/// named), decided at first use and opened like the user's.
static SYSTEM_CACHE_DIR: OnceLock<Option<CacheDir>> = OnceLock::new();

/// Whether the program is still being loaded: from our first call until
/// the loader reports its initial namespace consistent ([`la_activity`]),
/// which it does once it has mapped and relocated the program's objects
/// and before it runs any of their code (constructors, then the entry
/// point).
static STARTING: AtomicBool = AtomicBool::new(true);

/// The process's ID while it is being loaded ([`STARTING`]), asked for
/// once (0: not yet): none of the program's code runs before the loader is
/// done, so nothing forks the process under us.  See [`own_pid`].
static START_PID: AtomicI32 = AtomicI32::new(0);

/// `/dev/sframe` and the cache directories, opened at the first object
/// that needs them while the program is being loaded, and shared by the
/// objects that follow: the loader calls us for one object at a time, and
/// no code of the program runs that could close or reuse the descriptors.
/// Closed when the loader is done ([`end_start`]); after that (a
/// `dlopen()`, while the program's threads run) each object opens its own
/// and closes them before returning.
static START_KEPT: Mutex<Kept> = Mutex::new(Kept {
    device: None,
    caches: None,
});

/// The cache directories, opened (`None`: not usable), and the stamps read
/// from their files since.
#[derive(Default)]
struct OpenCaches {
    system: Option<Cache>,
    user: Option<Cache>,
    stamps: generated::Stamps,
}

impl OpenCaches {
    /// The two directories, as [`generated`] reads them, and the stamps
    /// read from them, to look in and add to.
    fn parts(&mut self) -> (generated::Caches<'_>, &mut generated::Stamps) {
        let caches = generated::Caches {
            system: self.system.as_ref(),
            user: self.user.as_ref(),
        };
        (caches, &mut self.stamps)
    }
}

/// See [`START_KEPT`].
#[derive(Default)]
struct Kept {
    /// `None` until an object needs it, or while it cannot be opened.
    device: Option<Device>,
    /// `None` until an object without a section of its own needs them.
    caches: Option<OpenCaches>,
}

/// Whether our own namespace's objects were registered (at the first
/// `la_objopen`).
static OWN_NAMESPACE: AtomicBool = AtomicBool::new(false);

/// The text segments of our own namespace's objects that we registered
/// (for good): the loader is in both namespaces, and when the main
/// namespace's `la_objopen` reports it again its section need not be
/// read a second time only for the module to answer `EEXIST`.
static OWN_TEXTS: Mutex<OwnTexts> = Mutex::new(OwnTexts {
    pid: 0,
    starts: [0; MAX_OWN_TEXTS],
    len: 0,
});
/// Text segments of our own namespace we remember.
const MAX_OWN_TEXTS: usize = MAX_OWN_OBJECTS * MAX_TEXT;

/// See [`OWN_TEXTS`].
struct OwnTexts {
    /// The process that registered them (a `fork()` child inherits this
    /// memory, not necessarily the registrations).
    pid: libc::pid_t,
    starts: [u64; MAX_OWN_TEXTS],
    len: usize,
}

impl OwnTexts {
    fn add(&mut self, pid: libc::pid_t, layout: &Layout) {
        if self.pid != pid {
            *self = OwnTexts {
                pid,
                starts: [0; MAX_OWN_TEXTS],
                len: 0,
            };
        }
        for text in layout.text() {
            if let Some(slot) = self.starts.get_mut(self.len) {
                *slot = text.start;
                self.len += 1;
            }
        }
    }

    /// Whether every text segment of `layout` is one of ours, registered
    /// by this process.
    fn covers(&self, pid: libc::pid_t, layout: &Layout) -> bool {
        let ours = self.starts.get(..self.len).unwrap_or_default();
        self.pid == pid
            && !layout.text().is_empty()
            && layout.text().iter().all(|t| ours.contains(&t.start))
    }
}

/// Writes one line to standard error when `SFRAME_AUDIT_DEBUG=1`.
macro_rules! debug {
    ($($arg:tt)*) => {
        if DEBUG.load(Ordering::Relaxed) {
            log(format_args!($($arg)*));
        }
    };
}

fn log(args: core::fmt::Arguments<'_>) {
    let mut line = String::from("sframe-audit: ");
    let _ = line.write_fmt(args);
    line.push('\n');
    // SAFETY: `line` is a valid buffer of `line.len()` bytes.  A short or
    // failed write to stderr is of no consequence to a debug log.
    let _ = unsafe { libc::write(2, line.as_ptr().cast(), line.len()) };
}

/// What [`la_objopen`] registered for one object; its address is the
/// object's audit cookie, so [`la_objclose`] finds it without a lookup.
struct Registered {
    /// The process that registered: a `fork()` child inherits the loader's
    /// state but not (for now) the registrations.
    pid: libc::pid_t,
    /// Handle and text start of each executable segment registered.
    handles: [(u64, u64); MAX_TEXT],
    len: usize,
}

/// Opens `/dev/sframe`, or `None` if registration is off.  The first call
/// decides: a device that is missing, refuses us, or speaks another ABI
/// turns registration off for the life of the process.
fn device() -> Option<Device> {
    if DEVICE_STATE.load(Ordering::Relaxed) == DEVICE_OFF {
        return None;
    }
    let opened = Device::open().and_then(|dev| {
        if DEVICE_STATE.load(Ordering::Relaxed) == DEVICE_UNKNOWN {
            let v = dev.check_version()?;
            TAGS.store(v.features & SFRAME_FEAT_TAG != 0, Ordering::Relaxed);
            debug!(
                "/dev/sframe: ABI {}, module {}.{}.{}",
                v.abi_version,
                v.module_version >> 16,
                (v.module_version >> 8) & 0xff,
                v.module_version & 0xff
            );
        }
        Ok(dev)
    });
    match opened {
        Ok(dev) => {
            DEVICE_STATE.store(DEVICE_READY, Ordering::Relaxed);
            Some(dev)
        }
        Err(err) if DEVICE_STATE.load(Ordering::Relaxed) == DEVICE_READY && is_transient(&err) => {
            debug!("/dev/sframe: {err}: skipping this object");
            None
        }
        Err(err) => {
            debug!("/dev/sframe unusable ({err}): not registering anything");
            DEVICE_STATE.store(DEVICE_OFF, Ordering::Relaxed);
            None
        }
    }
}

/// Whether a failure to open a device that worked before is the program's
/// passing state (out of descriptors, a signal), not the module's answer.
fn is_transient(err: &io::Error) -> bool {
    matches!(
        err.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::EINTR | libc::ENOMEM)
    )
}

/// Whether an errno from `REGISTER` means the module cannot register at all
/// (as opposed to "not this object").
fn disables_registration(err: &io::Error) -> bool {
    matches!(
        err.raw_os_error(),
        Some(libc::ENOTTY | libc::ENOSYS | libc::EPERM | libc::EACCES)
    )
}

/// The object's name for messages.
///
/// # Safety
///
/// `map` is a link map the loader gave us.
unsafe fn name(map: &LinkMap) -> &str {
    if map.l_name.is_null() {
        return "?";
    }
    // SAFETY: The loader keeps `l_name` a NUL-terminated string for the
    // object's lifetime.
    let name = unsafe { CStr::from_ptr(map.l_name) };
    match name.to_str() {
        Ok("") => "(main program)",
        Ok(name) => name,
        Err(_) => "(non-UTF-8 name)",
    }
}

/// Whether `layout` describes the object the loader recorded in `map`.
fn describes(layout: &Layout, map: &LinkMap) -> bool {
    let ld = map.l_ld as u64;
    layout.bias == map.l_addr as u64 && (ld == 0 || layout.dynamic == Some(ld))
}

/// Finds the object's layout from its link map.
fn locate(mem: &impl Memory, map: &LinkMap, lmid: c_long) -> Result<Layout, ImageError> {
    if lmid == LM_ID_BASE && map.l_prev.is_null() {
        // The main program: the kernel told us where its program headers
        // are (and it may be a non-PIE executable, whose ELF header is not
        // at its zero bias).
        // SAFETY: getauxval() has no preconditions.
        let (phdr, phnum) = unsafe {
            (
                libc::getauxval(libc::AT_PHDR),
                libc::getauxval(libc::AT_PHNUM),
            )
        };
        let phnum = usize::try_from(phnum).unwrap_or(usize::MAX);
        if phdr != 0 {
            let layout = Layout::new(&ProgramHeaders::read(mem, phdr, phnum)?, map.l_addr as u64)?;
            if describes(&layout, map) {
                return Ok(layout);
            }
            // `ld.so ./prog` maps the program itself; fall through.
        }
    }
    // Shared objects (ld.so, the vDSO, PIE programs run through ld.so) are
    // linked at zero, so their ELF header is at the load bias.
    let layout = Layout::read_at_header(mem, map.l_addr as u64)?;
    if !describes(&layout, map) {
        return Err(ImageError::Mismatch);
    }
    Ok(layout)
}

/// This process's ID: during the start, the one [`START_PID`] keeps (a
/// start reads and registers several objects, each with its ID); after
/// it, asked each time, as a `fork()` child runs our code with the
/// parent's statics.
fn own_pid() -> libc::pid_t {
    let ask = || {
        // SAFETY: getpid() has no preconditions.
        unsafe { libc::getpid() }
    };
    if !STARTING.load(Ordering::Relaxed) {
        return ask();
    }
    match START_PID.load(Ordering::Relaxed) {
        0 => {
            let pid = ask();
            START_PID.store(pid, Ordering::Relaxed);
            pid
        }
        pid => pid,
    }
}

/// The object's name for messages, the file it was mapped from (which
/// names it when it has no build-id: its path, or for the main program,
/// whose name is empty, the kernel's link to it) and its layout.
fn object_of<'a>(
    mem: &impl Memory,
    map: &'a LinkMap,
    lmid: c_long,
) -> Option<(&'a str, Option<&'a CStr>, Layout)> {
    // SAFETY: `map` came from the loader.
    let name = unsafe { name(map) };
    let layout = match locate(mem, map, lmid) {
        Ok(layout) => layout,
        Err(err) => {
            debug!("{name}: skipped: {err}");
            return None;
        }
    };
    // SAFETY: The loader keeps `l_name` a NUL-terminated string for the
    // object's lifetime.
    let path = (!map.l_name.is_null())
        .then(|| unsafe { CStr::from_ptr(map.l_name) })
        .map(|p| if p.is_empty() { c"/proc/self/exe" } else { p });
    Some((name, path, layout))
}

/// Registers the object; returns the cookie for [`la_objclose`] (0: none,
/// or registered for good).
///
/// An object of the program's start ([`STARTING`]) is registered for good:
/// the loader never unloads one (`dlclose()` only unloads what `dlopen()`
/// loaded), so its `la_objclose` comes at the process's exit, when the
/// module drops every registration of its mm anyway.  Removing them there
/// cost each such object four system calls at every exit, and in a
/// `vfork()` child that calls `exit()`, which shares its parent's mm,
/// removed the parent's registrations.
fn objopen(map: &LinkMap, lmid: c_long) -> usize {
    let cookie = objopen_cookie(map, lmid);
    if cookie != 0 && STARTING.load(Ordering::Relaxed) {
        // SAFETY: A non-zero cookie is a `Box<Registered>` that
        // `register_object` leaked; it is not handed to the loader.
        drop(unsafe { Box::from_raw(cookie as *mut Registered) });
        return 0;
    }
    cookie
}

/// [`objopen`], with a cookie for every object registered.
fn objopen_cookie(map: &LinkMap, lmid: c_long) -> usize {
    if DEVICE_STATE.load(Ordering::Relaxed) == DEVICE_OFF {
        return 0;
    }
    // The object's headers, read from its first page at once.
    let own = OwnMemoryOf(own_pid());
    let mem = ReadAhead::new(&own);
    let Some((name, path, layout)) = object_of(&mem, map, lmid) else {
        return 0;
    };
    if registered_in_own_namespace(&layout) {
        debug!("{name}: namespace {lmid}: registered with our own namespace");
        return 0;
    }
    register_object(&mem, name, path, &layout, lmid)
}

/// Whether the object `layout` describes was registered with our own
/// namespace (the loader), by this process.
fn registered_in_own_namespace(layout: &Layout) -> bool {
    let pid = own_pid();
    OWN_TEXTS.lock().is_ok_and(|own| own.covers(pid, layout))
}

/// Registers the object `layout` describes, its own section or one
/// generated; returns the cookie for [`la_objclose`] (0: none).  `lmid` is
/// for messages.
fn register_object(
    mem: &impl Memory,
    name: &str,
    path: Option<&CStr>,
    layout: &Layout,
    lmid: c_long,
) -> usize {
    if layout.sframe.is_none()
        && (layout.eh_frame_hdr.is_none() || SYNTH.load(Ordering::Relaxed) == SYNTH_OFF)
    {
        debug!("{name}: no PT_GNU_SFRAME, none generated (no PT_GNU_EH_FRAME, or generation off)");
        return 0;
    }
    if STARTING.load(Ordering::Relaxed) {
        // Not poisoned unless a registration panicked: then as after the
        // start.
        if let Ok(mut kept) = START_KEPT.lock() {
            let kept = &mut *kept;
            if kept.device.is_none() {
                kept.device = device();
            }
            let Some(dev) = kept.device.as_ref() else {
                return 0;
            };
            return register_object_in(dev, mem, name, path, layout, lmid, &mut kept.caches);
        }
    }
    let Some(dev) = device() else {
        return 0;
    };
    register_object_in(&dev, mem, name, path, layout, lmid, &mut None)
}

/// Closes what the program's start kept open ([`START_KEPT`]).
fn end_start() {
    let kept = match START_KEPT.lock() {
        Ok(mut kept) => core::mem::take(&mut *kept),
        Err(poisoned) => core::mem::take(&mut *poisoned.into_inner()),
    };
    if kept.device.is_some() || kept.caches.is_some() {
        debug!("program loaded: /dev/sframe and the caches closed");
    }
}

/// Where registrations go: `/dev/sframe`, or in the start-up benchmark a
/// sink that accepts everything ([`replay_start`]).
pub trait Registry {
    /// Registers one text range; returns the handle.
    fn register(&self, reg: &Registration) -> io::Result<u64>;

    /// Removes the registration `handle` names.
    fn unregister(&self, handle: u64) -> io::Result<()>;
}

impl Registry for Device {
    fn register(&self, reg: &Registration) -> io::Result<u64> {
        Device::register(self, reg, None)
    }

    fn unregister(&self, handle: u64) -> io::Result<()> {
        Device::unregister(self, Unregister::Handle(handle), None)
    }
}

/// [`register_object`] once the device is open: obtains the section and
/// registers it in `dev` for every text segment.  `caches` are the cache
/// directories (and what was read from them) if an earlier object opened
/// them, else opened here if needed and left there.
fn register_object_in(
    dev: &impl Registry,
    mem: &impl Memory,
    name: &str,
    path: Option<&CStr>,
    layout: &Layout,
    lmid: c_long,
    caches: &mut Option<OpenCaches>,
) -> usize {
    let tags = TAGS.load(Ordering::Relaxed);
    // The object's own section, mapped with it (the same bytes at the same
    // address), or one generated from its `.eh_frame`, in our memory, kept
    // for the calls (the module copies it).
    let held = match layout.sframe {
        Some(_) => None,
        None => {
            // Its cache file's header for a registration by tag, then, if
            // need be, the whole file.
            let open = caches.get_or_insert_with(open_caches);
            if tags {
                if let Some(cookie) =
                    register_cached_by_tag(dev, mem, name, path, layout, lmid, open)
                {
                    return cookie;
                }
            }
            match synthesize(mem, path, name, layout, open.parts().0) {
                Some(held) => Some(held),
                None => return 0,
            }
        }
    };
    let section = match (&layout.sframe, &held) {
        (Some(sframe), _) => Section {
            data: sframe.clone(),
            sframe_addr: sframe.start,
            tag: Tag::None,
        },
        (None, Some(held)) => {
            let start = held.section.as_ptr() as u64;
            let len = held.section.len() as u64;
            // A section the caches hold is filed under its digest, which
            // the next start reads from the cache file's header to
            // register it by tag.
            let cached = matches!(
                held.source,
                Source::Cache | Source::SystemCache | Source::Stored
            );
            Section {
                data: start..start + len,
                sframe_addr: layout.bias.wrapping_add(held.base),
                tag: if tags && cached {
                    Tag::File(held.digest)
                } else {
                    Tag::None
                },
            }
        }
        (None, None) => return 0,
    };
    // Only a registration by tag is ever not held.
    let cookie = register_texts(dev, name, layout, lmid, &section).unwrap_or(0);
    if held.is_some_and(|held| !matches!(held.source, Source::Cache | Source::SystemCache)) {
        // The section is freed; so is what the generator used, which
        // malloc keeps in our heap unless asked to give it back.
        // SAFETY: malloc_trim() has no preconditions.
        unsafe { libc::malloc_trim(0) };
    }
    cookie
}

/// The section of one object as registered for each of its texts.
struct Section {
    /// Its bytes, in our memory (by tag: `0..len`).
    data: core::ops::Range<u64>,
    /// The address the object maps them at.
    sframe_addr: u64,
    tag: Tag,
}

/// A registration by tag found no copy under the tag: the section's bytes
/// are to be given.
struct NotHeld;

/// Registers `section`, of the object `layout` describes, for each of its
/// text segments; returns the cookie for [`la_objclose`] (0: none).
/// `name` and `lmid` are for messages.  By tag, `NotHeld` if the module
/// has no copy under it (nothing left registered).
fn register_texts(
    dev: &impl Registry,
    name: &str,
    layout: &Layout,
    lmid: c_long,
    section: &Section,
) -> Result<usize, NotHeld> {
    let mut registered = Registered {
        pid: own_pid(),
        handles: [(0, 0); MAX_TEXT],
        len: 0,
    };
    let Section {
        data,
        sframe_addr,
        tag,
    } = section;
    for text in layout.text() {
        let reg = Registration {
            data: data.clone(),
            sframe_addr: *sframe_addr,
            text: text.clone(),
            tag: *tag,
        };
        match dev.register(&reg) {
            Ok(handle) => {
                debug!(
                    "{name}: namespace {lmid}: registered text {:#x}-{:#x}, sframe {:#x}+{:#x}: handle {handle}",
                    text.start,
                    text.end,
                    sframe_addr,
                    data.end - data.start
                );
                if let Some(slot) = registered.handles.get_mut(registered.len) {
                    *slot = (handle, text.start);
                    registered.len += 1;
                }
            }
            // The module registered the program (or its interpreter) at
            // exec: it is covered, and the registration is not ours to
            // remove at la_objclose.
            Err(err) if err.raw_os_error() == Some(libc::EEXIST) => {
                debug!(
                    "{name}: namespace {lmid}: text {:#x}-{:#x} already registered",
                    text.start, text.end
                );
            }
            // No copy under the tag (a first start since the module was
            // loaded, or its kept copy let go): none of the texts.
            Err(err) if matches!(tag, Tag::Find(_)) && err.raw_os_error() == Some(libc::ENOENT) => {
                for &(handle, _) in registered.handles.get(..registered.len).unwrap_or_default() {
                    let _ = dev.unregister(handle);
                }
                return Err(NotHeld);
            }
            Err(err) => {
                debug!(
                    "{name}: register text {:#x}-{:#x}: {err}",
                    text.start, text.end
                );
                if disables_registration(&err) {
                    DEVICE_STATE.store(DEVICE_OFF, Ordering::Relaxed);
                    break;
                }
            }
        }
    }
    if registered.len == 0 {
        return Ok(0);
    }
    Ok(Box::into_raw(Box::new(registered)) as usize)
}

/// Registers the section the caches hold for the object `layout`
/// describes by its tag, the digest its cache file's header records,
/// without reading it: `Some(cookie)` if the module holds our copy of it
/// (left by this program's last start, or by another program that loads
/// the same object); `None` if no cache in `open` or the module has none,
/// and the section is then read (or generated) and given.  A header read
/// for another object of this start with the same identity (libc, in our
/// namespace and the program's) is not read again.
fn register_cached_by_tag(
    dev: &impl Registry,
    mem: &impl Memory,
    name: &str,
    path: Option<&CStr>,
    layout: &Layout,
    lmid: c_long,
    open: &mut OpenCaches,
) -> Option<usize> {
    let (caches, stamps) = open.parts();
    let (stamp, source) = generated::cached_stamp(mem, layout, path, caches, stamps)?;
    let section = Section {
        data: 0..stamp.len as u64,
        sframe_addr: layout.bias.wrapping_add(stamp.base),
        tag: Tag::Find(stamp.digest),
    };
    let from = match source {
        Source::SystemCache => "the system cache",
        _ => "the cache",
    };
    match register_texts(dev, name, layout, lmid, &section) {
        Ok(cookie) => {
            // Otherwise every text was refused or registered already
            // (said above).
            let how = if cookie != 0 {
                "the module holds it"
            } else {
                "nothing registered"
            };
            debug!(
                "{name}: no PT_GNU_SFRAME: section from {from} ({} bytes), by tag: {how}",
                stamp.len
            );
            Some(cookie)
        }
        Err(NotHeld) => {
            debug!(
                "{name}: no PT_GNU_SFRAME: section in {from}: the module holds no copy by its tag"
            );
            None
        }
    }
}

/// An object of the audit library's own namespace, as `dl_iterate_phdr()`
/// reports it.
struct OwnObject {
    bias: u64,
    phdr: u64,
    phnum: usize,
    name: *const c_char,
}

/// Objects of our own namespace we are prepared to register (it has three:
/// this library, its libc and the loader; the unwinder is linked in, see
/// `build.rs`).
const MAX_OWN_OBJECTS: usize = 16;

/// The objects of the namespace this library was loaded in: the loader
/// reports no `la_objopen` for them.
fn own_namespace() -> Vec<OwnObject> {
    /// Called by `dl_iterate_phdr()` for each object of the caller's
    /// namespace, with `data` the vector below.
    unsafe extern "C" fn collect(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        data: *mut c_void,
    ) -> libc::c_int {
        // SAFETY: `data` is the `Vec` that `own_namespace` passed, alive and
        // not otherwise borrowed during the iteration.
        let objects = unsafe { &mut *data.cast::<Vec<OwnObject>>() };
        if info.is_null() || objects.len() == objects.capacity() {
            return 1;
        }
        // SAFETY: The loader passes a valid `dl_phdr_info` for the call.
        let info = unsafe { &*info };
        objects.push(OwnObject {
            bias: info.dlpi_addr,
            phdr: info.dlpi_phdr as u64,
            phnum: usize::from(info.dlpi_phnum),
            name: info.dlpi_name,
        });
        0
    }
    let mut objects = Vec::with_capacity(MAX_OWN_OBJECTS);
    // SAFETY: `collect` matches the callback type and only touches
    // `objects` through `data`.  glibc reports the namespace of the code
    // that calls it: ours.
    unsafe { libc::dl_iterate_phdr(Some(collect), (&raw mut objects).cast()) };
    objects
}

/// Registers the objects of our own namespace, once per process: without
/// them a sample taken while we work (in a `dlopen()` of the program, or
/// at its exit) stops at its first frame.  They stay registered until the
/// process exits.
fn register_own_namespace() {
    own_namespace_in(|mem, name, path, layout| {
        if register_object(mem, name, path, layout, OWN_LMID) != 0 {
            remember_own(layout);
        }
    });
}

/// Records that the object `layout` describes is registered with our own
/// namespace.
fn remember_own(layout: &Layout) {
    let pid = own_pid();
    if let Ok(mut own) = OWN_TEXTS.lock() {
        own.add(pid, layout);
    }
}

/// Calls `register` for each object of our own namespace whose layout can
/// be read.
fn own_namespace_in(
    mut register: impl FnMut(&ReadAhead<'_, OwnMemoryOf>, &str, Option<&CStr>, &Layout),
) {
    for object in own_namespace() {
        // SAFETY: `dlpi_name` is the loader's NUL-terminated name of a
        // loaded object, kept for the object's lifetime (ours).
        let path = (!object.name.is_null()).then(|| unsafe { CStr::from_ptr(object.name) });
        let name = path.and_then(|p| p.to_str().ok()).unwrap_or("?");
        if DEVICE_STATE.load(Ordering::Relaxed) == DEVICE_OFF {
            return;
        }
        let own = OwnMemoryOf(own_pid());
        let mem = ReadAhead::new(&own);
        let layout = ProgramHeaders::read(&mem, object.phdr, object.phnum)
            .and_then(|phdrs| Layout::new(&phdrs, object.bias));
        match layout {
            // Registered for good: the cookie is not kept (a section the
            // main namespace also maps, the loader's, is registered once).
            Ok(layout) => register(&mem, name, path.filter(|p| !p.is_empty()), &layout),
            Err(err) => debug!("{name}: own namespace: skipped: {err}"),
        }
    }
}

/// A section generated for the object without `PT_GNU_SFRAME` that
/// `layout` describes, through `caches` (none if caching is off); `None`
/// (and a debug message) if it has none or generation is off.
fn synthesize(
    mem: &impl Memory,
    path: Option<&CStr>,
    name: &str,
    layout: &Layout,
    caches: generated::Caches<'_>,
) -> Option<generated::Held> {
    match generated::obtain_held(mem, layout, path, caches) {
        Ok(gen) => {
            debug!("{name}: no PT_GNU_SFRAME: {gen}");
            Some(gen)
        }
        Err(err) => {
            debug!("{name}: no PT_GNU_SFRAME, none generated: {err}");
            None
        }
    }
}

/// The system's cache and the user's, opened (or `None`); neither if the
/// caches are off (`SFRAME_AUDIT_SYNTH`).
fn open_caches() -> OpenCaches {
    let mut open = OpenCaches::default();
    if SYNTH.load(Ordering::Relaxed) != SYNTH_CACHED {
        return open;
    }
    // Absent until the system's libraries are cached: no message.
    open.system = open_cache(
        &SYSTEM_CACHE_DIR,
        CacheDir::system,
        CacheDir::open_shared,
        true,
        "system cache",
        "not used",
    );
    open.user = open_cache(
        &CACHE_DIR,
        CacheDir::from_env,
        CacheDir::create_and_open,
        false,
        "cache",
        "not caching",
    );
    open
}

/// The cache directory `dir` holds (named by `init` at first use), opened
/// with `open` for one object; `None` if none is named or it cannot be
/// opened, which a debug message says ("`what` DIR: error: `outcome`")
/// unless it does not exist and `quiet_absent`.
fn open_cache(
    dir: &OnceLock<Option<CacheDir>>,
    init: fn() -> Option<CacheDir>,
    open: fn(&CacheDir) -> std::io::Result<Cache>,
    quiet_absent: bool,
    what: &str,
    outcome: &str,
) -> Option<Cache> {
    let dir = dir.get_or_init(init).as_ref()?;
    match open(dir) {
        Ok(cache) => Some(cache),
        Err(err) if quiet_absent && err.raw_os_error() == Some(libc::ENOENT) => None,
        Err(err) => {
            debug!("{what} {}: {err}: {outcome}", dir.path().display());
            None
        }
    }
}

/// Removes what [`objopen`] registered under `cookie`.
fn objclose(cookie: usize) {
    if cookie == 0 {
        return;
    }
    // SAFETY: A non-zero cookie is a `Box<Registered>` that `objopen` leaked
    // and that the loader hands back exactly once, in `la_objclose`.
    let registered = unsafe { Box::from_raw(cookie as *mut Registered) };
    if DEVICE_STATE.load(Ordering::Relaxed) != DEVICE_READY {
        return;
    }
    let Some(dev) = device() else {
        return;
    };
    // SAFETY: getpid() has no preconditions.
    let same_process = unsafe { libc::getpid() } == registered.pid;
    for &(handle, text_start) in registered.handles.iter().take(registered.len) {
        // In a fork() child the handle means nothing; the address still
        // names the same object (today the child has no registrations, so
        // this finds none).
        let which = if same_process {
            Unregister::Handle(handle)
        } else {
            Unregister::Address(text_start)
        };
        match dev.unregister(which, None) {
            Ok(()) => debug!("unregistered {which:?}"),
            Err(err) => debug!("unregister {which:?}: {err}"),
        }
    }
}

/// Reads the switches from the environment (`SFRAME_AUDIT_DEBUG`,
/// `SFRAME_AUDIT_SYNTH`).
fn read_environment() {
    let on = std::env::var_os("SFRAME_AUDIT_DEBUG").is_some_and(|v| v == "1");
    DEBUG.store(on, Ordering::Relaxed);
    let synth = match std::env::var_os("SFRAME_AUDIT_SYNTH") {
        Some(v) if v == "0" => SYNTH_OFF,
        Some(v) if v == "nocache" => SYNTH_UNCACHED,
        _ => SYNTH_CACHED,
    };
    SYNTH.store(synth, Ordering::Relaxed);
}

/// The audit library's start-up work for the objects of the calling
/// process, registered in `registry` instead of `/dev/sframe`: what the
/// first [`la_objopen`] does for the objects of our own namespace (here:
/// the caller's), then what every [`la_objopen`] does for each object of
/// the main namespace, in link map order.  Returns the registrations made.
///
/// For the start-up benchmark (`examples/startup.rs`), which runs where
/// there is no module: with `/dev/sframe` missing the library itself stops
/// at the first object with a section and does nothing more.
#[doc(hidden)]
pub fn replay_start(registry: &impl Registry) -> usize {
    read_environment();
    let mut cookies = Vec::new();
    // Shared by the objects, as the library's start shares them.
    let mut caches = None;
    own_namespace_in(|mem, name, path, layout| {
        let cookie = register_object_in(registry, mem, name, path, layout, OWN_LMID, &mut caches);
        if cookie != 0 {
            remember_own(layout);
        }
        cookies.push(cookie);
    });
    // SAFETY: dlopen(NULL) returns the main program's handle, and dlinfo()
    // writes its link map through a pointer to a pointer.
    let mut map: *const LinkMap = core::ptr::null();
    unsafe {
        let handle = libc::dlopen(core::ptr::null(), libc::RTLD_NOW);
        if !handle.is_null() {
            libc::dlinfo(handle, libc::RTLD_DI_LINKMAP, (&raw mut map).cast());
            libc::dlclose(handle);
        }
    }
    while !map.is_null() {
        // SAFETY: The loader's link maps of the main namespace stay valid
        // while nothing is unloaded.
        let entry = unsafe { &*map };
        let own = OwnMemoryOf(own_pid());
        let mem = ReadAhead::new(&own);
        if let Some((name, path, layout)) = object_of(&mem, entry, LM_ID_BASE) {
            if !registered_in_own_namespace(&layout) {
                cookies.push(register_object_in(
                    registry,
                    &mem,
                    name,
                    path,
                    &layout,
                    LM_ID_BASE,
                    &mut caches,
                ));
            }
        }
        map = entry.l_next;
    }
    let made = cookies.iter().filter(|&&c| c != 0).count();
    for cookie in cookies.into_iter().filter(|&c| c != 0) {
        // SAFETY: A non-zero cookie is a `Box<Registered>` that
        // `register_object_in` leaked, freed here once.
        drop(unsafe { Box::from_raw(cookie as *mut Registered) });
    }
    made
}

/// First call from the loader: agree on the interface version.
#[no_mangle]
pub extern "C" fn la_version(version: c_uint) -> c_uint {
    let _ = catch_unwind(|| {
        // Our panics (there should be none) must not print into the
        // program's stderr.  This is our own copy of std: the hook does not
        // touch the audited program's.
        std::panic::set_hook(Box::new(|info| debug!("internal error: {info}")));
        read_environment();
    });
    if version == 0 {
        return 0;
    }
    version.min(LAV_CURRENT)
}

/// An object was mapped: register its SFrame section.
///
/// Returns no `LA_FLG_BIND*` flags: we audit no symbol bindings.
///
/// # Safety
///
/// Called by the dynamic loader with its link map and our cookie slot.
#[no_mangle]
pub unsafe extern "C" fn la_objopen(map: *mut LinkMap, lmid: c_long, cookie: *mut usize) -> c_uint {
    if map.is_null() || cookie.is_null() {
        return 0;
    }
    // SAFETY: The loader passes its link map for the object, valid for the
    // call.
    let map = unsafe { &*map };
    // The loader calls us under its lock: one call at a time.
    if !OWN_NAMESPACE.swap(true, Ordering::Relaxed) {
        let _ = catch_unwind(register_own_namespace);
    }
    let value = catch_unwind(AssertUnwindSafe(|| objopen(map, lmid))).unwrap_or(0);
    // SAFETY: `cookie` is our slot for this object, writable.
    unsafe { *cookie = value };
    0
}

/// `la_activity()`'s `LA_ACT_CONSISTENT`: a namespace's objects are all
/// mapped (or unmapped).
const LA_ACT_CONSISTENT: c_uint = 0;

/// The loader changes a namespace's objects.  The first time it reports one
/// consistent, the program's initial objects are loaded: what the start
/// kept open is closed before any of the program's code runs.
///
/// # Safety
///
/// Called by the dynamic loader with the namespace's cookie slot, which
/// we do not use.
#[no_mangle]
pub unsafe extern "C" fn la_activity(_cookie: *mut usize, flag: c_uint) {
    if flag == LA_ACT_CONSISTENT && STARTING.swap(false, Ordering::Relaxed) {
        let _ = catch_unwind(end_start);
    }
}

/// An object is about to be unmapped (`dlclose()`, or exit): remove it.
///
/// # Safety
///
/// Called by the dynamic loader with the cookie [`la_objopen`] set.
#[no_mangle]
pub unsafe extern "C" fn la_objclose(cookie: *mut usize) -> c_uint {
    if cookie.is_null() {
        return 0;
    }
    // SAFETY: `cookie` is our slot for this object.  Zero it so that the
    // registration is freed once even if the loader were to call us again.
    let value = unsafe { core::mem::replace(&mut *cookie, 0) };
    let _ = catch_unwind(|| objclose(value));
    0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::OwnMemory;

    #[test]
    fn version_negotiation() {
        assert_eq!(la_version(0), 0);
        assert_eq!(la_version(1), 1);
        assert_eq!(la_version(2), 2);
        assert_eq!(la_version(7), LAV_CURRENT);
    }

    #[test]
    fn a_panic_unwinds_to_catch_unwind_through_the_linked_unwinder() {
        // build.rs links libgcc_eh instead of libgcc_s, here as in the
        // library: the entry points still catch a panic of ours.
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        let index = std::hint::black_box(3);
        let caught = catch_unwind(|| [0u8; 2].get(index).copied().expect("out of range"));
        std::panic::set_hook(hook);
        assert!(caught.is_err());
    }

    #[test]
    fn finds_the_main_program_through_its_link_map() {
        // A link map as the loader builds it for this test binary.
        // SAFETY: getauxval() has no preconditions.
        let phdr = unsafe { libc::getauxval(libc::AT_PHDR) };
        let phnum = unsafe { libc::getauxval(libc::AT_PHNUM) } as usize;
        let phdrs = ProgramHeaders::read(&OwnMemory, phdr, phnum).unwrap();
        let pt_phdr = phdrs
            .iter()
            .find(|p| p.p_type == crate::image::PT_PHDR)
            .unwrap();
        let bias = phdr - pt_phdr.p_vaddr;
        let dynamic = Layout::new(&phdrs, bias).unwrap().dynamic.unwrap_or(0);
        let map = LinkMap {
            l_addr: bias as usize,
            l_name: c"".as_ptr(),
            l_ld: dynamic as *const c_void,
            l_next: core::ptr::null(),
            l_prev: core::ptr::null(),
        };
        let layout = locate(&OwnMemory, &map, LM_ID_BASE).unwrap();
        let here = finds_the_main_program_through_its_link_map as *const () as u64;
        assert!(layout.text().iter().any(|r| r.contains(&here)));
        // The same object seen as a dlmopen()ed one: found from its header.
        assert_eq!(
            locate(&OwnMemory, &map, 1).map(|l| l.bias).ok(),
            if bias == 0 { None } else { Some(bias) }
        );
    }

    #[test]
    fn own_namespace_lists_the_objects_of_the_caller() {
        let objects = own_namespace();
        assert!(!objects.is_empty() && objects.len() <= MAX_OWN_OBJECTS);
        // This test program (the caller) is among them, its text found
        // through the headers the loader reported.
        let here = own_namespace_lists_the_objects_of_the_caller as *const () as u64;
        let found = objects.iter().any(|o| {
            ProgramHeaders::read(&OwnMemory, o.phdr, o.phnum)
                .and_then(|p| Layout::new(&p, o.bias))
                .is_ok_and(|l| l.text().iter().any(|r| r.contains(&here)))
        });
        assert!(found);
    }

    #[test]
    fn a_wrong_link_map_is_refused_not_followed() {
        let map = LinkMap {
            l_addr: 0x10,
            l_name: core::ptr::null(),
            l_ld: core::ptr::null(),
            l_next: core::ptr::null(),
            l_prev: 8 as *const LinkMap,
        };
        assert!(matches!(
            locate(&OwnMemory, &map, 0),
            Err(ImageError::Read(_))
        ));
        // The loader's own cookie slot is set to "nothing registered".
        let mut cookie = 0x1234usize;
        let mut map = map;
        // SAFETY: Valid link map and cookie slot.
        unsafe { la_objopen(&mut map, 0, &mut cookie) };
        assert_eq!(cookie, 0);
        // SAFETY: As above.
        unsafe { la_objclose(&mut cookie) };
    }
}
