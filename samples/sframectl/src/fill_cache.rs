// SPDX-License-Identifier: GPL-2.0

//! `sframectl fill-cache`: generate, ahead of time, the sections of the
//! system's libraries and programs into the system's cache, which the
//! audit library and the daemon read before the user's own
//! (`sframe_audit::cache`).  Without it, the first start of a program
//! under the audit library generates its section, libc's and every other
//! library's, each user once.
//!
//! Each object is read from its file as the loader would map it
//! ([`FileImage`]), so the section is the one the audit library would make
//! from the object in memory, under the same name (its build-id).  Only
//! files every user may read go into the shared cache: a section tells how
//! its object's code uses the stack.  Objects with their own `.sframe` are
//! left out (the audit library registers theirs), and so are those of
//! another machine.
//!
//! With no path, the objects are every library the dynamic linker's cache
//! lists (`ldconfig -p`), every program of the system's program
//! directories ([`PROGRAM_DIRS`]), the audit library `sframectl run`
//! uses, and the running kernel's vDSO, which every process maps (read
//! from this process's memory, as the audit library reads it); the files
//! of those the last such run found and this one does not are removed
//! (objects added by path stay): the Debian package runs it so when it is
//! installed and when a package installs or removes libraries or programs
//! (its triggers).

use anyhow::bail;
use anyhow::Context;
use anyhow::Result;
use sframe_audit::cache::Cache;
use sframe_audit::cache::CacheDir;
use sframe_audit::generated;
use sframe_audit::generated::Caches;
use sframe_audit::generated::Source;
use sframe_audit::identity::Identity;
use sframe_audit::image::FileImage;
use sframe_audit::image::ImageError;
use sframe_audit::image::Layout;
use sframe_audit::image::Memory;
use sframe_audit::image::OwnMemory;
use std::collections::BTreeSet;
use std::collections::HashSet;
use std::ffi::CStr;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::path::PathBuf;
use std::process::Command;

/// What became of one object.
enum Outcome {
    /// Generated and stored.
    Generated(usize),
    /// Its file was there already.
    Cached,
    /// Not for the cache, and why.
    Skipped(String),
    /// Not an object this machine loads (not ELF, another machine):
    /// silent for a file found in a directory.
    NotObject,
}

/// The counts printed at the end.
#[derive(Default)]
struct Tally {
    generated: u64,
    cached: u64,
    skipped: u64,
    bytes: u64,
    removed: u64,
}

/// The system's program directories, each with whether its
/// subdirectories are taken too (to [`MAX_PROGRAM_DEPTH`]): helper
/// programs live there, such as gcc's `cc1`, which a build starts for
/// every file it compiles, in `/usr/libexec/gcc/TRIPLET/VERSION/`.  `/bin`
/// and `/sbin` are the `/usr` ones on a merged system, taken once.
const PROGRAM_DIRS: [(&str, bool); 5] = [
    ("/usr/bin", false),
    ("/usr/sbin", false),
    ("/bin", false),
    ("/sbin", false),
    ("/usr/libexec", true),
];

/// How many directory levels below a program directory whose
/// subdirectories are taken are searched.
const MAX_PROGRAM_DEPTH: usize = 4;

/// What the running kernel's vDSO is called in the messages.
const VDSO: &str = "[vdso]";

