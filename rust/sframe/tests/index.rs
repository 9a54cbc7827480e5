// SPDX-License-Identifier: GPL-2.0

//! The lookup index: a section with an index answers every lookup exactly
//! as the same section without one (rows, misses and errors alike), on the
//! toolchain-made fixtures (x86-64 and AArch64) at every PC, at other
//! addresses, and on hostile sections; an index that does not belong to
//! its section is refused, and one whose contents are wrong makes lookups
//! miss, never panic.

mod common;
mod readelf_common;

use common::{harness, harness::check_table, sample_fdes, FdeB, FreB, SectionB};
use proptest::prelude::*;
use readelf_common::{fixtures, sframe_section};
use sframe::{Budget, Error, Section, FDES_PER_BUCKET};

/// `sec` with an index built into `words`, or `None` if it cannot have one.
fn indexed<'a>(sec: Section<'a>, words: &'a mut Vec<u32>) -> Option<Section<'a>> {
    let n = sec.index_words().ok()?;
    words.clear();
    words.resize(n, 0);
    let written = sec.build_index(words, &mut || {}).ok()?;
    assert_eq!(written, n, "build_index wrote what index_words said");
    let words: &'a [u32] = words;
    Some(
        sec.with_index(words)
            .expect("an index fits its own section"),
    )
}

/// The indexed section gives the plain one's answers at every PC of
/// `pcs`, and its budgeted lookups spend no more but for the index's own
/// read (one unit, which every indexed lookup pays).
fn assert_same(plain: &Section<'_>, fast: &Section<'_>, pcs: impl IntoIterator<Item = u64>) {
    assert!(fast.has_index() && !plain.has_index());
    for pc in pcs {
        assert_eq!(fast.find_row(pc), plain.find_row(pc), "find_row({pc:#x})");
        assert_eq!(
            fast.find_fde_index(pc),
            plain.find_fde_index(pc),
            "find_fde_index({pc:#x})"
        );
        let (mut a, mut b) = (Budget::unlimited(), Budget::unlimited());
        assert_eq!(
            fast.find_row_within(pc, &mut a),
            plain.find_row_within(pc, &mut b),
            "find_row_within({pc:#x})"
        );
        assert!(a.spent() <= b.spent() + 1, "{pc:#x}: {a:?} vs {b:?}");
        assert!(a.spent() >= 1, "{pc:#x}: an indexed lookup paid nothing");
    }
}

/// The PCs worth asking about: every FDE's start and end and their
/// neighbours, the section's extremes, and `extra`.
fn interesting_pcs(sec: &Section<'_>, extra: &[u64]) -> Vec<u64> {
    let mut pcs = vec![0, 1, u64::MAX, u64::MAX - 1, sec.section_addr()];
    for fde in sec.fdes().take(4096).flatten() {
        for pc in [fde.start, fde.end()] {
            pcs.extend([pc.wrapping_sub(1), pc, pc.wrapping_add(1)]);
        }
        pcs.push(fde.start.wrapping_add(u64::from(fde.size) / 2));
    }
    pcs.extend_from_slice(extra);
    pcs
}

#[test]
fn every_pc_of_every_fixture() {
    let mut checked = 0usize;
    for kind in ["v2", "v2-pcrel", "v3", "aarch64-v2", "aarch64-v3"] {
        for fixture in fixtures(kind) {
            let (bytes, addr) = sframe_section(&fixture.elf);
            let plain = Section::parse(bytes, addr).unwrap();
            plain.validate(&mut || {}).unwrap();
            let mut words = Vec::new();
            let fast = indexed(plain, &mut words).expect(&fixture.name);
            let (lo, hi) = plain.text_range().unwrap().unwrap();
            assert_same(&plain, &fast, lo.saturating_sub(64)..hi.saturating_add(64));
            checked += usize::try_from(hi - lo).unwrap();

            // The same index serves the same bytes at another address.
            for delta in [0x1000u64, 0x7f00_0000_0000, addr.wrapping_neg() + 0x2000] {
                let moved_addr = addr.wrapping_add(delta);
                let Ok(moved) = Section::parse(bytes, moved_addr) else {
                    continue;
                };
                if moved.validate(&mut || {}).is_err() {
                    continue;
                }
                let fast = moved.with_index(&words).unwrap();
                let (lo, hi) = moved.text_range().unwrap().unwrap();
                let step = ((hi - lo) / 4096).max(1);
                assert_same(
                    &moved,
                    &fast,
                    (lo.saturating_sub(64)..hi + 64).step_by(step as usize),
                );
                assert_same(&moved, &fast, interesting_pcs(&moved, &[]));
            }
        }
    }
    assert!(checked > 40_000, "{checked} PCs");
}

