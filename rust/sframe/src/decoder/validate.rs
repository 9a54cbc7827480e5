// SPDX-License-Identifier: GPL-2.0

//! The full validation pass, run once when a section is registered.

use super::fde::PcType;
use super::fre::RawFre;
use super::header::{Abi, Section, Version, V3_ATTR_LEN};
use super::Error;

/// `resched` is called after this many FDEs.
const RESCHED_FDES: u32 = 1024;
/// ... and after this many FREs within one huge function.
const RESCHED_FRES: u32 = 16384;

impl<'a> Section<'a> {
    /// Checks everything lookups rely on, in one pass over all FDEs and FREs.
    ///
    /// FDEs decode (known FRE, PC and FDE types, non-zero PCMASK block
    /// size), start and end addresses do not overflow, FDEs are sorted by
    /// start and do not overlap; every FRE (and V3 attribute) lies inside
    /// the FRE area, FRE start offsets strictly increase and stay inside the
    /// function (PCINC: at most its size; PCMASK: below `rep_size`), every
    /// FRE's data words decode for the ABI and FDE type; the per-function
    /// FRE counts add up to the header's `num_fres` and the bytes they
    /// use (with V3 attributes) to its `fre_len`.
    ///
    /// An FRE starting exactly at the function's size is tolerated, as the
    /// upstream kernel unwinder does: it covers no PC. Rows of s390x are not
    /// decoded (see [`Error::UnsupportedRows`]), their structure is checked.
    ///
    /// Work is O(`num_fdes` + `num_fres`); `resched` is called about every
    /// 1024 FDEs (and every 16384 FREs) so the kernel can `cond_resched()`.
    pub fn validate(&self, resched: &mut dyn FnMut()) -> Result<(), Error> {
        let mut prev: Option<(u64, u64)> = None;
        let mut total_fres: u64 = 0;
        let mut total_bytes: u64 = 0;
        let mut since_resched: u32 = 0;
        let mut fdes_since_resched: u32 = 0;

        for index in 0..self.num_fdes {
            if fdes_since_resched == RESCHED_FDES {
                resched();
                since_resched = 0;
                fdes_since_resched = 0;
            }
            fdes_since_resched = fdes_since_resched.saturating_add(1);
            let fde = self.fde(index)?;
            let end = fde.end();
            if let Some((prev_start, prev_end)) = prev {
                if fde.start < prev_start {
                    return Err(Error::FdesNotSorted);
                }
                if fde.start < prev_end {
                    return Err(Error::FdesOverlap);
                }
            }
            prev = Some((fde.start, end));

            // Checking the running total first bounds the whole pass by the
            // header's count, which `parse` bounded by `fre_len`.
            total_fres = total_fres.saturating_add(u64::from(fde.num_fres));
            if total_fres > u64::from(self.num_fres) {
                return Err(Error::CountMismatch);
            }
            if fde.fre_off > self.fres.len() {
                return Err(Error::FreOutOfBounds);
            }

            let limit = match fde.pc_type {
                PcType::Inc => u64::from(fde.size),
                PcType::Mask => u64::from(fde.rep_size).saturating_sub(1),
            };
            let mut pos = fde.fre_off;
            let mut prev_start: Option<u32> = None;
            for _ in 0..fde.num_fres {
                since_resched = since_resched.saturating_add(1);
                if since_resched >= RESCHED_FRES {
                    resched();
                    since_resched = 0;
                }
                let raw = RawFre::read(&self.fres, pos, &fde)?;
                if prev_start.is_some_and(|p| raw.start_off <= p) {
                    return Err(Error::FreStartsNotIncreasing);
                }
                if u64::from(raw.start_off) > limit {
                    return Err(Error::FreStartBeyondFunction);
                }
                if self.abi != Abi::S390xBe {
                    self.decode_row(&fde, raw)?;
                }
                prev_start = Some(raw.start_off);
                pos = raw.next;
            }
            let used = pos.saturating_sub(fde.fre_off);
            let attr = match self.version {
                Version::V2 => 0,
                Version::V3 => V3_ATTR_LEN,
            };
            let used = u64::try_from(used.saturating_add(attr)).unwrap_or(u64::MAX);
            total_bytes = total_bytes.saturating_add(used);
        }

        if total_fres != u64::from(self.num_fres) {
            return Err(Error::CountMismatch);
        }
        if total_bytes != u64::try_from(self.fres.len()).unwrap_or(u64::MAX) {
            return Err(Error::FreLenMismatch);
        }
        Ok(())
    }
}
