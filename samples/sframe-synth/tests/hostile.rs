// SPDX-License-Identifier: GPL-2.0

//! Hostile `.eh_frame` input: truncated, looping, overlapping, absurd.
//! The generator runs in every audited process: it must never panic or
//! hang, and whatever it returns must be valid.

mod common;

use common::eh::eh_frame_hdr;
use common::eh::EhB;
use common::eh::UDATA8;
use common::harness;
use object::Object;
use object::ObjectSection;
use sframe_synth::synth_mapped;
use sframe_synth::Error;
use sframe_synth::Options;
use sframe_synth::Reason;
use sframe_synth::Version;

const EH: u64 = 0x2000;

fn run(eh: &[u8], opts: &Options) -> Result<sframe_synth::Synthesized, Error> {
    for v2 in [false, true] {
        let _ = harness::exercise(&harness::join(v2, EH, &[], eh));
    }
    synth_mapped(&[], 0, eh, EH, opts)
}

fn stats(result: &Result<sframe_synth::Synthesized, Error>) -> sframe_synth::Stats {
    match result {
        Ok(out) => out.stats.clone(),
        Err(Error::NothingUsable(s)) => (**s).clone(),
        Err(e) => panic!("unexpected error {e}"),
    }
}

/// CFA rsp+16 after 1 byte, rbp saved at CFA-16; CFA rbp+16 after 4.
const PROLOGUE: [u8; 7] = [0x41, 0x0e, 16, 0x86, 2, 0x43, 0x0c];

#[test]
fn plain_function() {
    let mut b = EhB::new(EH);
    let cie = b.cie();
    b.fde(cie, 0x1000, 0x40, &[0x41, 0x0e, 16, 0x86, 2, 0x43, 0x0d, 6]);
    let out = run(&b.finish(), &Options::default()).unwrap();
    assert_eq!(out.base, 0x1000);
    assert_eq!(out.text_range, (0x1000, 0x1040));
    assert_eq!(out.stats.rows, 3);
    assert_eq!(out.stats.rows_emitted, 3);
    let s = sframe::Section::parse(&out.section, out.base).unwrap();
    let row = s.find_row(0x1010).unwrap().unwrap();
    assert_eq!(row.cfa.base, sframe::Reg::Fp);
    assert_eq!(row.cfa.offset, 16);
    assert_eq!(row.fp, sframe::RegRule::AtCfa(-16));
}

#[test]
fn truncated_everywhere() {
    let mut b = EhB::new(EH);
    let cie = b.cie();
    for i in 0..8u64 {
        b.fde(cie, 0x1000 + 0x40 * i, 0x40, &PROLOGUE);
    }
    let eh = b.finish();
    for len in 0..eh.len() {
        let _ = run(&eh[..len], &Options::default());
    }
}

#[test]
fn cie_pointer_loops() {
    let mut b = EhB::new(EH);
    let cie = b.cie();
    let fde = b.fde(cie, 0x1000, 0x10, &[]);
    // An FDE whose CIE pointer points at itself, and one pointing at the
    // previous FDE.
    let me = b.bytes.len();
    b.fde(me, 0x2000, 0x10, &[]);
    b.fde(fde, 0x3000, 0x10, &[]);
    let s = stats(&run(&b.finish(), &Options::default()));
    assert!(s.refused(Reason::BadEntry).fdes >= 1);
    assert_eq!(s.sframe_fdes, 1);
}

#[test]
fn overlapping_and_duplicate_fdes() {
    let mut b = EhB::new(EH);
    let cie = b.cie();
    let a = b.fde(cie, 0x1000, 0x40, &[]);
    b.fde(cie, 0x1020, 0x40, &[]);
    b.fde(cie, 0x1000, 0x40, &[]);
    let eh = b.finish();
    let out = run(&eh, &Options::default()).unwrap();
    assert_eq!(out.stats.sframe_fdes, 1);
    assert_eq!(out.stats.refused(Reason::Overlap).fdes, 2);
    // A search table listing one FDE 10,000 times costs one evaluation.
    let table: Vec<(u64, u64)> = (0..10_000).map(|_| (0x1000, EH + a as u64)).collect();
    let hdr_addr = EH + 0x10000;
    let hdr = eh_frame_hdr(hdr_addr, EH, &table);
    let out = synth_mapped(&hdr, hdr_addr, &eh, EH, &Options::default()).unwrap();
    assert_eq!(out.stats.cfi_fdes, 1);
    assert_eq!(out.stats.sframe_fdes, 1);
}

