// SPDX-License-Identifier: GPL-2.0

//! Hostile AArch64 `.eh_frame` input: pointer-authentication state
//! misused, PAuth_LR, `x30` undefined and redefined, CFI of the other
//! architecture, absurd alignment factors, and mutated real sections.
//! As for x86-64: no panic, no hang, and whatever is returned is valid.

mod common;

use common::eh::EhB;
use common::harness;
use object::Object;
use object::ObjectSection;
use sframe::RegRule;
use sframe_synth::synth_mapped;
use sframe_synth::Arch;
use sframe_synth::Error;
use sframe_synth::Options;
use sframe_synth::Reason;
use sframe_synth::Synthesized;
use sframe_synth::Version;

const EH: u64 = 0x2000;

fn a64(version: Version) -> Options {
    Options {
        version,
        arch: Arch::Aarch64,
        ..Options::default()
    }
}

fn run(eh: &[u8], opts: &Options) -> Result<Synthesized, Error> {
    for v2 in [false, true] {
        let _ = harness::exercise(&harness::join_aarch64(v2, EH, &[], eh));
        let _ = harness::exercise(&harness::join(v2, EH, &[], eh));
    }
    synth_mapped(&[], 0, eh, EH, opts)
}

fn stats(result: &Result<Synthesized, Error>) -> sframe_synth::Stats {
    match result {
        Ok(out) => out.stats.clone(),
        Err(Error::NothingUsable(s)) => (**s).clone(),
        Err(e) => panic!("unexpected error {e}"),
    }
}

/// GCC's prologue with -mbranch-protection=standard: paciasp (+4),
/// stp x29, x30, [sp, #-32]! (+8), mov x29, sp (+12).
const PAC_PROLOGUE: [u8; 12] = [0x41, 0x2d, 0x41, 0x0e, 32, 0x9d, 4, 0x9e, 3, 0x41, 0x0d, 29];

#[test]
fn pac_function() {
    let mut b = EhB::new(EH);
    let cie = b.cie_aarch64();
    b.fde(cie, 0x1000, 0x40, &PAC_PROLOGUE);
    let eh = b.finish();
    for version in [Version::V3, Version::V2] {
        let out = run(&eh, &a64(version)).unwrap();
        assert_eq!(out.stats.rows_emitted, 4);
        let s = sframe::Section::parse(&out.section, out.base).unwrap();
        assert_eq!(s.abi(), sframe::Abi::Aarch64Le);
        assert_eq!(s.cfa_fixed_ra_offset(), 0);
        let at = |pc| s.find_row(pc).unwrap().unwrap();
        let entry = at(0x1000);
        assert_eq!((entry.cfa.base, entry.cfa.offset), (sframe::Reg::Sp, 0));
        assert_eq!(
            (entry.ra, entry.fp, entry.mangled_ra),
            (RegRule::Unchanged, RegRule::Unchanged, false)
        );
        assert!(at(0x1004).mangled_ra);
        let saved = at(0x1008);
        assert_eq!(
            (saved.ra, saved.fp),
            (RegRule::AtCfa(-24), RegRule::AtCfa(-32))
        );
        assert!(saved.mangled_ra);
        let body = at(0x1030);
        assert_eq!((body.cfa.base, body.cfa.offset), (sframe::Reg::Fp, 32));
    }
    // The same bytes as x86-64 CFI: RA column 30 is not rip.
    let s = stats(&run(&eh, &Options::default()));
    assert_eq!(s.refused(Reason::RaColumn).fdes, 1);
}

#[test]
fn truncated_everywhere() {
    let mut b = EhB::new(EH);
    let cie = b.cie_aarch64();
    for i in 0..8u64 {
        b.fde(cie, 0x1000 + 0x40 * i, 0x40, &PAC_PROLOGUE);
    }
    let eh = b.finish();
    for len in 0..eh.len() {
        for version in [Version::V3, Version::V2] {
            let _ = run(&eh[..len], &a64(version));
        }
    }
}

