// SPDX-License-Identifier: GPL-2.0

//! A row table's hints ([`Section::with_hints`]) taken out of their section
//! for a walk: the lookups of the frames in one object, nearly all of them
//! answered by their slots, without the checks a lookup through the
//! section makes before it reaches the slot.

use super::budget::Budget;
use super::error::Error;
use super::header::Section;
use super::packed::PackedRow;
use super::table::Hinted;

/// A section's hint slots, with what a lookup through them needs, taken
/// out of the section once for the many lookups of a walk in one object
/// ([`Section::hints_within`]): a PC whose slot holds its key costs one
/// range check, the slot, its entry and one unit of budget, without the
/// checks a lookup through the section makes first (a table, its first
/// function, a PC above it, a key of 32 bits).
#[derive(Clone, Copy, Debug)]
pub struct Hints<'a> {
    /// The first PC the hints answer for: the table's first function, or
    /// the start of the text range where that is above it.
    lo: u64,
    /// How many PCs from `lo` on they answer for (none: 0): within the
    /// text range, and with keys of 32 bits.
    span: u64,
    /// `lo`'s key, the offset from the first function's start: with
    /// `span`, at most 2^32.
    key_lo: u64,
    hinted: Hinted<'a>,
}

impl Hints<'_> {
    /// Hints that answer for no PC.
    pub const NONE: Hints<'static> = Hints {
        lo: 0,
        span: 0,
        key_lo: 0,
        hinted: Hinted::EMPTY,
    };

    /// The table's answer for `pc` where its hint slot holds it, as
    /// [`Section::find_within`] gives it, for one unit of `budget`
    /// (`Err` only for a budget that runs out); `None` for a PC these
    /// hints do not answer for (out of their range, not in its slot, an
    /// entry that asks the decoder): the section answers then, as it
    /// would have, nothing charged here.
    #[inline(always)]
    pub fn find(&self, pc: u64, budget: &mut Budget) -> Option<Result<Option<PackedRow>, Error>> {
        let off = pc.wrapping_sub(self.lo);
        if off >= self.span {
            return None;
        }
        // `key_lo + span <= 2^32`: the key has 32 bits.
        let k = (self.key_lo.wrapping_add(off) & 0xffff_ffff) as u32;
        let answer = self.hinted.entry(self.hinted.hinted(k)?)?;
        if !budget.charge(1) {
            return Some(Err(Error::BudgetExhausted));
        }
        Some(answer)
    }
}

impl<'a> Section<'a> {
    /// The hints of this section's row table for lookups of PCs in
    /// `start..end` (its text range) through [`Hints::find`], which answers
    /// as [`Section::find_within`] does where a slot holds the PC, and
    /// otherwise leaves the lookup to it; [`Hints::NONE`] without a table,
    /// hints or a first function.
    pub fn hints_within(&self, start: u64, end: u64) -> Hints<'a> {
        let Some(table) = self.table.filter(|t| !t.hinted.hints.is_empty()) else {
            return Hints::NONE;
        };
        let Some(first) = table.first else {
            return Hints::NONE;
        };
        let lo = start.max(first);
        let end = end.min(first.saturating_add(1 << 32));
        Hints {
            lo,
            span: end.saturating_sub(lo),
            key_lo: lo.wrapping_sub(first),
            hinted: table.hinted,
        }
    }
}
