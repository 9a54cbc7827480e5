// SPDX-License-Identifier: GPL-2.0

//! A row table for a section: every row its lookups can return, decoded
//! once (at registration) into a buffer the caller provides and keeps next
//! to the section's bytes.
//!
//! A lookup without it searches the FDEs, decodes the function's FDE, scans
//! its FREs from the first (they have variable sizes) and decodes the row:
//! several hundred instructions per frame of a stack walk, most of a walk's
//! cost.  With it, a lookup reads two adjacent bucket words, binary-searches
//! the few entries between them and unpacks one 64-bit word.
//!
//! The table flattens the section into sorted entries, each the address
//! where a row starts to apply and a packed value: one per FRE, plus one
//! with no row where a function's rows have not started (its first FRE
//! starts after it) and one where a function ends before the next begins.
//! A PC's row is the value of the last entry at or below it.  A row that
//! does not pack (a dereferenced CFA, a rule on another register, an offset
//! beyond the packed range) and a PCMASK function (its rows repeat) are
//! entries that send the lookup to the decoder, which answers as it would
//! without the table.
//!
//! Layout (`u32` words, native byte order, it never leaves the machine):
//!
//! ```text
//! [0] TABLE_MAGIC     [1] num_fdes     [2] num_fres     [3] fre_len
//! [4] first function start minus the section address, low word
//! [5] the same, high word (the table serves the section at any address)
//! [6] shift           [7] buckets (nb)  [8] entries (ne)  [9] 0
//! [10 .. 10 + ne]              entry starts, minus the first function start
//! [.. + 2 ne]                  entry values, low word then high word
//! [.. + nb + 1]                entries starting at or below bucket b's first byte
//! ```
//!
//! Size: 12 bytes per entry (at most one per FRE plus two per FDE) and
//! about 1 per entry for the buckets.  [`Section::table_words`] says
//! exactly how many words, from a pass over the FRE starts that decodes
//! no row; [`Section::build_table`] decodes each row once.
//!
//! The table is trusted to be the one [`Section::build_table`] made for the
//! same bytes: [`Section::with_table`] checks its shape in O(1), and a
//! lookup reads it with bounds checks, falling back to the decoder when
//! what it reads is impossible.  A wrong table can make a lookup wrong,
//! never panic or loop; a right one gives the decoder's answers, except
//! that it also finds the rows the decoder's FRE scan refuses to reach
//! ([`Error::TooManyFres`]): it does not scan.
//!
//! Hints ([`Section::with_hints`]): a stack walk looks up the same return
//! addresses sample after sample.  A table may be given an array of
//! 64-bit slots, a power of two of them, shared by every lookup in any
//! context (NMI included, on any CPU): each slot remembers the last key
//! (the PC minus the first function's start) hashed to it and the entry
//! its search found, in one word, written and read whole with relaxed
//! atomics: the key's complement in the high half, the entry's index
//! plus one in the low half.  A slot whose key matches gives the entry
//! without the bucket words and the search (one unit of budget); any
//! other falls back to the search, which then writes the slot.  A slot
//! is only ever written with an entry the search found for its key in
//! the same table, so a match is always the right entry; the entry index
//! is still read with a bounds check, so even a wrong word could make a
//! lookup wrong, never panic.  An empty slot (zero) matches the key
//! `0xffff_ffff` alone, and its entry, none, sends that lookup to the
//! decoder: the complement spares the hit its test for an empty slot.

use super::budget::{Budget, ReschedEvery};
use super::fre::RawFre;
use super::header::Section;
use super::index::{geometry, shr};
use super::lookup::search_probes;
use super::packed::{pack_row, PackedRow, KIND_DECODER, KIND_MASK, KIND_NONE, KIND_ROW};
use super::{Error, PcType};
use core::sync::atomic::{AtomicU64, Ordering};

