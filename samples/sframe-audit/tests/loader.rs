// SPDX-License-Identifier: GPL-2.0

//! The audit library under the host's real glibc loader: every object of a
//! program is located from its link map (none skipped), and the program's
//! output and exit status are untouched.  The host has no `/dev/sframe`
//! and its objects no `.sframe`, so nothing is registered here; the guest
//! tests (`tests/guest/50-loader.sh`) cover registration.

use std::path::PathBuf;
use std::process::Command;
use std::process::Output;

/// The cdylib cargo built next to this test's directory.
fn audit_lib() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    [
        deps.join("libsframe_audit.so"),
        deps.parent().unwrap().join("libsframe_audit.so"),
    ]
    .into_iter()
    .find(|p| p.is_file())
    .expect("libsframe_audit.so built by cargo")
}

fn sh(script: &str, audit: bool, debug: bool) -> Output {
    let mut cmd = Command::new("/bin/sh");
    // Without generation, objects without .sframe are dismissed before
    // the device is opened: every one of them is logged.
    cmd.args(["-c", script])
        .env_remove("LD_AUDIT")
        .env_remove("SFRAME_AUDIT_DEBUG")
        .env("SFRAME_AUDIT_SYNTH", "0");
    if audit {
        cmd.env("LD_AUDIT", audit_lib());
    }
    if debug {
        cmd.env("SFRAME_AUDIT_DEBUG", "1");
    }
    cmd.output().unwrap()
}

#[test]
fn output_and_status_unchanged() {
    let script = "echo out; echo err >&2; exit 7";
    let plain = sh(script, false, false);
    let audited = sh(script, true, false);
    assert_eq!(plain.status.code(), Some(7));
    assert_eq!(audited.status.code(), Some(7));
    assert_eq!(plain.stdout, audited.stdout);
    assert_eq!(plain.stderr, audited.stderr);
}

#[test]
fn every_object_is_located() {
    let out = sh("exit 0", true, true);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.starts_with("sframe-audit: "))
        .collect();
    // The main program, ld.so, the vDSO and libc at least, each either
    // registered or found to have no section: none skipped as unreadable.
    assert!(lines.iter().any(|l| l.contains("(main program)")), "{log}");
    assert!(lines.iter().any(|l| l.contains("ld-linux")), "{log}");
    assert!(lines.iter().any(|l| l.contains("libc.so")), "{log}");
    // An object with a section turns registration off at the first one
    // here (no device), and the rest are not even looked at.
    assert!(
        lines.len() >= 4 || log.contains("/dev/sframe unusable"),
        "{log}"
    );
    assert!(!log.contains("skipped"), "{log}");
}

#[test]
fn the_auditor_namespace_loads_no_libgcc_s() {
    // The unwinder is linked into the library (build.rs): an audited
    // program maps no libgcc_s the program itself does not load.
    let count = |out: &Output| {
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.contains("libgcc_s"))
            .count()
    };
    let plain = sh("exec cat /proc/self/maps", false, false);
    let audited = sh("exec cat /proc/self/maps", true, false);
    assert!(plain.status.success() && audited.status.success());
    let log = String::from_utf8_lossy(&audited.stdout);
    // The library is mapped: the program was audited.
    assert!(log.contains("libsframe_audit.so"), "{log}");
    assert_eq!(count(&audited), count(&plain), "{log}");
}
