// SPDX-License-Identifier: GPL-2.0

//! The module's run-time switches (`SFRAME_IOC_CONTROL`): which of the
//! unwinder's hooks and which of the lifecycle's probes are installed, and
//! which are on.
//!
//! A part that installed something makes its bits available at load and
//! withdraws them at unload; `SFRAME_IOC_CONTROL` turns available ones on
//! and off.  Off means the hook's callback, or the probe, declines: the
//! kernel's own code runs.  Contexts: [`enabled`] is read in any context
//! (NMI included, in the ftrace callbacks); the rest in process context.

#![deny(unsafe_code)]

use crate::{
    abstractions::compat::eopnotsupp,
    uapi::{
        SFRAME_CTL_EXEC,
        SFRAME_CTL_FORK,
        SFRAME_CTL_HOOK_DEFERRED,
        SFRAME_CTL_HOOK_SAMPLE, //
    },
};
use core::sync::atomic::{
    AtomicU32,
    Ordering, //
};
use kernel::prelude::*;

/// `SFRAME_CTL_*` bits of the hooks that are on.
static ENABLED: AtomicU32 = AtomicU32::new(0);
/// `SFRAME_CTL_*` bits of the hooks that are installed (could be turned on).
static AVAILABLE: AtomicU32 = AtomicU32::new(0);
/// Every control bit this module knows: `rust/unwind/hooks.rs` owns the
/// hooks' bits, `rust/lifecycle/` the exec and fork bits.
pub(crate) const CTL_ALL: u32 =
    SFRAME_CTL_HOOK_SAMPLE | SFRAME_CTL_HOOK_DEFERRED | SFRAME_CTL_EXEC | SFRAME_CTL_FORK;

/// Makes the switches `bits` available and turns them on (at load).
pub(crate) fn make_available(bits: u32) {
    AVAILABLE.fetch_or(bits, Ordering::Relaxed);
    ENABLED.fetch_or(bits, Ordering::Release);
}

/// Turns the switches `bits` off for good (at unload).
pub(crate) fn withdraw(bits: u32) {
    ENABLED.fetch_and(!bits, Ordering::Release);
    AVAILABLE.fetch_and(!bits, Ordering::Relaxed);
}

/// Whether the hook with control bit `bit` is on.
pub(crate) fn enabled(bit: u32) -> bool {
    ENABLED.load(Ordering::Relaxed) & bit != 0
}

/// The control bits that are on.
pub(crate) fn current() -> u32 {
    ENABLED.load(Ordering::Relaxed)
}

/// Turns the hooks in `mask` on or off as `value` says; returns the bits on
/// afterwards. A hook whose target this kernel lacks cannot be turned on.
pub(crate) fn set(mask: u32, value: u32) -> Result<u32> {
    if mask & !CTL_ALL != 0 {
        return Err(EINVAL);
    }
    let on = mask & value;
    if on & !AVAILABLE.load(Ordering::Relaxed) != 0 {
        return Err(eopnotsupp());
    }
    let old = ENABLED
        .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |cur| {
            Some((cur & !mask) | on)
        })
        .unwrap_or_else(|cur| cur);
    Ok((old & !mask) | on)
}
