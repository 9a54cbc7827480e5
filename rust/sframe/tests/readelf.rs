// SPDX-License-Identifier: GPL-2.0

//! The decoder against GNU readelf, on sections made by real toolchains.
//!
//! `scripts/sframe-corpus` builds the programs in `tests/fixtures/src/` with
//! binutils 2.44 (V2), 2.47 (V3) and derives V2 with PC-relative starts;
//! for AArch64 it cross-builds them with the same two toolchains
//! (`aarch64-v2`, `aarch64-v3`), each plain and with
//! `-mbranch-protection=standard`.  Beside each binary it records
//! `readelf --sframe`, from the same binutils.  Every expected value here
//! comes from those dumps, and the ABI from the ELF header.

mod readelf_common;

use readelf_common::fixtures;
use readelf_common::parse_readelf;
use readelf_common::sframe_section;
use readelf_common::Column;
use readelf_common::Dump;
use readelf_common::DumpFde;
use readelf_common::Fixture;
use readelf_common::Location;
use readelf_common::RegName;
use readelf_common::Row as DumpRow;
use sframe::Abi;
use sframe::CfaRule;
use sframe::Fde;
use sframe::FdeType;
use sframe::PcType;
use sframe::Reg;
use sframe::RegRule;
use sframe::Row;
use sframe::Section;
use sframe::Version;

/// Names readelf prints for the header flag bits.
const FLAG_NAMES: [(&str, u8); 3] = [
    ("SFRAME_F_FDE_SORTED", sframe::FLAG_FDE_SORTED),
    ("SFRAME_F_FRAME_POINTER", sframe::FLAG_FRAME_POINTER),
    (
        "SFRAME_F_FDE_FUNC_START_PCREL",
        sframe::FLAG_FDE_FUNC_START_PCREL,
    ),
];

/// Programs every fixture directory must hold.
const PROGRAMS: [&str; 7] = [
    "bigframe",
    "chain",
    "libshape.so",
    "many",
    "realign",
    "shape-user",
    "vla",
];

/// AArch64 programs: the portable ones of `src/` and `edges.c`, each plain
/// and PAC-signed, and `libedges.so`; the V2 set also has `many`.
const AARCH64_PROGRAMS: [&str; 9] = [
    "bigframe",
    "bigframe-pac",
    "chain",
    "chain-pac",
    "edges",
    "edges-pac",
    "libedges.so",
    "vla",
    "vla-pac",
];

/// The ABI the ELF header's machine field names: the section's must match.
fn elf_abi(fixture: &Fixture) -> Abi {
    const EM_X86_64: u16 = 62;
    const EM_AARCH64: u16 = 183;
    match u16::from_le_bytes([fixture.elf[0x12], fixture.elf[0x13]]) {
        EM_X86_64 => Abi::Amd64Le,
        EM_AARCH64 => Abi::Aarch64Le,
        other => panic!("{}: ELF machine {other}", fixture.name),
    }
}

fn section<'a>(fixture: &'a Fixture) -> Section<'a> {
    let (data, addr) = sframe_section(&fixture.elf);
    Section::parse(data, addr).unwrap_or_else(|e| panic!("{}: parse: {e}", fixture.name))
}

fn decoded_fdes(fixture: &Fixture, section: &Section<'_>) -> Vec<Fde> {
    section
        .fdes()
        .collect::<Result<Vec<_>, _>>()
        .unwrap_or_else(|e| panic!("{}: FDE: {e}", fixture.name))
}

fn reg_name(reg: Reg) -> RegName {
    match reg {
        Reg::Sp => RegName::Sp,
        Reg::Fp => RegName::Fp,
        Reg::Dwarf(n) => RegName::Dwarf(n).normalise(),
    }
}

/// A decoder row with registers named as readelf names them.
#[derive(Debug, PartialEq, Eq)]
struct Normalised {
    cfa: Location,
    fp: NormRule,
    ra: NormRule,
    outermost: bool,
    signal_frame: bool,
    mangled_ra: bool,
}

