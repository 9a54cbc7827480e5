// SPDX-License-Identifier: GPL-2.0

//! Test helpers: a child process that executes another program on cue.

use std::fs::File;
use std::process::Child;
use std::process::Command;
use std::process::Stdio;
use std::time::Duration;

/// A child that runs `sh`, then, once a line is written to its stdin
/// ([`cue`]), executes `sleep` in the same process; its pid, and its
/// `/proc/PID/mem` opened while it runs `sh`.
pub(crate) fn exec_on_cue() -> (Child, i32, File) {
    let child = Command::new("sh")
        .args(["-c", "read cue; exec sleep 30"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    wait_for_comm(pid, "sh");
    let mem = File::open(format!("/proc/{pid}/mem")).unwrap();
    (child, pid, mem)
}

/// Waits until process `pid` runs `name`.
fn wait_for_comm(pid: i32, name: &str) {
    for _ in 0..500 {
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        if comm.trim_end() == name {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("process {pid} never ran {name}");
}

/// Has `child`, waiting in [`exec_on_cue`], execute `sleep`, and waits
/// until it does.
pub(crate) fn cue(child: &mut Child) {
    use std::io::Write;
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    wait_for_comm(child.id() as i32, "sleep");
}
