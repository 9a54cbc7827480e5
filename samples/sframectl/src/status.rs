// SPDX-License-Identifier: GPL-2.0

//! `sframectl status`: is the module loaded, which ABI it speaks, and its
//! counters, one `name: value` per line (easy to read and to grep); then
//! whether `sframectl daemon` runs, and its own counters (`daemon ...`);
//! then the caches of generated sections, the system's and the user's.

use crate::kernel;
use crate::run_dir;
use crate::run_dir::Daemon;
use anyhow::bail;
use anyhow::Result;
use sframe_audit::cache::Cache;
use sframe_audit::cache::CacheDir;
use sframe_uapi::SframeStats;
use sframe_uapi::SFRAME_FEAT_V2;
use sframe_uapi::SFRAME_FEAT_V3;
use sframe_uapi::SFRAME_STATS_SCOPE_OWN;
use std::io::Write;

/// Names of `failures[]`, by index (`SFRAME_FAIL_*`).
const FAILURES: [&str; 10] = [
    "format",
    "argument",
    "fault",
    "overlap",
    "not text",
    "too big",
    "limit",
    "permission",
    "not found",
    "no memory",
];

/// Names of `unwind[]`, by index (`SFRAME_UNWIND_*`).
const UNWIND: [&str; 17] = [
    "walks (sample)",
    "walks (deferred)",
    "frames by sframe",
    "frames by frame pointer",
    "frames by entry rule",
    "signal frames",
    "ends at outermost frame",
    "ends at frame limit",
    "ends at bad step",
    "ends at fault",
    "ends without coverage",
    "ns in sample walks",
    "ns in deferred walks",
    "frames (sample)",
    "frames (deferred)",
    "ends at work budget",
    "ends at signal frame limit",
];

pub(crate) fn run() -> Result<()> {
    let mut out = std::io::stdout().lock();
    if kernel::module_loaded() == Some(false) {
        writeln!(out, "module: not loaded")?;
        bail!(
            "the {} module is not loaded: load it with `insmod sframe_unwind.ko`",
            kernel::MODULE_NAME
        );
    }
    let dev = kernel::open()?;
    writeln!(out, "module: loaded, /dev/sframe")?;
    let v = dev
        .version()
        .map_err(|err| kernel::explain(err, "version", None))?;
    writeln!(out, "abi: {}", v.abi_version)?;
    writeln!(
        out,
        "module version: {}.{}.{}",
        v.module_version >> 16,
        (v.module_version >> 8) & 0xff,
        v.module_version & 0xff
    )?;
    let mut features = Vec::new();
    if v.features & SFRAME_FEAT_V2 != 0 {
        features.push("sframe-v2");
    }
    if v.features & SFRAME_FEAT_V3 != 0 {
        features.push("sframe-v3");
    }
    writeln!(out, "features: {}", features.join(" "))?;
    match dev.stats() {
        Ok(stats) => print_stats(&mut out, &stats)?,
        Err(err) if err.raw_os_error() == Some(libc::ENOTTY) => {
            writeln!(out, "stats: not supported by this module")?;
        }
        Err(err) => return Err(kernel::explain(err, "stats", None)),
    }
    print_daemon(&mut out, &run_dir::probe(&run_dir::default_dir()))?;
    print_cache(
        &mut out,
        "system cache",
        CacheDir::system(),
        CacheDir::open_shared,
    )?;
    print_cache(&mut out, "your cache", CacheDir::from_env(), CacheDir::open)?;
    Ok(())
}

/// One cache of generated sections: where, whether it is used, and what
/// it holds (`N sections, B bytes`).
fn print_cache(
    out: &mut impl Write,
    name: &str,
    dir: Option<CacheDir>,
    open: impl Fn(&CacheDir) -> std::io::Result<Cache>,
) -> Result<()> {
    let Some(dir) = dir else {
        writeln!(out, "{name}: none")?;
        return Ok(());
    };
    let path = dir.path().display();
    match open(&dir) {
        Ok(_) => {
            let (files, bytes) = cache_contents(dir.path());
            writeln!(out, "{name}: {path}, {files} sections, {bytes} bytes")?;
        }
        Err(err) if err.raw_os_error() == Some(libc::ENOENT) => {
            writeln!(out, "{name}: {path}, absent")?;
        }
        Err(err) if err.raw_os_error() == Some(libc::EPERM) => {
            writeln!(
                out,
                "{name}: {path}, not used: writable by others or not owned"
            )?;
        }
        Err(err) => writeln!(out, "{name}: {path}, not used: {err}")?,
    }
    Ok(())
}

/// The section files in a cache directory, and their bytes.
fn cache_contents(dir: &std::path::Path) -> (u64, u64) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return (0, 0);
    };
    entries
        .flatten()
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            !name.starts_with('.') && name.ends_with(".sframe")
        })
        .filter_map(|e| e.metadata().ok().filter(|m| m.is_file()))
        .fold((0, 0), |(n, b), m| (n + 1, b + m.len()))
}

