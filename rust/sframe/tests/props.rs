// SPDX-License-Identifier: GPL-2.0

//! Property tests: no input makes the decoder panic, steps only move up,
//! walks end within their frame limit, their signal frame limit and their
//! work budget.

mod common;

use common::hostile::{deep_chain, sigreturn_chain, SectionRows};
use common::{harness, sample_fdes, SectionB};
use proptest::prelude::*;
use sframe::unwind::{
    step_aarch64, step_amd64, walk_aarch64, walk_aarch64_metered, walk_amd64, walk_amd64_metered,
    FrameSource, Lookup, Memory, Regs, WalkLimits,
};
use sframe::{Budget, CfaRule, FoundRow, PackedRow, Reg, RegRule, Row, Section};

fn sections() -> Vec<Vec<u8>> {
    vec![
        SectionB::v2(0x400000, sample_fdes()).build(),
        SectionB::v2_pcrel(0x400000, sample_fdes()).build(),
        SectionB::v3(0x400000, sample_fdes()).build(),
    ]
}

/// Memory whose contents are a pure function of the address and a seed,
/// with some unreadable holes.
struct HashMem {
    seed: u64,
    small: bool,
    /// Reads asked for.
    reads: u64,
}

impl HashMem {
    fn word(&self, addr: u64) -> Option<u64> {
        let mut x = addr ^ self.seed;
        x = x.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        x ^= x >> 29;
        if x % 17 == 0 {
            return None;
        }
        // Mostly plausible stack and text addresses.
        Some(if self.small {
            addr.wrapping_add(x % 512)
        } else {
            x
        })
    }
}

impl Memory for HashMem {
    fn read_u64(&mut self, addr: u64) -> Option<u64> {
        self.reads += 1;
        self.word(addr)
    }
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> bool {
        self.reads += 1;
        for (i, b) in buf.iter_mut().enumerate() {
            match self.word(addr.wrapping_add(i as u64)) {
                Some(w) => *b = w as u8,
                None => return false,
            }
        }
        true
    }
}

/// [`HashLookup`]'s rows as a lookup with a row table gives them: packed
/// where they pack, so that the walk takes its steps by the row's form.
struct PackedLookup(HashLookup);

impl Lookup for PackedLookup {
    fn row(&mut self, pc: u64) -> Option<Row> {
        self.0.row(pc)
    }
    fn found_within(&mut self, pc: u64, budget: &mut Budget) -> Option<FoundRow> {
        let row = self.0.row_within(pc, budget)?;
        Some(PackedRow::pack(&row).map_or(FoundRow::Decoded(row), FoundRow::Packed))
    }
    fn is_function_start(&mut self, pc: u64) -> bool {
        self.0.is_function_start(pc)
    }
    fn is_text(&mut self, pc: u64) -> bool {
        self.0.is_text(pc)
    }
}

struct HashLookup {
    seed: u64,
    rows: Vec<Row>,
    /// Questions asked: rows, function starts, text checks.
    questions: u64,
}

impl Lookup for HashLookup {
    fn row(&mut self, pc: u64) -> Option<Row> {
        self.questions += 1;
        let i = (pc ^ self.seed).wrapping_mul(0x2545_f491_4f6c_dd1d) >> 40;
        let i = usize::try_from(i).unwrap() % (self.rows.len() + 1);
        self.rows.get(i).copied()
    }
    fn is_function_start(&mut self, pc: u64) -> bool {
        self.questions += 1;
        pc % 3 == 0
    }
    fn is_text(&mut self, pc: u64) -> bool {
        self.questions += 1;
        pc % 5 != 0
    }
}

fn reg() -> impl Strategy<Value = Reg> {
    prop_oneof![
        Just(Reg::Sp),
        Just(Reg::Fp),
        (0u16..20).prop_map(Reg::Dwarf)
    ]
}

fn rule() -> impl Strategy<Value = RegRule> {
    prop_oneof![
        Just(RegRule::Unchanged),
        Just(RegRule::Undefined),
        (-64i32..64).prop_map(RegRule::AtCfa),
        reg().prop_map(RegRule::InReg),
        (reg(), -64i32..64).prop_map(|(reg, offset)| RegRule::AtReg { reg, offset }),
        (reg(), -64i32..64).prop_map(|(reg, offset)| RegRule::ValReg { reg, offset }),
    ]
}

prop_compose! {
    fn row()(base in reg(), offset in prop_oneof![-64i32..256, any::<i32>()], deref: bool,
             ra in rule(), fp in rule(), outermost in prop::bool::weighted(0.1),
             signal_frame in prop::bool::weighted(0.1)) -> Row {
        Row {
            cfa: CfaRule { base, offset, deref },
            ra,
            fp,
            outermost,
            signal_frame,
            mangled_ra: false,
        }
    }
}

/// A rule the row table packs, mostly.
fn packable_rule() -> impl Strategy<Value = RegRule> {
    prop_oneof![
        4 => (-64i32..64).prop_map(|o| RegRule::AtCfa(o & !7)),
        2 => Just(RegRule::Unchanged),
        1 => Just(RegRule::Undefined),
        1 => (-3000i32..3000).prop_map(RegRule::AtCfa),
        1 => rule(),
    ]
}