/// Identifies a row table, and its layout revision ("SFT1").
const TABLE_MAGIC: u32 = 0x5346_5431;
/// Words before the bucket table.
const HEADER_WORDS: usize = 10;
/// Entries per bucket, on average at most: a lookup probes about `log2`
/// of it.
pub const ENTRIES_PER_BUCKET: u32 = 4;

/// Hint slots ([`Section::with_hints`]) a table is given at least and at
/// most ([`TableShape::hint_slots`]).
const MIN_HINT_SLOTS: usize = 4;
const MAX_HINT_SLOTS: usize = 8192;

/// The shape of a section's row table ([`Section::table_shape`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableShape {
    entries: usize,
    shift: u32,
    buckets: usize,
    words: usize,
}

impl TableShape {
    /// The `u32` words the table takes.
    pub fn words(&self) -> usize {
        self.words
    }

    /// How many hint slots ([`Section::with_hints`]) suit the table: a
    /// power of two, one for about every two entries, between 4 and 8192
    /// (8 bytes each: at most two thirds of the table's own 12 bytes per
    /// entry, and 64 KiB; a small table's search is short, and a copy of
    /// one function is charged 32 bytes for them, not ten times its
    /// size).
    pub fn hint_slots(&self) -> usize {
        (self.entries / 2)
            .clamp(MIN_HINT_SLOTS, MAX_HINT_SLOTS)
            .next_power_of_two()
    }
}

/// A row table of one section, borrowed from the caller's buffer, checked
/// for shape by [`Section::with_table`].
#[derive(Clone, Copy, Debug)]
pub struct Table<'a> {
    /// `nb + 1` words: entries starting at or below each bucket's first byte.
    buckets: &'a [u32],
    /// `ne` entry starts, relative to the first function's start.
    starts: &'a [u32],
    shift: u32,
    /// The first function's start: the section's address plus the offset
    /// stored in the table; `None` where that overflows (lookups then go
    /// to the decoder).
    pub(super) first: Option<u64>,
    /// The entries' values and the hint slots.
    pub(super) hinted: Hinted<'a>,
}

/// A row table's entry values and the hint slots that name its entries:
/// all that a lookup through a hint reads.
#[derive(Clone, Copy, Debug)]
pub(super) struct Hinted<'a> {
    /// `2 ne` words: the entries' values.
    values: &'a [u32],
    /// Hint slots, a power of two of them, at least 2; empty for none.
    pub(super) hints: &'a [AtomicU64],
    /// `32 - log2(hints.len())`: a key's slot is the top bits of its hash.
    hint_shift: u32,
}

impl Hinted<'_> {
    /// No entries and no hint slots.
    pub(super) const EMPTY: Hinted<'static> = Hinted {
        values: &[],
        hints: &[],
        hint_shift: 32,
    };

    /// The hint slot of `key`: Fibonacci hashing, the product's top bits
    /// (PCs that differ in their low bits only spread over the slots).
    #[inline(always)]
    fn hint_slot(&self, key: u32) -> Option<&AtomicU64> {
        let hash = key.wrapping_mul(0x9e37_79b1);
        // `hint_shift` is below 32 where there are hints; where there are
        // none, any index misses the empty slice.
        self.hints
            .get(usize::try_from(hash.wrapping_shr(self.hint_shift)).ok()?)
    }

    /// The entry the hint slot of `k` gives, if the slot holds `k`: an
    /// empty slot's entry (none, 0) wraps to an index out of bounds, which
    /// [`Hinted::entry`] sends to the decoder.
    #[inline(always)]
    pub(super) fn hinted(&self, k: u32) -> Option<u32> {
        let word = self.hint_slot(k)?.load(Ordering::Relaxed);
        ((word >> 32) as u32 == !k).then_some(((word & 0xffff_ffff) as u32).wrapping_sub(1))
    }

    /// The answer of entry `found`; `None` to ask the decoder (or for an
    /// entry out of bounds, which a right table never gives).
    #[inline(always)]
    pub(super) fn entry(&self, found: u32) -> Option<Result<Option<PackedRow>, Error>> {
        let i = usize::try_from(found).ok()?.checked_mul(2)?;
        // One bounds check for the pair.
        let value = match self.values.get(i..i.checked_add(2)?) {
            Some(&[lo, hi]) => u64::from(lo) | u64::from(hi) << 32,
            _ => return None,
        };
        match value & KIND_MASK {
            KIND_NONE => Some(Ok(None)),
            KIND_ROW => Some(Ok(Some(PackedRow(value)))),
            _ => None,
        }
    }
}

