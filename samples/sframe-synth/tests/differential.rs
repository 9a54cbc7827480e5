// SPDX-License-Identifier: GPL-2.0

//! Differential test against GNU as/ld: for every fixture built with
//! `-Wa,--gsframe`, the section generated from its `.eh_frame` must say
//! what its own `.sframe` says at (nearly) every PC, and every difference
//! must fall under a named rule (see `common::compare`).

mod common;

use common::aarch64_fixtures;
use common::compare;
use common::elf_sframe;
use common::fixtures;
use common::known_rule;
use common::Report;
use sframe::Abi;
use sframe::Section;
use sframe::Version;
use sframe_synth::synth_elf;
use sframe_synth::Options;
use sframe_synth::Synthesized;
use std::path::PathBuf;

fn options(version: Version) -> Options {
    Options {
        version,
        ..Options::default()
    }
}

/// The generated section, parsed, validated and of the version asked for.
fn checked(out: &Synthesized, version: Version) -> Section<'_> {
    let section = Section::parse(&out.section, out.base).unwrap();
    section.validate(&mut || {}).unwrap();
    assert_eq!(section.version(), version);
    section
}

fn run(dirs: &[&str], version: Version) -> Report {
    let sets: Vec<(&str, Vec<PathBuf>)> = dirs.iter().map(|d| (*d, fixtures(d))).collect();
    run_sets(&sets, version)
}

fn run_sets(sets: &[(&str, Vec<PathBuf>)], version: Version) -> Report {
    let mut total = Report::default();
    for (dir, paths) in sets {
        for path in paths {
            let elf = std::fs::read(path).unwrap();
            let (oracle_bytes, oracle_addr) = elf_sframe(&elf).expect("fixture has .sframe");
            let oracle = Section::parse(&oracle_bytes, oracle_addr).unwrap();
            let ours = synth_elf(&elf, &options(version)).unwrap();
            let section = checked(&ours, version);
            // The header as GNU as writes it for the ABI (fixed offsets,
            // and the flags of the version written).
            assert_eq!(section.abi(), oracle.abi(), "{}", path.display());
            assert_eq!(
                section.cfa_fixed_ra_offset(),
                oracle.cfa_fixed_ra_offset(),
                "{}",
                path.display()
            );
            assert_eq!(section.cfa_fixed_fp_offset(), 0);
            if version == Version::V2 && oracle.version() == Version::V2 {
                // v2-pcrel's oracles were rewritten to PC-relative starts.
                let want = oracle.flags() & !sframe::FLAG_FDE_FUNC_START_PCREL;
                assert_eq!(section.flags(), want, "{}", path.display());
            }
            let r = compare(&elf, &oracle, &section, &ours.stats);
            println!(
                "{dir}/{}: {} of {} PCs agree ({:.2}%), {:?}, {} more PCs covered; \
                 {} FDEs -> {} SFrame FDEs, {} rows emitted, {} refused",
                path.file_name().unwrap().to_string_lossy(),
                r.agree,
                r.pcs,
                100.0 * r.share(),
                r.explained,
                r.extra,
                ours.stats.cfi_fdes,
                ours.stats.sframe_fdes,
                ours.stats.rows_emitted,
                ours.stats.rows_refused()
            );
            for u in &r.unexplained {
                println!("  unexplained: {u}");
            }
            total.add(&r);
        }
    }
    println!(
        "total ({version:?} output): {} of {} PCs agree ({:.3}%), explained {:?}, \
         unexplained {}, {} PCs covered beyond as",
        total.agree,
        total.pcs,
        100.0 * total.share(),
        total.explained,
        total.unexplained_count,
        total.extra
    );
    total
}

fn check(total: &Report) {
    assert_eq!(total.unexplained_count, 0, "{:#?}", total.unexplained);
    assert!(total.explained.keys().all(|k| known_rule(k)));
    assert!(total.share() >= 0.995, "agreement {:.4}", total.share());
}