pub(crate) fn run(
    paths: Vec<PathBuf>,
    dir: Option<PathBuf>,
    programs: bool,
    verbose: bool,
) -> Result<()> {
    let dir = match dir {
        Some(dir) => CacheDir::at(&dir)?,
        None => CacheDir::system().context("no system cache directory")?,
    };
    let cache = dir
        .create_shared_and_open()
        .with_context(|| format!("cache {}", dir.path().display()))?;
    let whole_system = paths.is_empty();
    let objects = if whole_system {
        let mut objects = ldconfig_libraries()?;
        if programs {
            objects = merged(objects, system_programs());
        }
        // The audit library itself, loaded into every audited program.
        if let Ok(lib) = crate::run::find_audit_lib(None, None, std::env::current_exe().ok()) {
            objects.push((lib, false));
        }
        objects
    } else {
        named_objects(&paths)?
    };
    let mut tally = Tally::default();
    let mut keys = HashSet::new();
    let vdso = whole_system.then(|| (Path::new(VDSO), fill_vdso(&cache, &mut keys)));
    let filled = objects
        .iter()
        .map(|(path, named)| (path.as_path(), *named, fill_one(&cache, path, &mut keys)));
    for (path, named, outcome) in filled.chain(vdso.map(|(path, outcome)| (path, true, outcome))) {
        let line = match outcome {
            Outcome::Generated(len) => {
                tally.generated += 1;
                tally.bytes += len as u64;
                format!("generated ({len} bytes)")
            }
            Outcome::Cached => {
                tally.cached += 1;
                "cached already".to_owned()
            }
            Outcome::Skipped(why) => {
                tally.skipped += 1;
                format!("skipped: {why}")
            }
            Outcome::NotObject if !named => continue,
            Outcome::NotObject => {
                tally.skipped += 1;
                "skipped: not an object of this machine".to_owned()
            }
        };
        if verbose {
            println!("{}: {line}", path.display());
        }
    }
    if whole_system {
        tally.removed = remove_unlisted(dir.path(), &keys, verbose)?;
    }
    println!(
        "{}: {} sections generated ({} bytes), {} cached already, {} objects skipped, {} files removed",
        dir.path().display(),
        tally.generated,
        tally.bytes,
        tally.cached,
        tally.skipped,
        tally.removed
    );
    Ok(())
}

/// The section of the object in `path`, into `cache`; its name added to
/// `keys`.
fn fill_one(cache: &Cache, path: &Path, keys: &mut HashSet<String>) -> Outcome {
    // Only regular files are opened: opening a device can do something.
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_file() => {}
        Ok(_) => return Outcome::NotObject,
        Err(err) => return Outcome::Skipped(err.to_string()),
    }
    // Non-blocking: a FIFO swapped in since cannot hold us up.
    let file = match std::fs::File::options()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
    {
        Ok(file) => file,
        Err(err) => return Outcome::Skipped(err.to_string()),
    };
    let meta = match file.metadata() {
        Ok(meta) => meta,
        Err(err) => return Outcome::Skipped(err.to_string()),
    };
    if !meta.file_type().is_file() {
        return Outcome::NotObject;
    }
    if meta.mode() & 0o004 == 0 || !reachable_by_all(path) {
        return Outcome::Skipped("not readable by every user".into());
    }
    let (image, layout) = match FileImage::new(file) {
        Ok(found) => found,
        Err(ImageError::NotElf | ImageError::Foreign) => return Outcome::NotObject,
        // Shorter than an ELF header.
        Err(ImageError::Read(err)) if err.kind() == std::io::ErrorKind::UnexpectedEof => {
            return Outcome::NotObject
        }
        Err(err) => return Outcome::Skipped(err.to_string()),
    };
    let Ok(cpath) = CString::new(path.as_os_str().as_bytes()) else {
        return Outcome::Skipped("a NUL in its path".into());
    };
    fill_image(cache, &image, &layout, Some(&cpath), keys)
}

/// The section of the object `layout` describes in `mem`, into `cache`,
/// unless it has its own; its name (its build-id, else the identity of
/// its file `path`) added to `keys`.  Without a file, an object without a
/// build-id has no name to be cached under.
fn fill_image(
    cache: &Cache,
    mem: &impl Memory,
    layout: &Layout,
    path: Option<&CStr>,
    keys: &mut HashSet<String>,
) -> Outcome {
    if layout.sframe.is_some() {
        return Outcome::Skipped("has its own .sframe".into());
    }
    match Identity::build_id(mem, layout).or_else(|| path.and_then(Identity::file)) {
        Some(key) => {
            keys.insert(key.as_str().to_owned());
        }
        None if path.is_none() => return Outcome::Skipped("no build-id".into()),
        None => {}
    }
    match generated::obtain(mem, layout, path, Caches::user(Some(cache))) {
        Ok(gen) => match gen.source {
            Source::Cache | Source::SystemCache => Outcome::Cached,
            Source::Stored => Outcome::Generated(gen.section.len()),
            Source::Generated => Outcome::Skipped(format!("not stored: {gen}")),
        },
        Err(err) => Outcome::Skipped(format!("none generated: {err}")),
    }
}