#[test]
fn absurd_addresses_and_lengths() {
    let mut b = EhB::new(EH);
    let cie = b.cie_with(UDATA8, 16, false, &[0x0c, 7, 8, 0x90, 1]);
    b.fde_with(cie, UDATA8, u64::MAX - 4, 0x100, &[]);
    b.fde_with(cie, UDATA8, 0x10_0000, 1 << 40, &[]);
    b.fde_with(cie, UDATA8, 0x1000, 0x10, &[]);
    // V2 starts are 32-bit: a function 4 GiB above the first is refused.
    b.fde_with(cie, UDATA8, 0x1_0000_1000, 0x10, &[]);
    let eh = b.finish();
    let s = stats(&run(&eh, &Options::default()));
    assert_eq!(s.refused(Reason::AddressRange).fdes, 2);
    assert_eq!(s.sframe_fdes, 2);
    let v2 = Options {
        version: Version::V2,
        ..Options::default()
    };
    let s = stats(&run(&eh, &v2));
    assert_eq!(s.sframe_fdes, 1);
    assert_eq!(s.refused(Reason::AddressRange).rows, 1);
}

#[test]
fn huge_advances_and_offsets() {
    let mut b = EhB::new(EH);
    let cie = b.cie();
    // DW_CFA_advance_loc4 0xffffffff, past the FDE's end, then more rows.
    b.fde(
        cie,
        0x1000,
        0x20,
        &[
            0x41, 0x0e, 16, 0x04, 0xff, 0xff, 0xff, 0xff, 0x0e, 24, 0x41, 0x0e, 32,
        ],
    );
    // CFA offset 2^40: refused; rbp saved 2^40 away: refused.
    b.fde(
        cie,
        0x1100,
        0x20,
        &[0x41, 0x0e, 0x80, 0x80, 0x80, 0x80, 0x80, 0x20],
    );
    b.fde(
        cie,
        0x1200,
        0x20,
        &[0x41, 0x86, 0x80, 0x80, 0x80, 0x80, 0x02],
    );
    let s = stats(&run(&b.finish(), &Options::default()));
    assert_eq!(s.refused(Reason::CfaOffset).rows, 1);
    assert_eq!(s.refused(Reason::FpOffset).rows, 1);
    assert_eq!(s.sframe_fdes, 3);
}

#[test]
fn bad_programs() {
    let mut b = EhB::new(EH);
    let cie = b.cie();
    // remember_state past gimli's stack, an unknown opcode, a register
    // rule for register 5000, DW_CFA_def_cfa_offset with no register CFA.
    b.fde(
        cie,
        0x1000,
        0x10,
        &[0x41, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a, 0x0a],
    );
    b.fde(cie, 0x1100, 0x10, &[0x41, 0x0e, 16, 0x41, 0x3f]);
    b.fde(cie, 0x1200, 0x10, &[0x05, 0x88, 0x27, 1]);
    b.fde(cie, 0x1300, 0x10, &[0x0f, 2, 0x77, 8, 0x41, 0x0e, 16]);
    let out = run(&b.finish(), &Options::default()).unwrap();
    // The rows before each error stay.
    assert!(out.stats.sframe_fdes >= 2);
    assert!(out.stats.refused(Reason::BadProgram).rows >= 2);
}

#[test]
fn refusals_are_named() {
    let mut b = EhB::new(EH);
    let cie = b.cie();
    let sig = b.cie_with(0x1b, 16, true, &[0x0c, 7, 8, 0x90, 1]);
    let ra5 = b.cie_with(0x1b, 5, false, &[0x0c, 7, 8, 0x85, 1]);
    // RA saved at CFA-16; CFA in r12 (V3: FLEX); rbp in a register.
    b.fde(cie, 0x1000, 0x10, &[0x41, 0x90, 2]);
    b.fde(cie, 0x1100, 0x10, &[0x41, 0x0c, 12, 0]);
    b.fde(cie, 0x1200, 0x10, &[0x41, 0x09, 6, 3]);
    b.fde(sig, 0x1300, 0x10, &[]);
    b.fde(ra5, 0x1400, 0x10, &[]);
    // A CFA expression nobody knows.
    b.fde(cie, 0x1500, 0x10, &[0x41, 0x0f, 1, 0x96]);
    let eh = b.finish();
    let s = stats(&run(&eh, &Options::default()));
    assert_eq!(s.refused(Reason::RaRule).rows, 1);
    assert_eq!(s.refused(Reason::CfaRegister).rows, 0);
    assert_eq!(s.refused(Reason::FpRule).rows, 1);
    assert_eq!(s.refused(Reason::SignalFrame).rows, 1);
    assert_eq!(s.refused(Reason::RaColumn).fdes, 1);
    assert_eq!(s.refused(Reason::CfaExpression).rows, 1);
    let v2 = Options {
        version: Version::V2,
        ..Options::default()
    };
    let s = stats(&run(&eh, &v2));
    assert_eq!(s.refused(Reason::CfaRegister).rows, 1);
    let names: Vec<_> = s.refusals().map(|(r, _)| r.as_str()).collect();
    assert!(names.contains(&"cfa-register"), "{names:?}");
}

