// SPDX-License-Identifier: GPL-2.0

//! x86-64 walks over hand-made stacks.

mod common;

use common::hostile::{deep_chain, sigreturn_chain, Hostile, SectionRows};
use common::stack::{Mem, SecLookup};
use common::{ctl, FdeB, FreB, SectionB};
use sframe::unwind::{
    step_amd64, walk_amd64, walk_amd64_metered, FrameSource, Lookup, Memory, Regs, Stop,
    WalkLimits, Walked, ENTRY_ROW, RT_SIGRETURN_INSNS, SAMPLE_MAX_FRES, SAMPLE_MAX_WORK,
};
use sframe::{CfaRule, Reg, RegRule, Row, Section};

const LIMITS: WalkLimits = WalkLimits::unbudgeted(64, 1 << 20);

fn walk(
    regs: Regs,
    lookup: &mut impl Lookup,
    mem: &mut Mem,
    limits: &WalkLimits,
) -> (Vec<(u64, FrameSource)>, Stop) {
    let mut frames = Vec::new();
    let stop = walk_amd64(regs, limits, lookup, mem, &mut |pc, src| {
        frames.push((pc, src));
        true
    });
    (frames, stop)
}

/// main (0x1000) calls a (0x1100) calls b (0x1200, FP based), all covered.
fn program() -> Vec<u8> {
    SectionB::v3(
        0x8000,
        vec![
            FdeB::new(
                0x1000,
                0x40,
                vec![FreB::sp(0, 8), FreB::sp(1, 16), FreB::new(0x30, true, &[])],
            ),
            FdeB::new(0x1100, 0x40, vec![FreB::sp(0, 8), FreB::sp(4, 32)]),
            FdeB::new(
                0x1200,
                0x40,
                vec![
                    FreB::sp(0, 8),
                    FreB::with_fp(1, true, 16, -16),
                    FreB::with_fp(4, false, 16, -16),
                ],
            ),
        ],
    )
    .build()
}

#[test]
fn walks_covered_frames_to_the_outermost_row() {
    let data = program();
    let mut lookup = SecLookup(Section::parse(&data, 0x8000).unwrap());
    let mut mem = Mem::default();
    // b: rbp = 0x7000 - 0x40 + ..., CFA = rbp + 16.
    let sp_b = 0x6f00;
    let fp_b = 0x6f40; // CFA_b = 0x6f50, RA at 0x6f48, saved rbp at 0x6f40
    mem.put64(0x6f48, 0x1121); // into a, after the call
    mem.put64(0x6f40, 0x1234_5678); // caller's rbp (a doesn't use it)
                                    // a: CFA = sp + 32 = 0x6f70; RA at 0x6f68.
    mem.put64(0x6f68, 0x1031); // into main at 0x30: outermost row
    let (frames, stop) = walk(
        Regs {
            pc: 0x1210,
            sp: sp_b,
            fp: fp_b,
            lr: 0,
        },
        &mut lookup,
        &mut mem,
        &LIMITS,
    );
    assert_eq!(
        frames,
        vec![
            (0x1210, FrameSource::Sample),
            (0x1121, FrameSource::Sframe),
            (0x1031, FrameSource::Sframe),
        ]
    );
    assert_eq!(stop, Stop::Outermost);
}

#[test]
fn caller_lookup_uses_ra_minus_one() {
    // A call as the last instruction of f (0x1000..0x1010) returns to
    // 0x1010, the start of g, whose rows differ.
    let data = SectionB::v2(
        0,
        vec![
            FdeB::new(0x1000, 0x10, vec![FreB::sp(0, 8), FreB::sp(1, 24)]),
            // Looked up at 0x1010 this row would read 0x7008 (unmapped).
            FdeB::new(0x1010, 0x10, vec![FreB::sp(0, 8)]),
        ],
    )
    .build();
    let mut lookup = SecLookup(Section::parse(&data, 0).unwrap());
    let mut mem = Mem::default();
    // leaf (uncovered, at its first instruction "push %rbp"): RA at sp.
    mem.put(0x5000, &[0x55]);
    mem.put64(0x7000, 0x1010);
    mem.put64(0x7008 + 16, 0); // f's RA slot (CFA = 0x7008 + 24)
    let (frames, stop) = walk(
        Regs {
            pc: 0x5000,
            sp: 0x7000,
            fp: 0,
            lr: 0,
        },
        &mut lookup,
        &mut mem,
        &LIMITS,
    );
    assert_eq!(
        frames,
        vec![
            (0x5000, FrameSource::Sample),
            (0x1010, FrameSource::EntryRule)
        ]
    );
    // f's row at 0x100f (RA - 1) was used: CFA = sp + 24, RA 0 = end.
    assert_eq!(stop, Stop::Outermost);
}