/// What an indexed lookup is charged: the index's read (one unit) and the
/// FDEs left to probe, never nothing, not the whole array's worst case.
#[test]
fn an_indexed_lookup_pays_for_what_it_reads() {
    for kind in ["v2", "v3"] {
        for fixture in fixtures(kind) {
            let (bytes, addr) = sframe_section(&fixture.elf);
            let plain = Section::parse(bytes, addr).unwrap();
            let mut words = Vec::new();
            let fast = indexed(plain, &mut words).unwrap();
            let all = u32::BITS - plain.num_fdes().leading_zeros();
            let (lo, _) = plain.text_range().unwrap().unwrap();
            // Below the first function: no FDE probed, the index read.
            let (mut a, mut b) = (Budget::unlimited(), Budget::unlimited());
            assert_eq!(fast.find_row_within(lo - 1, &mut a), Ok(None));
            assert_eq!(plain.find_row_within(lo - 1, &mut b), Ok(None));
            assert_eq!((a.spent(), b.spent()), (1, all), "{}", fixture.name);
            // At a function's start: the same FREs decoded, the index's
            // read and the probes among the FDEs of one bucket.
            let fde = plain.fde(plain.num_fdes() / 2).unwrap();
            let (mut a, mut b) = (Budget::unlimited(), Budget::unlimited());
            assert!(fast.find_row_within(fde.start, &mut a).is_ok());
            assert!(plain.find_row_within(fde.start, &mut b).is_ok());
            let fres = b.spent() - all;
            assert!(fres >= 1, "{}: {b:?}", fixture.name);
            assert!(
                (fres + 1..=fres + 1 + all).contains(&a.spent()),
                "{}: {a:?} vs {b:?}",
                fixture.name
            );
        }
    }
}

#[test]
fn size_is_bounded_per_fde() {
    for kind in ["v2", "v3"] {
        for fixture in fixtures(kind) {
            let (bytes, addr) = sframe_section(&fixture.elf);
            let sec = Section::parse(bytes, addr).unwrap();
            let n = sec.num_fdes() as usize;
            let words = sec.index_words().unwrap();
            assert!(
                words <= 9 + n.div_ceil(FDES_PER_BUCKET as usize),
                "{words} for {n}"
            );
            let mut buf = vec![0u32; words - 1];
            assert_eq!(
                sec.build_index(&mut buf, &mut || {}),
                Err(Error::IndexTooSmall)
            );
            // A larger buffer is fine; the index is its first words.
            let mut buf = vec![0u32; words + 5];
            assert_eq!(sec.build_index(&mut buf, &mut || {}), Ok(words));
            assert!(sec.with_index(&buf).is_err(), "the length is checked");
            assert!(sec.with_index(&buf[..words]).is_ok());
        }
    }
}

#[test]
fn an_index_of_other_bytes_is_refused() {
    let a = SectionB::v3(0x40_0000, sample_fdes()).build();
    let mut fdes = sample_fdes();
    fdes.pop();
    let b = SectionB::v3(0x40_0000, fdes).build();
    let (sa, sb) = (
        Section::parse(&a, 0x40_0000).unwrap(),
        Section::parse(&b, 0x40_0000).unwrap(),
    );
    let mut words = Vec::new();
    indexed(sa, &mut words).unwrap();
    assert_eq!(sb.with_index(&words).err(), Some(Error::BadIndex));
    assert_eq!(sa.with_index(&words[..7]).err(), Some(Error::BadIndex));
    assert_eq!(sa.with_index(&[]).err(), Some(Error::BadIndex));
    let mut bad = words.clone();
    bad[0] ^= 1;
    assert_eq!(sa.with_index(&bad).err(), Some(Error::BadIndex));
    let mut bad = words.clone();
    bad[2] = 65;
    assert_eq!(sa.with_index(&bad).err(), Some(Error::BadIndex));
}

