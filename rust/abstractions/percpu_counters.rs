// SPDX-License-Identifier: GPL-2.0

//! Counters added to in any context, NMI included: [`SLOTS`] 64-bit
//! counters, one set per CPU.
//!
//! C header: [`include/linux/percpu-defs.h`](srctree/include/linux/percpu-defs.h)
//! (`this_cpu_add()`); the set and its helpers are in `helpers.c`.
//!
//! Atomic counters shared by every CPU make each adder own their cache
//! line for a moment: on a machine sampling many CPUs at once, every
//! sample's walk would wait for it.  Here a CPU adds to its own set, with
//! no atomic instruction on x86-64 (one `add` to a per-CPU address, which
//! an NMI cannot split) and none shared on arm64; a reader sums the sets
//! of every possible CPU.  The sums are not a snapshot: a count added
//! while they are read may or may not be in them, and counts only grow.

use super::ffi;

/// How many counters there are: slots `0 .. SLOTS`.
pub(crate) const SLOTS: usize = ffi::SFRAME_PERCPU_COUNTERS as usize;

/// Adds each `(slot, amount)` of `adds` to this CPU's counters, in one
/// call; a slot out of range is ignored.  Any context, NMI included.
pub(crate) fn add<const N: usize>(adds: &[(usize, u64); N]) {
    let pairs = adds.map(|(slot, n)| [u64::try_from(slot).unwrap_or(u64::MAX), n]);
    let npairs = u32::try_from(N).unwrap_or(u32::MAX);
    // SAFETY: `pairs` is `N` pairs of words, contiguous (`[[u64; 2]; N]`),
    // and the helper reads `npairs <= N` pairs from it; it checks each
    // slot, and `this_cpu_add()` is safe in any context.
    unsafe { ffi::sframe_percpu_counters_add(pairs.as_ptr().cast(), npairs) }
}

/// The first `N` counters, each summed over every possible CPU (zero past
/// [`SLOTS`]).  Any context that may read other CPUs' memory; the module
/// reads them for an ioctl.
pub(crate) fn read<const N: usize>() -> [u64; N] {
    let mut out = [0u64; N];
    let count = u32::try_from(N).unwrap_or(u32::MAX);
    // SAFETY: `out` is writable for `N` words and the helper writes
    // `count <= N` of them.
    unsafe { ffi::sframe_percpu_counters_read(out.as_mut_ptr(), count) };
    out
}