#[derive(Debug, PartialEq, Eq)]
enum NormRule {
    Unchanged,
    Undefined,
    AtCfa(i32),
    /// Saved at, or (`deref` false) equal to, register plus offset.
    Reg(Location),
}

fn norm_rule(rule: RegRule) -> NormRule {
    let at = |reg: Reg, offset: i32, deref: bool| {
        NormRule::Reg(Location {
            reg: reg_name(reg),
            offset,
            deref,
        })
    };
    match rule {
        RegRule::Unchanged => NormRule::Unchanged,
        RegRule::Undefined => NormRule::Undefined,
        RegRule::AtCfa(offset) => NormRule::AtCfa(offset),
        RegRule::InReg(reg) => at(reg, 0, false),
        RegRule::ValReg { reg, offset } => at(reg, offset, false),
        RegRule::AtReg { reg, offset } => at(reg, offset, true),
    }
}

fn normalise(row: &Row) -> Normalised {
    let CfaRule {
        base,
        offset,
        deref,
    } = row.cfa;
    Normalised {
        cfa: Location {
            reg: reg_name(base),
            offset,
            deref,
        },
        fp: norm_rule(row.fp),
        ra: norm_rule(row.ra),
        outermost: row.outermost,
        signal_frame: row.signal_frame,
        mangled_ra: row.mangled_ra,
    }
}

/// What a readelf column means, given the header's fixed offset for it.
/// `f` is the fixed offset; `U` (a FLEX padding word) and `u` leave the
/// default, which is the fixed offset when the ABI has one.
fn expected_rule(column: Column, fixed: Option<i8>) -> NormRule {
    let default = fixed.map_or(NormRule::Unchanged, |o| NormRule::AtCfa(o.into()));
    match column {
        Column::Fixed => NormRule::AtCfa(i32::from(fixed.expect("'f' without a fixed offset"))),
        Column::Padding | Column::Untracked => default,
        Column::AtCfa(offset) => NormRule::AtCfa(offset),
        Column::Location(location) => NormRule::Reg(Location {
            reg: location.reg.normalise(),
            ..location
        }),
    }
}

/// Checks one decoded row against readelf's; `what` names it for messages.
fn check_row(what: &str, dump: &Dump, fde: &DumpFde, expected: &DumpRow, actual: &Row) {
    match expected {
        DumpRow::Outermost => {
            assert!(
                actual.outermost,
                "{what}: readelf says outermost: {actual:?}"
            );
            assert_eq!(actual.ra, RegRule::Undefined, "{what}: outermost RA");
        }
        DumpRow::Rule {
            cfa,
            fp,
            ra,
            mangled_ra,
        } => {
            let expected = Normalised {
                cfa: Location {
                    reg: cfa.reg.normalise(),
                    ..*cfa
                },
                fp: expected_rule(*fp, dump.cfa_fixed_fp_offset),
                ra: expected_rule(*ra, dump.cfa_fixed_ra_offset),
                outermost: false,
                signal_frame: fde.signal_frame,
                mangled_ra: *mangled_ra,
            };
            assert_eq!(normalise(actual), expected, "{what}");
        }
    }
}

fn check_header(fixture: &Fixture, dump: &Dump, section: &Section<'_>) {
    let name = &fixture.name;
    let version = match section.version() {
        Version::V2 => 2,
        Version::V3 => 3,
    };
    assert_eq!(version, dump.version, "{name}: version");
    assert_eq!(section.abi(), elf_abi(fixture), "{name}: ABI");
    let mut flags = 0;
    for flag in &dump.flags {
        let (_, bit) = FLAG_NAMES
            .iter()
            .find(|(n, _)| n == flag)
            .unwrap_or_else(|| panic!("{name}: unknown flag {flag}"));
        flags |= bit;
    }
    assert_eq!(section.flags(), flags, "{name}: flags {:?}", dump.flags);
    assert_eq!(
        section.cfa_fixed_ra_offset(),
        dump.cfa_fixed_ra_offset.unwrap_or(0),
        "{name}: fixed RA offset"
    );
    assert_eq!(
        section.cfa_fixed_fp_offset(),
        dump.cfa_fixed_fp_offset.unwrap_or(0),
        "{name}: fixed FP offset"
    );
    assert_eq!(section.num_fdes(), dump.num_fdes, "{name}: num_fdes");
    assert_eq!(section.num_fres(), dump.num_fres, "{name}: num_fres");
    assert_eq!(
        dump.fdes.len() as u32,
        dump.num_fdes,
        "{name}: readelf FDEs"
    );
    let fres: usize = dump.fdes.iter().map(|f| f.fres.len()).sum();
    assert_eq!(fres as u32, dump.num_fres, "{name}: readelf FREs");
}

