// SPDX-License-Identifier: GPL-2.0

//! The work one stack walk may do.
//!
//! The frame limit alone does not bound a walk's cost: one frame may need
//! an FDE binary search, a scan of up to [`MAX_FRES_SCANNED`] FREs and
//! several user-memory reads, and a process can register a section whose
//! functions have that many FREs. In NMI context that cost is paid with
//! interrupts off, so every walk gets a [`Budget`] of work units and ends
//! when it is spent.

use super::MAX_FRES_SCANNED;

/// Work units left to one walk, and the most FREs one of its lookups may
/// decode.
///
/// A unit is one FRE decoded, one FDE probed by the binary search, one
/// user-memory read, or one question to the lookup that the walker cannot
/// see inside of. Units are charged before the work is done (the FDE search
/// at its worst case, `floor(log2(num_fdes)) + 1` probes), so the work of a
/// walk never exceeds its budget. Once a charge fails the budget is
/// exhausted and every later charge fails too: the walk ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// Units left; 0 once exhausted.
    left: u32,
    /// The units given, or once exhausted the units paid: what is spent
    /// is this less `left`, so a charge updates one count.
    initial: u32,
    max_fres: u32,
    exhausted: bool,
}

impl Budget {
    /// `units` of work, lookups capped at `max_fres` FREs each.
    pub const fn new(units: u32, max_fres: u32) -> Self {
        Budget {
            left: units,
            initial: units,
            max_fres,
            exhausted: false,
        }
    }

    /// No bound beyond [`MAX_FRES_SCANNED`] per lookup: one lookup at
    /// registration time or in a tool, where no walk is being bounded.
    pub const fn unlimited() -> Self {
        Self::new(u32::MAX, MAX_FRES_SCANNED)
    }

    /// Pays `units`; `false`, and the budget is exhausted, if they are not
    /// all left (nothing is paid then).
    ///
    /// Once exhausted, `left` is 0, so a charge of one unit or more fails
    /// on the one comparison its success makes too: only a charge of no
    /// units reads the flag (a constant charge, inlined, does not).
    #[inline(always)]
    pub fn charge(&mut self, units: u32) -> bool {
        if units > self.left || (units == 0 && self.exhausted) {
            self.exhaust();
            return false;
        }
        // `units <= left`: it cannot wrap.
        self.left = self.left.wrapping_sub(units);
        true
    }

    /// Marks the budget as spent: the caller needed more than was left.
    /// What was paid stays [`Budget::spent`].
    pub fn exhaust(&mut self) {
        self.initial = self.spent();
        self.left = 0;
        self.exhausted = true;
    }

    /// Whether a charge has failed.
    pub fn exhausted(&self) -> bool {
        self.exhausted
    }

    /// Units still available (none once exhausted).
    pub fn left(&self) -> u32 {
        self.left
    }

    /// Units paid so far.
    pub fn spent(&self) -> u32 {
        // `left` only ever decreases from `initial`, and is 0 when
        // `initial` becomes what was spent.
        self.initial.wrapping_sub(self.left)
    }

    /// The most FREs one lookup may decode.
    pub fn max_fres(&self) -> u32 {
        self.max_fres
    }
}

/// Calls a rescheduling callback every [`RESCHED_FDES`] FDEs of an
/// O(FDEs) pass at registration (the index's and the row table's builds).
pub(super) struct ReschedEvery<'r> {
    resched: &'r mut dyn FnMut(),
    since: u32,
}

/// FDEs between two calls of a pass's rescheduling callback.
pub(super) const RESCHED_FDES: u32 = 1024;

impl<'r> ReschedEvery<'r> {
    pub(super) fn new(resched: &'r mut dyn FnMut()) -> Self {
        Self { resched, since: 0 }
    }

    /// One more FDE: calls the callback on every 1024th.
    pub(super) fn fde(&mut self) {
        self.since = self.since.wrapping_add(1);
        if self.since == RESCHED_FDES {
            (self.resched)();
            self.since = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_charge_pays_nothing_and_every_later_one_fails() {
        let mut b = Budget::new(5, 10);
        assert!(b.charge(3));
        // Two left: the charge fails, nothing is paid.
        assert!(!b.charge(3));
        assert_eq!((b.spent(), b.left(), b.exhausted()), (3, 0, true));
        assert!(!b.charge(1));
        assert!(!b.charge(0));
        assert_eq!((b.spent(), b.left(), b.exhausted()), (3, 0, true));
    }

    #[test]
    fn spent_to_the_last_unit_is_not_exhausted() {
        let mut b = Budget::new(2, 10);
        assert!(b.charge(2));
        assert_eq!((b.spent(), b.left(), b.exhausted()), (2, 0, false));
        assert!(b.charge(0));
        assert!(!b.charge(1));
        assert_eq!((b.spent(), b.left(), b.exhausted()), (2, 0, true));
    }

    #[test]
    fn exhausting_keeps_what_was_paid() {
        let mut b = Budget::new(9, 10);
        assert!(b.charge(4));
        b.exhaust();
        assert_eq!((b.spent(), b.left(), b.exhausted()), (4, 0, true));
        assert!(!b.charge(0));
    }
}
