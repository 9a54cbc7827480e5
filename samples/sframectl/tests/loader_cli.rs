// SPDX-License-Identifier: GPL-2.0

//! Argument handling of the loader subcommands (`status`, `list`,
//! `register`, `unregister`, `run`), as far as it goes without the module.

use std::path::PathBuf;
use std::process::Command;
use std::process::Output;

fn sframectl(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sframectl"))
        .args(args)
        .env_remove("SFRAME_AUDIT_LIB")
        .env_remove("LD_AUDIT")
        .output()
        .unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn module_loaded() -> bool {
    std::path::Path::new("/dev/sframe").exists()
}

#[test]
fn run_needs_a_command() {
    let out = sframectl(&["run"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("CMD"), "{}", stderr(&out));
}

/// A stand-in for the audit library: `run` only checks that the file
/// exists, and ld.so ignores an audit object it cannot load.  The real
/// library is exercised in the guest (tests/guest/50-loader.sh).
fn fake_audit_lib(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sframectl-{}-{test}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let lib = dir.join("libsframe_audit.so");
    std::fs::write(&lib, b"not an ELF object").unwrap();
    lib
}

#[test]
fn run_passes_arguments_and_exit_status_through() {
    let lib = fake_audit_lib("args");
    let out = sframectl(&[
        "run",
        "--audit-lib",
        lib.to_str().unwrap(),
        "--",
        "/bin/sh",
        "-c",
        "echo \"$LD_AUDIT\" \"$0\" \"$1\"; exit 5",
        "a b",
        "--x",
    ]);
    std::fs::remove_dir_all(lib.parent().unwrap()).unwrap();
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.trim_end().ends_with("libsframe_audit.so a b --x"),
        "{stdout}"
    );
}

#[test]
fn run_with_a_missing_library_says_so() {
    let out = sframectl(&[
        "run",
        "--audit-lib",
        "/nonexistent/sframe-audit.so",
        "--",
        "true",
    ]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("does not exist"), "{}", stderr(&out));
}

#[test]
fn run_of_a_missing_program_says_so() {
    let lib = fake_audit_lib("missing");
    let out = sframectl(&[
        "run",
        "--audit-lib",
        lib.to_str().unwrap(),
        "--",
        "/nonexistent/program",
    ]);
    std::fs::remove_dir_all(lib.parent().unwrap()).unwrap();
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("cannot run /nonexistent/program"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn pid_must_be_a_number() {
    for sub in ["register", "unregister", "list"] {
        let out = sframectl(&[sub, "--pid", "abc"]);
        assert_eq!(out.status.code(), Some(2), "{sub}");
    }
    assert_eq!(sframectl(&["register"]).status.code(), Some(2));
}

#[test]
fn without_the_module_every_subcommand_explains() {
    if module_loaded() {
        eprintln!("skipped: the module is loaded here");
        return;
    }
    let pid = std::process::id().to_string();
    for args in [
        vec!["status"],
        vec!["list"],
        vec!["list", "--pid", &pid],
        vec!["register", "--pid", &pid],
        vec!["unregister", "--pid", &pid],
    ] {
        let out = sframectl(&args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(
            stderr(&out).contains("not loaded"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
}
