// SPDX-License-Identifier: GPL-2.0

//! The full validation pass, run once when a section is registered.

use super::bytes::{Be, ByteOrder, Le};
use super::fde::{Fde, FdeType, FreType, PcType};
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
        // One copy of the pass per byte order, as for lookups.
        if self.fdes.big_endian() {
            self.validate_in::<Be>(resched)
        } else {
            self.validate_in::<Le>(resched)
        }
    }

    /// [`Section::validate`] in byte order `E`.
    ///
    /// The FREs of one function are checked by a loop specialised for
    /// their start offset size ([`Section::check_fres`]); a DEFAULT FDE's
    /// rows are checked by their data word count alone, which is what
    /// decoding them checks ([`RowCheck`]).
    fn validate_in<E: ByteOrder>(&self, resched: &mut dyn FnMut()) -> Result<(), Error> {
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
            let fde = self.fde_at::<E>(self.fde_off(index)?)?;
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
            let mut fres = FreCheck {
                limit,
                rows: RowCheck::new(self, &fde),
                since_resched,
                resched: &mut *resched,
            };
            let pos = match fde.fre_type {
                FreType::Addr1 => self.check_fres::<E, 1>(&fde, &mut fres)?,
                FreType::Addr2 => self.check_fres::<E, 2>(&fde, &mut fres)?,
                FreType::Addr4 => self.check_fres::<E, 4>(&fde, &mut fres)?,
            };
            since_resched = fres.since_resched;
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

    /// Checks the FREs of `fde`, whose start offsets are `N` bytes in byte
    /// order `E`: each lies in the FRE area, starts after the previous one
    /// and within the function, and its row decodes.  Returns the offset
    /// after the last one.
    #[inline(always)]
    fn check_fres<E: ByteOrder, const N: usize>(
        &self,
        fde: &Fde,
        check: &mut FreCheck<'_>,
    ) -> Result<usize, Error> {
        let fres = self.fres.as_slice();
        let limit = check.limit;
        // What the loop tests per FRE, worked out once: the most data words
        // a row may have, and whether rows are decoded in full.
        let (max_words, decode) = match check.rows {
            RowCheck::Words(max) => (max, false),
            RowCheck::Decode => (usize::MAX, true),
            RowCheck::None => (usize::MAX, false),
        };
        let mut since_resched = check.since_resched;
        let mut pos = fde.fre_off;
        let mut prev_start: u32 = 0;
        for i in 0..fde.num_fres {
            since_resched = since_resched.saturating_add(1);
            if since_resched >= RESCHED_FRES {
                (check.resched)();
                since_resched = 0;
            }
            let raw = RawFre::read_at::<E, N>(fres, pos)?;
            if i != 0 && raw.start_off <= prev_start {
                return Err(Error::FreStartsNotIncreasing);
            }
            if u64::from(raw.start_off) > limit {
                return Err(Error::FreStartBeyondFunction);
            }
            if raw.word_count > max_words {
                return Err(Error::BadDataWordCount);
            }
            if decode {
                self.decode_row_in::<E>(fde, raw)?;
            }
            prev_start = raw.start_off;
            pos = raw.next;
        }
        check.since_resched = since_resched;
        Ok(pos)
    }
}

/// What [`Section::check_fres`] checks of one function's FREs, besides
/// their bounds and order.
struct FreCheck<'r> {
    /// The highest start offset allowed.
    limit: u64,
    rows: RowCheck,
    /// FREs since `resched` was last called.
    since_resched: u32,
    resched: &'r mut dyn FnMut(),
}

/// How the rows of one function are checked.
#[derive(Clone, Copy, Debug)]
enum RowCheck {
    /// DEFAULT FDE: a row decodes exactly when it has at most this many
    /// data words (read by [`RawFre::read_at`] inside the FRE area, so
    /// every word reads): the CFA offset, then an RA offset unless the
    /// header fixes it, then an FP offset unless the header fixes it; or
    /// none, an outermost frame.
    Words(usize),
    /// FLEX FDE: decode each row (control words have rules of their own).
    Decode,
    /// s390x: rows are not decoded (see [`Error::UnsupportedRows`]).
    None,
}

