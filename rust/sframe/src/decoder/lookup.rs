// SPDX-License-Identifier: GPL-2.0

//! PC to unwind row: binary search over the FDEs, bounded scan of the FREs.

use super::budget::Budget;
use super::bytes::{usize_from, Be, ByteOrder, Le};
use super::fde::{Fde, FdeLayout, FreType, PcType, V2Layout, V3Layout};
use super::fre::{RawFre, Row};
use super::header::{Section, Version, FLAG_FDE_FUNC_START_PCREL};
use super::packed::PackedRow;
use super::Error;

/// The most FREs one lookup decodes in a single function.
///
/// FREs have variable sizes, so a function's FREs are scanned linearly from
/// its first; the scan stops at the first FRE that starts after the PC. A
/// lookup whose PC lies beyond the first `MAX_FRES_SCANNED` FREs of its
/// function fails with [`Error::TooManyFres`] instead of scanning on: the
/// caller then treats the PC as not covered (the kernel falls back to a
/// frame-pointer step). Compilers emit one FRE per change of the CFA or of
/// a saved register, so real functions stay far below this. This is the
/// cap of [`Section::find_row`] and of an unlimited [`Budget`]; a walk in
/// NMI context passes a smaller one ([`Section::find_row_within`]), and its
/// budget bounds the total over all its lookups.
pub const MAX_FRES_SCANNED: u32 = 1024;

/// A row a lookup found ([`Section::find_within`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FoundRow {
    /// From the row table.
    Packed(PackedRow),
    /// Decoded from the section's FDE and FRE.
    Decoded(Row),
}

impl FoundRow {
    /// The row.
    #[inline(always)]
    pub fn row(self) -> Row {
        match self {
            FoundRow::Packed(packed) => packed.row(),
            FoundRow::Decoded(row) => row,
        }
    }
}

/// The most FDEs a binary search over `num_fdes` of them probes:
/// `floor(log2(num_fdes)) + 1`, the bit length (0 for none).
pub(super) fn search_probes(num_fdes: u32) -> u32 {
    u32::BITS.wrapping_sub(num_fdes.leading_zeros())
}

impl<'a> Section<'a> {
    /// Index of the last FDE whose function starts at or below `pc`.
    ///
    /// O(log n) reads of the start field. Relies on validated (sorted)
    /// FDEs for a meaningful answer, but terminates on any input.
    pub fn find_fde_index(&self, pc: u64) -> Result<Option<u32>, Error> {
        let bounds = self.search_bounds(pc);
        if self.fdes.big_endian() {
            self.search::<Be>(pc, bounds)
        } else {
            self.search::<Le>(pc, bounds)
        }
    }

    /// [`Section::find_fde_index`] in byte order `E`, among the FDEs
    /// `bounds` ([`Section::search_bounds`]).
    #[inline(always)]
    fn search<E: ByteOrder>(&self, pc: u64, bounds: (u32, u32)) -> Result<Option<u32>, Error> {
        match self.version {
            Version::V2 => self.search_in::<E, V2Layout>(pc, bounds),
            Version::V3 => self.search_in::<E, V3Layout>(pc, bounds),
        }
    }

