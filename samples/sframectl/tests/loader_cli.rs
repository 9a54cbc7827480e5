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

#[test]
fn run_passes_arguments_and_exit_status_through() {
    // The audit library cargo built sits next to sframectl.
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_sframectl"));
    if !exe.with_file_name("libsframe_audit.so").is_file() {
        eprintln!("skipped: build sframe-audit first");
        return;
    }
    let out = sframectl(&[
        "run",
        "--",
        "/bin/sh",
        "-c",
        "echo \"$LD_AUDIT\" \"$0\" \"$1\"; exit 5",
        "a b",
        "--x",
    ]);
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
    let out = sframectl(&["run", "--", "/nonexistent/program"]);
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