/// Where [`Section::build_table`] writes entries, or, without room
/// (`starts` and `values` empty), where [`Section::table_words`] counts
/// them without decoding a row.
struct Entries<'o> {
    starts: &'o mut [u32],
    values: &'o mut [u32],
    /// Write the entries (else count them).
    write: bool,
    n: usize,
    /// The start of the last entry, relative to the first function.
    last: Option<u64>,
}

impl Entries<'_> {
    /// Adds an entry at `rel` (relative to the first function's start),
    /// its value from `value` (called only when writing): starts must
    /// increase strictly.
    ///
    /// An entry at the same start as the last replaces it: two FREs at the
    /// same offset, of which the decoder's scan takes the second.
    fn push(&mut self, rel: u64, value: impl FnOnce() -> Result<u64, Error>) -> Result<(), Error> {
        let slot = match self.last {
            Some(last) if rel < last => return Err(Error::FdesOverlap),
            // `n > 0` once there is a last entry.
            Some(last) if rel == last => self.n.wrapping_sub(1),
            _ => self.n,
        };
        let start = u32::try_from(rel).map_err(|_| Error::TableSpan)?;
        if self.write {
            let value = value()?;
            let at = slot.wrapping_mul(2);
            let (Some(s), Some([lo, hi])) = (
                self.starts.get_mut(slot),
                self.values.get_mut(at..at.wrapping_add(2)),
            ) else {
                return Err(Error::IndexTooSmall);
            };
            *s = start;
            *lo = (value & 0xffff_ffff) as u32;
            *hi = (value >> 32) as u32;
        }
        if slot == self.n {
            self.n = self.n.checked_add(1).ok_or(Error::TableSpan)?;
        }
        self.last = Some(rel);
        Ok(())
    }
}

impl<'a> Section<'a> {
    /// The entries of this section's table, written into `entries`,
    /// calling `resched` about every 1024 FDEs.  Returns the first
    /// function's start.
    fn table_entries(
        &self,
        entries: &mut Entries<'_>,
        resched: &mut dyn FnMut(),
    ) -> Result<u64, Error> {
        let first = match self.fdes().next() {
            Some(fde) => fde?.start,
            None => self.addr,
        };
        let mut pacer = ReschedEvery::new(resched);
        for index in 0..self.num_fdes {
            pacer.fde();
            let fde = self.fde(index)?;
            let next = match index.checked_add(1).filter(|&n| n < self.num_fdes) {
                Some(n) => self.fde_range(n)?.0,
                None => u64::MAX,
            };
            // The lookup takes the last function starting at or below a
            // PC: this one's rows stop where the next one starts.
            let limit = fde.end().min(next);
            let rel = |addr: u64| addr.checked_sub(first).ok_or(Error::FdesNotSorted);
            if fde.pc_type == PcType::Mask {
                entries.push(rel(fde.start)?, || Ok(KIND_DECODER))?;
            } else {
                let mut rows_started = false;
                let mut pos = fde.fre_off;
                for _ in 0..fde.num_fres {
                    // The start alone to count; the row decoded to write.
                    let raw = RawFre::read(&self.fres, pos, &fde)?;
                    pos = raw.next;
                    let start = fde
                        .start
                        .checked_add(u64::from(raw.start_off))
                        .ok_or(Error::FunctionStartOverflow)?;
                    if start >= limit {
                        break;
                    }
                    if !rows_started && start > fde.start {
                        entries.push(rel(fde.start)?, || Ok(KIND_NONE))?;
                    }
                    rows_started = true;
                    entries.push(rel(start)?, || {
                        Ok(pack_row(&self.decode_row(&fde, raw)?).unwrap_or(KIND_DECODER))
                    })?;
                }
                if !rows_started {
                    entries.push(rel(fde.start)?, || Ok(KIND_NONE))?;
                }
            }
            if limit < next && limit > fde.start {
                entries.push(rel(limit)?, || Ok(KIND_NONE))?;
            }
        }
        Ok(first)
    }

