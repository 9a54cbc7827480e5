// SPDX-License-Identifier: GPL-2.0

//! `sframectl run -- CMD...`: run a program with the audit library, so
//! that every object it loads is registered (and removed on `dlclose`).
//!
//! Its start is part of the start of every program a user runs this way.
//! So the usual forms of the command line are read without building the
//! whole command line's parser ([`quick_parse`]), the program is started
//! with the environment as it is, not a copy of it, and all of that
//! happens before the standard library's own start-up ([`EARLY_RUN`]).

use anyhow::anyhow;
use anyhow::bail;
use anyhow::Result;
use std::ffi::CStr;
use std::ffi::OsStr;
use std::ffi::OsString;
use std::os::raw::c_char;
use std::os::raw::c_int;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::path::PathBuf;
use std::process::Command;

use crate::cli;

/// Environment variable naming the audit library.
pub(crate) const AUDIT_LIB_ENV: &str = "SFRAME_AUDIT_LIB";

/// Names the audit library goes by: installed, and as cargo builds it.
const LIB_NAMES: [&str; 2] = ["sframe-audit.so", "libsframe_audit.so"];

/// The directory, relative to the prefix, where a Debian package installs
/// the library: private to sframe-unwind, in the multiarch library
/// directory (`lib/x86_64-linux-gnu/sframe-unwind`), since it is built for
/// one architecture.
fn multiarch_dir() -> String {
    format!("lib/{}-linux-gnu/sframe-unwind", std::env::consts::ARCH)
}

/// Where to look, in order: the flag, the environment, next to `sframectl`
/// (a cargo build directory, or `bin/` beside `lib/`: the Debian
/// package's multiarch directory first).
fn candidates(flag: Option<PathBuf>, env: Option<OsString>, exe: Option<PathBuf>) -> Vec<PathBuf> {
    if let Some(path) = flag.or_else(|| env.map(PathBuf::from)) {
        return vec![path];
    }
    let Some(dir) = exe.as_deref().and_then(Path::parent) else {
        return Vec::new();
    };
    let mut dirs = vec![dir.to_path_buf()];
    if let Some(prefix) = dir.parent() {
        dirs.push(prefix.join(multiarch_dir()));
        dirs.push(prefix.join("lib/sframe-unwind"));
        dirs.push(prefix.join("lib"));
    }
    dirs.iter()
        .flat_map(|d| LIB_NAMES.iter().map(move |n| d.join(n)))
        .collect()
}

/// The audit library to use, as an absolute path (`LD_AUDIT` is read by
/// the loader in the program's working directory).
pub(crate) fn find_audit_lib(
    flag: Option<PathBuf>,
    env: Option<OsString>,
    exe: Option<PathBuf>,
) -> Result<PathBuf> {
    let explicit = flag.is_some() || env.is_some();
    let tried = candidates(flag, env, exe);
    if let Some(found) = tried.iter().find(|p| p.is_file()) {
        return found
            .canonicalize()
            .map_err(|err| anyhow!("{}: {err}", found.display()));
    }
    let list = tried
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ");
    if explicit {
        bail!("audit library {list} does not exist");
    }
    bail!(
        "cannot find the audit library (looked for {list}): build it with \
         `cargo build --release -p sframe-audit`, or pass --audit-lib PATH or set {AUDIT_LIB_ENV}"
    )
}

/// `LD_AUDIT` with `lib` added to what the caller already audits with.
fn ld_audit(lib: &Path, existing: Option<OsString>) -> OsString {
    match existing.filter(|e| !e.is_empty()) {
        Some(mut list) => {
            list.push(":");
            list.push(lib);
            list
        }
        None => lib.as_os_str().to_owned(),
    }
}

/// The `run` subcommand read from the whole command line `args` (the
/// program's name first) when it has one of its usual forms:
///
/// ```text
/// sframectl run [--debug] [--audit-lib PATH | --audit-lib=PATH] -- CMD [ARGS...]
/// ```
///
/// with the options in any order, each at most once.  Anything else
/// (another subcommand, `--help`, an option twice, an option's value that
/// looks like an option, a mistake) gives `None`, and the full parser
/// decides, with its messages: what this returns is what that parser
/// would have made of the same line.
pub(crate) fn quick_parse(args: &[OsString]) -> Option<cli::Command> {
    let mut rest = args.get(1..)?.iter();
    if rest.next()? != "run" {
        return None;
    }
    let mut audit_lib = None;
    let mut debug = false;
    loop {
        let arg = rest.next()?;
        if arg == "--" {
            break;
        }
        if arg == "--debug" && !debug {
            debug = true;
            continue;
        }
        if audit_lib.is_some() {
            return None;
        }
        let value = if arg == "--audit-lib" {
            rest.next()?.clone()
        } else {
            OsString::from(arg.to_str()?.strip_prefix("--audit-lib=")?)
        };
        if matches!(value.as_bytes().first(), None | Some(b'-')) {
            return None;
        }
        audit_lib = Some(PathBuf::from(value));
    }
    let command: Vec<OsString> = rest.cloned().collect();
    if command.is_empty() {
        return None;
    }
    Some(cli::Command::Run {
        audit_lib,
        debug,
        command,
    })
}

