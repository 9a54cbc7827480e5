// SPDX-License-Identifier: GPL-2.0

//! The cache of generated SFrame sections, one file per object
//! ([`Identity`]), shared by every process of the user: the audit library
//! generates libc's section once, not at every program start.
//!
//! `$XDG_CACHE_HOME/sframe-unwind/synth` (default
//! `~/.cache/sframe-unwind/synth`), created mode 0700.  Processes share it
//! without locks:
//!
//! - A file is written under a temporary name and renamed over its final
//!   name, so a reader sees a whole file or none.  Two processes that
//!   generate the same object write the same bytes; the last rename wins.
//! - Nothing read is trusted before it is checked: a file must carry our
//!   header (magic, format revision, base, length, its own key, the digest
//!   of its section) and a section whose bytes have that digest and whose
//!   header this project's decoder parses, else it is ignored and replaced.
//!   The rows are not decoded again: the file was validated when it was
//!   written (the generator validates what it returns), the digest shows
//!   it is those bytes, and the module validates every section at
//!   registration anyway.  Nothing in the audit library interprets a row,
//!   so a hostile file can at worst be refused by the module.
//! - Files are opened relative to the directory, `O_NOFOLLOW`, `O_CLOEXEC`
//!   and `O_NONBLOCK` (a FIFO planted there cannot block us), and read with
//!   `pread()` (which a FIFO refuses); a section is read only from a
//!   regular file of bounded size, as long as its header says.  A header
//!   alone ([`Cache::stamp`]) is a fixed number of bytes and is not
//!   checked against the file.  The directory must be ours and not
//!   writable by others.
//! - No descriptor outlives a call: the audit library runs inside programs
//!   that close or `dup2()` over descriptors they do not know.
//! - A program running set-user-ID (`AT_SECURE`) never uses the cache: its
//!   environment names the directory.
//!
//! Beside each user's cache, the system's ([`CacheDir::system`],
//! `/var/cache/sframe-unwind/system`): sections for the system's
//! libraries and programs and the running kernel's vDSO, made ahead of
//! time by `sframectl fill-cache` as root (the Debian package runs it when
//! it is installed and whenever a package installs libraries or
//! programs), so that the first start of a program after the install
//! generates none.  It is read, never written,
//! by the audit library and the daemon, before the user's own; it must be
//! owned by root (or the user) and writable by nobody else, and its files
//! are readable by all: `fill-cache` puts there only sections of files
//! every user may read.

use crate::digest::xxh64;
use crate::identity::Identity;
use crate::pages::Pages;
use core::ops::DerefMut;
use std::ffi::CString;
use std::ffi::OsStr;
use std::io;
use std::os::fd::AsRawFd;
use std::os::fd::FromRawFd;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::path::PathBuf;

/// The header's magic: "SFRCACHE".
const MAGIC: [u8; 8] = *b"SFRCACHE";
/// Bump when the header changes: files of another revision are
/// regenerated.  2: the section's digest in the header.
pub const REVISION: u32 = 2;

/// The revision a file carries: [`REVISION`] and the generator's
/// fingerprint (its sources, the decoder's and the dependencies'
/// versions), so that a file another build of the generator wrote, whose
/// bytes may differ, is regenerated too, without anyone bumping anything.
pub const FILE_REVISION: u32 = REVISION.rotate_left(24) ^ sframe_synth::FINGERPRINT;
/// Header: magic, revision, key length, base, section length, digest of
/// the section ([`section_digest`]); then the key, padded to 8 bytes, then
/// the section.
const HEADER: usize = 40;
/// Largest file we read (libc's section is about 190 KiB).
const MAX_FILE: u64 = 64 << 20;
/// The system's cache ([`CacheDir::system`]).
pub const SYSTEM_CACHE: &str = "/var/cache/sframe-unwind/system";

/// A section as read from the cache (checked) or to be written to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The SFrame section.
    pub section: Vec<u8>,
    /// The link-time address its function starts are relative to.
    pub base: u64,
}

/// The cache directory, by path; [`CacheDir::open`] opens it for one use.
#[derive(Clone, Debug)]
pub struct CacheDir {
    path: CString,
}