#[test]
fn frame_pointer_fallback_for_uncovered_code() {
    let data = program();
    let mut lookup = SecLookup(Section::parse(&data, 0x8000).unwrap());
    let mut mem = Mem::default();
    // JIT code at 0x9000 (no rows) with a frame pointer, called from a.
    mem.put(0x9010, &[0x90]);
    mem.put64(0x6f00, 0x6e00); // saved rbp
    mem.put64(0x6f08, 0x1121); // RA into a
                               // a: CFA = 0x6f10 + 32 = 0x6f30, RA at 0x6f28.
    mem.put64(0x6f28, 0);
    let (frames, stop) = walk(
        Regs {
            pc: 0x9010,
            sp: 0x6ef0,
            fp: 0x6f00,
            lr: 0,
        },
        &mut lookup,
        &mut mem,
        &LIMITS,
    );
    assert_eq!(
        frames,
        vec![
            (0x9010, FrameSource::Sample),
            (0x1121, FrameSource::FramePointer),
        ]
    );
    assert_eq!(stop, Stop::Outermost);
}

#[test]
fn implausible_frame_pointers_stop() {
    let data = program();
    let mut lookup = SecLookup(Section::parse(&data, 0x8000).unwrap());
    let cases = [
        (0, Stop::NoCoverage),
        (0x6f04, Stop::Misaligned),
        (0x6e00, Stop::CfaNotIncreasing),
        (0x6f00, Stop::ReadFault),
    ];
    for (fp, want) in cases {
        let mut mem = Mem::default();
        mem.put(0x9010, &[0x90]);
        let (frames, stop) = walk(
            Regs {
                pc: 0x9010,
                sp: 0x6ef0,
                fp,
                lr: 0,
            },
            &mut lookup,
            &mut mem,
            &LIMITS,
        );
        assert_eq!(frames.len(), 1);
        assert_eq!(stop, want, "fp {fp:#x}");
    }
    // Beyond the span.
    let mut mem = Mem::default();
    mem.put64(0x6f00 + (2 << 20), 0);
    mem.put64(0x6f08 + (2 << 20), 0x1121);
    let (_, stop) = walk(
        Regs {
            pc: 0x9010,
            sp: 0x6ef0,
            fp: 0x6f00 + (2 << 20),
            lr: 0,
        },
        &mut lookup,
        &mut mem,
        &LIMITS,
    );
    assert_eq!(stop, Stop::SpanExceeded);
}

struct NotText<L>(L);
impl<L: Lookup> Lookup for NotText<L> {
    fn row(&mut self, pc: u64) -> Option<Row> {
        self.0.row(pc)
    }
    fn is_text(&mut self, _pc: u64) -> bool {
        false
    }
}

#[test]
fn frame_pointer_return_address_must_be_text() {
    let data = program();
    let mut lookup = NotText(SecLookup(Section::parse(&data, 0x8000).unwrap()));
    let mut mem = Mem::default();
    mem.put(0x9010, &[0x90]);
    mem.put64(0x6f00, 0x6e00);
    mem.put64(0x6f08, 0x1121);
    let (_, stop) = walk(
        Regs {
            pc: 0x9010,
            sp: 0x6ef0,
            fp: 0x6f00,
            lr: 0,
        },
        &mut lookup,
        &mut mem,
        &LIMITS,
    );
    assert_eq!(stop, Stop::BadReturnAddress);
}

