// SPDX-License-Identifier: GPL-2.0

//! AArch64 walks over hand-made stacks: the return address in the link
//! register for the topmost frame only, signed return addresses, the
//! `rt_sigframe` of a signal handler, the entry rule and frame records.

mod common;

use common::stack::{Mem, SecLookup};
use common::{FdeB, FreB, SectionB};
use sframe::unwind::{
    walk_aarch64, FrameSource, Lookup, Regs, Stop, WalkLimits, AARCH64_RT_SIGRETURN_INSNS,
};
use sframe::{Row, Section};

const LIMITS: WalkLimits = WalkLimits::unbudgeted(64, 1 << 20);

/// An AArch64 V2 section as GNU as writes it: ABI 2 (little endian), no
/// fixed RA or FP offset.
fn aarch64(fdes: Vec<FdeB>) -> Vec<u8> {
    SectionB {
        abi: 2,
        fixed_ra: 0,
        ..SectionB::v2(0x8000, fdes)
    }
    .build()
}

/// CFA = SP + `cfa`; RA and FP still in their registers.
fn in_regs(start: u32, cfa: i64) -> FreB {
    FreB::sp(start, cfa)
}

/// CFA = SP or FP + `cfa`; RA at CFA + `ra`; FP at CFA + `fp`.
fn saved(start: u32, base_sp: bool, cfa: i64, ra: i64, fp: i64) -> FreB {
    FreB::new(start, base_sp, &[cfa, ra, fp])
}

/// main (0x1000) calls a (0x1100), which calls the leaf b (0x1200).
/// - main: `stp x29, x30, [sp, #-32]!` at 0, `mov x29, sp` at 4.
/// - a: `stp x29, x30, [sp, #-16]!` at 0 (FP not set up: frame pointers
///   omitted).
/// - b: a leaf, nothing saved.
/// - c (0x1300): allocates 16 bytes without saving LR (a leaf too).
/// - h (0x1400): a signal handler, `stp x29, x30, [sp, #-16]!` at 0.
fn program() -> Vec<u8> {
    aarch64(vec![
        FdeB::new(
            0x1000,
            0x40,
            vec![
                in_regs(0, 0),
                saved(4, true, 32, -24, -32),
                saved(8, false, 32, -24, -32),
            ],
        ),
        FdeB::new(
            0x1100,
            0x40,
            vec![in_regs(0, 0), saved(4, true, 16, -8, -16)],
        ),
        FdeB::new(0x1200, 0x40, vec![in_regs(0, 0)]),
        FdeB::new(0x1300, 0x40, vec![in_regs(0, 0), in_regs(4, 16)]),
        FdeB::new(
            0x1400,
            0x40,
            vec![in_regs(0, 0), saved(4, true, 16, -8, -16)],
        ),
    ])
}

fn walk(regs: Regs, lookup: &mut impl Lookup, mem: &mut Mem) -> (Vec<(u64, FrameSource)>, Stop) {
    let mut frames = Vec::new();
    let stop = walk_aarch64(regs, &LIMITS, lookup, mem, &mut |pc, src| {
        frames.push((pc, src));
        true
    });
    (frames, stop)
}

/// Stack of the chain main → a → b, b sampled with the return address
/// into a in LR: a's record {x29, x30} at `sp`, main's at `main_fp`.
fn chain_stack(sp: u64, main_fp: u64, ra_into_main: u64) -> Mem {
    let mut mem = Mem::default();
    mem.put64(sp, main_fp); // a's saved x29: main's frame
    mem.put64(sp + 8, ra_into_main);
    mem.put64(main_fp, 0); // main's caller's x29
    mem.put64(main_fp + 8, 0); // main's return address: end of stack
    mem
}

