// SPDX-License-Identifier: GPL-2.0

//! `sframectl` as a user runs it, on the fixtures made by
//! `scripts/sframe-corpus`: `dump --json` has the documented shape and
//! agrees with readelf; `check` accepts real sections and refuses corrupt
//! or unsupported ones with the decoder's precise error.

#[path = "../../../rust/sframe/tests/readelf_common/mod.rs"]
mod readelf_common;

use readelf_common::fixtures;
use readelf_common::parse_readelf;
use readelf_common::sframe_section_info;
use readelf_common::Column;
use readelf_common::Fixture;
use readelf_common::RegName;
use readelf_common::Row;
use readelf_common::SH_SIZE;
use serde_json::Value;
use std::path::Path;
use std::path::PathBuf;
use std::process::Command;
use std::process::Output;

const KINDS: [&str; 3] = ["v2", "v3", "v2-pcrel"];

fn sframectl(args: &[&str], file: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sframectl"))
        .args(args)
        .arg(file)
        .output()
        .expect("running sframectl")
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).unwrap()
}

/// A scratch file for a modified copy of a fixture.
fn scratch(name: &str, data: &[u8]) -> PathBuf {
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    std::fs::write(&path, data).unwrap();
    path
}

fn keys(value: &Value) -> Vec<&str> {
    let mut keys: Vec<&str> = value
        .as_object()
        .expect("a JSON object")
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort();
    keys
}

fn int(value: &Value) -> i64 {
    value
        .as_i64()
        .unwrap_or_else(|| panic!("{value} is not an integer"))
}

/// readelf's register name as `dump --json` spells it.
fn base_name(reg: RegName) -> String {
    match reg.normalise() {
        RegName::Sp => "sp".to_string(),
        RegName::Fp => "fp".to_string(),
        RegName::Dwarf(n) => format!("r{n}"),
    }
}

/// The JSON `*_offset` readelf's column implies: a CFA-relative save slot,
/// where `f` (and a FLEX padding word `U`) mean the header's fixed offset.
fn slot(column: Column, fixed: Option<i8>) -> Value {
    match column {
        Column::AtCfa(offset) => offset.into(),
        Column::Fixed | Column::Padding | Column::Untracked => {
            fixed.map_or(Value::Null, |f| i64::from(f).into())
        }
        Column::Location(_) => Value::Null,
    }
}

fn check_json(fixture: &Fixture) {
    let name = &fixture.name;
    let output = sframectl(&["dump", "--json"], &fixture.path);
    assert!(output.status.success(), "{name}: {}", stderr(&output));
    let json: Value = serde_json::from_str(&stdout(&output)).unwrap();
    let dump = parse_readelf(&fixture.readelf);

    assert_eq!(
        keys(&json),
        [
            "abi",
            "cfa_fixed_fp_offset",
            "cfa_fixed_ra_offset",
            "fdes",
            "flags",
            "version"
        ],
        "{name}"
    );
    assert_eq!(int(&json["version"]), i64::from(dump.version), "{name}");
    assert_eq!(json["flags"], serde_json::json!(dump.flags), "{name}");
    assert_eq!(json["abi"], "amd64-le", "{name}");
    let fixed_ra = dump.cfa_fixed_ra_offset;
    let fixed_fp = dump.cfa_fixed_fp_offset;
    assert_eq!(
        int(&json["cfa_fixed_ra_offset"]),
        i64::from(fixed_ra.unwrap_or(0))
    );
    assert_eq!(
        int(&json["cfa_fixed_fp_offset"]),
        i64::from(fixed_fp.unwrap_or(0))
    );

    let fdes = json["fdes"].as_array().unwrap();
    assert_eq!(fdes.len(), dump.fdes.len(), "{name}: FDEs");
    for (fde, want) in fdes.iter().zip(&dump.fdes) {
        let what = format!("{name}: FDE at {:#x}", want.start);
        assert_eq!(
            keys(fde),
            ["fres", "pc_type", "rep_size", "size", "start"],
            "{what}"
        );
        assert_eq!(int(&fde["start"]), want.start as i64, "{what}");
        assert_eq!(int(&fde["size"]), i64::from(want.size), "{what}");
        let pc_type = if want.pc_mask { "mask" } else { "inc" };
        assert_eq!(fde["pc_type"], pc_type, "{what}");
        let rep_size = int(&fde["rep_size"]);
        if want.pc_mask {
            assert!(
                rep_size > 0 && i64::from(want.size) % rep_size == 0,
                "{what}"
            );
        }
        let fres = fde["fres"].as_array().unwrap();
        assert_eq!(fres.len(), want.fres.len(), "{what}: FREs");
        for (fre, want) in fres.iter().zip(&want.fres) {
            let what = format!("{what}: FRE at {:#x}", want.start);
            assert_eq!(
                keys(fre),
                [
                    "cfa_base",
                    "cfa_offset",
                    "fp_offset",
                    "outermost",
                    "ra_offset",
                    "start"
                ],
                "{what}"
            );
            assert_eq!(int(&fre["start"]), want.start as i64, "{what}");
            match &want.row {
                Row::Outermost => {
                    assert_eq!(fre["outermost"], true, "{what}");
                    assert_eq!(fre["ra_offset"], Value::Null, "{what}");
                }
                Row::Rule { cfa, fp, ra, .. } => {
                    assert_eq!(fre["outermost"], false, "{what}");
                    assert_eq!(fre["cfa_base"], base_name(cfa.reg), "{what}");
                    assert_eq!(int(&fre["cfa_offset"]), i64::from(cfa.offset), "{what}");
                    assert_eq!(fre["ra_offset"], slot(*ra, fixed_ra), "{what}: RA");
                    assert_eq!(fre["fp_offset"], slot(*fp, fixed_fp), "{what}: FP");
                }
            }
        }
    }
}