/// A machine whose user addresses end lower than the default (4-level
/// paging ends them at 2^47 - 4096; here, below the program's callers).
struct UserEnd<L>(L, u64);
impl<L: Lookup> Lookup for UserEnd<L> {
    fn row(&mut self, pc: u64) -> Option<Row> {
        self.0.row(pc)
    }
    fn user_addr_end(&mut self) -> u64 {
        self.1
    }
}

#[test]
fn return_address_beyond_the_user_end_stops_the_walk() {
    let data = program();
    let mut mem = Mem::default();
    mem.put64(0x6f48, 0x1121);
    mem.put64(0x6f40, 0);
    let regs = Regs {
        pc: 0x1210,
        sp: 0x6f00,
        fp: 0x6f40,
        lr: 0,
    };
    let mut lookup = UserEnd(SecLookup(Section::parse(&data, 0x8000).unwrap()), 0x1121);
    let (frames, stop) = walk(regs, &mut lookup, &mut mem, &LIMITS);
    assert_eq!(frames, vec![(0x1210, FrameSource::Sample)]);
    assert_eq!(stop, Stop::BadReturnAddress);
    // One byte higher, the same return address is accepted.
    let mut lookup = UserEnd(SecLookup(Section::parse(&data, 0x8000).unwrap()), 0x1122);
    let (frames, _) = walk(regs, &mut lookup, &mut mem, &LIMITS);
    assert_eq!(frames.get(1), Some(&(0x1121, FrameSource::Sframe)));
    // No user addresses at all: every return address is beyond them.
    let mut lookup = UserEnd(SecLookup(Section::parse(&data, 0x8000).unwrap()), 0);
    let (frames, stop) = walk(regs, &mut lookup, &mut mem, &LIMITS);
    assert_eq!(frames.len(), 1);
    assert_eq!(stop, Stop::BadReturnAddress);
}

#[test]
fn signal_frame_on_an_alternate_stack() {
    // handler (0x1100, covered) returns to __restore_rt at 0x3000; the
    // interrupted code was at b+8 (0x1208) on the normal stack at 0x6f00,
    // while the handler ran on a sigaltstack at 0x2_0000.
    let data = program();
    let mut lookup = SecLookup(Section::parse(&data, 0x8000).unwrap());
    let mut mem = Mem::default();
    mem.put(0x3000, &RT_SIGRETURN_INSNS);
    let alt_sp = 0x2_0000;
    // handler a: CFA = sp + 32; RA at CFA - 8 = __restore_rt.
    mem.put64(alt_sp + 24, 0x3000);
    let uc = alt_sp + 32;
    let mc = uc + 40;
    mem.put64(mc + 16 * 8, 0x1208); // rip
    mem.put64(mc + 15 * 8, 0x6f00); // rsp
    mem.put64(mc + 10 * 8, 0x6f40); // rbp
                                    // b at 0x1208: CFA = rbp + 16 = 0x6f50.
    mem.put64(0x6f48, 0x1031);
    mem.put64(0x6f40, 0);
    let (frames, stop) = walk(
        Regs {
            pc: 0x1110,
            sp: alt_sp,
            fp: 0,
            lr: 0,
        },
        &mut lookup,
        &mut mem,
        &LIMITS,
    );
    assert_eq!(
        frames,
        vec![
            (0x1110, FrameSource::Sample),
            (0x3000, FrameSource::Sframe),
            (0x1208, FrameSource::SignalFrame),
            (0x1031, FrameSource::Sframe),
        ]
    );
    assert_eq!(stop, Stop::Outermost);
}