/// AArch64 (ABI 2) output against GNU as 2.44's (SFrame V2), row by row
/// at every instruction: CFA base and offset, RA rule (in x30 or at
/// CFA + off), FP rule and the mangled-RA bit. The disagreements, named
/// by `compare`: `as-v2-undefined-ra` (`.cfi_undefined x30`: as 2.44
/// writes an ordinary row, the generator an outermost one) and
/// `refused:signal-frame` (as writes the signal trampoline's CFI as an
/// ordinary function; the kernel unwinder knows `rt_sigreturn` itself).
fn aarch64(version: Version) -> Report {
    let fixtures = aarch64_fixtures();
    assert!(fixtures.len() >= 11, "{} AArch64 fixtures", fixtures.len());
    for path in &fixtures {
        let elf = std::fs::read(path).unwrap();
        let (bytes, addr) = elf_sframe(&elf).unwrap();
        let oracle = Section::parse(&bytes, addr).unwrap();
        assert_eq!(oracle.abi(), Abi::Aarch64Le, "{}", path.display());
    }
    run_sets(&[("aarch64", fixtures)], version)
}

#[test]
fn aarch64_v2_output_matches_gas() {
    check(&aarch64(Version::V2));
}

#[test]
fn aarch64_v3_output_matches_gas() {
    check(&aarch64(Version::V3));
}

/// The PAC-signed fixtures have signed rows, and the generator agrees on
/// them: the mangled-RA bit is compared, not only present.
#[test]
fn aarch64_mangled_rows_are_compared() {
    let mut signed = 0u64;
    for path in aarch64_fixtures() {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let elf = std::fs::read(&path).unwrap();
        let ours = synth_elf(&elf, &options(Version::V2)).unwrap();
        let section = checked(&ours, Version::V2);
        let (bytes, addr) = elf_sframe(&elf).unwrap();
        let oracle = Section::parse(&bytes, addr).unwrap();
        let mut here = 0u64;
        for fde in oracle.fdes() {
            let fde = fde.unwrap();
            for pc in (fde.start..fde.end()).step_by(4) {
                let want = oracle.find_row(pc).unwrap();
                if want.is_some_and(|w| w.mangled_ra) {
                    here += 1;
                    let got = section.find_row(pc).unwrap();
                    assert!(got.is_some_and(|g| g.mangled_ra), "{name} {pc:#x}");
                }
            }
        }
        if name.ends_with("-pac") {
            assert!(here > 0, "{name}: no signed rows");
        }
        signed += here;
    }
    println!("{signed} signed instructions agree");
}

#[test]
fn v3_output_matches_gas() {
    check(&run(&["v2", "v2-pcrel", "v3"], Version::V3));
}

/// V2 output against V2 oracles: V2 cannot describe DRAP realignment, and
/// binutils 2.44 leaves such functions out as the generator does.
#[test]
fn v2_output_matches_gas() {
    check(&run(&["v2", "v2-pcrel"], Version::V2));
}

/// The decoder benchmark's program (12,000 functions, `scripts/bench-decoder`,
/// built in the trixie root: SFrame V2 by binutils 2.44), if it was built:
/// `$SFRAME_SYNTH_LARGE`, else the newest `big-v2-*` in the bench cache.
fn large_object() -> Option<std::path::PathBuf> {
    if let Some(p) = std::env::var_os("SFRAME_SYNTH_LARGE") {
        return Some(p.into());
    }
    let cache = std::env::var_os("SFRAME_CACHE")
        .map(std::path::PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .map(|h| std::path::PathBuf::from(h).join(".cache/sframe-unwind"))
        })?;
    let mut found: Vec<_> = std::fs::read_dir(cache.join("bench"))
        .ok()?
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("big-v2-"))
        .map(|e| e.path())
        .collect();
    found.sort();
    found.pop()
}