impl RowCheck {
    fn new(section: &Section<'_>, fde: &Fde) -> Self {
        if section.abi == Abi::S390xBe {
            return RowCheck::None;
        }
        match fde.fde_type {
            FdeType::Default => RowCheck::Words(
                1 + usize::from(section.fixed_ra == 0) + usize::from(section.fixed_fp == 0),
            ),
            FdeType::Flex => RowCheck::Decode,
        }
    }
}

#[cfg(test)]
mod tests {
    //! The specialised pass against the pass it replaced, which decoded
    //! every row in full: the same answer (error included) and the same
    //! `resched` calls on real sections and on mutations of them.

    extern crate std;

    use super::super::bytes::usize_from;
    use super::*;
    use std::vec::Vec;

    /// `validate` before it was specialised (the oracle).
    fn validate_reference(sec: &Section<'_>, resched: &mut dyn FnMut()) -> Result<(), Error> {
        let mut prev: Option<(u64, u64)> = None;
        let mut total_fres: u64 = 0;
        let mut total_bytes: u64 = 0;
        let mut since_resched: u32 = 0;
        let mut fdes_since_resched: u32 = 0;
        for index in 0..sec.num_fdes {
            if fdes_since_resched == RESCHED_FDES {
                resched();
                since_resched = 0;
                fdes_since_resched = 0;
            }
            fdes_since_resched = fdes_since_resched.saturating_add(1);
            let fde = sec.fde(index)?;
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
            total_fres = total_fres.saturating_add(u64::from(fde.num_fres));
            if total_fres > u64::from(sec.num_fres) {
                return Err(Error::CountMismatch);
            }
            if fde.fre_off > sec.fres.len() {
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
                let raw = RawFre::read(&sec.fres, pos, &fde)?;
                if prev_start.is_some_and(|p| raw.start_off <= p) {
                    return Err(Error::FreStartsNotIncreasing);
                }
                if u64::from(raw.start_off) > limit {
                    return Err(Error::FreStartBeyondFunction);
                }
                if sec.abi != Abi::S390xBe {
                    sec.decode_row(&fde, raw)?;
                }
                prev_start = Some(raw.start_off);
                pos = raw.next;
            }
            let used = pos.saturating_sub(fde.fre_off);
            let attr = match sec.version {
                Version::V2 => 0,
                Version::V3 => V3_ATTR_LEN,
            };
            let used = u64::try_from(used.saturating_add(attr)).unwrap_or(u64::MAX);
            total_bytes = total_bytes.saturating_add(used);
        }
        if total_fres != u64::from(sec.num_fres) {
            return Err(Error::CountMismatch);
        }
        if total_bytes != u64::try_from(sec.fres.len()).unwrap_or(u64::MAX) {
            return Err(Error::FreLenMismatch);
        }
        Ok(())
    }

    /// The `.sframe` section and its address in a little-endian ELF64 file.
    fn sframe_of(elf: &[u8]) -> (Vec<u8>, u64) {
        let u16_at = |at: usize| u16::from_le_bytes([elf[at], elf[at + 1]]);
        let u32_at = |at: usize| u32::from_le_bytes(elf[at..at + 4].try_into().unwrap());
        let u64_at = |at: usize| u64::from_le_bytes(elf[at..at + 8].try_into().unwrap());
        let shoff = u64_at(0x28) as usize;
        let (size, count) = (usize::from(u16_at(0x3a)), usize::from(u16_at(0x3c)));
        let strtab = u64_at(shoff + usize::from(u16_at(0x3e)) * size + 0x18) as usize;
        (0..count)
            .map(|i| shoff + i * size)
            .find(|&sh| elf[strtab + usize_from(u32_at(sh))..].starts_with(b".sframe\0"))
            .map(|sh| {
                let off = u64_at(sh + 0x18) as usize;
                (
                    elf[off..off + u64_at(sh + 0x20) as usize].to_vec(),
                    u64_at(sh + 0x10),
                )
            })
            .unwrap()
    }