#[test]
fn limits_and_consumer() {
    // A frame-pointer chain that goes on forever upwards.
    let mut mem = Mem::default();
    for i in 0..200u64 {
        let fp = 0x10_0000 + i * 16;
        mem.put64(fp, fp + 16);
        mem.put64(fp + 8, 0x9000 + i);
    }
    mem.put(0x9000, &[0x90]);
    struct NoRows;
    impl Lookup for NoRows {
        fn row(&mut self, _pc: u64) -> Option<Row> {
            None
        }
    }
    let regs = Regs {
        pc: 0x9000,
        sp: 0x10_0000,
        fp: 0x10_0000,
        lr: 0,
    };
    let limits = WalkLimits::unbudgeted(10, 1 << 20);
    let (frames, stop) = walk(regs, &mut NoRows, &mut mem, &limits);
    assert_eq!(frames.len(), 10);
    assert_eq!(stop, Stop::MaxFrames);
    let zero = WalkLimits::unbudgeted(0, 0);
    assert_eq!(walk(regs, &mut NoRows, &mut mem, &zero).0.len(), 0);
    let mut n = 0;
    let stop = walk_amd64(regs, &LIMITS, &mut NoRows, &mut mem, &mut |_, _| {
        n += 1;
        n < 3
    });
    assert_eq!((n, stop), (3, Stop::Consumer));
    // A self-referencing frame pointer is caught, not followed forever.
    let mut mem = Mem::default();
    mem.put64(0x10_0000, 0x10_0000);
    mem.put64(0x10_0008, 0x9000);
    let (frames, stop) = walk(regs, &mut NoRows, &mut mem, &LIMITS);
    assert_eq!(frames.len(), 2);
    assert_eq!(stop, Stop::CfaNotIncreasing);
}

fn sp_row(cfa: i32) -> Row {
    Row {
        cfa: CfaRule {
            offset: cfa,
            ..ENTRY_ROW.cfa
        },
        ..ENTRY_ROW
    }
}

#[test]
fn step_rules() {
    let mut mem = Mem::default();
    mem.put64(0x1000, 0x4444);
    mem.put64(0x1008, 0x5555);
    let regs = Regs {
        pc: 1,
        sp: 0x1000,
        fp: 0x2000,
        lr: 0,
    };
    assert_eq!(
        step_amd64(&ENTRY_ROW, &regs, &mut mem),
        Ok(Regs {
            pc: 0x4444,
            sp: 0x1008,
            fp: 0x2000,
            lr: 0,
        })
    );
    let mut r = sp_row(16);
    r.fp = RegRule::AtCfa(-16);
    assert_eq!(
        step_amd64(&r, &regs, &mut mem),
        Ok(Regs {
            pc: 0x5555,
            sp: 0x1010,
            fp: 0x4444,
            lr: 0,
        })
    );
    assert_eq!(
        step_amd64(&sp_row(0), &regs, &mut mem),
        Err(Stop::CfaNotIncreasing)
    );
    assert_eq!(
        step_amd64(&sp_row(-8), &regs, &mut mem),
        Err(Stop::CfaNotIncreasing)
    );
    assert_eq!(
        step_amd64(&sp_row(12), &regs, &mut mem),
        Err(Stop::Misaligned)
    );
    assert_eq!(
        step_amd64(&sp_row(64), &regs, &mut mem),
        Err(Stop::ReadFault)
    );
    let mut r = sp_row(8);
    r.outermost = true;
    assert_eq!(step_amd64(&r, &regs, &mut mem), Err(Stop::Outermost));
    let mut r = sp_row(8);
    r.ra = RegRule::Undefined;
    assert_eq!(step_amd64(&r, &regs, &mut mem), Err(Stop::Outermost));
    let mut r = sp_row(8);
    r.cfa.base = Reg::Dwarf(10);
    assert_eq!(step_amd64(&r, &regs, &mut mem), Err(Stop::Unsupported));
    // DRAP: CFA = *(rbp - 8).
    let mut mem2 = Mem::default();
    mem2.put64(0x1ff8, 0x3000);
    mem2.put64(0x2ff8, 0x7777);
    let mut r = sp_row(-8);
    r.cfa = CfaRule {
        base: Reg::Fp,
        offset: -8,
        deref: true,
    };
    r.fp = RegRule::AtReg {
        reg: Reg::Fp,
        offset: 0,
    };
    mem2.put64(0x2000, 0x2100);
    assert_eq!(
        step_amd64(&r, &regs, &mut mem2),
        Ok(Regs {
            pc: 0x7777,
            sp: 0x3000,
            fp: 0x2100,
            lr: 0,
        })
    );
}

