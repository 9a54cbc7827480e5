// SPDX-License-Identifier: GPL-2.0

//! Fingerprints the generator's sources into `FINGERPRINT`: caches of
//! generated sections (the audit library's) are keyed by it, so a build
//! whose output may differ never reads another build's files.

use std::env;
use std::fs;
use std::path::Path;
use std::path::PathBuf;

/// FNV-1a, 64 bits: stable across Rust releases, unlike `DefaultHasher`.
fn fnv1a(hash: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(hash, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

/// Every file under `dir`, recursively, sorted.
fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files(&path, out);
        } else {
            out.push(path);
        }
    }
}

fn main() {
    let root = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    // The generator and the decoder that validates its output, and the
    // versions of what it is built with (gimli and object evaluate the CFI).
    let inputs = [root.join("src"), root.join("../../rust/sframe/src")];
    let mut paths = Vec::new();
    for dir in &inputs {
        println!("cargo:rerun-if-changed={}", dir.display());
        files(dir, &mut paths);
    }
    paths.sort();
    let mut hash = 0xcbf2_9ce4_8422_2325;
    for path in &paths {
        let name = path.strip_prefix(&root).unwrap_or(path);
        hash = fnv1a(hash, name.to_string_lossy().as_bytes());
        hash = fnv1a(hash, &fs::read(path).unwrap_or_default());
    }
    let lock = root.join("../../Cargo.lock");
    println!("cargo:rerun-if-changed={}", lock.display());
    hash = fnv1a(hash, &fs::read(lock).unwrap_or_default());
    let folded = (hash ^ (hash >> 32)) as u32;
    let out = PathBuf::from(env::var_os("OUT_DIR").unwrap_or_default()).join("fingerprint.rs");
    let text = format!(
        "/// A hash of the generator's sources, the decoder's and `Cargo.lock`.\n\
         pub const FINGERPRINT: u32 = {folded:#010x};\n"
    );
    if fs::read_to_string(&out).ok().as_deref() != Some(text.as_str()) {
        fs::write(&out, text).expect("write fingerprint.rs");
    }
}