    /// The table's shape, from a pass that reads every FRE's start but
    /// decodes no row (`resched` is called about every 1024 FDEs):
    /// [`TableShape::words`] for the buffer, then
    /// [`Section::build_table_shaped`].
    pub fn table_shape(&self, resched: &mut dyn FnMut()) -> Result<TableShape, Error> {
        let mut count = Entries {
            starts: &mut [],
            values: &mut [],
            write: false,
            n: 0,
            last: None,
        };
        self.table_entries(&mut count, resched)?;
        let target = u64::try_from(count.n)
            .map_err(|_| Error::TableSpan)?
            .div_ceil(u64::from(ENTRIES_PER_BUCKET))
            .max(1);
        let (shift, buckets) = geometry(count.last.unwrap_or(0), target);
        let nb = usize::try_from(buckets).map_err(|_| Error::TableSpan)?;
        let words = count
            .n
            .checked_mul(3)
            .and_then(|w| w.checked_add(nb))
            .and_then(|w| w.checked_add(HEADER_WORDS + 1))
            .ok_or(Error::TableSpan)?;
        Ok(TableShape {
            entries: count.n,
            shift,
            buckets: nb,
            words,
        })
    }

    /// How many `u32` words [`Section::build_table`] writes for this
    /// section.  O(FDEs + FREs), but decodes no row: reads the FRE starts
    /// (`resched` is called about every 1024 FDEs).  [`Error::TableSpan`]
    /// if the section's functions span 4 GiB or more.
    pub fn table_words(&self, resched: &mut dyn FnMut()) -> Result<usize, Error> {
        Ok(self.table_shape(resched)?.words)
    }

    /// Builds this section's row table into `out` and returns the number
    /// of words written (a prefix of `out`, [`Section::table_words`] of
    /// them); [`Section::with_table`] then makes lookups use it.
    ///
    /// O(FDEs + FREs), no allocation: one pass over the FRE starts, one
    /// that decodes the rows; `resched` is called about every 1024 FDEs
    /// of each.  Meant for a validated section: fails on any FDE or FRE
    /// that does not decode, on functions that overlap, with
    /// [`Error::TableSpan`] if the functions span 4 GiB or more, and with
    /// [`Error::IndexTooSmall`] if `out` is shorter than needed.
    pub fn build_table(&self, out: &mut [u32], resched: &mut dyn FnMut()) -> Result<usize, Error> {
        let shape = self.table_shape(resched)?;
        self.build_table_shaped(&shape, out, resched)
    }