#[test]
fn flex_section_drives_a_step() {
    // CFA = *(rbp - 8), FP at *(rbp + 0), RA padding (CFA - 8).
    let mut fde = FdeB::new(
        0x1000,
        0x20,
        vec![FreB::new(
            0,
            false,
            &[ctl(6, true, true), -8, 0, ctl(6, true, true), 0],
        )],
    );
    fde.fde_type = 1;
    let data = SectionB::v3(0, vec![fde]).build();
    let sec = Section::parse(&data, 0).unwrap();
    sec.validate(&mut || {}).unwrap();
    let row = sec.find_row(0x1004).unwrap().unwrap();
    let mut mem = Mem::default();
    mem.put64(0x1ff8, 0x3000);
    mem.put64(0x2ff8, 0x7777);
    mem.put64(0x2000, 0x2100);
    let regs = Regs {
        pc: 0x1004,
        sp: 0x1000,
        fp: 0x2000,
        lr: 0,
    };
    assert_eq!(
        step_amd64(&row, &regs, &mut mem),
        Ok(Regs {
            pc: 0x7777,
            sp: 0x3000,
            fp: 0x2100,
            lr: 0,
        })
    );
}

/// What [`walk_amd64_metered`] returns, plus the frames by source.
fn walk_hostile(h: &Hostile, limits: &WalkLimits) -> (Walked, Vec<FrameSource>) {
    let mut lookup = SectionRows(h.parse());
    let mut mem = h.mem.clone();
    let mut sources = Vec::new();
    let walked = walk_amd64_metered(h.start, limits, &mut lookup, &mut mem, &mut |_, src| {
        sources.push(src);
        true
    });
    (walked, sources)
}

#[test]
fn forged_signal_frames_stop_at_the_signal_limit() {
    // Cheap rows: only the number of signal frames can end this walk.
    let h = sigreturn_chain(2, 0);
    // Without a limit it runs to the frame limit, crossing a fake signal
    // frame every second frame: the CFA checks restart at each.
    let (walked, sources) = walk_hostile(&h, &WalkLimits::unbudgeted(127, 64 << 20));
    assert_eq!(walked.stop, Stop::MaxFrames);
    assert_eq!(walked.frames, 127);
    let signals = |s: &[FrameSource]| s.iter().filter(|&&s| s == FrameSource::SignalFrame).count();
    assert_eq!(signals(&sources), 63);
    // With one: the ninth signal frame ends it. The sample, then eight
    // times the trampoline and the interrupted PC, then the trampoline.
    let limits = WalkLimits {
        max_signal_frames: 8,
        ..WalkLimits::unbudgeted(127, 64 << 20)
    };
    let (walked, sources) = walk_hostile(&h, &limits);
    assert_eq!(walked.stop, Stop::SignalLimit);
    assert_eq!(signals(&sources), 8);
    assert_eq!(walked.frames, 1 + 2 * 8 + 1);
    // The module's limits, on both paths.
    for limits in [
        WalkLimits::sample(127, 64 << 20),
        WalkLimits::deferred(127, 64 << 20),
    ] {
        let (walked, sources) = walk_hostile(&h, &limits);
        assert_eq!(walked.stop, Stop::SignalLimit);
        assert_eq!(signals(&sources) as u32, limits.max_signal_frames);
    }
}

#[test]
fn many_fres_per_function_spend_the_budget() {
    // Every caller is looked up after 1,000 FREs of its function.
    let h = deep_chain(1000);
    let (walked, _) = walk_hostile(&h, &WalkLimits::unbudgeted(127, 64 << 20));
    assert_eq!(walked.stop, Stop::MaxFrames);
    // 126 lookups of one probe and 1,000 FREs, and 126 return addresses.
    assert_eq!(walked.work, 126 * (1 + 1000 + 1));
    let limits = WalkLimits {
        max_work: 4096,
        ..WalkLimits::unbudgeted(127, 64 << 20)
    };
    let (walked, sources) = walk_hostile(&h, &limits);
    assert_eq!(walked.stop, Stop::Budget);
    assert!(walked.work <= 4096);
    // Four frames paid for in full; the fifth lookup ran out.
    assert_eq!(sources.len(), 1 + 4);
    assert!(sources[1..].iter().all(|&s| s == FrameSource::Sframe));
    // Under the sample path's FRE cap these functions are not covered:
    // the walk gives up at the first caller, as beyond 1,024 FREs before.
    let (walked, _) = walk_hostile(&h, &WalkLimits::sample(127, 64 << 20));
    assert_eq!((walked.stop, walked.frames), (Stop::NoCoverage, 1));
    // Functions just under that cap: the budget ends the walk.
    let h = deep_chain(SAMPLE_MAX_FRES);
    let (walked, _) = walk_hostile(&h, &WalkLimits::sample(127, 64 << 20));
    assert_eq!(walked.stop, Stop::Budget);
    assert!(walked.work <= SAMPLE_MAX_WORK);
}