#[test]
fn dump_json_matches_readelf() {
    for kind in KINDS {
        let all = fixtures(kind);
        assert!(all.len() >= 7, "{kind}");
        all.iter().for_each(check_json);
    }
}

#[test]
fn dump_text_lists_every_fde_and_fre() {
    for kind in KINDS {
        for fixture in fixtures(kind) {
            let output = sframectl(&["dump"], &fixture.path);
            assert!(output.status.success(), "{}", fixture.name);
            let text = stdout(&output);
            let dump = parse_readelf(&fixture.readelf);
            let fdes = text.lines().filter(|l| l.starts_with("  fde ")).count();
            let fres = text.lines().filter(|l| l.starts_with("    0x")).count();
            assert_eq!(fdes as u32, dump.num_fdes, "{}", fixture.name);
            assert_eq!(fres as u32, dump.num_fres, "{}", fixture.name);
            for fde in &dump.fdes {
                assert!(text.contains(&format!("{:#x}..{:#x}", fde.start, fde.end())));
            }
        }
    }
}

#[test]
fn check_accepts_every_fixture() {
    for kind in KINDS {
        for fixture in fixtures(kind) {
            let output = sframectl(&["check"], &fixture.path);
            let name = &fixture.name;
            assert!(output.status.success(), "{name}: {}", stderr(&output));
            let dump = parse_readelf(&fixture.readelf);
            let all = stdout(&output);
            // The validation line, then the generator's coverage report.
            let line = all.lines().next().unwrap_or_default().to_string();
            assert!(
                all.lines()
                    .nth(1)
                    .is_some_and(|l| l.starts_with("generated from .eh_frame: SFrame V3")),
                "{name}: {all}"
            );
            let counts = format!("{} FDEs, {} FREs", dump.num_fdes, dump.num_fres);
            assert!(
                line.contains(&format!("SFrame V{}", dump.version)),
                "{line}"
            );
            assert!(line.contains(&counts), "{name}: {line}");
            let start = dump.fdes.first().unwrap().start;
            let end = dump.fdes.iter().map(|f| f.end()).max().unwrap();
            assert!(
                line.contains(&format!("text {start:#x}..{end:#x}")),
                "{line}"
            );
        }
    }
}