    /// [`Section::find_fde_index`] in byte order `E` and FDE layout `L`,
    /// among the FDEs `lo..hi`: those below `lo` are known to start at or
    /// below `pc`, those from `hi` on above it.
    ///
    /// Over all FDEs, probes the same FDEs in the same order as a search
    /// calling [`Section::fde_range`] per probe, with the same checks and
    /// errors, but with what does not change between probes worked out
    /// once.
    #[inline(always)]
    fn search_in<E: ByteOrder, L: FdeLayout>(
        &self,
        pc: u64,
        (lo, hi): (u32, u32),
    ) -> Result<Option<u32>, Error> {
        let fdes = self.fdes.as_slice();
        // A PCREL start counts from `addr + fde_area_off + off` (the field
        // itself), else from `addr`: `base + (off & mask)` is either, and
        // checking `base` and then the sum rejects exactly the same FDEs
        // as checking `fde_area_off + off` and then `addr + field`.
        let (base, mask) = if self.flags & FLAG_FDE_FUNC_START_PCREL != 0 {
            let base = u64::try_from(self.fde_area_off)
                .ok()
                .and_then(|o| self.addr.checked_add(o));
            (base, u64::MAX)
        } else {
            (Some(self.addr), 0)
        };
        let (mut lo, mut hi) = (lo, hi.min(self.num_fdes));
        // Invariant: FDEs below `lo` start at or below `pc`, FDEs at or
        // above `hi` start above it. The range halves every iteration.
        while lo < hi {
            // `lo < hi`, so neither can wrap.
            let mid = lo.wrapping_add(hi.wrapping_sub(lo) / 2);
            // `mid < hi <= num_fdes`, so `fde_off` would not fail on the
            // index; `parse` made the array `num_fdes` entries long.
            let off = usize_from(mid)
                .checked_mul(L::LEN)
                .ok_or(Error::FdeIndexOutOfRange)?;
            let (raw, size) = L::start_size::<E>(fdes, off).ok_or(Error::FdeAreaOutOfBounds)?;
            let field = u64::try_from(off).map_err(|_| Error::FunctionStartOverflow)?;
            let start = base
                .and_then(|b| b.checked_add(field & mask))
                .and_then(|b| b.checked_add_signed(raw))
                .filter(|s| s.checked_add(u64::from(size)).is_some())
                .ok_or(Error::FunctionStartOverflow)?;
            let below = start <= pc;
            lo = if below { mid.wrapping_add(1) } else { lo };
            hi = if below { hi } else { mid };
        }
        Ok(lo.checked_sub(1))
    }

    /// The unwind row that applies at `pc`.
    ///
    /// `Ok(None)` when no function covers `pc`, or when `pc` lies before
    /// the function's first FRE. O(log n) FDE binary search; PCMASK FDEs
    /// match on `(pc - start) % rep_size`; the FRE scan is capped at
    /// [`MAX_FRES_SCANNED`].
    pub fn find_row(&self, pc: u64) -> Result<Option<Row>, Error> {
        if let Some(found) = self.table_row(pc, &mut Budget::unlimited()) {
            return found.map(|row| row.map(PackedRow::row));
        }
        // Without a budget to keep, the FRE count is not needed.
        let mut decoded = 0;
        let bounds = self.search_bounds(pc);
        self.find_row_capped(pc, bounds, MAX_FRES_SCANNED, &mut decoded)
    }

    /// [`Section::find_row`], paid for from `budget`.
    ///
    /// The FDE search is charged its worst case before it starts (with an
    /// index, one unit more for the index's words: a lookup through it
    /// never costs nothing), then one unit per FRE decoded; the FRE scan
    /// stops at `budget.max_fres()` FREs ([`Error::TooManyFres`], as
    /// [`Section::find_row`] at its cap) or when the units left run out
    /// first ([`Error::BudgetExhausted`], and the budget is marked
    /// exhausted). No other error depends on the budget.
    ///
    /// Inlined into its callers, with the row table's lookup, so that the
    /// common case (a table, a row that packs) does not pay the set-up of
    /// the decoder's search, which stays out of line.
    #[inline(always)]
    pub fn find_row_within(&self, pc: u64, budget: &mut Budget) -> Result<Option<Row>, Error> {
        Ok(self.find_within(pc, budget)?.map(FoundRow::row))
    }

    /// [`Section::find_row_within`], the row as the lookup found it: as
    /// the row table packs it, or decoded.  For a walk: a caller that
    /// matches on the two, with its use of the row inlined in each arm,
    /// unpacks the table's rows into registers.
    #[inline(always)]
    pub fn find_within(&self, pc: u64, budget: &mut Budget) -> Result<Option<FoundRow>, Error> {
        // The row table, when there is one: a few probes, no scan.
        if self.table.is_some() {
            if let Some(found) = self.table_row(pc, budget) {
                return found.map(|row| row.map(FoundRow::Packed));
            }
        }
        // The budget goes out of line by value and comes back: its
        // address does not reach the search, so a walk whose other code
        // out of line does not have it either (x86-64's, whose rules are
        // inlined, `rules::recover`) keeps it in a machine register.
        let (found, left) = self.find_row_decoded(pc, *budget);
        *budget = left;
        Ok(found?.map(FoundRow::Decoded))
    }

    /// [`Section::find_row_within`] without the row table, with what is
    /// left of `budget` after it.
    #[inline(never)]
    fn find_row_decoded(
        &self,
        pc: u64,
        mut budget: Budget,
    ) -> (Result<Option<Row>, Error>, Budget) {
        let found = self.find_row_decoded_in(pc, &mut budget);
        (found, budget)
    }