/// The audit library `run` gives the program: the flag's, else the
/// environment's, else the one beside `sframectl`.
fn audit_lib_for(flag: Option<PathBuf>) -> Result<PathBuf> {
    find_audit_lib(
        flag,
        std::env::var_os(AUDIT_LIB_ENV),
        std::env::current_exe().ok(),
    )
}

fn module_loaded() -> bool {
    Path::new("/dev/sframe").exists()
}

/// Replaces this process with `program` run with `args` and the audit
/// library `lib`; returns only if that fails, with the environment as it
/// was.
///
/// The variables are set in this process, whose environment the program
/// inherits as it is: a `Command` given variables of its own would copy
/// the whole environment first.  This process has one thread, so nothing
/// reads the environment meanwhile.
fn exec(program: &OsStr, args: &[OsString], lib: &Path, debug: bool) -> std::io::Error {
    let saved = ENV_SET.map(|name| (name, std::env::var_os(name)));
    std::env::set_var("LD_AUDIT", ld_audit(lib, std::env::var_os("LD_AUDIT")));
    if debug {
        std::env::set_var("SFRAME_AUDIT_DEBUG", "1");
    }
    let err = Command::new(program).args(args).exec();
    for (name, value) in saved {
        match value {
            Some(value) => std::env::set_var(name, value),
            None => std::env::remove_var(name),
        }
    }
    err
}

/// The variables [`exec`] sets.
const ENV_SET: [&str; 2] = ["LD_AUDIT", "SFRAME_AUDIT_DEBUG"];

pub(crate) fn run(audit_lib: Option<PathBuf>, debug: bool, command: &[OsString]) -> Result<()> {
    let Some((program, args)) = command.split_first() else {
        bail!("no command given: sframectl run -- CMD [ARGS...]");
    };
    let lib = audit_lib_for(audit_lib)?;
    if !module_loaded() {
        eprintln!(
            "sframectl: warning: the sframe_unwind module is not loaded: {} runs without SFrame registration",
            program.to_string_lossy()
        );
    }
    let err = exec(program, args, &lib, debug);
    bail!("cannot run {}: {err}", program.to_string_lossy())
}

/// `sframectl run` in the usual case, before `main`.
///
/// The standard library's start-up, which runs before `main`, costs six
/// times what the rest of `sframectl run`'s own code does (callgrind:
/// 89,500 instructions against 14,000): it finds the main thread's stack
/// in `/proc/self/maps` and sets up an alternate signal stack for its
/// stack overflow message, on behalf of a process that only reads its
/// command line and replaces itself.  glibc runs the
/// functions of `.init_array` before it with the command line, as it
/// does for the standard library's own.  This one starts the program
/// when the command line has one of the usual forms ([`quick_parse`]),
/// the audit library is found and the module is loaded; otherwise, or
/// if the program cannot be started, it returns, and `main` does the
/// same again and says what went wrong.  What it does is what `run`
/// does, less the warning that goes with a missing module; the program
/// starts in the same state (`Command`'s exec sets `SIGPIPE` back to its
/// default and empties the signal mask either way).  Nothing here may
/// panic: the unwinding would stop at this `extern "C"` function and
/// abort.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[used]
#[link_section = ".init_array"]
static EARLY_RUN: extern "C" fn(c_int, *const *const c_char, *const *const c_char) = early_run;