    /// [`Section::build_table`] with the shape [`Section::table_shape`]
    /// gave for this section: one pass that decodes the rows.  A shape of
    /// another section fails ([`Error::IndexTooSmall`]), never panics.
    pub fn build_table_shaped(
        &self,
        shape: &TableShape,
        out: &mut [u32],
        resched: &mut dyn FnMut(),
    ) -> Result<usize, Error> {
        let TableShape {
            entries: n,
            shift,
            buckets: nb,
            words,
        } = *shape;
        if words
            != n.wrapping_mul(3)
                .wrapping_add(nb)
                .wrapping_add(HEADER_WORDS + 1)
        {
            return Err(Error::IndexTooSmall);
        }
        let out = out.get_mut(..words).ok_or(Error::IndexTooSmall)?;
        let (header, body) = out.split_at_mut(HEADER_WORDS);
        let (starts, rest) = body.split_at_mut(n);
        let (values, bucket_words) = rest.split_at_mut(n.wrapping_mul(2));
        let mut entries = Entries {
            starts,
            values,
            write: true,
            n: 0,
            last: None,
        };
        let first = self.table_entries(&mut entries, resched)?;
        if entries.n != n {
            return Err(Error::IndexTooSmall);
        }
        let starts = &*entries.starts;
        // Bucket b: the entries starting at or below its first byte.
        let mut e = 0usize;
        for (b, slot) in bucket_words.iter_mut().enumerate() {
            // Below `nb`, `b << shift` is at most the last entry's start.
            let first_byte = u64::try_from(b)
                .ok()
                .and_then(|b| b.checked_shl(shift))
                .unwrap_or(u64::MAX);
            while starts.get(e).is_some_and(|&s| u64::from(s) <= first_byte) {
                e = e.wrapping_add(1);
            }
            // The last word: all of them.
            *slot = u32::try_from(if b == nb { n } else { e }).map_err(|_| Error::TableSpan)?;
        }
        let first_off = first.wrapping_sub(self.addr);
        header.copy_from_slice(&[
            TABLE_MAGIC,
            self.num_fdes,
            self.num_fres,
            self.fre_len(),
            (first_off & 0xffff_ffff) as u32,
            (first_off >> 32) as u32,
            shift,
            u32::try_from(nb).map_err(|_| Error::TableSpan)?,
            u32::try_from(n).map_err(|_| Error::TableSpan)?,
            0,
        ]);
        Ok(words)
    }

