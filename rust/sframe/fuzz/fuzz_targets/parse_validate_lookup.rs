// SPDX-License-Identifier: GPL-2.0

//! Fuzz target: parse, validate, iterate and look up arbitrary sections.
//!
//! Input: 8 bytes section address, 8 bytes PC seed (both little endian),
//! then the section bytes. Panics only if the decoder panics (including
//! arithmetic overflow with debug assertions on) or if a promise made after
//! validation does not hold; see `tests/common/harness.rs`.

#![no_main]

use libfuzzer_sys::fuzz_target;

#[allow(dead_code)]
#[path = "../../tests/common/harness.rs"]
mod harness;

fuzz_target!(|data: &[u8]| {
    harness::exercise(data);
});
