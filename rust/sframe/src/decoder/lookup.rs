// SPDX-License-Identifier: GPL-2.0

//! PC to unwind row: binary search over the FDEs, bounded scan of the FREs.

use super::fde::PcType;
use super::fre::{RawFre, Row};
use super::header::Section;
use super::Error;

/// The most FREs one lookup decodes in a single function.
///
/// FREs have variable sizes, so a function's FREs are scanned linearly from
/// its first; the scan stops at the first FRE that starts after the PC. A
/// lookup whose PC lies beyond the first `MAX_FRES_SCANNED` FREs of its
/// function fails with [`Error::TooManyFres`] instead of scanning on: the
/// caller then treats the PC as not covered (the kernel falls back to a
/// frame-pointer step). Compilers emit one FRE per change of the CFA or of
/// a saved register, so real functions stay far below this; the cap bounds
/// the work an adversarial section can cause in NMI context to about
/// 1024 two-byte reads plus `log2(num_fdes)` FDE reads per lookup.
pub const MAX_FRES_SCANNED: u32 = 1024;

impl<'a> Section<'a> {
    /// Index of the last FDE whose function starts at or below `pc`.
    ///
    /// O(log n) reads of the start field. Relies on validated (sorted)
    /// FDEs for a meaningful answer, but terminates on any input.
    pub fn find_fde_index(&self, pc: u64) -> Result<Option<u32>, Error> {
        let mut lo: u32 = 0;
        let mut hi: u32 = self.num_fdes;
        // Invariant: FDEs below `lo` start at or below `pc`, FDEs at or
        // above `hi` start above it. The range halves every iteration.
        while lo < hi {
            // `lo < hi`, so neither can wrap.
            let mid = lo.wrapping_add(hi.wrapping_sub(lo) / 2);
            let (start, _) = self.fde_range(mid)?;
            if start <= pc {
                lo = mid.wrapping_add(1);
            } else {
                hi = mid;
            }
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
        let Some(index) = self.find_fde_index(pc)? else {
            return Ok(None);
        };
        let fde = self.fde(index)?;
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

        let mut pos = fde.fre_off;
        let mut found: Option<RawFre> = None;
        for scanned in 0..fde.num_fres {
            if scanned >= MAX_FRES_SCANNED {
                return Err(Error::TooManyFres);
            }
            let raw = RawFre::read(&self.fres, pos, &fde)?;
            if raw.start_off > off {
                break;
            }
            pos = raw.next;
            found = Some(raw);
        }
        match found {
            Some(raw) => self.decode_row(&fde, raw).map(Some),
            None => Ok(None),
        }
    }
}