#[test]
fn leaf_return_address_is_taken_from_the_link_register() {
    let data = program();
    let mut lookup = SecLookup(Section::parse(&data, 0x8000).unwrap());
    let (sp, main_fp) = (0x7_0000, 0x7_0100);
    let mut mem = chain_stack(sp, main_fp, 0x100c);
    let regs = Regs {
        pc: 0x1210,
        sp,
        fp: main_fp,
        lr: 0x1108,
    };
    let (frames, stop) = walk(regs, &mut lookup, &mut mem);
    assert_eq!(
        frames,
        vec![
            (0x1210, FrameSource::Sample),
            (0x1108, FrameSource::LinkRegister),
            (0x100c, FrameSource::Sframe),
        ]
    );
    assert_eq!(stop, Stop::Outermost);
}

#[test]
fn link_register_is_refused_below_the_topmost_frame() {
    let data = program();
    // a's saved return address leads into c after its `sub sp`, where the
    // return address would still be in LR: LR is long gone by then.
    let mut lookup = SecLookup(Section::parse(&data, 0x8000).unwrap());
    let (sp, main_fp) = (0x7_0000, 0x7_0100);
    let mut mem = chain_stack(sp, main_fp, 0x1308);
    let regs = Regs {
        pc: 0x1210,
        sp,
        fp: main_fp,
        lr: 0x1108,
    };
    let (frames, stop) = walk(regs, &mut lookup, &mut mem);
    assert_eq!(frames.len(), 3);
    assert_eq!(stop, Stop::Unsupported);

    // Into b, whose CFA is the SP itself: a frame that is not topmost may
    // not stand still.
    let mut mem = chain_stack(sp, main_fp, 0x1208);
    let (frames, stop) = walk(regs, &mut lookup, &mut mem);
    assert_eq!(frames.len(), 3);
    assert_eq!(stop, Stop::CfaNotIncreasing);
}

/// Strips a 48-bit user address's pointer-authentication code.
struct Pac<'a>(SecLookup<'a>);

impl Lookup for Pac<'_> {
    fn row(&mut self, pc: u64) -> Option<Row> {
        self.0.row(pc)
    }
    fn strip_return_address(&mut self, ra: u64) -> u64 {
        ra & ((1 << 48) - 1)
    }
}

#[test]
fn signed_return_addresses_are_stripped() {
    let mut fdes = vec![
        FdeB::new(
            0x1000,
            0x40,
            vec![in_regs(0, 0), saved(8, true, 32, -24, -32)],
        ),
        FdeB::new(
            0x1100,
            0x40,
            vec![in_regs(0, 0), saved(4, true, 16, -8, -16)],
        ),
    ];
    // a signs its return address before saving it (paciasp at 0).
    fdes[1].fres[1].mangled_ra = true;
    let data = aarch64(fdes);
    let (sp, main_fp) = (0x7_0000, 0x7_0100);
    let signed = 0x100c | (0x2b_u64 << 48);
    let mut mem = chain_stack(sp, main_fp, signed);
    mem.put64(sp + 16 + 8, 0); // main's saved RA (main's CFA is SP based here)
    let regs = Regs {
        pc: 0x1110,
        sp,
        fp: main_fp,
        lr: 0,
    };

    let mut lookup = Pac(SecLookup(Section::parse(&data, 0x8000).unwrap()));
    let (frames, _) = walk(regs, &mut lookup, &mut mem);
    assert_eq!(frames.get(1), Some(&(0x100c, FrameSource::Sframe)));

    // Without stripping the signed value is no address of the program.
    let mut lookup = SecLookup(Section::parse(&data, 0x8000).unwrap());
    let (frames, _) = walk(regs, &mut lookup, &mut mem);
    assert_eq!(frames.get(1), Some(&(signed, FrameSource::Sframe)));
}