#[test]
fn unsorted_or_overflowing_sections_get_no_index() {
    let mut fdes = sample_fdes();
    fdes.swap(0, 1);
    let unsorted = SectionB::v2(0x40_0000, fdes).build();
    let sec = Section::parse(&unsorted, 0x40_0000).unwrap();
    let mut words = vec![0; 64];
    assert_eq!(
        sec.build_index(&mut words, &mut || {}),
        Err(Error::FdesNotSorted)
    );
    // A function that ends past 2^64 at this address.
    let fdes = vec![
        FdeB::new(0x1000, 0x10, vec![FreB::sp(0, 8)]),
        FdeB::new(u64::MAX - 8, 0x10, vec![FreB::sp(0, 8)]),
    ];
    let over = SectionB::v3(0x1000, fdes).build();
    let sec = Section::parse(&over, 0x1000).unwrap();
    assert_eq!(
        sec.build_index(&mut words, &mut || {}),
        Err(Error::FunctionStartOverflow)
    );
}

#[test]
fn huge_and_degenerate_spans() {
    // Spans that need every shift, up to all 64 bits (one bucket): V3's
    // 64-bit PC-relative starts reach 2^63 either side of the section.
    let addr = 0x8000_0000_0000_0000;
    for second in [
        0x3000,
        0x1_0000_0000,
        0x8000_0000_0000_1000,
        u64::MAX - 0x100,
    ] {
        for extra in [0usize, 1, 7] {
            let mut fdes = vec![FdeB::new(0x1000, 1, vec![FreB::sp(0, 8)])];
            for i in 0..extra {
                fdes.push(FdeB::new(0x2000 + 0x10 * i as u64, 8, vec![FreB::sp(0, 8)]));
            }
            fdes.push(FdeB::new(second, 0x10, vec![FreB::sp(0, 16)]));
            let bytes = SectionB::v3(addr, fdes).build();
            let plain = Section::parse(&bytes, addr).unwrap();
            plain.validate(&mut || {}).unwrap();
            let mut words = Vec::new();
            let fast = indexed(plain, &mut words).unwrap();
            assert_same(
                &plain,
                &fast,
                interesting_pcs(&plain, &[0x1800, second / 2]),
            );
        }
    }
    // No FDEs at all, and duplicated starts (not valid, still searched
    // alike).
    let empty = SectionB::v2(0x1000, vec![]).build();
    let plain = Section::parse(&empty, 0x1000).unwrap();
    let mut words = Vec::new();
    assert_eq!(plain.index_words(), Ok(9));
    let fast = indexed(plain, &mut words).unwrap();
    assert_same(&plain, &fast, [0, 0x1000, u64::MAX]);
    let dup = vec![
        FdeB::new(0x2000, 0x10, vec![FreB::sp(0, 8)]),
        FdeB::new(0x2000, 0x20, vec![FreB::sp(0, 16)]),
        FdeB::new(0x2000, 0x30, vec![FreB::sp(0, 24)]),
        FdeB::new(0x2100, 0x30, vec![FreB::sp(0, 32)]),
    ];
    let bytes = SectionB::v2_pcrel(0x1000, dup).build();
    let plain = Section::parse(&bytes, 0x1000).unwrap();
    let mut words = Vec::new();
    let fast = indexed(plain, &mut words).unwrap();
    assert_same(&plain, &fast, 0x1ff0..0x2140);
}

#[test]
fn wrong_contents_make_lookups_miss_never_panic() {
    let fixture = &fixtures("v3")[0];
    let (bytes, addr) = sframe_section(&fixture.elf);
    let plain = Section::parse(bytes, addr).unwrap();
    plain.validate(&mut || {}).unwrap();
    let mut words = Vec::new();
    indexed(plain, &mut words).unwrap();
    let (lo, hi) = plain.text_range().unwrap().unwrap();
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut missed = 0;
    for _ in 0..200 {
        let mut bad = words.clone();
        // Bucket words, and the first function's offset.
        for _ in 0..1 + next() % 4 {
            let at = 4 + (next() as usize) % (bad.len() - 4);
            if at == 6 || at == 7 {
                continue;
            }
            bad[at] = match next() % 3 {
                0 => next() as u32,
                1 => bad[at].wrapping_add(1),
                _ => bad[at].wrapping_sub(1),
            };
        }
        let fast = plain.with_index(&bad).unwrap();
        for pc in (lo.saturating_sub(16)..hi + 16).step_by(7) {
            let got = fast.find_row(pc);
            let want = plain.find_row(pc);
            // Only one function covers a PC of a validated section: a wrong
            // candidate does not contain it.
            assert!(
                got == want || got == Ok(None),
                "{pc:#x}: {got:?} vs {want:?}"
            );
            missed += usize::from(got != want);
        }
    }
    assert!(missed > 0, "the corruptions were seen");
}