fn check_fde(name: &str, index: usize, expected: &DumpFde, fde: &Fde) {
    let what = format!("{name}: FDE {index} at {:#x}", expected.start);
    assert_eq!(fde.start, expected.start, "{what}: start");
    assert_eq!(fde.size, expected.size, "{what}: size");
    let pc_type = if expected.pc_mask {
        PcType::Mask
    } else {
        PcType::Inc
    };
    assert_eq!(fde.pc_type, pc_type, "{what}: pc type");
    let fde_type = if expected.flex {
        FdeType::Flex
    } else {
        FdeType::Default
    };
    assert_eq!(fde.fde_type, fde_type, "{what}: FDE type");
    assert_eq!(fde.signal_frame, expected.signal_frame, "{what}: signal");
    assert_eq!(fde.pauth_key, u8::from(expected.pauth_b_key), "{what}: key");
    assert_eq!(fde.num_fres as usize, expected.fres.len(), "{what}: FREs");
}

/// The decoder agrees with readelf on the header and every FDE and FRE,
/// and the section passes full validation.
fn check_against_readelf(kind: &str) -> usize {
    let all = fixtures(kind);
    let mut rows = 0;
    for fixture in &all {
        let name = &fixture.name;
        let dump = parse_readelf(&fixture.readelf);
        let section = section(fixture);
        section
            .validate(&mut || {})
            .unwrap_or_else(|e| panic!("{name}: validate: {e}"));
        check_header(fixture, &dump, &section);
        let fdes = decoded_fdes(fixture, &section);
        assert_eq!(fdes.len(), dump.fdes.len(), "{name}: FDE count");
        for (index, (fde, expected)) in fdes.iter().zip(&dump.fdes).enumerate() {
            check_fde(name, index, expected, fde);
            let fres = section
                .fres(fde)
                .collect::<Result<Vec<_>, _>>()
                .unwrap_or_else(|e| panic!("{name}: FDE {index}: {e}"));
            assert_eq!(fres.len(), expected.fres.len(), "{name}: FDE {index}");
            for (j, (fre, want)) in fres.iter().zip(&expected.fres).enumerate() {
                let what = format!("{name}: FDE {index} FRE {j} at {:#x}", want.start);
                assert_eq!(fre.start, want.start, "{what}: start");
                check_row(&what, &dump, expected, &want.row, &fre.row);
                rows += 1;
            }
        }
        let text = section.text_range().unwrap();
        let expected_text = dump.fdes.first().map(|first| {
            let end = dump.fdes.iter().map(DumpFde::end).max().unwrap();
            (first.start, end)
        });
        assert_eq!(text, expected_text, "{name}: text range");
    }
    rows
}

/// Half-open PC ranges where each FRE of `fde` applies, with the FRE index.
fn fre_ranges(fde: &DumpFde, rep_size: u64) -> Vec<(u64, u64, usize)> {
    let offsets: Vec<u64> = fde.fres.iter().map(|f| f.start - fde.start).collect();
    let block = |base: u64, end: u64| -> Vec<(u64, u64, usize)> {
        (0..offsets.len())
            .map(|j| {
                let hi = offsets.get(j + 1).map_or(end, |next| base + next);
                (base + offsets[j], hi, j)
            })
            .collect()
    };
    if !fde.pc_mask {
        return block(fde.start, fde.end());
    }
    assert!(rep_size > 0 && u64::from(fde.size) % rep_size == 0);
    (fde.start..fde.end())
        .step_by(rep_size as usize)
        .flat_map(|base| block(base, base + rep_size))
        .collect()
}

