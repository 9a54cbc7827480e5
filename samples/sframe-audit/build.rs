// SPDX-License-Identifier: GPL-2.0

//! Links the unwinder into the audit library instead of loading
//! `libgcc_s.so.1` beside it.
//!
//! Rust's standard library links the unwinder it needs for `catch_unwind`
//! as `-lgcc_s`.  In the audit library that is one more shared object the
//! loader opens, maps, relocates and initialises in the auditor's namespace
//! at every start of every audited program (and one more section the
//! library registers there).  A linker script named `libgcc_s.so`, found
//! first, makes `-lgcc_s` resolve to the static `libgcc_eh.a`, as
//! `gcc -static-libgcc` does for a C library: the unwinder's functions
//! become hidden symbols of the library, and unwinding works as before.
//! `sframectl`, which links this crate, gets the same.

use std::env;
use std::fs;
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let target_os = env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let target_env = env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if target_os != "linux" || target_env != "gnu" {
        return;
    }
    let Some(out) = env::var_os("OUT_DIR").map(PathBuf::from) else {
        return;
    };
    let dir = out.join("static-unwinder");
    if fs::create_dir_all(&dir).is_err()
        || fs::write(dir.join("libgcc_s.so"), "INPUT(-lgcc_eh)\n").is_err()
    {
        // Without it the library links libgcc_s.so.1 as before.
        println!("cargo:warning=libgcc_s linker script not written: linking libgcc_s.so.1");
        return;
    }
    println!("cargo:rustc-link-search=native={}", dir.display());
}