prop_compose! {
    /// Rows as compiled code has them, mostly, and some that do not pack.
    fn packable_row()(fp_base: bool, offset in prop_oneof![4 => (0i32..256).prop_map(|o| o & !7), 1 => -64i32..256],
                      ra in packable_rule(), fp in packable_rule(), outermost in prop::bool::weighted(0.05),
                      signal_frame in prop::bool::weighted(0.05), mangled_ra: bool,
                      other in prop::option::weighted(0.05, row())) -> Row {
        other.unwrap_or(Row {
            cfa: CfaRule { base: if fp_base { Reg::Fp } else { Reg::Sp }, offset, deref: false },
            ra,
            fp,
            outermost,
            signal_frame,
            mangled_ra,
        })
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_bytes_never_panic(data in prop::collection::vec(any::<u8>(), 0..400),
                                   addr: u64, seed: u64) {
        harness::exercise_section(&data, addr, seed);
    }

    #[test]
    fn arbitrary_header_with_valid_magic_never_panics(
        version in 0u8..5, flags: u8, abi in 0u8..6, rest in prop::collection::vec(any::<u8>(), 24..300),
        addr: u64, seed: u64)
    {
        let mut data = vec![0xe2, 0xde, version, flags, abi];
        data.extend_from_slice(&rest);
        harness::exercise_section(&data, addr, seed);
    }

    #[test]
    fn mutated_sections_never_panic(which in 0usize..3,
                                    edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
                                    addr_delta in -4096i64..4096, seed: u64) {
        let mut data = sections()[which].clone();
        for (i, v) in edits {
            let i = i.index(data.len());
            data[i] = v;
        }
        harness::exercise_section(&data, 0x400000u64.wrapping_add_signed(addr_delta), seed);
    }

    #[test]
    fn step_moves_the_stack_up(row in row(), pc: u64, sp in prop_oneof![any::<u64>(), 0x1000u64..0x2000],
                               fp in prop_oneof![any::<u64>(), 0x1000u64..0x2000], seed: u64, small: bool) {
        let regs = Regs { pc, sp, fp, lr: 0 };
        let mut mem = HashMem { seed, small, reads: 0 };
        if let Ok(next) = step_amd64(&row, &regs, &mut mem) {
            prop_assert!(next.sp > regs.sp);
            prop_assert_eq!(next.sp % 8, 0);
        }
    }

    #[test]
    fn aarch64_step_moves_the_stack_up(row in row(), pc: u64, sp in prop_oneof![any::<u64>(), 0x1000u64..0x2000],
                                       fp in prop_oneof![any::<u64>(), 0x1000u64..0x2000], lr: u64,
                                       topmost: bool, seed: u64, small: bool) {
        // Only a topmost frame, whose return address is in the link
        // register, may leave the SP where it is.
        let regs = Regs { pc, sp, fp, lr };
        let mut mem = HashMem { seed, small, reads: 0 };
        if let Ok(next) = step_aarch64(&row, &regs, topmost, &mut mem) {
            let in_lr = matches!(row.ra, RegRule::Unchanged | RegRule::InReg(Reg::Dwarf(30)));
            prop_assert!(next.sp > regs.sp || (topmost && in_lr && next.sp == regs.sp));
            prop_assert_eq!(next.sp % 16, 0);
        }
    }

    #[test]
    fn walk_ends_within_max_frames(rows in prop::collection::vec(row(), 0..8), seed: u64, small: bool,
                                   pc: u64, sp in prop_oneof![any::<u64>(), 0x10000u64..0x20000],
                                   fp in prop_oneof![any::<u64>(), 0x10000u64..0x20000],
                                   max_frames in 0u32..200, max_span in prop_oneof![any::<u64>(), 0u64..65536],
                                   lr: u64, aarch64: bool) {
        let mut lookup = HashLookup { seed, rows, questions: 0 };
        let mut mem = HashMem { seed, small, reads: 0 };
        let limits = WalkLimits::unbudgeted(max_frames, max_span);
        let mut emitted = 0u32;
        let mut last_sp_ok = true;
        let mut emit = |_, _| {
            emitted += 1;
            last_sp_ok &= emitted <= max_frames;
            true
        };
        let regs = Regs { pc, sp, fp, lr };
        let _stop = if aarch64 {
            walk_aarch64(regs, &limits, &mut lookup, &mut mem, &mut emit)
        } else {
            walk_amd64(regs, &limits, &mut lookup, &mut mem, &mut emit)
        };
        prop_assert!(emitted <= max_frames);
        prop_assert!(last_sp_ok);
    }

    #[test]
    fn packed_rows_walk_as_decoded_rows(rows in prop::collection::vec(packable_row(), 0..8), seed: u64,
                                        small: bool, pc: u64,
                                        sp in prop_oneof![any::<u64>(), 0x10000u64..0x20000],
                                        fp in prop_oneof![any::<u64>(), 0x10000u64..0x20000],
                                        max_work in prop_oneof![0u32..64, Just(4000u32)],
                                        lr: u64, aarch64: bool) {
        // The walk's steps by packed form give what its step of the
        // decoded row gives: the same frames, sources, end and work.
        let limits = WalkLimits {
            max_work,
            ..WalkLimits::unbudgeted(64, 1 << 20)
        };
        let regs = Regs { pc, sp, fp, lr };
        let mut walks = Vec::new();
        for packed in [false, true] {
            let hash = HashLookup { seed, rows: rows.clone(), questions: 0 };
            let mut mem = HashMem { seed, small, reads: 0 };
            let mut frames = Vec::new();
            let mut emit = |pc, src| {
                frames.push((pc, src));
                true
            };
            let walked = match (packed, aarch64) {
                (false, false) => walk_amd64_metered(regs, &limits, &mut { hash }, &mut mem, &mut emit),
                (false, true) => walk_aarch64_metered(regs, &limits, &mut { hash }, &mut mem, &mut emit),
                (true, false) => walk_amd64_metered(regs, &limits, &mut PackedLookup(hash), &mut mem, &mut emit),
                (true, true) => walk_aarch64_metered(regs, &limits, &mut PackedLookup(hash), &mut mem, &mut emit),
            };
            walks.push((walked, frames));
        }
        prop_assert_eq!(&walks[0], &walks[1]);
    }

    #[test]
    fn walk_work_never_exceeds_the_budget(rows in prop::collection::vec(row(), 0..8), seed: u64, small: bool,
                                          pc: u64, sp in prop_oneof![any::<u64>(), 0x10000u64..0x20000],
                                          fp in prop_oneof![any::<u64>(), 0x10000u64..0x20000],
                                          max_frames in 0u32..200, max_work in prop_oneof![0u32..64, 0u32..4000],
                                          max_signal_frames in 0u32..10, lr: u64, aarch64: bool) {
        // Every read and every question is counted where it is answered:
        // the walk's own account must match it and stay within budget.
        let mut lookup = HashLookup { seed, rows, questions: 0 };
        let mut mem = HashMem { seed, small, reads: 0 };
        let limits = WalkLimits {
            max_work,
            max_signal_frames,
            ..WalkLimits::unbudgeted(max_frames, 1 << 20)
        };
        let mut signals = 0u32;
        let mut emit = |_, src| {
            signals += u32::from(src == FrameSource::SignalFrame);
            true
        };
        let regs = Regs { pc, sp, fp, lr };
        let walked = if aarch64 {
            walk_aarch64_metered(regs, &limits, &mut lookup, &mut mem, &mut emit)
        } else {
            walk_amd64_metered(regs, &limits, &mut lookup, &mut mem, &mut emit)
        };
        prop_assert_eq!(mem.reads + lookup.questions, u64::from(walked.work));
        prop_assert!(walked.work <= max_work);
        prop_assert!(walked.frames <= max_frames);
        prop_assert!(signals <= max_signal_frames);
    }

    #[test]
    fn section_walks_stay_within_the_budget(which in 0usize..5, fres in 1u32..1100, seed: u64, small: bool,
                                            max_frames in 0u32..300, max_work in 0u32..20000,
                                            max_fres in 0u32..1100, max_signal_frames in 0u32..10,
                                            hash_mem: bool) {
        // Real section lookups (FDE search and FRE scan charged inside the
        // decoder), on hostile stacks or on random memory.
        let (data, h) = match which {
            0..=2 => (sections()[which].clone(), None),
            3 => (Vec::new(), Some(sigreturn_chain(fres, fres.saturating_add(1)))),
            _ => (Vec::new(), Some(deep_chain(fres))),
        };
        let limits = WalkLimits {
            max_work,
            max_fres,
            max_signal_frames,
            ..WalkLimits::unbudgeted(max_frames, 64 << 20)
        };
        let (section, start) = match &h {
            Some(h) => (h.parse(), h.start),
            None => (
                Section::parse(&data, 0x400000).unwrap(),
                Regs { pc: 0x401000 + seed % 0x1100, sp: 0x10000 + (seed >> 32) % 0x1000, fp: seed >> 40, lr: 0 },
            ),
        };
        let mut lookup = SectionRows(section);
        let mut signals = 0u32;
        let mut count = |_: u64, src: FrameSource| {
            signals += u32::from(src == FrameSource::SignalFrame);
            true
        };
        let walked = match (&h, hash_mem) {
            (Some(h), false) => {
                let mut mem = h.mem.clone();
                walk_amd64_metered(start, &limits, &mut lookup, &mut mem, &mut count)
            }
            _ => {
                let mut mem = HashMem { seed, small, reads: 0 };
                walk_amd64_metered(start, &limits, &mut lookup, &mut mem, &mut count)
            }
        };
        prop_assert!(walked.work <= max_work, "{:?}", walked);
        prop_assert!(walked.frames <= max_frames);
        prop_assert!(signals <= max_signal_frames);
    }
}