    /// Real sections: gcc and GNU as, V2, V2 with PC-relative starts, V3.
    fn fixtures() -> Vec<(Vec<u8>, u64)> {
        macro_rules! fixture {
            ($path:literal) => {
                sframe_of(include_bytes!(concat!("../../tests/fixtures/", $path)))
            };
        }
        std::vec![
            fixture!("v2/many"),
            fixture!("v2/realign"),
            fixture!("v2/libshape.so"),
            fixture!("v2-pcrel/many"),
            fixture!("v2-pcrel/vla"),
            fixture!("v3/many"),
            fixture!("v3/realign"),
            fixture!("v3/bigframe"),
            fixture!("v3/libshape.so"),
        ]
    }

    /// Both passes on `data` at `addr`: the same result and `resched` calls.
    fn same(data: &[u8], addr: u64) -> Option<Result<(), Error>> {
        let sec = Section::parse(data, addr).ok()?;
        let (mut a, mut b) = (0u32, 0u32);
        let fast = sec.validate(&mut || a += 1);
        let reference = validate_reference(&sec, &mut || b += 1);
        assert_eq!(fast, reference, "section at {addr:#x}");
        assert_eq!(a, b, "resched calls");
        Some(fast)
    }

    #[test]
    fn agrees_with_decoding_every_row() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let (mut ok, mut errors) = (0u32, 0u32);
        for (data, addr) in fixtures() {
            assert_eq!(same(&data, addr), Some(Ok(())));
            for round in 0..3000 {
                let mut bad = data.clone();
                // Some rounds hit the header and the ABI fields (other
                // byte orders, fixed offsets), the rest anywhere.
                for _ in 0..1 + next() % 3 {
                    let at = if round % 4 == 0 {
                        (next() % 28) as usize
                    } else {
                        (next() % bad.len() as u64) as usize
                    };
                    bad[at] ^= 1 << (next() % 8);
                }
                if round % 16 == 0 {
                    bad[4] = (next() % 5) as u8;
                    if bad[4] == 1 || bad[4] == 4 {
                        bad.swap(0, 1);
                    }
                }
                match same(&bad, addr ^ (next() & 0xffff_f000)) {
                    Some(Ok(())) => ok += 1,
                    Some(Err(_)) => errors += 1,
                    None => {}
                }
            }
        }
        // Both outcomes were exercised, many times.
        assert!(ok > 1000 && errors > 1000, "{ok} valid, {errors} invalid");
    }

    /// The fuzz corpus, as is and mutated: the hand-built sections of every
    /// ABI and byte order (AArch64 without a fixed RA offset, s390x, FLEX
    /// rows), which no toolchain fixture has, and what the fuzzer kept.
    #[test]
    fn agrees_on_the_fuzz_corpus() {
        let dir = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/fuzz/corpus/parse_validate_lookup"
        );
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        // Per ABI (header byte 4, 1 to 4): sections found valid, invalid.
        let mut outcomes = [[0u32; 2]; 5];
        for entry in std::fs::read_dir(dir).unwrap() {
            let input = std::fs::read(entry.unwrap().path()).unwrap();
            // The fuzz target's layout: address, PC seed, section.
            if input.len() <= 16 {
                continue;
            }
            let addr = u64::from_le_bytes(input[..8].try_into().unwrap());
            let data = &input[16..];
            for round in 0..64 {
                let mut bad = data.to_vec();
                if round != 0 {
                    for _ in 0..1 + next() % 3 {
                        let at = (next() % bad.len() as u64) as usize;
                        bad[at] ^= 1 << (next() % 8);
                    }
                }
                if let Some(result) = same(&bad, addr) {
                    let abi = usize::from(bad[4]).min(4);
                    outcomes[abi][usize::from(result.is_err())] += 1;
                }
            }
        }
        for (abi, [ok, errors]) in outcomes.iter().enumerate().skip(1) {
            assert!(
                *ok > 20 && *errors > 100,
                "ABI {abi}: {ok} valid, {errors} invalid"
            );
        }
    }
}