/// The cache directory, open.
#[derive(Debug)]
pub struct Cache {
    dir: OwnedFd,
    /// The mode of the files [`Cache::store`] writes: 0600 in a user's
    /// cache, 0644 in the system's.
    file_mode: u32,
}

/// Who may own a cache directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Owner {
    /// Only the effective user: a user's own cache.
    Us,
    /// The effective user or root: the system's cache.
    UsOrRoot,
}

fn errno(n: i32) -> io::Error {
    io::Error::from_raw_os_error(n)
}

fn cstr(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| errno(libc::EINVAL))
}

impl CacheDir {
    /// The user's cache directory, from `XDG_CACHE_HOME` or `HOME`; `None`
    /// if neither is set (to an absolute path) or the program runs with
    /// privileges it was not started with.
    pub fn from_env() -> Option<Self> {
        // SAFETY: getauxval() has no preconditions.
        if unsafe { libc::getauxval(libc::AT_SECURE) } != 0 {
            return None;
        }
        let absolute = |v: std::ffi::OsString| Some(PathBuf::from(v)).filter(|p| p.is_absolute());
        let base = std::env::var_os("XDG_CACHE_HOME")
            .and_then(absolute)
            .or_else(|| Some(absolute(std::env::var_os("HOME")?)?.join(".cache")))?;
        Self::at(&base.join("sframe-unwind").join("synth")).ok()
    }

    /// The system's cache: `SFRAME_SYSTEM_CACHE` if set to an absolute
    /// path, else [`SYSTEM_CACHE`]; only [`SYSTEM_CACHE`] in a program
    /// running with privileges it was not started with.
    pub fn system() -> Option<Self> {
        // SAFETY: getauxval() has no preconditions.
        let secure = unsafe { libc::getauxval(libc::AT_SECURE) } != 0;
        let path = std::env::var_os("SFRAME_SYSTEM_CACHE")
            .filter(|_| !secure)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .unwrap_or_else(|| PathBuf::from(SYSTEM_CACHE));
        Self::at(&path).ok()
    }

    /// The cache directory `path`.
    pub fn at(path: &Path) -> io::Result<Self> {
        Ok(Self { path: cstr(path)? })
    }

    /// The directory's path.
    pub fn path(&self) -> &Path {
        Path::new(OsStr::from_bytes(self.path.as_bytes()))
    }

    /// Creates the directory and its missing parents, mode 0700.
    pub fn create(&self) -> io::Result<()> {
        self.create_with_mode(0o700)
    }