/// Runs `check` on a corrupted copy: it must fail with the decoder's own
/// error for those bytes.
fn assert_check_fails(name: &str, elf: &[u8], expected: Option<sframe::Error>) {
    let info = sframe_section_info(elf);
    let data = &elf[info.offset..info.offset + info.size];
    let error = sframe::Section::parse(data, info.addr)
        .and_then(|section| section.validate(&mut || {}))
        .expect_err("the decoder accepts the corrupted section");
    if let Some(expected) = expected {
        assert_eq!(error, expected, "{name}");
    }
    let path = scratch(name, elf);
    let output = sframectl(&["check"], &path);
    let message = stderr(&output);
    assert!(!output.status.success(), "{name}: check succeeded");
    assert!(stdout(&output).is_empty(), "{name}");
    assert!(
        message.contains(&error.to_string()),
        "{name}: {message:?} lacks {error}"
    );
    assert_eq!(message.lines().count(), 1, "{name}: {message}");
}

#[test]
fn check_rejects_v1() {
    for fixture in fixtures("v1") {
        let output = sframectl(&["check"], &fixture.path);
        assert!(!output.status.success());
        assert!(stderr(&output).contains("unsupported SFrame version"));
        assert_check_fails(
            "v1",
            &fixture.elf,
            Some(sframe::Error::UnsupportedVersion(1)),
        );
    }
}

#[test]
fn check_rejects_corruption() {
    for kind in ["v2", "v3"] {
        let fixture = fixtures(kind)
            .into_iter()
            .find(|f| f.name.ends_with("/chain"))
            .unwrap();
        let info = sframe_section_info(&fixture.elf);
        let at = info.offset;
        let edit = |f: &dyn Fn(&mut Vec<u8>)| {
            let mut copy = fixture.elf.clone();
            f(&mut copy);
            copy
        };

        // The section header claims less than the FDEs and FREs need.
        for size in [0, 27, 28, info.size / 2, info.size - 1] {
            let elf = edit(&|e| {
                let sh_size = info.header_offset + SH_SIZE;
                e[sh_size..sh_size + 8].copy_from_slice(&(size as u64).to_le_bytes());
            });
            assert_check_fails(&format!("{kind}-truncated-{size}"), &elf, None);
        }
        let magic = edit(&|e| e[at] ^= 0xff);
        assert_check_fails(
            &format!("{kind}-magic"),
            &magic,
            Some(sframe::Error::BadMagic),
        );
        let version = edit(&|e| e[at + 2] = 9);
        let unsupported = sframe::Error::UnsupportedVersion(9);
        assert_check_fails(&format!("{kind}-version"), &version, Some(unsupported));
        let abi = edit(&|e| e[at + 4] = 0x7f);
        let unknown = sframe::Error::UnsupportedAbi(0x7f);
        assert_check_fails(&format!("{kind}-abi"), &abi, Some(unknown));
        let num_fdes = edit(&|e| e[at + 8..at + 12].copy_from_slice(&u32::MAX.to_le_bytes()));
        assert_check_fails(&format!("{kind}-num-fdes"), &num_fdes, None);
        let num_fres = edit(&|e| e[at + 12..at + 16].copy_from_slice(&u32::MAX.to_le_bytes()));
        assert_check_fails(&format!("{kind}-num-fres"), &num_fres, None);
    }

    // Two V2 FDEs swapped (section-relative starts stay meaningful).
    let fixture = fixtures("v2")
        .into_iter()
        .find(|f| f.name == "v2/chain")
        .unwrap();
    let fdes = sframe_section_info(&fixture.elf).offset + 28;
    let mut elf = fixture.elf.clone();
    let (first, second) = elf[fdes..fdes + 40].split_at_mut(20);
    first.swap_with_slice(second);
    assert_check_fails("v2-unsorted", &elf, Some(sframe::Error::FdesNotSorted));
}

#[test]
fn check_reports_missing_sframe() {
    // sframectl itself is built by rustc, without SFrame: the generator
    // covers it from .eh_frame.
    let output = sframectl(&["check"], Path::new(env!("CARGO_BIN_EXE_sframectl")));
    assert!(output.status.success(), "{}", stderr(&output));
    let out = stdout(&output);
    assert!(out.contains("no SFrame data"), "{out}");
    assert!(out.contains("generated from .eh_frame: SFrame V3"), "{out}");
    assert!(out.contains("coverage: .text"), "{out}");
    // Neither SFrame nor .eh_frame: an ELF file cut after its header.
    let elf = std::fs::read(env!("CARGO_BIN_EXE_sframectl")).unwrap();
    let output = sframectl(&["check"], &scratch("header-only", &elf[..64]));
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("no SFrame data") || stderr(&output).contains("ELF"),
        "{}",
        stderr(&output)
    );
    let output = sframectl(&["check"], Path::new("/nonexistent"));
    assert!(!output.status.success());
    assert!(stderr(&output).contains("cannot read /nonexistent"));
}

