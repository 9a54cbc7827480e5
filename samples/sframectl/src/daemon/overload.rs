// SPDX-License-Identifier: GPL-2.0

//! What the daemon does when it falls behind: a ring buffer that
//! overflowed (`PERF_RECORD_LOST`) hid some mappings, so every process is
//! scanned again, but at most once per [`RESCAN_INTERVAL`], so that an exec
//! storm costs bounded work.

use std::time::Duration;
use std::time::Instant;

/// The shortest time between two scans of every process after losses.
pub(super) const RESCAN_INTERVAL: Duration = Duration::from_secs(1);

/// Whether a scan of every process is owed, and when the last one ran.
pub(super) struct Rescan {
    pending: bool,
    last: Instant,
}

impl Rescan {
    /// No scan owed; the last one ran at `now`.
    pub(super) fn new(now: Instant) -> Self {
        Self {
            pending: false,
            last: now,
        }
    }

    /// Records were lost: a scan is owed.
    pub(super) fn lost(&mut self) {
        self.pending = true;
    }

    /// A scan of every process has just run.
    pub(super) fn scanned(&mut self) {
        self.pending = false;
        self.last = Instant::now();
    }

    /// How long the loop may sleep before the owed scan is due, if one is.
    pub(super) fn timeout(&self) -> Option<Duration> {
        self.pending
            .then(|| RESCAN_INTERVAL.saturating_sub(self.last.elapsed()))
    }

    /// Whether the owed scan is due now.
    pub(super) fn due(&self) -> bool {
        self.pending && self.last.elapsed() >= RESCAN_INTERVAL
    }
}