    /// This section with lookups ([`Section::find_row`],
    /// [`Section::find_row_within`]) that use `table`, which
    /// [`Section::build_table`] built for the same bytes (at any address).
    /// O(1): checks the table's header against the section and its length;
    /// [`Error::BadIndex`] if they do not match.
    pub fn with_table(mut self, table: &'a [u32]) -> Result<Section<'a>, Error> {
        self.attach_table(table)?;
        Ok(self)
    }

    /// [`Section::with_table`] in place, as [`Section::attach_index`] is:
    /// on an error the section is left as it was.
    pub fn attach_table(&mut self, table: &'a [u32]) -> Result<(), Error> {
        let header = table.get(..HEADER_WORDS).ok_or(Error::BadIndex)?;
        let [magic, num_fdes, num_fres, fre_len, lo, hi, shift, nb, ne, _] = header else {
            return Err(Error::BadIndex);
        };
        let nb = usize::try_from(*nb).map_err(|_| Error::BadIndex)?;
        let ne = usize::try_from(*ne).map_err(|_| Error::BadIndex)?;
        let len = ne
            .checked_mul(3)
            .and_then(|w| w.checked_add(nb))
            .and_then(|w| w.checked_add(HEADER_WORDS + 1));
        if *magic != TABLE_MAGIC
            || *num_fdes != self.num_fdes
            || *num_fres != self.num_fres
            || *fre_len != self.fre_len()
            || *shift > 64
            || len != Some(table.len())
        {
            return Err(Error::BadIndex);
        }
        let rest = table.get(HEADER_WORDS..).ok_or(Error::BadIndex)?;
        // `len` matched: these splits are in bounds.
        let (starts, rest) = rest.split_at(ne);
        let (values, buckets) = rest.split_at(ne.wrapping_mul(2));
        self.table = Some(Table {
            buckets,
            starts,
            shift: *shift,
            first: self.addr.checked_add_signed(i64::from_ne_bytes(
                (u64::from(*lo) | u64::from(*hi) << 32).to_ne_bytes(),
            )),
            hinted: Hinted {
                values,
                ..Hinted::EMPTY
            },
        });
        Ok(())
    }

    /// This section with its row table's lookups remembered in `hints`
    /// (see the module's documentation): slots all zero at first, a power
    /// of two of them, at least 2 and at most 2^31, kept with the table
    /// and given to every section made with it, whatever its address.
    /// Any other `hints`, or a section without a table, is returned as it
    /// is: the same answers, without hints.
    pub fn with_hints(mut self, hints: &'a [AtomicU64]) -> Section<'a> {
        self.attach_hints(hints);
        self
    }

    /// [`Section::with_hints`] in place.
    pub fn attach_hints(&mut self, hints: &'a [AtomicU64]) {
        let n = hints.len();
        if let Some(table) = self.table.as_mut() {
            if n.is_power_of_two() && (2..=1 << 31).contains(&n) {
                table.hinted.hints = hints;
                table.hinted.hint_shift = 32 - n.trailing_zeros();
            }
        }
    }

    /// Whether lookups use a row table ([`Section::with_table`]).
    pub fn has_table(&self) -> bool {
        self.table.is_some()
    }

    /// Whether the row table's lookups use hints ([`Section::with_hints`]).
    pub fn has_hints(&self) -> bool {
        self.table.is_some_and(|t| !t.hinted.hints.is_empty())
    }

    /// The table's answer for `pc`: from its hint, for one unit of
    /// `budget`, or from the search, the entries it probes paid first (one
    /// unit more for the bucket words), which then writes the hint;
    /// `None` to ask the decoder.  `Err` only for a budget that runs out.
    #[inline(always)]
    pub(super) fn table_row(
        &self,
        pc: u64,
        budget: &mut Budget,
    ) -> Option<Result<Option<PackedRow>, Error>> {
        let table = self.table.as_ref()?;
        let first = table.first?;
        let Some(key) = pc.checked_sub(first) else {
            // Below the first function.
            return budget
                .charge(1)
                .then_some(Ok(None))
                .or(Some(Err(Error::BudgetExhausted)));
        };
        // A key of 32 bits (any PC a table entry can start at) may have a
        // hint.
        let k = u32::try_from(key).ok();
        if let Some(found) = k.and_then(|k| table.hinted.hinted(k)) {
            if !budget.charge(1) {
                return Some(Err(Error::BudgetExhausted));
            }
            return table.hinted.entry(found);
        }
        let nb = table.buckets.len().wrapping_sub(1);
        let bucket = usize::try_from(shr(key, table.shift)).unwrap_or(usize::MAX);
        let (lo, hi) = if bucket >= nb {
            // At or past the last entry's start (the last bucket holds it).
            let all = table.buckets.get(nb).copied()?;
            (all, all)
        } else {
            (
                table.buckets.get(bucket).copied()?,
                table.buckets.get(bucket.wrapping_add(1)).copied()?,
            )
        };
        if lo > hi {
            return None;
        }
        let probes = search_probes(hi.wrapping_sub(lo));
        if !budget.charge(probes.saturating_add(1)) {
            return Some(Err(Error::BudgetExhausted));
        }
        // Entries below `lo` start at or below `key`, those from `hi` on
        // above it.
        let (mut l, mut h) = (lo, hi);
        while l < h {
            let mid = l.wrapping_add(h.wrapping_sub(l) / 2);
            let start = table.starts.get(usize::try_from(mid).ok()?).copied()?;
            if u64::from(start) <= key {
                l = mid.wrapping_add(1);
            } else {
                h = mid;
            }
        }
        // `l` is the entry after the one found (0: below the first one).
        if l == 0 {
            return Some(Ok(None));
        }
        if let Some((k, slot)) = k.and_then(|k| Some((k, table.hinted.hint_slot(k)?))) {
            slot.store(u64::from(!k) << 32 | u64::from(l), Ordering::Relaxed);
        }
        table.hinted.entry(l.wrapping_sub(1))
    }
}