/// The section of the running kernel's vDSO, as this process maps it, into
/// `cache`; its name added to `keys`.  Every process maps the same one
/// (until the next boot of another kernel), and the audit library finds
/// it under its build-id, whatever its address.
fn fill_vdso(cache: &Cache, keys: &mut HashSet<String>) -> Outcome {
    // SAFETY: getauxval() has no preconditions.
    let header = unsafe { libc::getauxval(libc::AT_SYSINFO_EHDR) };
    if header == 0 {
        return Outcome::Skipped("this process has none".into());
    }
    // Read as the audit library reads it: a read of an address that is
    // not mapped fails, it does not fault.
    match Layout::read_at_header(&OwnMemory, header) {
        // No file names it: only its build-id does.
        Ok(layout) => fill_image(cache, &OwnMemory, &layout, None, keys),
        Err(err) => Outcome::Skipped(err.to_string()),
    }
}

/// The files of the system's program directories ([`PROGRAM_DIRS`]),
/// each real file once, not named: a file that is not an object (a
/// script) is passed over in silence.
fn system_programs() -> Vec<(PathBuf, bool)> {
    let mut dirs = BTreeSet::new();
    let mut found = BTreeSet::new();
    for (dir, deep) in PROGRAM_DIRS {
        let Ok(real) = std::fs::canonicalize(dir) else {
            continue;
        };
        if dirs.insert(real.clone()) {
            let depth = if deep { MAX_PROGRAM_DEPTH } else { 0 };
            files_below(&real, depth, &mut found);
        }
    }
    found.into_iter().map(|p| (p, false)).collect()
}

/// Adds the real files of `dir` to `found`, and those of its
/// subdirectories `depth` levels down; symbolic links to directories are
/// not followed (a link to a file is taken as the file it names).
fn files_below(dir: &Path, depth: usize, found: &mut BTreeSet<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let path = entry.path();
        if kind.is_dir() {
            if let Some(below) = depth.checked_sub(1) {
                files_below(&path, below, found);
            }
        } else if let Ok(real) = std::fs::canonicalize(&path) {
            if real.is_file() {
                found.insert(real);
            }
        }
    }
}

/// `a` and `b` with each path once.
fn merged(a: Vec<(PathBuf, bool)>, b: Vec<(PathBuf, bool)>) -> Vec<(PathBuf, bool)> {
    let mut seen = BTreeSet::new();
    a.into_iter()
        .chain(b)
        .filter(|(path, _)| seen.insert(path.clone()))
        .collect()
}

/// Whether every directory above `path` (resolved) lets every user
/// through: a file others may read in a directory they may not enter is
/// not theirs to read.
fn reachable_by_all(path: &Path) -> bool {
    let Ok(real) = std::fs::canonicalize(path) else {
        return false;
    };
    real.ancestors()
        .skip(1)
        .all(|dir| std::fs::metadata(dir).is_ok_and(|m| m.mode() & 0o001 != 0))
}

/// The objects named: files, and the files of directories (not their
/// subdirectories), each with whether it was named itself.
fn named_objects(paths: &[PathBuf]) -> Result<Vec<(PathBuf, bool)>> {
    let mut out = Vec::new();
    for path in paths {
        let meta = std::fs::metadata(path).with_context(|| path.display().to_string())?;
        if !meta.is_dir() {
            out.push((path.clone(), true));
            continue;
        }
        let mut found = BTreeSet::new();
        for entry in std::fs::read_dir(path).with_context(|| path.display().to_string())? {
            found.insert(entry?.path());
        }
        out.extend(found.into_iter().map(|p| (p, false)));
    }
    Ok(out)
}

/// Every library the dynamic linker's cache lists, each file once.
fn ldconfig_libraries() -> Result<Vec<(PathBuf, bool)>> {
    let output = ["ldconfig", "/usr/sbin/ldconfig", "/sbin/ldconfig"]
        .iter()
        .find_map(|cmd| Command::new(cmd).arg("-p").output().ok())
        .context("cannot run ldconfig -p")?;
    if !output.status.success() {
        bail!("ldconfig -p failed: {}", output.status);
    }
    Ok(parse_ldconfig(&output.stdout))
}

/// The paths `ldconfig -p` prints (`\tNAME (FLAGS) => PATH`), each real
/// file once.
fn parse_ldconfig(text: &[u8]) -> Vec<(PathBuf, bool)> {
    let mut seen = BTreeSet::new();
    for line in text.split(|&b| b == b'\n') {
        let Some(at) = line.windows(4).position(|w| w == b" => ") else {
            continue;
        };
        let path = Path::new(std::ffi::OsStr::from_bytes(&line[at + 4..]));
        if path.is_absolute() {
            seen.insert(std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned()));
        }
    }
    // Listed, not named: another machine's libraries are not reported.
    seen.into_iter().map(|p| (p, false)).collect()
}