/// Lookups at every FRE boundary, inside every FRE's range, and around
/// every function return readelf's row, or nothing outside all functions.
fn check_lookups(kind: &str) -> usize {
    let mut lookups = 0;
    for fixture in &fixtures(kind) {
        let name = &fixture.name;
        let dump = parse_readelf(&fixture.readelf);
        let section = section(fixture);
        let fdes = decoded_fdes(fixture, &section);
        for (index, (fde, expected)) in fdes.iter().zip(&dump.fdes).enumerate() {
            for (lo, hi, j) in fre_ranges(expected, u64::from(fde.rep_size)) {
                assert!(lo < hi, "{name}: FDE {index} FRE {j}: empty range");
                for pc in [lo, lo + (hi - lo) / 2, hi - 1] {
                    let what = format!("{name}: lookup {pc:#x} (FDE {index} FRE {j})");
                    let row = section
                        .find_row(pc)
                        .unwrap_or_else(|e| panic!("{what}: {e}"))
                        .unwrap_or_else(|| panic!("{what}: no row"));
                    check_row(&what, &dump, expected, &expected.fres[j].row, &row);
                    lookups += 1;
                }
            }
        }
        let mut outside = vec![0, u64::MAX];
        for pair in dump.fdes.windows(2) {
            outside.extend([pair[0].end(), pair[1].start.wrapping_sub(1)]);
        }
        if let (Some(first), Some(last)) = (dump.fdes.first(), dump.fdes.last()) {
            outside.extend([first.start - 1, last.end()]);
        }
        for pc in outside {
            let covered = dump.fdes.iter().any(|f| (f.start..f.end()).contains(&pc));
            if !covered {
                let row = section.find_row(pc);
                assert_eq!(row, Ok(None), "{name}: lookup {pc:#x} outside functions");
                lookups += 1;
            }
        }
    }
    lookups
}

#[test]
fn corpus_is_complete() {
    for kind in ["v2", "v3", "v2-pcrel"] {
        let names: Vec<String> = fixtures(kind)
            .iter()
            .map(|f| f.name.trim_start_matches(&format!("{kind}/")).to_string())
            .collect();
        assert_eq!(names, PROGRAMS, "{kind}: fixture set");
    }
    // The shapes the corpus exists for, as readelf sees them.
    let dumps: Vec<(String, Dump)> = ["v2", "v3"]
        .iter()
        .flat_map(|kind| fixtures(kind))
        .map(|f| (f.name.clone(), parse_readelf(&f.readelf)))
        .collect();
    let rows = || {
        dumps
            .iter()
            .flat_map(|(_, d)| d.fdes.iter().flat_map(|f| f.fres.iter().map(|r| &r.row)))
    };
    let cfa_offsets = || {
        rows().filter_map(|row| match row {
            DumpRow::Rule { cfa, .. } => Some(cfa.offset),
            DumpRow::Outermost => None,
        })
    };
    assert!(
        cfa_offsets().any(|o| o > 127 && o <= 32767),
        "2-byte offsets"
    );
    assert!(cfa_offsets().any(|o| o > 32767), "4-byte offsets");
    assert!(
        rows().any(|r| matches!(r, DumpRow::Rule { cfa, .. } if cfa.reg == RegName::Fp)),
        "FP-based CFA"
    );
    assert!(rows().any(|r| *r == DumpRow::Outermost), "outermost FRE");
    let fdes = || dumps.iter().flat_map(|(_, d)| d.fdes.iter());
    assert!(fdes().any(|f| f.pc_mask), "PCMASK FDE");
    assert!(fdes().any(|f| f.flex), "FLEX FDE");
    assert!(fdes().any(|f| f.signal_frame), "signal frame FDE");
    assert!(fdes().count() > 600, "many functions");
    let (_, many) = dumps.iter().find(|(n, _)| n == "v2/many").unwrap();
    assert!(
        many.fdes.len() >= 300,
        "v2/many has {} FDEs",
        many.fdes.len()
    );
}

