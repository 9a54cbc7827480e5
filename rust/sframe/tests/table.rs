// SPDX-License-Identifier: GPL-2.0

//! The row table: a section with one answers every lookup as the decoder
//! does (rows and misses alike), on the toolchain-made fixtures (x86-64
//! and AArch64) at every PC and at other addresses, on hostile and random sections; it also
//! finds the rows beyond the decoder's FRE cap, sends the rows it cannot
//! pack to the decoder, is refused by other bytes, and a wrong one never
//! makes a lookup panic.

mod common;
mod readelf_common;

use common::{
    harness::{check_table, reference_row},
    sample_fdes, FdeB, FreB, SectionB,
};
use proptest::prelude::*;
use readelf_common::{fixtures, sframe_section};
use sframe::{Budget, Error, Section, MAX_FRES_SCANNED};

/// `sec` with a row table built into `words`.
fn tabled<'a>(sec: Section<'a>, words: &'a mut Vec<u32>) -> Section<'a> {
    let n = sec
        .table_words(&mut || {})
        .expect("a table for a valid section");
    words.clear();
    words.resize(n, 0);
    assert_eq!(sec.build_table(words, &mut || {}), Ok(n));
    let words: &'a [u32] = words;
    sec.with_table(words).expect("a table fits its own section")
}

#[test]
fn every_pc_of_every_fixture() {
    let mut checked = 0usize;
    for kind in ["v2", "v2-pcrel", "v3", "aarch64-v2", "aarch64-v3"] {
        for fixture in fixtures(kind) {
            let (bytes, addr) = sframe_section(&fixture.elf);
            let plain = Section::parse(bytes, addr).unwrap();
            plain.validate(&mut || {}).unwrap();
            let (lo, hi) = plain.text_range().unwrap().unwrap();
            let pcs: Vec<u64> = (lo.saturating_sub(64)..hi.saturating_add(64)).collect();
            check_table(&plain, &pcs, true);
            checked += pcs.len();

            // The same table serves the same bytes at another address, and
            // with the lookup index beside it.
            let mut words = Vec::new();
            tabled(plain, &mut words);
            let mut index = vec![0u32; plain.index_words().unwrap()];
            plain.build_index(&mut index, &mut || {}).unwrap();
            for delta in [0u64, 0x1000, 0x7f00_0000_0000] {
                let moved = Section::parse(bytes, addr.wrapping_add(delta)).unwrap();
                let fast = moved
                    .with_index(&index)
                    .unwrap()
                    .with_table(&words)
                    .unwrap();
                let (lo, hi) = moved.text_range().unwrap().unwrap();
                for pc in (lo.saturating_sub(64)..hi + 64).step_by(3) {
                    assert_eq!(
                        fast.find_row(pc),
                        moved.find_row(pc),
                        "{}: {pc:#x}",
                        fixture.name
                    );
                }
            }
        }
    }
    assert!(checked > 40_000, "{checked} PCs");
}

/// A function with more FREs than the decoder scans: the table finds the
/// rows beyond the cap, for one probe's worth of budget.
#[test]
fn rows_beyond_the_scan_cap() {
    let n = MAX_FRES_SCANNED + 100;
    let fres = (0..n)
        .map(|i| FreB::sp(i * 4, 8 + i64::from(i % 100)))
        .collect();
    let bytes = SectionB::v3(0x1000, vec![FdeB::new(0x40_0000, n * 4, fres)]).build();
    let plain = Section::parse(&bytes, 0x1000).unwrap();
    plain.validate(&mut || {}).unwrap();
    let pc = 0x40_0000 + u64::from(n - 1) * 4;
    assert_eq!(plain.find_row(pc), Err(Error::TooManyFres));
    let mut words = Vec::new();
    let fast = tabled(plain, &mut words);
    let row = fast.find_row(pc).unwrap().unwrap();
    assert_eq!(Ok(Some(row)), reference_row(&plain, pc));
    assert_eq!(row.cfa.offset, 8 + i64::from((n - 1) % 100) as i32);
    let mut budget = Budget::new(16, 8);
    assert_eq!(fast.find_row_within(pc, &mut budget), Ok(Some(row)));
    assert!(budget.spent() <= 5, "{budget:?}");
    let pcs: Vec<u64> = (0x3f_fff0..0x40_0000 + u64::from(n) * 4 + 16).collect();
    check_table(&plain, &pcs, true);
}

