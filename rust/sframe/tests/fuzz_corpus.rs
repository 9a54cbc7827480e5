// SPDX-License-Identifier: GPL-2.0

//! Replays the committed fuzz corpus through parse + validate + find_row +
//! fres (the fuzz target's own harness), so `cargo test` catches a
//! regression on any input the fuzzer once found interesting.
//!
//! `cargo test -p sframe --test fuzz_corpus -- --ignored write_seed_corpus`
//! (re)writes the seed inputs: the hand-built sections of the unit tests
//! and the `.sframe` sections of the toolchain-made fixtures.

mod common;

use std::fs;
use std::path::{Path, PathBuf};

use common::{corpus, ctl, harness, sample_fdes, FdeB, FreB, SectionB};

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/parse_validate_lookup")
}

#[test]
fn replay_fuzz_corpus() {
    for path in corpus::inputs(&corpus_dir()) {
        let input = fs::read(&path).unwrap();
        harness::exercise(&input);
    }
}

/// `.sframe` bytes and address of a little-endian ELF64 file, if any.
fn elf_sframe(elf: &[u8]) -> Option<(Vec<u8>, u64)> {
    let u16_at = |at: usize| Some(u16::from_le_bytes(elf.get(at..at + 2)?.try_into().ok()?));
    let u32_at = |at: usize| Some(u32::from_le_bytes(elf.get(at..at + 4)?.try_into().ok()?));
    let u64_at = |at: usize| Some(u64::from_le_bytes(elf.get(at..at + 8)?.try_into().ok()?));
    if elf.get(..6)? != b"\x7fELF\x02\x01" {
        return None;
    }
    let shoff = u64_at(0x28)? as usize;
    let shentsize = usize::from(u16_at(0x3a)?);
    let shnum = usize::from(u16_at(0x3c)?);
    let shstrndx = usize::from(u16_at(0x3e)?);
    let strtab = u64_at(shoff + shstrndx * shentsize + 0x18)? as usize;
    for i in 0..shnum {
        let sh = shoff + i * shentsize;
        let name = strtab + u32_at(sh)? as usize;
        if elf.get(name..)?.starts_with(b".sframe\0") {
            let addr = u64_at(sh + 0x10)?;
            let off = u64_at(sh + 0x18)? as usize;
            let size = u64_at(sh + 0x20)? as usize;
            return Some((elf.get(off..off + size)?.to_vec(), addr));
        }
    }
    None
}

#[test]
#[ignore = "writes the seed corpus; run by hand"]
fn write_seed_corpus() {
    let dir = corpus_dir();
    fs::create_dir_all(&dir).unwrap();
    let mut seeds: Vec<(String, Vec<u8>)> = Vec::new();
    let mut add = |name: &str, b: &SectionB| {
        seeds.push((
            name.to_string(),
            harness::join(b.addr, 0x401000, &b.build()),
        ));
    };
    add("v2", &SectionB::v2(0x400238, sample_fdes()));
    add("v2-pcrel", &SectionB::v2_pcrel(0x400238, sample_fdes()));
    add("v3", &SectionB::v3(0x400238, sample_fdes()));
    let mut flex = FdeB::new(
        0x401000,
        0x5f,
        vec![
            FreB::new(0, false, &[ctl(7, false, true), 8]),
            FreB::new(9, false, &[ctl(10, false, true), 0]),
            FreB::new(
                0x18,
                false,
                &[ctl(10, false, true), 0, 0, ctl(6, true, true), 0],
            ),
            FreB::new(
                0x1a,
                false,
                &[ctl(6, true, true), -8, 0, ctl(6, true, true), 0],
            ),
            FreB::new(
                0x30,
                false,
                &[
                    ctl(7, false, true),
                    16,
                    ctl(0, true, false),
                    -16,
                    ctl(3, false, true),
                    8,
                ],
            ),
            FreB::new(0x5e, false, &[]),
        ],
    );
    flex.fde_type = 1;
    flex.signal = true;
    add("v3-flex", &SectionB::v3(0x402048, vec![flex]));
    let mut be = SectionB::v3(
        0x1000,
        vec![FdeB::new(
            0x2000,
            0x300,
            vec![FreB::sp(0, 0), FreB::new(0x104, true, &[0x120, -8, -16])],
        )],
    );
    be.abi = 1;
    be.fixed_ra = 0;
    be.big_endian = true;
    add("v3-aarch64-be", &be);
    let mut s390 = be.clone();
    s390.abi = 4;
    s390.version = 2;
    s390.pcrel = false;
    add("v2-s390x", &s390);
    add("v2-empty", &SectionB::v2(0, vec![]));
    let mut aux = SectionB::v3(0x400238, sample_fdes());
    aux.aux = vec![1, 2, 3];
    add("v3-aux", &aux);
    let mut big = FdeB::new(
        0x10_0000,
        0x2_0000,
        vec![FreB::sp(0, 8), FreB::sp(0x1_8000, 0x12_3456)],
    );
    big.fre_type = 2;
    add("v2-addr4", &SectionB::v2(0, vec![big]));

    // Sections made by real toolchains (written by scripts/sframe-corpus).
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    if let Ok(dirs) = fs::read_dir(&fixtures) {
        for d in dirs.flatten() {
            let Ok(files) = fs::read_dir(d.path()) else {
                continue;
            };
            for f in files.flatten() {
                let Ok(elf) = fs::read(f.path()) else {
                    continue;
                };
                if let Some((data, addr)) = elf_sframe(&elf) {
                    // Keep the seeds small: large sections are cut (the
                    // fuzzer then explores their truncations).
                    let data = &data[..data.len().min(4096)];
                    let name = format!(
                        "fixture-{}-{}",
                        d.file_name().to_string_lossy(),
                        f.file_name().to_string_lossy()
                    );
                    seeds.push((name, harness::join(addr, addr, data)));
                }
            }
        }
    }
    for (name, input) in seeds {
        harness::exercise(&input);
        fs::write(dir.join(format!("seed-{name}")), input).unwrap();
    }
}