#[test]
fn the_budget_bounds_the_worst_chain() {
    // The costliest stack for the old limits: 1,024 FREs decoded at every
    // frame, a fake signal frame every second one.
    let h = sigreturn_chain(1024, 1100);
    let (old, _) = walk_hostile(&h, &WalkLimits::unbudgeted(127, 64 << 20));
    assert_eq!((old.stop, old.frames), (Stop::MaxFrames, 127));
    assert!(old.work > 126 * 1024, "{old:?}");
    for limits in [
        WalkLimits::sample(127, 64 << 20),
        WalkLimits::deferred(127, 64 << 20),
    ] {
        for h in [
            sigreturn_chain(limits.max_fres, 1100),
            deep_chain(limits.max_fres),
        ] {
            let (walked, _) = walk_hostile(&h, &limits);
            assert!(matches!(walked.stop, Stop::Budget | Stop::SignalLimit));
            assert!(walked.work <= limits.max_work, "{walked:?}");
        }
    }
}

/// Memory that counts reads.
struct Counted<'m>(&'m mut Mem, u32);

impl Memory for Counted<'_> {
    fn read_u64(&mut self, addr: u64) -> Option<u64> {
        self.1 += 1;
        self.0.read_u64(addr)
    }
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> bool {
        self.1 += 1;
        self.0.read(addr, buf)
    }
}

/// A return address and a frame pointer saved within 32 bytes of each
/// other are read with one read (a frame record, or registers pushed
/// together), farther apart with two; the values are those two reads
/// give, and an unreadable word in the span fails the step as it would.
#[test]
fn ra_and_fp_saved_together_take_one_read() {
    let mut mem = Mem::default();
    for (i, v) in [0x1111u64, 0x2222, 0x3333, 0x4444, 0x5555, 0x6666]
        .iter()
        .enumerate()
    {
        mem.put64(0x1000 + 8 * i as u64, *v);
    }
    let regs = Regs {
        pc: 1,
        sp: 0x1000,
        fp: 0x9000,
        lr: 0,
    };
    // (CFA offset, FP offset) -> (pc, fp, reads).
    for (cfa, fp_off, want) in [
        (16, -16, (0x2222, 0x1111, 1)),
        (32, -24, (0x4444, 0x2222, 1)),
        (40, -32, (0x5555, 0x2222, 1)),
        (40, -40, (0x5555, 0x1111, 2)),
        (48, -48, (0x6666, 0x1111, 2)),
    ] {
        let mut r = sp_row(cfa);
        r.fp = RegRule::AtCfa(fp_off);
        let mut counted = Counted(&mut mem, 0);
        let next = step_amd64(&r, &regs, &mut counted).unwrap();
        assert_eq!(
            (next.pc, next.fp, counted.1),
            want,
            "CFA+{cfa}, FP at CFA{fp_off}"
        );
    }
    // FP saved above the RA: the same.
    let mut r = sp_row(16);
    r.ra = RegRule::AtCfa(-16);
    r.fp = RegRule::AtCfa(-8);
    let mut counted = Counted(&mut mem, 0);
    let next = step_amd64(&r, &regs, &mut counted).unwrap();
    assert_eq!((next.pc, next.fp, counted.1), (0x1111, 0x2222, 1));
    // The span runs past readable memory: a fault, as either read's.
    let mut r = sp_row(56);
    r.fp = RegRule::AtCfa(-32);
    assert_eq!(step_amd64(&r, &regs, &mut mem), Err(Stop::ReadFault));
    // Only the RA saved: one read of it.
    let mut counted = Counted(&mut mem, 0);
    step_amd64(&sp_row(16), &regs, &mut counted).unwrap();
    assert_eq!(counted.1, 1);
}
