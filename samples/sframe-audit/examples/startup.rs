// SPDX-License-Identifier: GPL-2.0

//! `startup`: the audit library's start-up work, on a host without the
//! module.  With `/dev/sframe` missing the library stops at the first
//! object and does nothing, so this program replays what it does for the
//! objects of its own process (`sframe_audit::audit::replay_start`: our
//! own namespace, then every link map), with registrations accepted by a
//! sink instead of the module.  Only the kernel's part (the copy and
//! validation of each section at registration) is left out.
//!
//! ```text
//! cargo build --release -p sframe-audit --lib --example startup
//! A=target/release/libsframe_audit.so
//! XDG_CACHE_HOME=$(mktemp -d) target/release/examples/startup --dlopen $A   # cold
//! valgrind --tool=callgrind --toggle-collect='startup::replay' \
//!     target/release/examples/startup --dlopen $A                       # warm
//! ```
//!
//! `--dlopen LIB` loads more objects first (the audit library itself, so
//! that its own section is part of the work as it is under `LD_AUDIT`);
//! `--rounds N` replays N times and reports each, with the process's
//! resident anonymous memory before and after; the environment switches
//! of the library (`SFRAME_AUDIT_SYNTH`, `SFRAME_AUDIT_DEBUG`,
//! `XDG_CACHE_HOME`) apply.

use sframe_audit::audit::replay_start;
use sframe_audit::audit::Registry;
use sframe_audit::device::Registration;
use std::cell::Cell;
use std::ffi::CString;
use std::io;
use std::time::Instant;

/// Accepts every registration, counting them and their bytes.
#[derive(Default)]
struct Sink {
    registrations: Cell<u64>,
    bytes: Cell<u64>,
}

impl Registry for Sink {
    fn register(&self, reg: &Registration) -> io::Result<u64> {
        let n = self.registrations.get() + 1;
        self.registrations.set(n);
        let len = reg.data.end.saturating_sub(reg.data.start);
        self.bytes.set(self.bytes.get() + len);
        Ok(n)
    }

    fn unregister(&self, _handle: u64) -> io::Result<()> {
        Ok(())
    }
}

/// The measured part (`--toggle-collect='startup::replay'`).
#[inline(never)]
fn replay(sink: &Sink) -> usize {
    replay_start(sink)
}

/// The process's resident anonymous memory (kB), from `/proc/self/status`.
fn rss_anon_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let line = status.lines().find(|l| l.starts_with("RssAnon:"))?;
            line.split_whitespace().nth(1)?.parse().ok()
        })
        .unwrap_or(0)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mut rounds = 1u32;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--dlopen" => {
                let lib = args.next().expect("--dlopen LIB");
                let c = CString::new(lib.clone()).expect("path");
                // SAFETY: Loading a shared object runs its initialisers;
                // the ones given here are ours or system libraries.
                let handle = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW) };
                assert!(!handle.is_null(), "cannot dlopen {lib}");
            }
            "--rounds" => {
                rounds = args
                    .next()
                    .and_then(|n| n.parse().ok())
                    .expect("--rounds N")
            }
            _ => panic!("usage: startup [--dlopen LIB]... [--rounds N]"),
        }
    }
    for round in 0..rounds {
        let sink = Sink::default();
        let before = rss_anon_kb();
        let t = Instant::now();
        let objects = replay(&sink);
        let us = t.elapsed().as_secs_f64() * 1e6;
        println!(
            "round {round}: {us:.0} us, {objects} objects registered, {} registrations, \
             {} section bytes, anonymous memory {before} kB before, {} kB after",
            sink.registrations.get(),
            sink.bytes.get(),
            rss_anon_kb()
        );
    }
}