/// Rows that do not pack (offsets beyond the packed fields, a FLEX rule on
/// another register) and PCMASK functions go to the decoder: the same
/// answers.
#[test]
fn rows_that_do_not_pack_ask_the_decoder() {
    let big = FdeB::new(
        0x40_0000,
        0x100,
        vec![
            FreB::sp(0, 8),
            FreB::with_fp(4, true, 0x40_0000, -16),
            FreB::with_fp(8, true, 16, -0x1000),
            FreB::with_fp(12, false, 40 * 1024, -16),
        ],
    );
    let mut plt = FdeB::new(0x40_1000, 0x40, vec![FreB::sp(0, 16), FreB::sp(11, 24)]);
    plt.pc_mask = true;
    plt.rep_size = 16;
    for b in [
        SectionB::v2(0x1000, vec![big.clone(), plt.clone()]),
        SectionB::v3(0x1000, vec![big, plt]),
    ] {
        let bytes = b.build();
        let plain = Section::parse(&bytes, 0x1000).unwrap();
        plain.validate(&mut || {}).unwrap();
        let pcs: Vec<u64> = (0x3f_fff0..0x40_1050).collect();
        check_table(&plain, &pcs, true);
        let mut words = Vec::new();
        let fast = tabled(plain, &mut words);
        // A 40 KiB frame packs, a 4 MiB one does not.
        assert_eq!(
            fast.find_row(0x40_000c).unwrap().unwrap().cfa.offset,
            40 * 1024
        );
        assert_eq!(
            fast.find_row(0x40_0004).unwrap().unwrap().cfa.offset,
            0x40_0000
        );
    }
    for b in [
        SectionB::v3(0x1000, sample_fdes()),
        SectionB::v2(0x1000, sample_fdes()),
    ] {
        let bytes = b.build();
        let plain = Section::parse(&bytes, 0x1000).unwrap();
        plain.validate(&mut || {}).unwrap();
        let (lo, hi) = plain.text_range().unwrap().unwrap();
        let pcs: Vec<u64> = (lo - 16..hi + 16).collect();
        check_table(&plain, &pcs, true);
    }
}

#[test]
fn a_table_of_other_bytes_is_refused() {
    let a = SectionB::v3(0x40_0000, sample_fdes()).build();
    let mut fdes = sample_fdes();
    fdes.pop();
    let b = SectionB::v3(0x40_0000, fdes).build();
    let sa = Section::parse(&a, 0x40_0000).unwrap();
    let sb = Section::parse(&b, 0x40_0000).unwrap();
    let mut words = Vec::new();
    tabled(sa, &mut words);
    assert_eq!(sb.with_table(&words).err(), Some(Error::BadIndex));
    assert_eq!(sa.with_table(&words[..9]).err(), Some(Error::BadIndex));
    assert_eq!(
        sa.with_table(&words[..words.len() - 1]).err(),
        Some(Error::BadIndex)
    );
    assert_eq!(sa.with_table(&[]).err(), Some(Error::BadIndex));
    let mut index = vec![0u32; sa.index_words().unwrap()];
    sa.build_index(&mut index, &mut || {}).unwrap();
    assert_eq!(
        sa.with_table(&index).err(),
        Some(Error::BadIndex),
        "an index is no table"
    );
    // Another section's shape: refused, whatever room is given.
    let shape_b = sb.table_shape(&mut || {}).unwrap();
    for room in [shape_b.words(), words.len(), words.len() + 64] {
        let mut buf = vec![0u32; room];
        assert!(sa
            .build_table_shaped(&shape_b, &mut buf, &mut || {})
            .is_err());
    }
    let mut short = vec![0u32; words.len() - 1];
    assert_eq!(
        sa.build_table(&mut short, &mut || {}),
        Err(Error::IndexTooSmall)
    );
}

#[test]
fn an_empty_section_has_an_empty_table() {
    let bytes = SectionB::v2(0x1000, vec![]).build();
    let plain = Section::parse(&bytes, 0x1000).unwrap();
    let mut words = Vec::new();
    let fast = tabled(plain, &mut words);
    for pc in [0, 0x1000, u64::MAX] {
        assert_eq!(fast.find_row(pc), Ok(None));
    }
}

