// SPDX-License-Identifier: GPL-2.0

//! Fuzz target: the SFrame generator on arbitrary `.eh_frame`,
//! `.eh_frame_hdr` and ELF input. See `tests/common/harness.rs` for the
//! input layout and what is checked.

#![no_main]

use libfuzzer_sys::fuzz_target;

#[allow(dead_code)]
#[path = "../../tests/common/harness.rs"]
mod harness;

fuzz_target!(|data: &[u8]| {
    let _ = harness::exercise(data);
});
