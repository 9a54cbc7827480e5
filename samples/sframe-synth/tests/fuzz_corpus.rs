// SPDX-License-Identifier: GPL-2.0

//! Replays the committed fuzz corpus through the fuzz target's harness,
//! so `cargo test` catches a regression on any input the fuzzer once found
//! interesting; and (ignored) writes the seed corpus.

mod common;

use common::corpus;
use common::eh::EhB;
use common::harness;
use object::Object;
use object::ObjectSection;
use std::fs;
use std::path::Path;
use std::path::PathBuf;

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/synth")
}

#[test]
fn replay_fuzz_corpus() {
    let entries = corpus::inputs(&corpus_dir());
    let mut seeds_ok = 0;
    for path in &entries {
        let ok = harness::exercise(&fs::read(path).unwrap());
        let seed = path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("seed-");
        seeds_ok += usize::from(ok && seed);
    }
    // The seeds from real objects and the hand-built ones all convert.
    assert!(seeds_ok >= 41, "{seeds_ok} seeds produced a section");
}

const CUT: usize = 4096;

#[test]
#[ignore = "writes the seed corpus; run by hand"]
fn write_seed_corpus() {
    let dir = corpus_dir();
    fs::create_dir_all(&dir).unwrap();
    let mut seeds: Vec<(String, Vec<u8>)> = Vec::new();
    for kind in ["v2", "v3"] {
        for path in common::fixtures(kind) {
            let elf = fs::read(&path).unwrap();
            let file = object::File::parse(&*elf).unwrap();
            let eh = file.section_by_name(".eh_frame").unwrap();
            let hdr = file.section_by_name(".eh_frame_hdr").unwrap();
            let data = eh.data().unwrap();
            let data = &data[..data.len().min(CUT)];
            let hdr_data = hdr.data().unwrap();
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            // The header is placed just below .eh_frame by the harness, as
            // ld places it; its pointers are rebased accordingly.
            let gap = eh.address() - hdr.address();
            let mut h = hdr_data.to_vec();
            h.resize(gap as usize, 0);
            seeds.push((
                format!("{kind}-{name}-hdr"),
                harness::join(false, eh.address(), &h, data),
            ));
            seeds.push((
                format!("{kind}-{name}-walk-v2"),
                harness::join(true, eh.address(), &[], data),
            ));
        }
    }
    // AArch64 fixtures (plain and PAC-signed), through synth_mapped.
    for path in common::aarch64_fixtures() {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if !matches!(
            name.as_str(),
            "chain" | "chain-pac" | "edges-pac" | "libedges.so"
        ) {
            continue;
        }
        let elf = fs::read(&path).unwrap();
        let file = object::File::parse(&*elf).unwrap();
        let eh = file.section_by_name(".eh_frame").unwrap();
        let hdr = file.section_by_name(".eh_frame_hdr").unwrap();
        let data = eh.data().unwrap();
        let data = &data[..data.len().min(CUT)];
        let gap = eh.address() - hdr.address();
        let mut h = hdr.data().unwrap().to_vec();
        h.resize(gap as usize, 0);
        seeds.push((
            format!("aarch64-{name}-hdr"),
            harness::join_aarch64(false, eh.address(), &h, data),
        ));
        seeds.push((
            format!("aarch64-{name}-walk-v2"),
            harness::join_aarch64(true, eh.address(), &[], data),
        ));
    }
    // Hand-built AArch64: signing, PAuth_LR, x30 undefined, in x9.
    let mut b = EhB::new(0x2000);
    let cie = b.cie_aarch64();
    b.fde(
        cie,
        0x1000,
        0x40,
        &[
            0x41, 0x2d, 0x41, 0x0e, 32, 0x9d, 4, 0x9e, 3, 0x41, 0x0d, 29, 0x0a, 0x41, 0xde, 0xdd,
            0x2d, 0x41, 0x0b,
        ],
    );
    b.fde(cie, 0x1100, 0x20, &[0x41, 0x2c, 0x41, 0x0e, 16]);
    b.fde(cie, 0x1200, 0x20, &[0x41, 0x07, 30, 0x41, 0x09, 30, 9]);
    b.fde(
        cie,
        0x1300,
        0x20,
        &[0x41, 0x0e, 16, 0x9d, 2, 0x41, 0x0c, 16, 0],
    );
    let eh = b.finish();
    seeds.push((
        "hand-aarch64-v3".into(),
        harness::join_aarch64(false, 0x2000, &[], &eh),
    ));
    seeds.push((
        "hand-aarch64-v2".into(),
        harness::join_aarch64(true, 0x2000, &[], &eh),
    ));
    // The whole AArch64 ELF, for synth_elf.
    let small = fs::read(common::aarch64_fixture("vla-pac")).unwrap();
    seeds.push((
        "elf-aarch64-vla-pac".into(),
        harness::join_elf(false, &small),
    ));

    // Hand-built: PLT expression, DRAP, signal frame, undefined RA, and a
    // program with every refusal.
    let mut b = EhB::new(0x2000);
    let cie = b.cie();
    let sig = b.cie_with(0x1b, 16, true, &[0x0c, 7, 8, 0x90, 1]);
    b.fde(
        cie,
        0x1020,
        0x40,
        &[
            0x0e, 16, 0x46, 0x0e, 24, 0x4a, 0x0f, 11, 0x77, 8, 0x80, 0, 0x3f, 0x1a, 0x3b, 0x2a,
            0x33, 0x24, 0x22,
        ],
    );
    b.fde(
        cie,
        0x1100,
        0x30,
        &[
            0x45, 0x0c, 10, 0, 0x4c, 0x10, 6, 2, 0x76, 0, 0x41, 0x0f, 3, 0x76, 0x78, 0x06,
        ],
    );
    b.fde(sig, 0x1200, 0x10, &[]);
    b.fde(cie, 0x1300, 0x10, &[0x41, 0x07, 16]);
    b.fde(
        cie,
        0x1400,
        0x10,
        &[0x41, 0x90, 2, 0x41, 0x09, 6, 3, 0x41, 0x0c, 12, 0],
    );
    let eh = b.finish();
    seeds.push(("hand-v3".into(), harness::join(false, 0x2000, &[], &eh)));
    seeds.push(("hand-v2".into(), harness::join(true, 0x2000, &[], &eh)));
    let mut budget = harness::join(false, 0x2000, &[], &eh);
    budget[0] |= 4;
    seeds.push(("hand-budget".into(), budget));
    for (name, input) in seeds {
        assert!(harness::exercise(&input), "{name}");
        fs::write(dir.join(format!("seed-{name}")), input).unwrap();
    }
}