/// The file, in the cache directory, that lists the objects the last run
/// without a path found (one key per line): only those are removed when a
/// later one no longer finds them, so objects added by path stay.
const LISTED: &str = ".listed";

/// Removes the cache files of the objects the last run without a path
/// listed ([`LISTED`]) and `keys` does not name, and temporary files a
/// killed run left; then lists `keys` for the next run.  How many files
/// were removed.
fn remove_unlisted(dir: &Path, keys: &HashSet<String>, verbose: bool) -> Result<u64> {
    let listed = dir.join(LISTED);
    let before = std::fs::read_to_string(&listed).unwrap_or_default();
    let mut stale: Vec<PathBuf> = before
        .lines()
        // A key is letters, digits and '-' (`Identity`): no path.
        .filter(|key| {
            !key.is_empty() && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
        .filter(|key| !keys.contains(*key))
        .map(|key| dir.join(format!("{key}.sframe")))
        .collect();
    if let Ok(entries) = std::fs::read_dir(dir) {
        stale.extend(
            entries
                .flatten()
                .filter(|e| {
                    let name = e.file_name();
                    let name = name.to_string_lossy();
                    name.starts_with('.') && name.ends_with(".tmp")
                })
                .map(|e| e.path()),
        );
    }
    let mut removed = 0;
    for path in stale {
        if std::fs::remove_file(&path).is_ok() {
            removed += 1;
            if verbose {
                println!("{}: removed", path.display());
            }
        }
    }
    let mut now: Vec<&str> = keys.iter().map(String::as_str).collect();
    now.sort_unstable();
    let tmp = dir.join(format!(".listed.{}.tmp", std::process::id()));
    std::fs::write(&tmp, now.join("\n") + "\n")
        .and_then(|()| std::fs::rename(&tmp, &listed))
        .with_context(|| format!("cannot write {}", listed.display()))?;
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldconfig_lines_give_each_file_once() {
        let text = b"1234 libs found in cache `/etc/ld.so.cache'\n\
            \tlibz.so.1 (libc6,x86-64) => /proc/self/exe\n\
            \tlibz.so (libc6,x86-64) => /proc/self/exe\n\
            \tlibodd.so (libc6) => relative/path\n\
            Cache generated by: ldconfig\n";
        let got = parse_ldconfig(text);
        assert_eq!(got.len(), 1);
        assert!(!got[0].1);
        assert_eq!(got[0].0, std::fs::canonicalize("/proc/self/exe").unwrap());
    }

    #[test]
    fn program_directories_are_searched_to_their_depth() {
        let dir = Path::new("/tmp").join(format!("sframectl-programs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let other = dir.join("other");
        let top = dir.join("bin");
        std::fs::create_dir_all(top.join("sub/deeper")).unwrap();
        std::fs::create_dir_all(&other).unwrap();
        for file in ["bin/a", "bin/sub/b", "bin/sub/deeper/c", "other/d"] {
            std::fs::write(dir.join(file), b"x").unwrap();
        }
        // A link to a file is that file; one to a directory is not followed.
        std::os::unix::fs::symlink(top.join("a"), top.join("to-a")).unwrap();
        std::os::unix::fs::symlink(&other, top.join("to-other")).unwrap();
        let below = |depth| {
            let mut found = BTreeSet::new();
            files_below(&top, depth, &mut found);
            found
                .iter()
                .map(|p| p.strip_prefix(&dir).unwrap().to_str().unwrap().to_owned())
                .collect::<Vec<_>>()
        };
        assert_eq!(below(0), ["bin/a"]);
        assert_eq!(below(1), ["bin/a", "bin/sub/b"]);
        assert_eq!(below(2), ["bin/a", "bin/sub/b", "bin/sub/deeper/c"]);
        let a = (top.join("a"), false);
        let d = (other.join("d"), false);
        assert_eq!(
            merged(vec![a.clone(), d.clone()], vec![d.clone(), a.clone()]),
            [a, d]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A new shared cache directory of the test `name`, and the cache: in
    /// /tmp, which every user may enter, whatever TMPDIR says.
    fn shared_cache(name: &str) -> (PathBuf, Cache) {
        let dir = Path::new("/tmp").join(format!("sframectl-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let cache = CacheDir::at(&dir)
            .unwrap()
            .create_shared_and_open()
            .unwrap();
        (dir, cache)
    }

    #[test]
    fn the_vdso_is_filled_once() {
        let (dir, cache) = shared_cache("vdso");
        let mut keys = HashSet::new();
        match fill_vdso(&cache, &mut keys) {
            Outcome::Generated(len) => {
                assert!(len > 0);
                assert_eq!(keys.len(), 1);
                assert!(matches!(fill_vdso(&cache, &mut keys), Outcome::Cached));
            }
            // A kernel built with SFrame for its vDSO, or one whose vDSO
            // has no .eh_frame to generate from (arm64's).
            Outcome::Skipped(why) => assert!(
                ["has its own .sframe", "none generated: no PT_GNU_EH_FRAME"]
                    .contains(&why.as_str()),
                "{why}"
            ),
            _ => panic!("the vDSO is an object"),
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn fills_then_finds_and_prunes() {
        // The object a copy of this test binary, which may live under a
        // directory others may not enter (run-tests builds in ~/.cache).
        let (dir, cache) = shared_cache("fill");
        let exe = dir.join("object");
        std::fs::copy("/proc/self/exe", &exe).unwrap();
        std::fs::set_permissions(&exe, std::os::unix::fs::PermissionsExt::from_mode(0o644))
            .unwrap();
        let mut keys = HashSet::new();
        assert!(matches!(
            fill_one(&cache, &exe, &mut keys),
            Outcome::Generated(_)
        ));
        assert!(matches!(fill_one(&cache, &exe, &mut keys), Outcome::Cached));
        assert_eq!(keys.len(), 1);
        // Not objects: a directory, a text file.
        assert!(matches!(
            fill_one(&cache, Path::new("/proc"), &mut keys),
            Outcome::NotObject
        ));
        let text = dir.join("not-elf");
        std::fs::write(&text, b"hello").unwrap();
        std::fs::set_permissions(&text, std::os::unix::fs::PermissionsExt::from_mode(0o644))
            .unwrap();
        assert!(matches!(
            fill_one(&cache, &text, &mut keys),
            Outcome::NotObject
        ));
        // A copy readable by its owner only stays out of the shared cache.
        let private = dir.join("private");
        std::fs::copy(&exe, &private).unwrap();
        std::fs::set_permissions(
            &private,
            std::os::unix::fs::PermissionsExt::from_mode(0o600),
        )
        .unwrap();
        assert!(matches!(
            fill_one(&cache, &private, &mut keys),
            Outcome::Skipped(_)
        ));
        // So does one others may read in a directory they may not enter.
        let hidden = dir.join("hidden");
        std::fs::create_dir(&hidden).unwrap();
        std::fs::set_permissions(&hidden, std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .unwrap();
        std::fs::copy(&exe, hidden.join("copy")).unwrap();
        std::fs::set_permissions(
            hidden.join("copy"),
            std::os::unix::fs::PermissionsExt::from_mode(0o644),
        )
        .unwrap();
        assert!(matches!(
            fill_one(&cache, &hidden.join("copy"), &mut keys),
            Outcome::Skipped(_)
        ));
        // A run without a path lists what it found; the next one removes
        // what it no longer finds of that list, and leftovers of a killed
        // run, but not what was added by path.
        std::fs::write(dir.join("b-0123.sframe"), b"stale").unwrap();
        std::fs::write(dir.join("b-0456.sframe"), b"added by path").unwrap();
        std::fs::write(dir.join(".b-0123.1.2.tmp"), b"left").unwrap();
        let mut old = keys.clone();
        old.insert("b-0123".into());
        assert_eq!(remove_unlisted(&dir, &old, false).unwrap(), 1);
        assert_eq!(remove_unlisted(&dir, &keys, false).unwrap(), 1);
        assert_eq!(remove_unlisted(&dir, &keys, false).unwrap(), 0);
        assert!(!dir.join("b-0123.sframe").exists());
        assert!(dir.join("b-0456.sframe").exists());
        // A listed name that is not a key names no file elsewhere.
        std::fs::write(dir.join(LISTED), "../../etc/passwd\n").unwrap();
        assert_eq!(remove_unlisted(&dir, &keys, false).unwrap(), 0);
        assert!(matches!(fill_one(&cache, &exe, &mut keys), Outcome::Cached));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