/// The AArch64 corpus has the shapes the decoder must read there: RA and
/// FP saved at CFA offsets the rows track (no fixed offsets in the
/// header), RA still in the link register under a non-zero CFA offset,
/// signed return addresses in exactly the PAC builds (and `edges`, whose
/// assembly signs by hand), FP-based CFAs, 2- and 4-byte offsets, and in
/// V3 an outermost frame and a signal frame.
#[test]
fn aarch64_corpus_is_complete() {
    for kind in ["aarch64-v2", "aarch64-v3"] {
        let all = fixtures(kind);
        let names: Vec<String> = all
            .iter()
            .map(|f| f.name.trim_start_matches(&format!("{kind}/")).to_string())
            .collect();
        let mut expected: Vec<&str> = AARCH64_PROGRAMS.to_vec();
        if kind == "aarch64-v2" {
            expected.extend(["many", "many-pac"]);
            expected.sort_unstable();
        }
        assert_eq!(names, expected, "{kind}: fixture set");
        let dumps: Vec<(&str, Dump)> = all
            .iter()
            .zip(&names)
            .map(|(f, n)| (n.as_str(), parse_readelf(&f.readelf)))
            .collect();
        let rules = |dump: &Dump| -> Vec<(Location, Column, Column, bool)> {
            dump.fdes
                .iter()
                .flat_map(|f| f.fres.iter())
                .filter_map(|fre| match fre.row {
                    DumpRow::Rule {
                        cfa,
                        fp,
                        ra,
                        mangled_ra,
                    } => Some((cfa, fp, ra, mangled_ra)),
                    DumpRow::Outermost => None,
                })
                .collect()
        };
        for (name, dump) in &dumps {
            assert_eq!(dump.cfa_fixed_ra_offset, None, "{kind}/{name}: fixed RA");
            assert_eq!(dump.cfa_fixed_fp_offset, None, "{kind}/{name}: fixed FP");
            let signed = rules(dump).iter().filter(|r| r.3).count();
            let hand_signed = name.starts_with("edges") || name.starts_with("libedges");
            if name.ends_with("-pac") || hand_signed {
                assert!(signed > 0, "{kind}/{name}: no signed rows");
            } else {
                assert_eq!(signed, 0, "{kind}/{name}: signed rows");
            }
        }
        let rows: Vec<_> = dumps.iter().flat_map(|(_, d)| rules(d)).collect();
        assert!(
            rows.iter().any(|r| matches!(r.2, Column::AtCfa(_)) && r.3),
            "{kind}: signed RA saved at the CFA"
        );
        assert!(
            rows.iter()
                .any(|r| matches!(r.2, Column::AtCfa(_)) && !r.3 && r.1 == Column::Untracked),
            "{kind}: RA saved without FP"
        );
        assert!(
            rows.iter()
                .any(|r| matches!((r.1, r.2), (Column::AtCfa(fp), Column::AtCfa(ra)) if fp != ra)),
            "{kind}: frame record saved"
        );
        assert!(
            rows.iter()
                .any(|r| r.2 == Column::Untracked && r.0.offset > 0 && !r.3),
            "{kind}: RA in the link register under a frame"
        );
        assert!(
            rows.iter().any(|r| r.0.reg == RegName::Fp),
            "{kind}: FP-based CFA"
        );
        let offsets = || rows.iter().map(|r| r.0.offset);
        assert!(offsets().any(|o| o > 127 && o <= 32767), "{kind}: 2-byte");
        assert!(offsets().any(|o| o > 32767), "{kind}: 4-byte");
        let fdes = || dumps.iter().flat_map(|(_, d)| d.fdes.iter());
        let outermost = fdes()
            .flat_map(|f| f.fres.iter())
            .any(|fre| fre.row == DumpRow::Outermost);
        let signal = fdes().any(|f| f.signal_frame);
        let v3 = kind == "aarch64-v3";
        // GNU as 2.44 writes `.cfi_undefined x30` and the signal trampoline
        // as ordinary rows; 2.47 as what they are.
        assert_eq!(outermost, v3, "{kind}: outermost FRE");
        assert_eq!(signal, v3, "{kind}: signal frame FDE");
    }
}