#[test]
fn build_table_calls_resched() {
    let fdes = (0..5000u64)
        .map(|i| FdeB::new(0x40_0000 + i * 16, 16, vec![FreB::sp(0, 8)]))
        .collect();
    let bytes = SectionB::v3(0x1000, fdes).build();
    let sec = Section::parse(&bytes, 0x1000).unwrap();
    let mut calls = 0;
    let mut words = vec![0u32; sec.table_words(&mut || calls += 1).unwrap()];
    assert_eq!(calls, 5000 / 1024);
    calls = 0;
    let n = sec.build_table(&mut words, &mut || calls += 1).unwrap();
    // The count, then the rows.
    assert_eq!(calls, 2 * (5000 / 1024));
    // One entry per FRE (the functions follow each other without gaps)
    // and one where the last ends.
    assert!(n <= 11 + 5001 * 3 + 5001 / 4 + 1, "{n} words");
    assert!(sec.with_table(&words[..n]).is_ok());
}

/// Threads that share one table's hints, two slots of them (every lookup
/// evicts another's), get the answers of the table without hints.
#[test]
fn hints_shared_by_threads() {
    use std::sync::atomic::AtomicU64;
    let fdes = (0..64u64)
        .map(|i| {
            FdeB::new(
                0x40_0000 + i * 64,
                64,
                vec![
                    FreB::sp(0, 8),
                    FreB::sp(1, 16 + 8 * (i as i64 % 5)),
                    FreB::sp(9, 24),
                ],
            )
        })
        .collect();
    let bytes = SectionB::v3(0x1000, fdes).build();
    let sec = Section::parse(&bytes, 0x1000).unwrap();
    let mut words = Vec::new();
    let table = tabled(sec, &mut words);
    let pcs: Vec<u64> = (0x40_0000 - 16..0x40_0000 + 64 * 64 + 16).collect();
    let expected: Vec<_> = pcs.iter().map(|&pc| table.find_row(pc)).collect();
    for slots in [2usize, 64] {
        let hints: Vec<AtomicU64> = (0..slots).map(|_| AtomicU64::new(0)).collect();
        let hinted = table.with_hints(&hints);
        std::thread::scope(|scope| {
            for t in 0..4usize {
                let (pcs, expected) = (&pcs, &expected);
                scope.spawn(move || {
                    for round in 0..20usize {
                        for i in 0..pcs.len() {
                            let j = (i * 7 + t * 13 + round) % pcs.len();
                            assert_eq!(hinted.find_row(pcs[j]), expected[j], "{:#x}", pcs[j]);
                        }
                    }
                });
            }
        });
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Whatever is in the hint slots, lookups through them end, never
    /// panic and never pay more than the search would.
    #[test]
    fn wrong_hints_never_panic(slots in prop::collection::vec(any::<u64>(), 64), seed in any::<u64>()) {
        use std::sync::atomic::AtomicU64;
        let bytes = SectionB::v3(0x40_0000, sample_fdes()).build();
        let sec = Section::parse(&bytes, 0x40_0000).unwrap();
        let mut words = Vec::new();
        let table = tabled(sec, &mut words);
        let hints: Vec<AtomicU64> = slots.into_iter().map(AtomicU64::new).collect();
        let hinted = table.with_hints(&hints);
        let mut pc = seed;
        for _ in 0..256 {
            pc = pc.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let _ = hinted.find_row(pc);
            let mut budget = Budget::new(64, 16);
            let at = 0x40_0000 + pc % 0x2000;
            let _ = hinted.find_row_within(at, &mut budget);
            prop_assert!(budget.spent() <= 64);
        }
    }

    /// Whatever is in a table's words, lookups through it end, and never
    /// panic.
    #[test]
    fn wrong_contents_never_panic(flips in prop::collection::vec((any::<usize>(), any::<u32>()), 1..8), seed in any::<u64>()) {
        let bytes = SectionB::v3(0x40_0000, sample_fdes()).build();
        let sec = Section::parse(&bytes, 0x40_0000).unwrap();
        let mut words = Vec::new();
        tabled(sec, &mut words);
        for (at, value) in flips {
            // Past the header, which `with_table` checks.
            let at = 10 + at % (words.len() - 10);
            words[at] = value;
        }
        let fast = sec.with_table(&words).unwrap();
        let mut pc = seed;
        for _ in 0..256 {
            pc = pc.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let _ = fast.find_row(pc);
            let _ = fast.find_row(0x40_0000 + pc % 0x2000);
            let mut budget = Budget::new(64, 16);
            let _ = fast.find_row_within(0x40_0000 + pc % 0x2000, &mut budget);
            prop_assert!(budget.spent() <= 64);
        }
    }
}