#[test]
fn large_object_matches_gas() {
    let Some(path) = large_object() else {
        println!("no large object (run scripts/bench-decoder once): skipped");
        return;
    };
    let elf = std::fs::read(&path).unwrap();
    let (oracle_bytes, oracle_addr) = elf_sframe(&elf).expect(".sframe");
    let oracle = Section::parse(&oracle_bytes, oracle_addr).unwrap();
    for version in [Version::V3, Version::V2] {
        let start = std::time::Instant::now();
        let ours = synth_elf(&elf, &options(version)).unwrap();
        let took = start.elapsed();
        let section = checked(&ours, version);
        let r = compare(&elf, &oracle, &section, &ours.stats);
        println!(
            "{} ({version:?}): {} of {} PCs agree ({:.4}%), {:?}, {} more PCs covered; \
             {} FDEs -> {} SFrame FDEs, {} FREs, {} bytes (as: {} bytes) in {:.1} ms",
            path.display(),
            r.agree,
            r.pcs,
            100.0 * r.share(),
            r.explained,
            r.extra,
            ours.stats.cfi_fdes,
            ours.stats.sframe_fdes,
            ours.stats.sframe_fres,
            ours.section.len(),
            oracle_bytes.len(),
            took.as_secs_f64() * 1e3
        );
        for u in &r.unexplained {
            println!("  unexplained: {u}");
        }
        check(&r);
    }
}

/// The v1 fixture (host binutils 2.40: obsolete SFrame V1, which the
/// decoder refuses) has a usable `.eh_frame`: the generator converts it,
/// though its own `.sframe` cannot serve as the oracle.
#[test]
fn v1_fixture_converts() {
    for path in fixtures("v1") {
        let elf = std::fs::read(&path).unwrap();
        for version in [Version::V3, Version::V2] {
            let out = synth_elf(&elf, &options(version)).unwrap();
            checked(&out, version);
            assert_eq!(out.stats.rows_emitted, out.stats.rows, "{}", path.display());
            println!(
                "{} ({version:?}): {} rows, {} SFrame FDEs",
                path.display(),
                out.stats.rows,
                out.stats.sframe_fdes
            );
        }
    }
}

/// What the edge cases of `edges.c` become, beyond the comparison (gas
/// has no FDE for most of them): glibc's `_start` (crt1.o, whose CFI says
/// `DW_CFA_undefined x30` after its first instruction) ends the stack,
/// PAuth_LR functions are left out whole, `x29` saved without `x30` is
/// refused in V2 and a FLEX row in V3, as is a CFA in x16.
#[test]
fn aarch64_edges() {
    let path = common::aarch64_fixture("edges");
    let elf = std::fs::read(&path).unwrap();
    let file = object::File::parse(&*elf).unwrap();
    let entry = object::Object::entry(&file);
    for version in [Version::V2, Version::V3] {
        let out = synth_elf(&elf, &options(version)).unwrap();
        let section = checked(&out, version);
        let at = |pc: u64| section.find_row(pc).unwrap();
        let first = at(entry).expect("row at _start");
        assert!(!first.outermost && first.ra == sframe::RegRule::Unchanged);
        assert!(at(entry + 4).expect("row at _start + 4").outermost);
        let s = &out.stats;
        assert_eq!(s.refused(sframe_synth::Reason::PauthLr).fdes, 1);
        assert_eq!(s.refused(sframe_synth::Reason::RaRule).rows, 1);
        assert_eq!(s.refused(sframe_synth::Reason::SignalFrame).rows, 1);
        let v2 = version == Version::V2;
        assert_eq!(
            s.refused(sframe_synth::Reason::FpWithoutRa).rows,
            u64::from(v2)
        );
        assert_eq!(
            s.refused(sframe_synth::Reason::CfaRegister).rows,
            u64::from(v2)
        );
        let flex = section
            .fdes()
            .filter(|f| f.unwrap().fde_type == sframe::FdeType::Flex)
            .count();
        assert_eq!(flex, if v2 { 0 } else { 2 }, "{version:?}");
        // a64_fp_only after `str x29, [sp, #-16]!`: RA still in x30 (a
        // padding word), FP at CFA-16.
        let fp_only = section
            .fdes()
            .map(|f| f.unwrap())
            .filter(|f| f.fde_type == sframe::FdeType::Flex)
            .flat_map(|f| section.fres(&f).map(|r| r.unwrap().row).collect::<Vec<_>>())
            .any(|r| r.ra == sframe::RegRule::Unchanged && r.fp == sframe::RegRule::AtCfa(-16));
        assert_eq!(fp_only, !v2);
    }
}
