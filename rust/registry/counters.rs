// SPDX-License-Identifier: GPL-2.0

//! The registry's figures for `SFRAME_IOC_STATS`, and failures: every
//! operation's error is a [`Failure`], counted by kind and explained in the
//! log (ratelimited), whatever context it comes from (an ioctl, an exec's
//! work).
//!
//! Contexts: the counters are atomics, changed in any context but NMI (the
//! unmap watch and the teardown probe retire sections in atomic context);
//! [`fill_stats`] and [`fail`] run in process context.

use super::{
    get,
    maintenance::maintain, //
};
use crate::{
    abstractions::ratelimit::pr_warn_ratelimited,
    uapi::*, //
};
use core::sync::atomic::{
    AtomicU64,
    Ordering, //
};
use kernel::prelude::*;

/// Module-wide counters for `SFRAME_IOC_STATS`.
pub(super) struct Counters {
    /// Sections held: live, or retired and not yet erased.
    pub(super) sections: AtomicU64,
    pub(super) copies: AtomicU64,
    pub(super) bytes: AtomicU64,
    pub(super) mms: AtomicU64,
    pub(super) registered: AtomicU64,
    pub(super) unregistered: AtomicU64,
    /// Kept copies and their bytes ([`super::kept`]), and how many were
    /// taken back since load.
    pub(super) kept_copies: AtomicU64,
    pub(super) kept_bytes: AtomicU64,
    pub(super) kept_reused: AtomicU64,
    /// Registrations made by tag (`SFRAME_F_BY_TAG`) since load.
    pub(super) by_tag: AtomicU64,
    failures: [AtomicU64; SFRAME_FAIL_COUNT],
}

pub(super) static COUNTERS: Counters = Counters {
    sections: AtomicU64::new(0),
    copies: AtomicU64::new(0),
    bytes: AtomicU64::new(0),
    mms: AtomicU64::new(0),
    registered: AtomicU64::new(0),
    unregistered: AtomicU64::new(0),
    kept_copies: AtomicU64::new(0),
    kept_bytes: AtomicU64::new(0),
    kept_reused: AtomicU64::new(0),
    by_tag: AtomicU64::new(0),
    failures: [const { AtomicU64::new(0) }; SFRAME_FAIL_COUNT],
};

/// Fills the registry's module-wide part of `SFRAME_IOC_STATS`, after what
/// the maintenance work had still to do (an exit just before counts as
/// done).  For callers allowed to see every user's figures.
pub(crate) fn fill_stats(s: &mut SframeStats) {
    maintain();
    let c = &COUNTERS;
    s.sections = c.sections.load(Ordering::Relaxed);
    s.copies = c.copies.load(Ordering::Relaxed);
    s.bytes = c.bytes.load(Ordering::Relaxed);
    s.mms = c.mms.load(Ordering::Relaxed);
    s.registered = c.registered.load(Ordering::Relaxed);
    s.unregistered = c.unregistered.load(Ordering::Relaxed);
    s.kept_copies = c.kept_copies.load(Ordering::Relaxed);
    s.kept_bytes = c.kept_bytes.load(Ordering::Relaxed);
    s.kept_reused = c.kept_reused.load(Ordering::Relaxed);
    s.by_tag = c.by_tag.load(Ordering::Relaxed);
    for (out, f) in s.failures.iter_mut().zip(c.failures.iter()) {
        *out = f.load(Ordering::Relaxed);
    }
}

/// Fills `SFRAME_IOC_STATS` with what account `id` holds: its sections,
/// copies and bytes, and the registrations made and removed in its
/// processes; nothing of other users.
pub(crate) fn fill_own_stats(s: &mut SframeStats, id: u32) {
    maintain();
    let Some(a) = get().and_then(|reg| reg.find_account(id)) else {
        return;
    };
    s.sections = u64::from(a.sections.load(Ordering::Relaxed));
    s.copies = u64::from(a.copies.load(Ordering::Relaxed));
    s.bytes = a.bytes.load(Ordering::Relaxed);
    s.registered = a.registered.load(Ordering::Relaxed);
    s.unregistered = a.unregistered.load(Ordering::Relaxed);
    s.kept_copies = u64::from(a.kept.load(Ordering::Relaxed));
    s.kept_bytes = a.kept_bytes.load(Ordering::Relaxed);
    s.kept_reused = a.kept_reused.load(Ordering::Relaxed);
    s.by_tag = a.by_tag.load(Ordering::Relaxed);
}

/// A failed request: the errno, the `SFRAME_FAIL_*` counter, and the reason
/// for the log.
pub(crate) struct Failure {
    pub(crate) error: Error,
    kind: usize,
    reason: &'static str,
    /// Whether the log says it (an expected failure is only counted).
    log: bool,
}

impl Failure {
    pub(crate) fn new(error: Error, kind: usize, reason: &'static str) -> Self {
        Self {
            error,
            kind,
            reason,
            log: true,
        }
    }

    /// A failure callers expect in normal operation: counted, not logged.
    pub(super) fn quiet(self) -> Self {
        Self { log: false, ..self }
    }
}

/// Counts a failure, logs it (rate-limited) and returns its errno.
pub(crate) fn fail(f: Failure, what: &str) -> Error {
    if let Some(c) = COUNTERS.failures.get(f.kind) {
        c.fetch_add(1, Ordering::Relaxed);
    }
    if let Some(reg) = get().filter(|_| f.log) {
        pr_warn_ratelimited!(
            reg.warn,
            "{} by pid {} failed: {} (errno {})\n",
            what,
            kernel::current!().pid(),
            f.reason,
            -f.error.to_errno()
        );
    }
    f.error
}

/// `ENOSPC` for the limit `reason` names.
pub(super) fn limit(reason: &'static str) -> Failure {
    Failure::new(ENOSPC, SFRAME_FAIL_LIMIT, reason)
}

pub(super) const FAIL_MEM: Failure = Failure {
    error: ENOMEM,
    kind: SFRAME_FAIL_NOMEM,
    reason: "out of memory",
    log: true,
};