/// Without section headers, the PT_GNU_SFRAME segment is used. Note that
/// ld makes that segment longer than the section (it ends in padding and
/// the next section's bytes), so the decoder must accept trailing bytes.
#[test]
fn check_falls_back_to_program_header() {
    for kind in KINDS {
        for fixture in fixtures(kind) {
            let mut elf = fixture.elf.clone();
            // e_shoff, e_shnum and e_shstrndx: no section headers.
            elf[0x28..0x30].fill(0);
            elf[0x3c..0x40].fill(0);
            let name = format!("{}-no-sections", fixture.name.replace('/', "-"));
            let output = sframectl(&["check"], &scratch(&name, &elf));
            assert!(output.status.success(), "{name}: {}", stderr(&output));
            assert!(stdout(&output).contains("PT_GNU_SFRAME segment"), "{name}");
        }
    }
}

#[test]
fn derive_pcrel_reproduces_the_fixtures() {
    let originals = fixtures("v2");
    for (original, committed) in originals.iter().zip(fixtures("v2-pcrel")) {
        let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("derived");
        let status = Command::new(env!("CARGO_BIN_EXE_sframectl"))
            .arg("derive-pcrel")
            .arg(&original.path)
            .arg(&out)
            .status()
            .unwrap();
        assert!(status.success(), "{}", original.name);
        assert!(
            std::fs::read(&out).unwrap() == committed.elf,
            "{}",
            committed.name
        );
    }
    // Already PC-relative, or V3: refused.
    for fixture in [&fixtures("v2-pcrel")[0], &fixtures("v3")[0]] {
        let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("refused");
        let output = Command::new(env!("CARGO_BIN_EXE_sframectl"))
            .arg("derive-pcrel")
            .arg(&fixture.path)
            .arg(&out)
            .output()
            .unwrap();
        assert!(!output.status.success(), "{}", fixture.name);
    }
}

/// `synth` writes a raw section that `check` and `dump --base` read back,
/// with the same functions as the generator library returns.
#[test]
fn synth_writes_a_raw_section() {
    for kind in ["v2", "v3"] {
        for fixture in fixtures(kind) {
            for v2 in [false, true] {
                let name = format!("{}-synth-{v2}", fixture.name.replace('/', "-"));
                let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(&name);
                let mut cmd = Command::new(env!("CARGO_BIN_EXE_sframectl"));
                cmd.arg("synth").arg(&fixture.path).arg("-o").arg(&out);
                if v2 {
                    cmd.arg("--v2");
                }
                let output = cmd.output().unwrap();
                assert!(output.status.success(), "{name}: {}", stderr(&output));
                let text = stdout(&output);
                let base = text
                    .split("base ")
                    .nth(1)
                    .and_then(|s| s.split(':').next())
                    .expect("base printed");
                let opts = sframe_synth::Options {
                    version: if v2 {
                        sframe::Version::V2
                    } else {
                        sframe::Version::V3
                    },
                    ..Default::default()
                };
                let want = sframe_synth::synth_elf(&fixture.elf, &opts).unwrap();
                assert_eq!(std::fs::read(&out).unwrap(), want.section, "{name}");
                assert_eq!(base, format!("{:#x}", want.base), "{name}");
                let check = sframectl(&["check", "--base", base], &out);
                assert!(check.status.success(), "{name}: {}", stderr(&check));
                let line = stdout(&check);
                assert!(line.contains("raw section file"), "{line}");
                let (lo, hi) = want.text_range;
                assert!(line.contains(&format!("text {lo:#x}..{hi:#x}")), "{line}");
                let dump = sframectl(&["dump", "--json", "--base", base], &out);
                assert!(dump.status.success(), "{name}: {}", stderr(&dump));
                let json: serde_json::Value = serde_json::from_slice(&dump.stdout).unwrap();
                let first = json["fdes"][0]["start"].as_u64().unwrap();
                assert_eq!(first, want.base, "{name}");
            }
        }
    }
}