fn print_daemon(out: &mut impl Write, daemon: &Daemon) -> Result<()> {
    match daemon {
        Daemon::NotRunning => writeln!(out, "daemon: not running")?,
        Daemon::Running { pid, state } => {
            match pid {
                Some(pid) => writeln!(out, "daemon: running, pid {pid}")?,
                None => writeln!(out, "daemon: running")?,
            }
            for line in state.lines().filter(|l| !l.starts_with("pid:")) {
                writeln!(out, "daemon {line}")?;
            }
        }
    }
    Ok(())
}

fn print_stats(out: &mut impl Write, s: &SframeStats) -> Result<()> {
    // An unprivileged caller is told of its own registrations only.
    let own = s.scope == SFRAME_STATS_SCOPE_OWN;
    if own {
        writeln!(
            out,
            "scope: your own registrations (every user's need CAP_PERFMON)"
        )?;
    }
    writeln!(out, "sections: {}", s.sections)?;
    writeln!(out, "copies: {}", s.copies)?;
    writeln!(out, "bytes: {}", s.bytes)?;
    if !own {
        writeln!(out, "processes: {}", s.mms)?;
    }
    writeln!(out, "registered: {}", s.registered)?;
    writeln!(out, "unregistered: {}", s.unregistered)?;
    // A module older than the kept copies leaves them zero.
    writeln!(out, "kept copies: {}", s.kept_copies)?;
    writeln!(out, "kept bytes: {}", s.kept_bytes)?;
    writeln!(out, "kept copies taken back: {}", s.kept_reused)?;
    // Zero from a module without registration by tag.
    writeln!(out, "registered by tag: {}", s.by_tag)?;
    if own {
        return Ok(());
    }
    for (name, value) in FAILURES.iter().zip(s.failures) {
        writeln!(out, "failed ({name}): {value}")?;
    }
    for (name, value) in UNWIND.iter().zip(s.unwind) {
        writeln!(out, "unwind {name}: {value}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use sframe_uapi::SFRAME_FAIL_NOMEM;
    use sframe_uapi::SFRAME_UNWIND_END_SIGNAL_LIMIT;

    #[test]
    fn every_named_counter_exists() {
        assert_eq!(FAILURES.len(), SFRAME_FAIL_NOMEM + 1);
        assert_eq!(UNWIND.len(), SFRAME_UNWIND_END_SIGNAL_LIMIT + 1);
    }

    #[test]
    fn stats_are_name_value_lines() {
        let mut s = SframeStats {
            sections: 3,
            bytes: 4096,
            ..Default::default()
        };
        s.failures[sframe_uapi::SFRAME_FAIL_OVERLAP] = 2;
        let mut out = Vec::new();
        print_stats(&mut out, &s).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("sections: 3\n"));
        assert!(text.contains("bytes: 4096\n"));
        assert!(text.contains("failed (overlap): 2\n"));
        assert!(text.lines().all(|l| l.split_once(": ").is_some()));
    }

    #[test]
    fn cache_lines() {
        use std::os::unix::fs::PermissionsExt;
        let base = std::env::temp_dir().join(format!("sframectl-status-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let line = |dir: Option<CacheDir>| {
            let mut out = Vec::new();
            print_cache(&mut out, "system cache", dir, CacheDir::open_shared).unwrap();
            String::from_utf8(out).unwrap()
        };
        let dir = || CacheDir::at(&base).ok();
        assert_eq!(line(None), "system cache: none\n");
        let p = base.display();
        assert_eq!(line(dir()), format!("system cache: {p}, absent\n"));
        CacheDir::at(&base)
            .unwrap()
            .create_shared_and_open()
            .unwrap();
        std::fs::write(base.join("b-01.sframe"), [0u8; 100]).unwrap();
        std::fs::write(base.join(".b-02.1.2.tmp"), [0u8; 7]).unwrap();
        assert_eq!(
            line(dir()),
            format!("system cache: {p}, 1 sections, 100 bytes\n")
        );
        std::fs::set_permissions(&base, PermissionsExt::from_mode(0o777)).unwrap();
        assert_eq!(
            line(dir()),
            format!("system cache: {p}, not used: writable by others or not owned\n")
        );
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn daemon_lines() {
        let mut out = Vec::new();
        print_daemon(&mut out, &Daemon::NotRunning).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "daemon: not running\n");
        let mut out = Vec::new();
        let running = Daemon::Running {
            pid: Some(7),
            state: "pid: 7\nobjects registered: 2\n".into(),
        };
        print_daemon(&mut out, &running).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "daemon: running, pid 7\ndaemon objects registered: 2\n"
        );
    }
}