#[cfg(all(target_os = "linux", target_env = "gnu"))]
extern "C" fn early_run(argc: c_int, argv: *const *const c_char, _envp: *const *const c_char) {
    let count = usize::try_from(argc).unwrap_or(0);
    if argv.is_null() || count < 2 {
        return;
    }
    let args: Vec<OsString> = (0..count)
        .map_while(|i| {
            // SAFETY: glibc passes the process's own `argc` and `argv`:
            // `argv` holds `argc` pointers (and a null one after them).
            let arg = unsafe { *argv.add(i) };
            // SAFETY: each of those points to a NUL-terminated string
            // that lives as long as the process; a null one, which the
            // kernel never makes, ends the list.
            (!arg.is_null()).then(|| unsafe { CStr::from_ptr(arg) })
        })
        .map(|arg| OsStr::from_bytes(arg.to_bytes()).to_owned())
        .collect();
    let Some(cli::Command::Run {
        audit_lib,
        debug,
        command,
    }) = quick_parse(&args)
    else {
        return;
    };
    let Some((program, rest)) = command.split_first() else {
        return;
    };
    if !module_loaded() {
        return;
    }
    if let Ok(lib) = audit_lib_for(audit_lib) {
        // On failure, `main` tries again and reports the error.
        let _ = exec(program, rest, &lib, debug);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_beats_environment_beats_neighbours() {
        let exe = Some(PathBuf::from("/opt/sf/bin/sframectl"));
        assert_eq!(
            candidates(Some("/a.so".into()), Some("/b.so".into()), exe.clone()),
            [PathBuf::from("/a.so")]
        );
        assert_eq!(
            candidates(None, Some("/b.so".into()), exe.clone()),
            [PathBuf::from("/b.so")]
        );
        let found = candidates(None, None, exe);
        assert_eq!(found[0], PathBuf::from("/opt/sf/bin/sframe-audit.so"));
        assert_eq!(found[1], PathBuf::from("/opt/sf/bin/libsframe_audit.so"));
        assert!(found.contains(&PathBuf::from("/opt/sf/lib/sframe-audit.so")));
    }

    #[test]
    fn finds_the_debian_package_layout() {
        let found = candidates(None, None, Some(PathBuf::from("/usr/bin/sframectl")));
        let packaged = PathBuf::from(format!(
            "/usr/lib/{}-linux-gnu/sframe-unwind/sframe-audit.so",
            std::env::consts::ARCH
        ));
        // Before the unversioned lib/ directories, after the binary's own.
        let at = found.iter().position(|p| *p == packaged).unwrap();
        assert_eq!(
            found[..at],
            ["/usr/bin/sframe-audit.so", "/usr/bin/libsframe_audit.so"].map(PathBuf::from)
        );
    }

    #[test]
    fn finds_a_library_next_to_the_binary() {
        let dir = std::env::temp_dir().join(format!("sframectl-run-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("bin")).unwrap();
        std::fs::create_dir_all(dir.join("lib")).unwrap();
        std::fs::write(dir.join("lib/sframe-audit.so"), b"").unwrap();
        let exe = Some(dir.join("bin/sframectl"));
        assert_eq!(
            find_audit_lib(None, None, exe.clone()).unwrap(),
            dir.join("lib/sframe-audit.so")
        );
        let err = find_audit_lib(Some(dir.join("nope.so")), None, exe).unwrap_err();
        assert!(err.to_string().contains("does not exist"), "{err}");
        let err = find_audit_lib(None, None, Some(dir.join("elsewhere/x/sframectl"))).unwrap_err();
        assert!(err.to_string().contains("--audit-lib"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn argv(line: &[&str]) -> Vec<OsString> {
        std::iter::once("sframectl")
            .chain(line.iter().copied())
            .map(OsString::from)
            .collect()
    }

    #[test]
    fn quick_parse_reads_the_usual_forms_as_the_parser_does() {
        use clap::Parser;
        let usual: &[&[&str]] = &[
            &["run", "--", "gzip", "-1", "--", "--debug"],
            &["run", "--debug", "--", "make", "-j"],
            &["run", "--audit-lib", "/l.so", "--", "x"],
            &[
                "run",
                "--audit-lib=/l.so",
                "--debug",
                "--",
                "x",
                "--audit-lib",
            ],
            &["run", "--debug", "--audit-lib", "rel/l.so", "--", "x"],
        ];
        for line in usual {
            let args = argv(line);
            let parsed = crate::cli::Cli::try_parse_from(&args).unwrap().command;
            assert_eq!(quick_parse(&args), Some(parsed), "{line:?}");
        }
        // Left to the parser: what it refuses, and what it reads with more
        // than the quick reading knows.
        let others: &[&[&str]] = &[
            &[],
            &["run"],
            &["run", "--"],
            &["run", "gzip"],
            &["run", "--help"],
            &["run", "-h", "--", "x"],
            &["run", "--debug", "--debug", "--", "x"],
            &[
                "run",
                "--audit-lib",
                "/a.so",
                "--audit-lib=/b.so",
                "--",
                "x",
            ],
            &["run", "--audit-lib", "--", "x"],
            &["run", "--audit-lib=", "--", "x"],
            &["run", "--audit-lib"],
            &["run", "--verbose", "--", "x"],
            &["status"],
            &["--version"],
            &["dump", "run"],
        ];
        for line in others {
            assert_eq!(quick_parse(&argv(line)), None, "{line:?}");
        }
    }

    #[test]
    fn ld_audit_keeps_existing_auditors() {
        let lib = Path::new("/l/sframe-audit.so");
        assert_eq!(ld_audit(lib, None), "/l/sframe-audit.so");
        assert_eq!(ld_audit(lib, Some("".into())), "/l/sframe-audit.so");
        assert_eq!(
            ld_audit(lib, Some("/x.so".into())),
            "/x.so:/l/sframe-audit.so"
        );
    }
}