    /// Creates the directory and its missing parents with `mode`.
    fn create_with_mode(&self, mode: libc::mode_t) -> io::Result<()> {
        let path = self.path();
        let mut missing = Vec::new();
        for dir in path.ancestors() {
            if dir.as_os_str().is_empty() || std::fs::symlink_metadata(dir).is_ok() {
                break;
            }
            missing.push(dir);
        }
        for dir in missing.iter().rev() {
            let c = cstr(dir)?;
            // SAFETY: `c` is a NUL-terminated path.
            if unsafe { libc::mkdir(c.as_ptr(), mode) } != 0 {
                let err = io::Error::last_os_error();
                if err.raw_os_error() != Some(libc::EEXIST) {
                    return Err(err);
                }
                continue;
            }
            // The mode asked for, whatever the umask took from it.
            // SAFETY: `c` is a NUL-terminated path.
            if unsafe { libc::chmod(c.as_ptr(), mode) } != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(())
    }

    /// Opens the directory if it exists, is ours and is not writable by
    /// others.
    pub fn open(&self) -> io::Result<Cache> {
        self.open_owned(Owner::Us, 0o600)
    }

    /// Opens a shared directory (the system's cache) if it exists, is
    /// root's or ours, and is not writable by others: to read, or to write
    /// files every user may read.
    pub fn open_shared(&self) -> io::Result<Cache> {
        self.open_owned(Owner::UsOrRoot, 0o644)
    }

    /// Creates a shared directory (mode 0755) if need be, then opens it.
    pub fn create_shared_and_open(&self) -> io::Result<Cache> {
        match self.open_shared() {
            Err(err) if err.raw_os_error() == Some(libc::ENOENT) => {
                self.create_with_mode(0o755)?;
                self.open_shared()
            }
            other => other,
        }
    }

    /// Opens the directory if `owner` may own it and nobody else may
    /// write to it; its files to be written with `file_mode`.
    fn open_owned(&self, owner: Owner, file_mode: u32) -> io::Result<Cache> {
        // SAFETY: `path` is NUL-terminated.
        let fd = unsafe {
            libc::open(
                self.path.as_ptr(),
                libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: open() returned a new descriptor that nothing else owns.
        let dir = unsafe { OwnedFd::from_raw_fd(fd) };
        let st = fstat(&dir)?;
        // SAFETY: geteuid() has no preconditions.
        let ours = st.st_uid == unsafe { libc::geteuid() };
        let owned = ours || (owner == Owner::UsOrRoot && st.st_uid == 0);
        if !owned || st.st_mode & 0o022 != 0 {
            return Err(errno(libc::EPERM));
        }
        Ok(Cache { dir, file_mode })
    }

    /// Creates the directory if need be, then opens it.
    pub fn create_and_open(&self) -> io::Result<Cache> {
        match self.open() {
            Err(err) if err.raw_os_error() == Some(libc::ENOENT) => {
                self.create()?;
                self.open()
            }
            other => other,
        }
    }
}

fn fstat(fd: &OwnedFd) -> io::Result<libc::stat> {
    // SAFETY: An all-zero `stat` is a valid value to be overwritten.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    // SAFETY: `fd` is open and `st` a writable `stat`.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st)
}

fn file_name(key: &Identity) -> io::Result<CString> {
    const SUFFIX: &str = ".sframe";
    // Room for the NUL too: no reallocation in CString::new().
    let mut name = String::with_capacity(key.as_str().len() + SUFFIX.len() + 1);
    name.push_str(key.as_str());
    name.push_str(SUFFIX);
    CString::new(name).map_err(|_| errno(libc::EINVAL))
}

/// Why a cache file was not used.
#[derive(Debug)]
pub enum Miss {
    /// No file for this key.
    Absent,
    /// The file could not be read.
    Read(io::Error),
    /// The file is not a valid entry for this key: it is to be replaced.
    Invalid(&'static str),
}

impl core::fmt::Display for Miss {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Absent => f.write_str("not cached"),
            Self::Read(err) => write!(f, "cache file unreadable: {err}"),
            Self::Invalid(why) => write!(f, "cache file ignored: {why}"),
        }
    }
}

impl Cache {
    fn open_file(&self, name: &CString, flags: i32) -> io::Result<std::fs::File> {
        // SAFETY: `name` is NUL-terminated; the mode is read only with
        // O_CREAT.
        let fd = unsafe {
            libc::openat(
                self.dir.as_raw_fd(),
                name.as_ptr(),
                flags | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                self.file_mode as libc::c_uint,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: openat() returned a new descriptor that nothing else owns.
        Ok(unsafe { std::fs::File::from_raw_fd(fd) })
    }

    /// The entry for `key`, checked (see the module documentation).
    pub fn load(&self, key: &Identity) -> Result<Entry, Miss> {
        let (section, stamp) = self.load_stamped(key)?;
        Ok(Entry {
            section,
            base: stamp.base,
        })
    }

    /// [`Cache::load`], with what the header says of the section.
    pub(crate) fn load_stamped(&self, key: &Identity) -> Result<(Vec<u8>, Stamp), Miss> {
        self.read(key, |len| {
            let mut v = Vec::new();
            v.try_reserve_exact(len).ok()?;
            v.resize(len, 0);
            Some(v)
        })
    }

    /// [`Cache::load`] into a buffer of its own pages, returned to the
    /// system when dropped (the audit library: see [`Pages`]); and what
    /// the header says of it.
    pub fn load_pages(&self, key: &Identity) -> Result<(Pages, Stamp), Miss> {
        self.read(key, |len| Pages::new(len).ok())
    }

    /// What the file for `key` says of its section, from its header
    /// alone (one read): the section itself is neither read nor checked,
    /// nor the file's type and length, which only bound what reading the
    /// section would read.  For a registration by tag, which names the
    /// module's copy of the bytes this header described when they were
    /// read and checked, of the length it says: a header that names no
    /// such copy gets the section read, and then refused if it is wrong.
    pub fn stamp(&self, key: &Identity) -> Result<Stamp, Miss> {
        self.open_header(key).map(|(_, stamp, _)| stamp)
    }

    /// The section for `key` read into the buffer `alloc` gives for its
    /// length (`None`: out of memory), checked; and its stamp.
    ///
    /// Two reads at known offsets: our header and key, then the section.
    fn read<B: DerefMut<Target = [u8]>>(
        &self,
        key: &Identity,
        alloc: impl FnOnce(usize) -> Option<B>,
    ) -> Result<(B, Stamp), Miss> {
        let (file, stamp, at) = self.open_entry(key)?;
        let mut section = alloc(stamp.len).ok_or(Miss::Read(errno(libc::ENOMEM)))?;
        file.read_exact_at(&mut section, at)
            .map_err(|_| Miss::Invalid("truncated"))?;
        stamp.check(&section).map_err(Miss::Invalid)?;
        Ok((section, stamp))
    }

    /// The file for `key`, open, its header read and checked against the
    /// key; the header's stamp, and where the section starts.  Opened
    /// without blocking, read with `pread()`: a FIFO fails at once
    /// (`ESPIPE`), as does a directory.
    fn open_header(&self, key: &Identity) -> Result<(std::fs::File, Stamp, u64), Miss> {
        let name = file_name(key).map_err(Miss::Read)?;
        let file = match self.open_file(&name, libc::O_RDONLY | libc::O_NONBLOCK) {
            Ok(file) => file,
            Err(err) if err.raw_os_error() == Some(libc::ENOENT) => return Err(Miss::Absent),
            Err(err) => return Err(Miss::Read(err)),
        };
        let want = key.as_str().as_bytes();
        let at = HEADER + padded(want.len());
        let mut head = [0u8; HEADER + MAX_KEY];
        let head = head.get_mut(..at).ok_or(Miss::Invalid("key too long"))?;
        file.read_exact_at(head, 0)
            .map_err(|_| Miss::Invalid("truncated header"))?;
        let stamp = Stamp::parse(head, key).map_err(Miss::Invalid)?;
        Ok((file, stamp, at as u64))
    }

    /// [`Cache::open_header`], and the file checked before its section is
    /// read: a regular file of at most [`MAX_FILE`] bytes, as long as its
    /// header says.
    fn open_entry(&self, key: &Identity) -> Result<(std::fs::File, Stamp, u64), Miss> {
        let (file, stamp, at) = self.open_header(key)?;
        let meta = file.metadata().map_err(Miss::Read)?;
        if !meta.file_type().is_file() {
            return Err(Miss::Invalid("not a regular file"));
        }
        if meta.len() > MAX_FILE {
            return Err(Miss::Invalid("too large"));
        }
        if meta.len() != at.saturating_add(stamp.len as u64) {
            return Err(Miss::Invalid("length does not match"));
        }
        Ok((file, stamp, at))
    }

    /// Writes the entry for `key`: to a temporary file, then renamed over
    /// the final name.
    pub fn store(&self, key: &Identity, entry: &Entry) -> io::Result<()> {
        use std::io::Write;
        let name = file_name(key)?;
        let mut stamp = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `stamp` is a writable timespec.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut stamp) };
        // SAFETY: getpid() has no preconditions.
        let pid = unsafe { libc::getpid() };
        let tmp = CString::new(format!(
            ".{}.{pid}.{}{:09}.tmp",
            key.as_str(),
            stamp.tv_sec,
            stamp.tv_nsec
        ))
        .map_err(|_| errno(libc::EINVAL))?;
        let written = self
            .open_file(&tmp, libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL)
            .and_then(|mut file| {
                // The mode asked for, whatever the umask took from it.
                use std::os::unix::fs::PermissionsExt;
                file.set_permissions(std::fs::Permissions::from_mode(self.file_mode))?;
                file.write_all(&encode(key, entry))
            });
        // SAFETY: both names are NUL-terminated, relative to our directory.
        let renamed = written.and_then(|()| {
            let rc = unsafe {
                libc::renameat(
                    self.dir.as_raw_fd(),
                    tmp.as_ptr(),
                    self.dir.as_raw_fd(),
                    name.as_ptr(),
                )
            };
            if rc != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
        if renamed.is_err() {
            // SAFETY: `tmp` is NUL-terminated, relative to our directory.
            unsafe { libc::unlinkat(self.dir.as_raw_fd(), tmp.as_ptr(), 0) };
        }
        renamed
    }
}

fn padded(n: usize) -> usize {
    n.saturating_add(7) & !7
}

/// The longest key (an [`Identity`] is at most 140 bytes), padded.
const MAX_KEY: usize = 144;

/// The digest a file records of its section: of the section's bytes,
/// seeded with the base they are encoded for, so a changed base is caught
/// too.  Also the tag a registration names the module's copy by.
pub fn section_digest(section: &[u8], base: u64) -> u64 {
    xxh64(section, base)
}

/// The file for `entry` under `key`.
fn encode(key: &Identity, entry: &Entry) -> Vec<u8> {
    let key = key.as_str().as_bytes();
    let at = HEADER + padded(key.len());
    let mut out = Vec::with_capacity(at + entry.section.len());
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&FILE_REVISION.to_le_bytes());
    out.extend_from_slice(&(key.len() as u32).to_le_bytes());
    out.extend_from_slice(&entry.base.to_le_bytes());
    out.extend_from_slice(&(entry.section.len() as u64).to_le_bytes());
    out.extend_from_slice(&section_digest(&entry.section, entry.base).to_le_bytes());
    out.extend_from_slice(key);
    out.resize(at, 0);
    out.extend_from_slice(&entry.section);
    out
}

/// What a file's header says of its section, parsed and checked against
/// the key it is read for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    /// The link-time address its function starts are relative to.
    pub base: u64,
    /// Its length.
    pub len: usize,
    /// Its digest ([`section_digest`]).
    pub digest: u64,
}

impl Stamp {
    /// Parses the header and key at the start of `bytes`, a file read for
    /// `key`.
    fn parse(bytes: &[u8], key: &Identity) -> Result<Self, &'static str> {
        let field = |at: usize, len: usize| bytes.get(at..at + len).ok_or("truncated header");
        let word = |at: usize| -> Result<u64, &'static str> {
            let b = field(at, 8)?;
            Ok(u64::from_le_bytes(b.try_into().map_err(|_| "truncated")?))
        };
        if field(0, 8)? != MAGIC {
            return Err("not a cache file");
        }
        let head = word(8)?;
        if head as u32 != FILE_REVISION {
            return Err("another revision");
        }
        let key_len = usize::try_from(head >> 32).map_err(|_| "bad key length")?;
        let base = word(16)?;
        let len = usize::try_from(word(24)?).map_err(|_| "bad length")?;
        let digest = word(32)?;
        let want = key.as_str().as_bytes();
        if key_len != want.len() || bytes.get(HEADER..HEADER + key_len) != Some(want) {
            return Err("another object's key");
        }
        let at = HEADER + padded(key_len);
        let padding = bytes.get(HEADER + key_len..at).ok_or("truncated")?;
        if padding.iter().any(|&b| b != 0) {
            return Err("bad padding");
        }
        Ok(Self { base, len, digest })
    }