    /// [`Section::find_row_decoded`], paid from `budget`.
    #[inline(always)]
    fn find_row_decoded_in(&self, pc: u64, budget: &mut Budget) -> Result<Option<Row>, Error> {
        let bounds = self.search_bounds(pc);
        let probes = search_probes(bounds.1.saturating_sub(bounds.0))
            .saturating_add(u32::from(self.index.is_some()));
        if !budget.charge(probes) {
            return Err(Error::BudgetExhausted);
        }
        let cap = budget.max_fres().min(budget.left());
        let mut decoded = 0;
        let found = self.find_row_capped(pc, bounds, cap, &mut decoded);
        // `decoded <= cap <= left`: this charge cannot fail.
        budget.charge(decoded);
        match found {
            // The units ran out before the FRE cap was reached.
            Err(Error::TooManyFres) if cap < budget.max_fres() => {
                budget.exhaust();
                Err(Error::BudgetExhausted)
            }
            found => found,
        }
    }

    /// The lookup, its FRE scan capped at `cap` FREs, `decoded` set to the
    /// number of FREs read.
    #[inline(always)]
    fn find_row_capped(
        &self,
        pc: u64,
        bounds: (u32, u32),
        cap: u32,
        decoded: &mut u32,
    ) -> Result<Option<Row>, Error> {
        // One copy of the whole lookup per byte order: its loops then
        // decode fields without testing the order each time.
        if self.fdes.big_endian() {
            self.find_row_in::<Be>(pc, bounds, cap, decoded)
        } else {
            self.find_row_in::<Le>(pc, bounds, cap, decoded)
        }
    }

    /// [`Section::find_row_capped`] in byte order `E`.
    #[inline(always)]
    fn find_row_in<E: ByteOrder>(
        &self,
        pc: u64,
        bounds: (u32, u32),
        cap: u32,
        decoded: &mut u32,
    ) -> Result<Option<Row>, Error> {
        let Some(index) = self.search::<E>(pc, bounds)? else {
            return Ok(None);
        };
        let fde = self.fde_at::<E>(self.fde_off(index)?)?;
        if !fde.contains(pc) {
            return Ok(None);
        }
        // `contains` ensures `pc - start < size <= u32::MAX`.
        let mut off = pc.wrapping_sub(fde.start);
        if fde.pc_type == PcType::Mask {
            // `fde()` rejects a zero `rep_size`.
            off = off
                .checked_rem(u64::from(fde.rep_size))
                .ok_or(Error::BadRepSize)?;
        }
        let off = u32::try_from(off).map_err(|_| Error::FreStartBeyondFunction)?;

        let fres = self.fres.as_slice();
        let (found, n) = match fde.fre_type {
            FreType::Addr1 => scan::<E, 1>(fres, &fde, off, cap),
            FreType::Addr2 => scan::<E, 2>(fres, &fde, off, cap),
            FreType::Addr4 => scan::<E, 4>(fres, &fde, off, cap),
        };
        *decoded = n;
        match found? {
            Some(raw) => self.decode_row_in::<E>(&fde, raw).map(Some),
            None => Ok(None),
        }
    }
}

/// The last FRE of `fde` that starts at or below `off`, its FRE start
/// offsets being `N` bytes in byte order `E`.
///
/// Reads FREs in order up to the first that starts beyond `off` (which
/// must read correctly too) and at most `cap` of them. Returns the
/// result and the number of FREs read, whatever the result.
#[inline(always)]
fn scan<E: ByteOrder, const N: usize>(
    fres: &[u8],
    fde: &Fde,
    off: u32,
    cap: u32,
) -> (Result<Option<RawFre>, Error>, u32) {
    let mut pos = fde.fre_off;
    let mut found: Option<RawFre> = None;
    let n = fde.num_fres.min(cap);
    for i in 0..n {
        // `i < n`, so this cannot wrap.
        let decoded = i.wrapping_add(1);
        let raw = match RawFre::read_at::<E, N>(fres, pos) {
            Ok(raw) => raw,
            Err(e) => return (Err(e), decoded),
        };
        if raw.start_off > off {
            return (Ok(found), decoded);
        }
        pos = raw.next;
        found = Some(raw);
    }
    // All `cap` FREs start at or below `off`, and the function has more.
    if fde.num_fres > n {
        return (Err(Error::TooManyFres), n);
    }
    (Ok(found), n)
}