#[test]
fn ra_sign_state_misused() {
    let mut b = EhB::new(EH);
    let cie = b.cie_aarch64();
    // RA_SIGN_STATE (34) given an ordinary rule: its meaning, and so the
    // RA's, is unknown.
    b.fde(cie, 0x1000, 0x10, &[0x41, 0x05, 34, 1]);
    // ... then negated: gimli refuses the program there.
    b.fde(cie, 0x1100, 0x10, &[0x41, 0x05, 34, 1, 0x41, 0x2d]);
    // Negated many times, and across remember/restore_state.
    let mut many = Vec::new();
    for _ in 0..1000 {
        many.extend_from_slice(&[0x2d, 0x0a, 0x2d, 0x0b]);
    }
    many.extend_from_slice(&[0x41, 0x2d]);
    b.fde(cie, 0x1200, 0x10, &many);
    let out = run(&b.finish(), &a64(Version::V3)).unwrap();
    let s = &out.stats;
    assert_eq!(s.refused(Reason::RaRule).rows, 2);
    assert_eq!(s.refused(Reason::BadProgram).rows, 1);
    let sec = sframe::Section::parse(&out.section, out.base).unwrap();
    // 2000 negations cancel out; one more signs.
    assert!(!sec.find_row(0x1200).unwrap().unwrap().mangled_ra);
    assert!(sec.find_row(0x1204).unwrap().unwrap().mangled_ra);
}

#[test]
fn pauth_lr_is_refused_whole() {
    let mut b = EhB::new(EH);
    let cie = b.cie_aarch64();
    let with_pc_cie = b.cie_aligned(4, 0x1b, 30, false, &[0x0c, 31, 0, 0x2c]);
    b.fde(cie, 0x1000, 0x40, &PAC_PROLOGUE);
    // DW_CFA_AARCH64_negate_ra_state_with_pc after good rows.
    b.fde(
        cie,
        0x1100,
        0x40,
        &[0x41, 0x0e, 16, 0x41, 0x2c, 0x41, 0x0e, 0],
    );
    b.fde(with_pc_cie, 0x1200, 0x40, &[]);
    b.fde(with_pc_cie, 0x1300, 0x40, &[0x41, 0x0e, 16]);
    for version in [Version::V3, Version::V2] {
        let out = run(&b.bytes_with_terminator(), &a64(version)).unwrap();
        let s = &out.stats;
        assert_eq!(s.refused(Reason::PauthLr).fdes, 3);
        assert_eq!(s.sframe_fdes, 1);
        assert_eq!(s.refusal_at(0x1100), Some(Reason::PauthLr));
        let sec = sframe::Section::parse(&out.section, out.base).unwrap();
        assert_eq!(sec.find_row(0x1100).unwrap(), None);
    }
}

#[test]
fn lr_undefined_and_redefined() {
    let mut b = EhB::new(EH);
    let cie = b.cie_aarch64();
    // _start: undefined from +4 to the end.
    b.fde(cie, 0x1000, 0x10, &[0x41, 0x07, 30]);
    // Undefined at +4, saved at +8: "no rule" at +4 is ambiguous.
    b.fde(
        cie,
        0x1100,
        0x10,
        &[0x41, 0x07, 30, 0x41, 0x0e, 16, 0x9e, 2],
    );
    // Undefined inside remembered state, then restored.
    b.fde(cie, 0x1200, 0x10, &[0x0a, 0x41, 0x07, 30, 0x41, 0x0b]);
    // Undefined twice.
    b.fde(cie, 0x1300, 0x10, &[0x07, 30, 0x41, 0x07, 30]);
    // The CIE says it: every row outermost.
    let undef_cie = b.cie_aligned(4, 0x1b, 30, false, &[0x0c, 31, 0, 0x07, 30]);
    b.fde(undef_cie, 0x1400, 0x10, &[0x41, 0x0e, 16]);
    let eh = b.finish();
    let out = run(&eh, &a64(Version::V3)).unwrap();
    let sec = sframe::Section::parse(&out.section, out.base).unwrap();
    let row = |pc| sec.find_row(pc).unwrap();
    assert!(!row(0x1000).unwrap().outermost);
    assert!(row(0x1004).unwrap().outermost);
    assert!(row(0x100c).unwrap().outermost);
    assert_eq!(out.stats.refusal_at(0x1104), Some(Reason::RaRule));
    assert_eq!(row(0x1108).unwrap().ra, RegRule::AtCfa(-16));
    assert_eq!(out.stats.refusal_at(0x1204), Some(Reason::RaRule));
    assert_eq!(out.stats.refusal_at(0x1304), Some(Reason::RaRule));
    assert!(row(0x1400).unwrap().outermost);
    assert!(row(0x1404).unwrap().outermost);
}

