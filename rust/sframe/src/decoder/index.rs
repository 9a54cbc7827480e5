// SPDX-License-Identifier: GPL-2.0

//! A lookup index for a section, built once (at registration) into a
//! buffer the caller provides and keeps next to the section's bytes.
//!
//! Without it a lookup binary-searches all FDEs: `log2(num_fdes)`
//! dependent probes spread over the whole FDE array, each a cache miss on
//! a large section.  The index cuts the function range the section covers
//! into buckets of `2^shift` bytes and records, for each bucket, how many
//! FDEs start at or below its first byte.  A lookup reads two adjacent
//! bucket words and binary-searches only the FDEs between them (about
//! [`FDES_PER_BUCKET`], next to each other in the FDE array, usually in
//! the cache line the found FDE is read from anyway).
//!
//! Layout (`u32` words, native byte order, it never leaves the machine):
//!
//! ```text
//! [0] INDEX_MAGIC     [1] num_fdes     [2] shift     [3] buckets (nb)
//! [4] first function start minus the section address, low word
//! [5] the same, high word (the index serves the section at any address)
//! [6] num_fres        [7] fre_len      (tie the index to its section)
//! [8 .. 8 + nb + 1]   FDEs starting at or below bucket b's first byte
//! ```
//!
//! Size: `8 + nb + 1` words, `nb <= ceil(num_fdes / FDES_PER_BUCKET)`:
//! at most 2 bytes per FDE plus 36, and nothing per FRE
//! ([`Section::index_words`] says exactly how many).
//!
//! The index is trusted to be the one [`Section::build_index`] made for
//! the same bytes: [`Section::with_index`] checks its shape in O(1), and a
//! lookup reads it with bounds checks, falling back to the full search
//! when what it reads is impossible. A wrong index can therefore make a
//! lookup miss, never panic or loop; a right one gives exactly the
//! answers of the full search.

use super::budget::ReschedEvery;
use super::bytes::{Be, ByteOrder, Le};
use super::header::Section;
use super::Error;

/// Identifies an index, and its layout revision ("SFI1").
const INDEX_MAGIC: u32 = 0x5346_4931;
/// Words before the bucket table.
const HEADER_WORDS: usize = 8;
/// FDEs per bucket, on average at most: the index costs 4 bytes per this
/// many FDEs, and a lookup probes about `log2` of it.
pub const FDES_PER_BUCKET: u32 = 2;

/// An index of one section, borrowed from the caller's buffer, checked
/// for shape by [`Section::with_index`].
#[derive(Clone, Copy, Debug)]
pub struct Index<'a> {
    /// `nb + 1` words: FDEs starting at or below each bucket's first byte.
    buckets: &'a [u32],
    shift: u32,
    /// First function start minus the section address (mod 2^64).
    first_off: u64,
}

/// `value >> shift`, 0 once every bit is shifted out.
pub(super) fn shr(value: u64, shift: u32) -> u64 {
    value.checked_shr(shift).unwrap_or(0)
}

/// The smallest shift that cuts `span + 1` bytes into at most `target`
/// buckets, and the number of buckets it gives.
pub(super) fn geometry(span: u64, target: u64) -> (u32, u64) {
    let mut shift = 0;
    // At most 65 iterations: `shr` by 64 gives 0, and 0 + 1 <= target.
    while shift < 64 && shr(span, shift) >= target {
        shift += 1;
    }
    (shift, shr(span, shift).saturating_add(1))
}

impl<'a> Section<'a> {
    /// The start of the first and of the last FDE.
    fn first_last(&self) -> Result<Option<(u64, u64)>, Error> {
        let Some(last) = self.num_fdes.checked_sub(1) else {
            return Ok(None);
        };
        let (first, _) = self.fde_range(0)?;
        let (last, _) = self.fde_range(last)?;
        if last < first {
            return Err(Error::FdesNotSorted);
        }
        Ok(Some((first, last)))
    }

    /// The bucket geometry of this section's index: `(shift, buckets)`.
    fn index_geometry(&self) -> Result<(u32, u64, u64), Error> {
        let Some((first, last)) = self.first_last()? else {
            return Ok((0, 0, 0));
        };
        let target = u64::from(self.num_fdes.div_ceil(FDES_PER_BUCKET));
        let (shift, buckets) = geometry(last.wrapping_sub(first), target);
        Ok((shift, buckets, first))
    }

    /// How many `u32` words [`Section::build_index`] writes for this
    /// section: `8 + buckets + 1`, at most `8 + ceil(num_fdes / 2) + 1`.
    /// O(1): reads the first and the last FDE.
    pub fn index_words(&self) -> Result<usize, Error> {
        let (_, buckets, _) = self.index_geometry()?;
        usize::try_from(buckets)
            .ok()
            .and_then(|b| b.checked_add(HEADER_WORDS + 1))
            .ok_or(Error::IndexTooSmall)
    }

    /// Builds this section's lookup index into `out` and returns the
    /// number of words written (a prefix of `out`, [`Section::index_words`]
    /// of them); [`Section::with_index`] then makes lookups use it.
    ///
    /// O(`num_fdes`), no allocation; `resched` is called about every 1024
    /// FDEs.  Checks what the index relies on: every FDE's start and end fit
    /// in 64 bits at this section's address and the starts do not
    /// decrease ([`Section::validate`] checks both and more; an index is
    /// meant for a validated section).  Fails with
    /// [`Error::IndexTooSmall`] if `out` is shorter than needed.
    pub fn build_index(&self, out: &mut [u32], resched: &mut dyn FnMut()) -> Result<usize, Error> {
        if self.fdes.big_endian() {
            self.build_index_in::<Be>(out, resched)
        } else {
            self.build_index_in::<Le>(out, resched)
        }
    }