    /// Checks `section`, read after the header: its length and digest, and
    /// that the decoder parses its header (O(1); see the module
    /// documentation for why its rows are not decoded again).
    fn check(&self, section: &[u8]) -> Result<(), &'static str> {
        if section.len() != self.len {
            return Err("length does not match");
        }
        if section_digest(section, self.base) != self.digest {
            return Err("digest does not match");
        }
        sframe::Section::parse(section, self.base).map_err(|_| "section does not parse")?;
        Ok(())
    }
}

/// The entry in `bytes`, if they are a valid file for `key`.
#[cfg(test)]
fn decode(bytes: &[u8], key: &Identity) -> Result<Entry, &'static str> {
    let stamp = Stamp::parse(bytes, key)?;
    let at = HEADER + padded(key.as_str().len());
    let section = bytes.get(at..).ok_or("truncated")?;
    stamp.check(section)?;
    Ok(Entry {
        section: section.to_vec(),
        base: stamp.base,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::this_program;
    use crate::image::OwnMemory;

    fn temp_dir(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("sframe-cache-test-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    /// A real generated section: this test binary's own.
    fn entry() -> Entry {
        crate::generated::generate(&OwnMemory, &this_program()).unwrap()
    }

    #[test]
    fn a_section_is_checked_by_its_digest_not_its_rows() {
        let key = Identity::file(c"/proc/self/exe").unwrap();
        let e = entry();
        let at = HEADER + padded(key.as_str().len());
        // A byte of the FRE area changed, the digest recomputed: the file
        // is taken (the module would validate it), its rows not decoded.
        let mut changed = e.clone();
        let last = changed.section.len() - 1;
        changed.section[last] ^= 0x7f;
        assert_eq!(decode(&encode(&key, &changed), &key), Ok(changed.clone()));
        // Without the new digest it is refused.
        let mut stale = encode(&key, &e);
        stale[at + last] ^= 0x7f;
        assert_eq!(decode(&stale, &key), Err("digest does not match"));
        // A section header the decoder does not parse is refused even with
        // its digest right.
        let mut bad = e.clone();
        bad.section[2] = 1;
        assert_eq!(
            decode(&encode(&key, &bad), &key),
            Err("section does not parse")
        );
        // A length that does not match the bytes.
        let mut short = encode(&key, &e);
        short.pop();
        assert_eq!(decode(&short, &key), Err("length does not match"));
    }

    #[test]
    fn another_generator_build_is_another_revision() {
        let key = Identity::file(c"/proc/self/exe").unwrap();
        let e = entry();
        let good = encode(&key, &e);
        assert_eq!(decode(&good, &key).unwrap(), e);
        // The same header written by a build with another fingerprint.
        let mut old = good.clone();
        old[8..12].copy_from_slice(&REVISION.rotate_left(24).to_le_bytes());
        if sframe_synth::FINGERPRINT != 0 {
            assert_eq!(decode(&old, &key), Err("another revision"));
        }
        old[8..12].copy_from_slice(&(FILE_REVISION ^ 1).to_le_bytes());
        assert_eq!(decode(&old, &key), Err("another revision"));
    }

    #[test]
    fn round_trip_and_refusals() {
        let dir = temp_dir("rt");
        let cache_dir = CacheDir::at(&dir.join("a/b")).unwrap();
        assert!(cache_dir.open().is_err());
        let cache = cache_dir.create_and_open().unwrap();
        let mode = std::fs::metadata(dir.join("a/b")).unwrap();
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&mode.permissions()) & 0o777,
            0o700
        );
        let key = Identity::file(c"/proc/self/exe").unwrap();
        assert!(matches!(cache.load(&key), Err(Miss::Absent)));
        let e = entry();
        cache.store(&key, &e).unwrap();
        assert_eq!(cache.load(&key).unwrap(), e);
        // No temporary file left.
        assert_eq!(std::fs::read_dir(dir.join("a/b")).unwrap().count(), 1);

        let path = dir.join("a/b").join(format!("{}.sframe", key.as_str()));
        let good = std::fs::read(&path).unwrap();
        // A truncated file is refused.
        for len in [0, 7, 20, HEADER, good.len() / 2, good.len() - 1] {
            std::fs::write(&path, &good[..len]).unwrap();
            assert!(matches!(cache.load(&key), Err(Miss::Invalid(_))), "{len}");
        }
        // A flipped byte anywhere in our header (the base included: the
        // digest is seeded with it) or in the section is refused, and by
        // the pages reader too.
        let at = HEADER + padded(key.as_str().len());
        for i in (0..at + 32).chain((at..good.len()).step_by(4099)) {
            let mut bad = good.clone();
            bad[i] ^= 0x40;
            std::fs::write(&path, &bad).unwrap();
            assert!(cache.load(&key).is_err(), "byte {i}");
            assert!(cache.load_pages(&key).is_err(), "byte {i}");
        }
        std::fs::write(&path, &good).unwrap();
        let (pages, stamp) = cache.load_pages(&key).unwrap();
        let want = Stamp {
            base: e.base,
            len: e.section.len(),
            digest: section_digest(&e.section, e.base),
        };
        assert_eq!((&pages[..], stamp), (&e.section[..], want));
        assert_eq!(cache.stamp(&key).unwrap(), want);
        // The stamp reads the header alone: a section changed since it
        // was written is refused when read, not when stamped; a header
        // changed is refused both ways.
        let mut body = good.clone();
        body[at + 8] ^= 0x40;
        std::fs::write(&path, &body).unwrap();
        assert_eq!(cache.stamp(&key).unwrap(), want);
        assert!(cache.load_pages(&key).is_err());
        // A length that does not match the file's: the stamp says what
        // the header says (the module has no copy of that length under
        // that digest), reading the section refuses it.
        let mut head = good.clone();
        head[24] ^= 1;
        std::fs::write(&path, &head).unwrap();
        assert_eq!(cache.stamp(&key).unwrap().len, want.len ^ 1);
        assert!(matches!(cache.load_pages(&key), Err(Miss::Invalid(_))));
        // The digest changed: another stamp, and the section refused.
        let mut head = good.clone();
        head[32] ^= 1;
        std::fs::write(&path, &head).unwrap();
        assert_eq!(cache.stamp(&key).unwrap().digest, want.digest ^ 1);
        assert!(matches!(cache.load_pages(&key), Err(Miss::Invalid(_))));
        std::fs::write(&path, &good).unwrap();
        // Another key's file under this name.
        let other = Identity::file(c"/proc/self/exe").unwrap();
        let mut foreign = encode(&other, &e);
        foreign[HEADER] ^= 1;
        std::fs::write(&path, &foreign).unwrap();
        assert!(matches!(cache.load(&key), Err(Miss::Invalid(_))));
        // Replaced by the next store.
        cache.store(&key, &e).unwrap();
        assert_eq!(cache.load(&key).unwrap(), e);
        // A symlink or a FIFO is never followed nor blocks.
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", &path).unwrap();
        assert!(cache.load(&key).is_err());
        std::fs::remove_file(&path).unwrap();
        let c = cstr(&path).unwrap();
        // SAFETY: `c` is NUL-terminated.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(matches!(cache.load(&key), Err(Miss::Invalid(_))));
        assert!(matches!(cache.stamp(&key), Err(Miss::Invalid(_))));
        // A directory neither.
        std::fs::remove_file(&path).unwrap();
        std::fs::create_dir(&path).unwrap();
        assert!(matches!(cache.stamp(&key), Err(Miss::Invalid(_))));
        assert!(matches!(cache.load(&key), Err(Miss::Invalid(_))));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_shared_directory_and_its_files_are_readable_by_all() {
        use std::os::unix::fs::PermissionsExt;
        let dir = temp_dir("shared");
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        let cache_dir = CacheDir::at(&dir.join("system")).unwrap();
        let cache = cache_dir.create_shared_and_open().unwrap();
        assert_eq!((mode(&dir), mode(&dir.join("system"))), (0o755, 0o755));
        let key = Identity::file(c"/proc/self/exe").unwrap();
        cache.store(&key, &entry()).unwrap();
        let file = dir.join("system").join(format!("{}.sframe", key.as_str()));
        assert_eq!(mode(&file), 0o644);
        // Ours: a user's own cache would take it too, but writable by
        // others neither does.
        assert!(cache_dir.open().is_ok());
        std::fs::set_permissions(dir.join("system"), PermissionsExt::from_mode(0o775)).unwrap();
        for open in [CacheDir::open, CacheDir::open_shared] {
            assert_eq!(
                open(&cache_dir).unwrap_err().raw_os_error(),
                Some(libc::EPERM)
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_directory_writable_by_others_is_not_used() {
        let dir = temp_dir("perm");
        let cache_dir = CacheDir::at(&dir).unwrap();
        cache_dir.create_and_open().unwrap();
        std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o777))
            .unwrap();
        assert_eq!(
            cache_dir.open().unwrap_err().raw_os_error(),
            Some(libc::EPERM)
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