#[test]
fn signal_handler_returns_through_the_rt_sigframe() {
    let data = program();
    let mut lookup = SecLookup(Section::parse(&data, 0x8000).unwrap());
    let trampoline = 0x9000;
    let sp = 0x6_0000; // in h, after its `stp`
    let frame = sp + 16; // h's CFA: the rt_sigframe
    let (isp, main_fp) = (0x7_0000, 0x7_0100);
    let mut mem = chain_stack(isp, main_fp, 0x100c);
    mem.put(trampoline, &AARCH64_RT_SIGRETURN_INSNS);
    mem.put64(sp, 0x6_1000); // h's saved x29
    mem.put64(sp + 8, trampoline); // h's return address
                                   // The interrupted registers: b (a leaf) with LR into a.
    let sc = frame + 128 + 176;
    mem.put64(sc + 8 + 29 * 8, main_fp);
    mem.put64(sc + 8 + 30 * 8, 0x1108);
    mem.put64(sc + 8 + 31 * 8, isp);
    mem.put64(sc + 8 + 32 * 8, 0x1210);
    let regs = Regs {
        pc: 0x1410,
        sp,
        fp: 0x6_1000,
        lr: 0,
    };
    let (frames, stop) = walk(regs, &mut lookup, &mut mem);
    assert_eq!(
        frames,
        vec![
            (0x1410, FrameSource::Sample),
            (trampoline, FrameSource::Sframe),
            (0x1210, FrameSource::SignalFrame),
            (0x1108, FrameSource::LinkRegister),
            (0x100c, FrameSource::Sframe),
        ]
    );
    assert_eq!(stop, Stop::Outermost);
}

#[test]
fn function_entry_without_rows_uses_the_link_register() {
    let data = program();
    let mut lookup = SecLookup(Section::parse(&data, 0x8000).unwrap());
    let (sp, main_fp) = (0x7_0000, 0x7_0100);
    for first in [0xd503_233f_u32, 0xa9bf_7bfd] {
        // paciasp; stp x29, x30, [sp, #-16]!
        let mut mem = chain_stack(sp, main_fp, 0x100c);
        mem.put(0x2000, &first.to_le_bytes());
        let regs = Regs {
            pc: 0x2000,
            sp,
            fp: main_fp,
            lr: 0x1108,
        };
        let (frames, stop) = walk(regs, &mut lookup, &mut mem);
        assert_eq!(
            frames,
            vec![
                (0x2000, FrameSource::Sample),
                (0x1108, FrameSource::LinkRegister),
                (0x100c, FrameSource::Sframe),
            ],
            "{first:#x}"
        );
        assert_eq!(stop, Stop::Outermost);
    }
}

#[test]
fn uncovered_code_takes_one_frame_record_step() {
    let data = program();
    let mut lookup = SecLookup(Section::parse(&data, 0x8000).unwrap());
    // A function without rows (its first instruction is no prologue) with
    // its record {x29, x30} at fp, returning into main after its `mov`.
    let (sp, fp, main_fp) = (0x7_0000, 0x7_0040, 0x7_0100);
    let mut mem = Mem::default();
    mem.put(0x3000, &0xd503_201f_u32.to_le_bytes()); // nop
    mem.put64(fp, main_fp);
    mem.put64(fp + 8, 0x100c);
    mem.put64(main_fp, 0);
    mem.put64(main_fp + 8, 0);
    let regs = Regs {
        pc: 0x3000,
        sp,
        fp,
        lr: 0,
    };
    let (frames, stop) = walk(regs, &mut lookup, &mut mem);
    assert_eq!(
        frames,
        vec![
            (0x3000, FrameSource::Sample),
            (0x100c, FrameSource::FramePointer),
        ]
    );
    assert_eq!(stop, Stop::Outermost);
}

#[test]
fn cfa_must_be_16_byte_aligned() {
    let data = aarch64(vec![FdeB::new(
        0x1000,
        0x40,
        vec![saved(0, true, 24, -8, -16)],
    )]);
    let mut lookup = SecLookup(Section::parse(&data, 0x8000).unwrap());
    let mut mem = Mem::default();
    let regs = Regs {
        pc: 0x1010,
        sp: 0x7_0000,
        fp: 0,
        lr: 0,
    };
    let (frames, stop) = walk(regs, &mut lookup, &mut mem);
    assert_eq!(frames.len(), 1);
    assert_eq!(stop, Stop::Misaligned);
}