#[test]
fn many_rows_split_and_work_limit() {
    let mut b = EhB::new(EH);
    let cie = b.cie();
    // 3000 rows alternating rsp+16 / rsp+24 (DW_CFA_advance_loc 1).
    let mut prog = Vec::new();
    for i in 0..3000 {
        prog.extend_from_slice(&[0x41, 0x0e, if i % 2 == 0 { 16 } else { 24 }]);
    }
    b.fde(cie, 0x10000, 0x4000, &prog);
    let eh = b.finish();
    let out = run(&eh, &Options::default()).unwrap();
    assert!(out.stats.sframe_fdes >= 3, "{}", out.stats.sframe_fdes);
    let tight = Options {
        max_work: Some(100),
        ..Options::default()
    };
    let out = run(&eh, &tight);
    let s = stats(&out);
    assert!(s.refused(Reason::WorkLimit).rows + s.refused(Reason::WorkLimit).fdes >= 1);
    // A CIE with 10 KiB of instructions shared by 2000 FDEs: the budget
    // charges it once per FDE and stops.
    let mut b = EhB::new(EH);
    let mut big = vec![0x0c, 7, 8, 0x90, 1];
    big.extend(std::iter::repeat(0).take(10_000));
    let cie = b.cie_with(0x1b, 16, false, &big);
    for i in 0..2000u64 {
        b.fde(cie, 0x1000 + 16 * i, 16, &[]);
    }
    let eh = b.finish();
    let start = std::time::Instant::now();
    let s = stats(&synth_mapped(&[], 0, &eh, EH, &Options::default()));
    assert!(start.elapsed().as_secs() < 5);
    assert!(s.work <= 16 * eh.len() as u64 + (1 << 20) + 20_000);
}

/// Random byte flips and cuts of real `.eh_frame` sections (a small
/// deterministic fuzzer, so `cargo test` explores some hostile input even
/// without cargo-fuzz).
#[test]
fn mutated_fixtures() {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for path in common::fixtures("v2") {
        let elf = std::fs::read(&path).unwrap();
        let file = object::File::parse(&*elf).unwrap();
        let eh = file.section_by_name(".eh_frame").unwrap();
        let hdr = file.section_by_name(".eh_frame_hdr").unwrap();
        let (eh_addr, eh) = (eh.address(), eh.data().unwrap().to_vec());
        let (hdr_addr, hdr) = (hdr.address(), hdr.data().unwrap().to_vec());
        for round in 0..300 {
            let mut e = eh.clone();
            let mut h = hdr.clone();
            for _ in 0..(1 + next() % 4) {
                let target = if next() % 4 == 0 { &mut h } else { &mut e };
                if !target.is_empty() {
                    let at = (next() % target.len() as u64) as usize;
                    target[at] ^= 1 << (next() % 8);
                }
            }
            if round % 7 == 0 {
                let cut = (next() % e.len() as u64) as usize;
                e.truncate(cut);
            }
            let use_hdr = round % 2 == 0;
            let h = if use_hdr { &h[..] } else { &[][..] };
            for version in [Version::V3, Version::V2] {
                let opts = Options {
                    version,
                    ..Options::default()
                };
                if let Ok(out) = synth_mapped(h, hdr_addr, &e, eh_addr, &opts) {
                    let s = sframe::Section::parse(&out.section, out.base).unwrap();
                    s.validate(&mut || {}).unwrap();
                }
            }
        }
    }
}

#[test]
fn fdes_outside_the_text_are_refused() {
    let mut b = EhB::new(EH);
    let cie = b.cie();
    b.fde(cie, 0x0, 0x40, &[]);
    b.fde(cie, 0x1000, 0x40, &[]);
    b.fde(cie, 0x1ff0, 0x40, &[]);
    let eh = b.finish();
    let cfi = sframe_synth::CfiSections {
        eh_frame: &eh,
        eh_frame_addr: EH,
        eh_frame_hdr: None,
        text_addr: None,
        exec_range: Some((0x1000, 0x2000)),
    };
    let out = sframe_synth::synth(&cfi, &Options::default()).unwrap();
    assert_eq!(out.stats.refused(Reason::OutsideText).fdes, 2);
    assert_eq!(out.text_range, (0x1000, 0x1040));
}

#[test]
fn relocatable_objects_are_refused() {
    // The ELF header of a fixture, turned into ET_REL.
    let mut elf = std::fs::read(&common::fixtures("v2")[0]).unwrap();
    elf[16] = 1;
    assert_eq!(
        sframe_synth::synth_elf(&elf, &Options::default()).unwrap_err(),
        Error::Relocatable
    );
}