#[test]
fn build_index_calls_resched() {
    let fdes: Vec<FdeB> = (0..5000u64)
        .map(|i| FdeB::new(0x10_0000 + 0x40 * i, 0x20, vec![FreB::sp(0, 8)]))
        .collect();
    let bytes = SectionB::v3(0x1000, fdes).build();
    let sec = Section::parse(&bytes, 0x1000).unwrap();
    let mut words = vec![0; sec.index_words().unwrap()];
    let mut calls = 0;
    sec.build_index(&mut words, &mut || calls += 1).unwrap();
    assert_eq!(calls, 5000 / 1024);
}

/// One FDE of a random layout: a gap after the previous one, a size, FRE
/// starts (inside it or not), whether it is PCMASK.
type RandomFde = (u64, u32, Vec<u32>, bool);

fn fde_strategy() -> impl Strategy<Value = RandomFde> {
    (
        prop_oneof![
            0u64..64,
            0u64..0x10000,
            Just(0),
            any::<u32>().prop_map(u64::from)
        ],
        prop_oneof![1u32..0x100, 0u32..0x3000],
        prop::collection::vec(0u32..0x200, 1..6),
        prop::bool::weighted(0.1),
    )
}

fn layout_strategy() -> impl Strategy<Value = (u8, u64, Vec<RandomFde>)> {
    (
        0u8..3,
        prop_oneof![
            Just(0x40_0000u64),
            any::<u64>(),
            (u64::MAX - 0x100_0000..u64::MAX)
        ],
        prop::collection::vec(fde_strategy(), 0..80),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// Random layouts (valid or not): wherever an index can be built,
    /// indexed lookups answer as plain ones; a section that validates
    /// always gets an index.
    #[test]
    fn random_layouts((kind, addr, layout) in layout_strategy(), seed in any::<u64>()) {
        let mut start = addr.wrapping_add(0x1000);
        let mut fdes = Vec::new();
        for (gap, size, mut offs, mask) in layout {
            start = start.wrapping_add(gap);
            offs.sort_unstable();
            offs.dedup();
            let fres = offs.iter().map(|&o| FreB::sp(o, 8 + i64::from(o % 64))).collect();
            let mut fde = FdeB::new(start, size, fres);
            if mask {
                fde.pc_mask = true;
                fde.rep_size = 16;
            }
            fdes.push(fde);
            start = start.wrapping_add(u64::from(size));
        }
        let b = match kind {
            0 => SectionB::v2(addr, fdes),
            1 => SectionB::v2_pcrel(addr, fdes),
            _ => SectionB::v3(addr, fdes),
        };
        let bytes = b.build();
        let Ok(plain) = Section::parse(&bytes, addr) else {
            return Ok(());
        };
        let validated = plain.validate(&mut || {}).is_ok();
        let mut words = Vec::new();
        let Some(fast) = indexed(plain, &mut words) else {
            prop_assert!(!validated, "a valid section got no index");
            return Ok(());
        };
        let mut extra = Vec::new();
        let mut pc = seed;
        for _ in 0..64 {
            pc = pc.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            extra.push(pc);
            extra.push(addr.wrapping_add(pc % 0x100_0000));
        }
        assert_same(&plain, &fast, interesting_pcs(&plain, &extra));
        check_table(&plain, &interesting_pcs(&plain, &extra), validated);
    }

    /// Mutated real sections: the same, wherever they still parse and an
    /// index can be built (the fuzz harness checks this too).
    #[test]
    fn mutated_fixtures(which in 0usize..6, flips in prop::collection::vec((any::<usize>(), 0u8..8), 1..6), seed in any::<u64>()) {
        let kinds = ["v2", "v3"];
        let all: Vec<_> = kinds.iter().flat_map(|k| fixtures(k)).collect();
        let fixture = &all[which % all.len()];
        let (bytes, addr) = sframe_section(&fixture.elf);
        let mut bytes = bytes.to_vec();
        for (at, bit) in flips {
            let at = at % bytes.len();
            bytes[at] ^= 1 << bit;
        }
        harness::exercise_section(&bytes, addr, seed);
    }
}