    /// [`Section::build_index`] in byte order `E`.
    fn build_index_in<E: ByteOrder>(
        &self,
        out: &mut [u32],
        resched: &mut dyn FnMut(),
    ) -> Result<usize, Error> {
        let words = self.index_words()?;
        let (shift, buckets, first) = self.index_geometry()?;
        let out = out.get_mut(..words).ok_or(Error::IndexTooSmall)?;
        let (header, table) = out.split_at_mut(HEADER_WORDS);
        // `index_words` made the table `buckets + 1` words long.
        let mut next_bucket: u64 = 0;
        let mut prev = first;
        let mut pacer = ReschedEvery::new(resched);
        for index in 0..self.num_fdes {
            pacer.fde();
            let (start, _) = self.fde_range_at::<E>(self.fde_off(index)?)?;
            if start < prev {
                return Err(Error::FdesNotSorted);
            }
            prev = start;
            // `first <= start`: the first FDE is the lowest.
            let rel = start.wrapping_sub(first);
            // Buckets whose first byte lies below this FDE's start have
            // exactly `index` FDEs at or below it (the starts are sorted).
            // (A shift of 64 leaves one bucket, starting at 0.)
            while next_bucket < buckets && next_bucket.checked_shl(shift).unwrap_or(0) < rel {
                let slot = usize::try_from(next_bucket)
                    .ok()
                    .and_then(|b| table.get_mut(b))
                    .ok_or(Error::IndexTooSmall)?;
                *slot = index;
                next_bucket = next_bucket.wrapping_add(1);
            }
        }
        // The remaining buckets, and the end of the table, have them all.
        for slot in table
            .iter_mut()
            .skip(usize::try_from(next_bucket).unwrap_or(usize::MAX))
        {
            *slot = self.num_fdes;
        }
        let first_off = first.wrapping_sub(self.addr);
        header.copy_from_slice(&[
            INDEX_MAGIC,
            self.num_fdes,
            shift,
            u32::try_from(buckets).map_err(|_| Error::IndexTooSmall)?,
            (first_off & 0xffff_ffff) as u32,
            (first_off >> 32) as u32,
            self.num_fres,
            self.fre_len(),
        ]);
        Ok(words)
    }

    /// This section with lookups ([`Section::find_row`],
    /// [`Section::find_row_within`], [`Section::find_fde_index`]) that use
    /// `index`, which [`Section::build_index`] built for the same bytes
    /// (at any address).  O(1): checks the index's header against the
    /// section and its length; [`Error::BadIndex`] if they do not match.
    pub fn with_index(mut self, index: &'a [u32]) -> Result<Section<'a>, Error> {
        self.attach_index(index)?;
        Ok(self)
    }

    /// [`Section::with_index`] in place: the section is not moved (it is
    /// some 200 bytes, and a stack walk attaches an index on every change
    /// of section).  On an error the section is left as it was.
    pub fn attach_index(&mut self, index: &'a [u32]) -> Result<(), Error> {
        let header = index.get(..HEADER_WORDS).ok_or(Error::BadIndex)?;
        let [magic, num_fdes, shift, buckets, lo, hi, num_fres, fre_len] = header else {
            return Err(Error::BadIndex);
        };
        let buckets = usize::try_from(*buckets).map_err(|_| Error::BadIndex)?;
        if *magic != INDEX_MAGIC
            || *num_fdes != self.num_fdes
            || *num_fres != self.num_fres
            || *fre_len != self.fre_len()
            || *shift > 64
            || buckets.checked_add(HEADER_WORDS + 1) != Some(index.len())
        {
            return Err(Error::BadIndex);
        }
        self.index = Some(Index {
            buckets: index.get(HEADER_WORDS..).ok_or(Error::BadIndex)?,
            shift: *shift,
            first_off: u64::from(*lo) | u64::from(*hi) << 32,
        });
        Ok(())
    }

    /// Whether lookups use an index ([`Section::with_index`]).
    pub fn has_index(&self) -> bool {
        self.index.is_some()
    }

    /// The FDEs a search for `pc` must consider, `lo..hi` (all below `lo`
    /// start at or below `pc`, all from `hi` on above it): narrowed by the
    /// index when there is one and it gives a consistent answer.
    #[inline(always)]
    pub(super) fn search_bounds(&self, pc: u64) -> (u32, u32) {
        let all = (0, self.num_fdes);
        let Some(index) = &self.index else {
            return all;
        };
        // The first start at this address, as the full search computes
        // it; where that overflows, the full search reports it.
        let first_off = i64::from_ne_bytes(index.first_off.to_ne_bytes());
        let Some(first) = self.addr.checked_add_signed(first_off) else {
            return all;
        };
        let Some(key) = pc.checked_sub(first) else {
            // Below the first function: no FDE starts at or below `pc`.
            return (0, 0);
        };
        // Buckets are numbered below `buckets.len()`, a `usize`.
        let bucket = usize::try_from(shr(key, index.shift)).unwrap_or(usize::MAX);
        if bucket >= index.buckets.len().saturating_sub(1) {
            // At or past the last function's start.
            return (self.num_fdes, self.num_fdes);
        }
        // `bucket + 1 < buckets.len()`.
        match (
            index.buckets.get(bucket),
            index.buckets.get(bucket.wrapping_add(1)),
        ) {
            (Some(&lo), Some(&hi)) if lo <= hi && hi <= self.num_fdes => (lo, hi),
            _ => all,
        }
    }
}
