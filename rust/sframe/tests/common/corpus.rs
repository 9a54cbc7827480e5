// SPDX-License-Identifier: GPL-2.0

//! A committed fuzz corpus, for the replay tests of this crate and of
//! `sframe-synth` (which includes this file by path).

use std::fs;
use std::path::Path;
use std::path::PathBuf;

/// Every input of the corpus in `dir`, sorted by name; panics on an empty
/// or missing corpus, which would make the replay test check nothing.
pub fn inputs(dir: &Path) -> Vec<PathBuf> {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .expect("fuzz corpus directory")
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    assert!(!entries.is_empty(), "empty fuzz corpus");
    entries
}
