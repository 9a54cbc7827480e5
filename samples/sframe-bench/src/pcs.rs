// SPDX-License-Identifier: GPL-2.0

//! The PCs every benchmark looks up, shared by `sframe-bench` and the
//! `find_row` example so that their figures are for the same addresses.

/// `count` pseudo-random PCs in `start..end`, the same on every run
/// (xorshift64*: reproducible without a dependency).
pub(crate) fn random_pcs(count: usize, start: u64, end: u64) -> Vec<u64> {
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let span = end.saturating_sub(start).max(1);
    (0..count)
        .map(|_| {
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            start + state.wrapping_mul(0x2545_f491_4f6c_dd1d) % span
        })
        .collect()
}
