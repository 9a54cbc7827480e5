// SPDX-License-Identifier: GPL-2.0

//! Differential test against GNU as/ld: for every fixture built with
//! `-Wa,--gsframe`, the section generated from its `.eh_frame` must say
//! what its own `.sframe` says at (nearly) every PC, and every difference
//! must fall under a named rule (see `common::compare`).

mod common;

use common::compare;
use common::elf_sframe;
use common::fixtures;
use common::known_rule;
use common::Report;
use sframe::Section;
use sframe::Version;
use sframe_synth::synth_elf;
use sframe_synth::Options;
use sframe_synth::Synthesized;

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
    let mut total = Report::default();
    for dir in dirs {
        for path in fixtures(dir) {
            let elf = std::fs::read(&path).unwrap();
            let (oracle_bytes, oracle_addr) = elf_sframe(&elf).expect("fixture has .sframe");
            let oracle = Section::parse(&oracle_bytes, oracle_addr).unwrap();
            let ours = synth_elf(&elf, &options(version)).unwrap();
            let section = checked(&ours, version);
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
