// SPDX-License-Identifier: GPL-2.0

//! Counters added to in any context, NMI included: [`SLOTS`] 64-bit
//! counters, one set per CPU.
//!
//! C header: [`include/linux/percpu-defs.h`](srctree/include/linux/percpu-defs.h)
//! (`raw_cpu_ptr()`); the sets and their helpers are in `helpers.c`.
//!
//! Atomic counters shared by every CPU make each adder own their cache
//! line for a moment: on a machine sampling many CPUs at once, every
//! sample's walk would wait for it.  Here a CPU adds to its own set, to
//! lines the other CPUs leave alone, with atomic adds: safe against an
//! NMI on the same CPU, and against a task that moves to another CPU
//! between finding its set and adding (it adds to the set it found, and
//! the sums are the same).  A reader sums the sets of every possible
//! CPU.  The sums are not a snapshot: a count added while they are read
//! may or may not be in them, and counts only grow.

use super::ffi;
use core::sync::atomic::{
    AtomicU64,
    Ordering, //
};

/// How many counters there are: slots `0 .. SLOTS`.
pub(crate) const SLOTS: usize = ffi::SFRAME_PERCPU_COUNTERS as usize;

/// Adds each `(slot, amount)` of `adds` to this CPU's counters; a slot out
/// of range is ignored.  Any context, NMI included.
#[inline]
pub(crate) fn add<const N: usize>(adds: &[(usize, u64); N]) {
    // SAFETY: The helper returns the address of the `SLOTS` words of the
    // running CPU's set, a per-CPU variable of this module: aligned, and
    // valid while the module is loaded, which this call keeps it (it runs
    // the module's code).  Every write to them is an atomic add (here);
    // the reader's loads are `READ_ONCE()`.
    let set = unsafe { &*ffi::sframe_percpu_counters_here().cast::<[AtomicU64; SLOTS]>() };
    for &(slot, n) in adds {
        if n != 0 {
            if let Some(c) = set.get(slot) {
                c.fetch_add(n, Ordering::Relaxed);
            }
        }
    }
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