#[test]
fn v2_matches_readelf() {
    assert!(check_against_readelf("v2") >= 700);
}

#[test]
fn v3_matches_readelf() {
    assert!(check_against_readelf("v3") >= 700);
}

#[test]
fn v2_pcrel_matches_readelf() {
    assert!(check_against_readelf("v2-pcrel") >= 700);
}

#[test]
fn v2_lookups_match_readelf() {
    assert!(check_lookups("v2") >= 2100);
}

#[test]
fn v3_lookups_match_readelf() {
    assert!(check_lookups("v3") >= 2100);
}

#[test]
fn v2_pcrel_lookups_match_readelf() {
    assert!(check_lookups("v2-pcrel") >= 2100);
}

#[test]
fn aarch64_v2_matches_readelf() {
    assert!(check_against_readelf("aarch64-v2") >= 2000);
}

#[test]
fn aarch64_v3_matches_readelf() {
    assert!(check_against_readelf("aarch64-v3") >= 220);
}

#[test]
fn aarch64_v2_lookups_match_readelf() {
    assert!(check_lookups("aarch64-v2") >= 6000);
}

#[test]
fn aarch64_v3_lookups_match_readelf() {
    assert!(check_lookups("aarch64-v3") >= 680);
}

/// The derived PC-relative sections decode to exactly the FDEs and rows of
/// the sections they were derived from, and differ only in the flag.
#[test]
fn v2_pcrel_decodes_like_v2() {
    let originals = fixtures("v2");
    let derived = fixtures("v2-pcrel");
    assert_eq!(originals.len(), derived.len());
    for (original, pcrel) in originals.iter().zip(&derived) {
        let (a, b) = (section(original), section(pcrel));
        assert_eq!(a.flags() & sframe::FLAG_FDE_FUNC_START_PCREL, 0);
        assert_eq!(
            b.flags(),
            a.flags() | sframe::FLAG_FDE_FUNC_START_PCREL,
            "{}",
            pcrel.name
        );
        let (fdes_a, fdes_b) = (decoded_fdes(original, &a), decoded_fdes(pcrel, &b));
        assert_eq!(fdes_a, fdes_b, "{}", pcrel.name);
        for fde in &fdes_a {
            let fres_a: Vec<_> = a.fres(fde).collect();
            let fres_b: Vec<_> = b.fres(fde).collect();
            assert_eq!(fres_a, fres_b, "{}: FDE at {:#x}", pcrel.name, fde.start);
            for pc in fde.start..fde.end() {
                assert_eq!(a.find_row(pc), b.find_row(pc), "{}: {pc:#x}", pcrel.name);
            }
        }
        // The raw function start fields did change.
        let (raw_a, _) = sframe_section(&original.elf);
        let (raw_b, _) = sframe_section(&pcrel.elf);
        assert_ne!(raw_a, raw_b, "{}: section unchanged", pcrel.name);
    }
}

/// Binutils 2.40's obsolete V1 is refused, by version, before anything else.
#[test]
fn v1_is_rejected() {
    let all = fixtures("v1");
    assert!(!all.is_empty());
    for fixture in &all {
        assert!(fixture.readelf.contains("SFRAME_VERSION_1"));
        let (data, addr) = sframe_section(&fixture.elf);
        assert_eq!(
            Section::parse(data, addr).err(),
            Some(sframe::Error::UnsupportedVersion(1)),
            "{}",
            fixture.name
        );
    }
}