#[test]
fn absurd_alignment_and_advances() {
    let mut b = EhB::new(EH);
    // Code alignment 2^62: every advance overflows.
    let huge = b.cie_aligned(1 << 62, 0x1b, 30, false, &[0x0c, 31, 0, 0x07, 30]);
    b.fde(
        huge,
        0x1000,
        0x40,
        &[0x41, 0x2d, 0x7f, 0x07, 30, 0x41, 0x0e, 16],
    );
    let zero = b.cie_aligned(0, 0x1b, 30, false, &[0x0c, 31, 0]);
    b.fde(zero, 0x1100, 0x40, &[0x41, 0x2d, 0x41, 0x07, 30]);
    // DW_CFA_set_loc backwards (absolute pointers are not allowed without
    // an encoding; gimli refuses) and advance_loc4 past the end.
    let cie = b.cie_aarch64();
    b.fde(
        cie,
        0x1200,
        0x40,
        &[0x01, 0, 0, 0, 0, 0x04, 0xff, 0xff, 0xff, 0xff, 0x07, 30],
    );
    let eh = b.finish();
    for version in [Version::V3, Version::V2] {
        let out = run(&eh, &a64(version));
        let s = stats(&out);
        assert!(s.sframe_fdes >= 2, "{version:?}: {s:?}");
    }
}

/// Random byte flips and cuts of the AArch64 fixtures' `.eh_frame` and
/// `.eh_frame_hdr` (as `hostile::mutated_fixtures` for x86-64).
#[test]
fn mutated_fixtures() {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for path in common::aarch64_fixtures() {
        let elf = std::fs::read(&path).unwrap();
        let file = object::File::parse(&*elf).unwrap();
        let eh = file.section_by_name(".eh_frame").unwrap();
        let hdr = file.section_by_name(".eh_frame_hdr").unwrap();
        let (eh_addr, eh) = (eh.address(), eh.data().unwrap().to_vec());
        let (hdr_addr, hdr) = (hdr.address(), hdr.data().unwrap().to_vec());
        for round in 0..150 {
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
            let h = if round % 2 == 0 { &h[..] } else { &[][..] };
            for version in [Version::V3, Version::V2] {
                if let Ok(out) = synth_mapped(h, hdr_addr, &e, eh_addr, &a64(version)) {
                    let s = sframe::Section::parse(&out.section, out.base).unwrap();
                    s.validate(&mut || {}).unwrap();
                }
            }
        }
        // And the whole file, through the harness's ELF path.
        let mut bad = elf.clone();
        for _ in 0..20 {
            let at = (next() % bad.len() as u64) as usize;
            bad[at] ^= 1 << (next() % 8);
            let _ = harness::exercise(&harness::join_elf(false, &bad));
        }
    }
}

#[test]
fn elf_header_picks_the_architecture() {
    let path = common::aarch64_fixture("chain");
    let mut elf = std::fs::read(path).unwrap();
    // Options say x86-64; the ELF header says AArch64, and wins.
    let out = sframe_synth::synth_elf(&elf, &Options::default()).unwrap();
    let s = sframe::Section::parse(&out.section, out.base).unwrap();
    assert_eq!(s.abi(), sframe::Abi::Aarch64Le);
    // EM_RISCV: refused.
    elf[18] = 243;
    elf[19] = 0;
    assert_eq!(
        sframe_synth::synth_elf(&elf, &Options::default()).unwrap_err(),
        Error::UnsupportedMachine
    );
}

/// glibc's `__longjmp`-style CFI: CFA = x0, x29 and x30 saved in the
/// jmp_buf. In V3 a FLEX FRE with three control word and offset pairs,
/// six data words (an encoder once kept only five).
#[test]
fn flex_row_with_ra_and_fp() {
    let mut b = EhB::new(EH);
    let cie = b.cie_aarch64();
    // def_cfa x0, 0; x29 at CFA+80, x30 at CFA+88 (offset_extended_sf).
    b.fde(
        cie,
        0x1000,
        0x40,
        &[0x41, 0x0c, 0, 0, 0x11, 29, 0x76, 0x11, 30, 0x75, 0x41, 0x2d],
    );
    let eh = b.finish();
    let out = run(&eh, &a64(Version::V3)).unwrap();
    let s = sframe::Section::parse(&out.section, out.base).unwrap();
    s.validate(&mut || {}).unwrap();
    for pc in [0x1004, 0x1008] {
        let row = s.find_row(pc).unwrap().unwrap();
        assert_eq!(row.cfa.base, sframe::Reg::Dwarf(0));
        assert_eq!((row.ra, row.fp), (RegRule::AtCfa(88), RegRule::AtCfa(80)));
        assert_eq!(row.mangled_ra, pc == 0x1008);
    }
    let s = stats(&run(&eh, &a64(Version::V2)));
    assert_eq!(s.refused(Reason::CfaRegister).rows, 2);
}
