// SPDX-License-Identifier: GPL-2.0

//! Shared by the tests: fixtures, and the per-PC comparison of a generated
//! section with the one GNU as and ld wrote.

#![allow(dead_code)]

#[path = "../../../../rust/sframe/tests/common/corpus.rs"]
pub mod corpus;
pub mod eh;
pub mod harness;

use object::Object;
use object::ObjectSection;
use sframe::RegRule;
use sframe::Row;
use sframe::Section;
use sframe_synth::Reason;
use sframe_synth::Stats;
use std::collections::BTreeMap;
use std::path::Path;
use std::path::PathBuf;

/// `rust/sframe/tests/fixtures`: binaries built with `-Wa,--gsframe`.
pub fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../rust/sframe/tests/fixtures")
}

/// The ELF fixtures of one subdirectory (`v2`, `v3`, ...), sorted.
pub fn fixtures(dir: &str) -> Vec<PathBuf> {
    elf_files(&fixtures_dir().join(dir))
}

/// The AArch64 ELF fixtures GNU as 2.44 made (`aarch64-v2/`: trixie's
/// cross toolchain, SFrame V2; plain and `-pac`), sorted.
pub fn aarch64_fixtures() -> Vec<PathBuf> {
    elf_files(&fixtures_dir().join("aarch64-v2"))
}

/// One of [`aarch64_fixtures`], by name.
pub fn aarch64_fixture(name: &str) -> PathBuf {
    fixtures_dir().join("aarch64-v2").join(name)
}

fn elf_files(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("fixture directory")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().map_or(true, |e| e == "so"))
        .collect();
    out.sort();
    out
}

/// The `.sframe` section of an ELF file and its address.
pub fn elf_sframe(elf: &[u8]) -> Option<(Vec<u8>, u64)> {
    let file = object::File::parse(elf).ok()?;
    let s = file.section_by_name(".sframe")?;
    Some((s.data().ok()?.to_vec(), s.address()))
}

/// The name of the section holding `pc`.
pub fn section_name(elf: &[u8], pc: u64) -> Option<String> {
    let file = object::File::parse(elf).ok()?;
    file.sections()
        .find(|s| (s.address()..s.address() + s.size()).contains(&pc))
        .and_then(|s| s.name().ok().map(str::to_string))
}

/// What a row says, for comparison (the signal frame bit and the FDE's
/// pauth key ignored; the mangled-RA bit compared: always clear on
/// x86-64).
#[derive(Debug, PartialEq, Eq)]
pub enum Rule {
    Outermost,
    Frame {
        cfa: sframe::CfaRule,
        ra: RegRule,
        fp: RegRule,
        mangled_ra: bool,
    },
}

pub fn rule(row: &Row) -> Rule {
    if row.outermost {
        Rule::Outermost
    } else {
        Rule::Frame {
            cfa: row.cfa,
            ra: row.ra,
            fp: row.fp,
            mangled_ra: row.mangled_ra,
        }
    }
}

/// The figures of one comparison.
#[derive(Default, Debug)]
pub struct Report {
    /// PCs the oracle describes.
    pub pcs: u64,
    /// Of those, where the generated section says the same.
    pub agree: u64,
    /// Disagreements by named rule.
    pub explained: BTreeMap<String, u64>,
    /// Disagreements no rule explains (first few, described).
    pub unexplained: Vec<String>,
    pub unexplained_count: u64,
    /// PCs the generated section describes and the oracle does not.
    pub extra: u64,
}

impl Report {
    pub fn add(&mut self, other: &Report) {
        self.pcs += other.pcs;
        self.agree += other.agree;
        for (k, v) in &other.explained {
            *self.explained.entry(k.clone()).or_default() += v;
        }
        self.unexplained.extend(other.unexplained.iter().cloned());
        self.unexplained_count += other.unexplained_count;
        self.extra += other.extra;
    }

    pub fn share(&self) -> f64 {
        if self.pcs == 0 {
            1.0
        } else {
            self.agree as f64 / self.pcs as f64
        }
    }
}

/// Compares `ours` with `oracle` at every PC of every oracle function
/// (AArch64: every instruction, 4 bytes apart).
///
/// Named rules for a disagreement:
/// - `ld-plt-got-sp16`: in `.plt.got`, ld's SFrame says CFA = SP+16, its
///   own `.eh_frame` (and the instruction, `jmp *GOT(%rip)` with the
///   return address at SP) CFA = SP+8.
/// - `as-v2-undefined-ra`: binutils 2.44 (SFrame V2) writes a function
///   with `.cfi_undefined rip` as an ordinary frame; the generator (and
///   binutils 2.46, SFrame V3) marks it outermost.
///   The same for `.cfi_undefined x30` on AArch64 (2.44 writes "CFA =
///   SP, RA in x30").
/// - `refused:<reason>`: the generator left the PC out, for that reason.
pub fn compare(elf: &[u8], oracle: &Section<'_>, ours: &Section<'_>, stats: &Stats) -> Report {
    let mut r = Report::default();
    let step = match oracle.abi() {
        sframe::Abi::Aarch64Le | sframe::Abi::Aarch64Be => 4,
        _ => 1,
    };
    for fde in oracle.fdes() {
        let fde = fde.unwrap();
        for pc in (fde.start..fde.end()).step_by(step) {
            let want = oracle.find_row(pc).unwrap();
            let Some(want) = want else { continue };
            r.pcs += 1;
            let got = ours.find_row(pc).unwrap();
            match got {
                Some(got) if rule(&got) == rule(&want) => r.agree += 1,
                Some(got) => {
                    let section = section_name(elf, pc).unwrap_or_default();
                    let plt_got = section == ".plt.got"
                        && want.cfa.base == sframe::Reg::Sp
                        && want.cfa.offset == 16
                        && got.cfa.base == sframe::Reg::Sp
                        && got.cfa.offset == 8;
                    // binutils 2.44 writes `.cfi_undefined rip` as an
                    // ordinary SP+8 row (2.46 writes "RA undefined").
                    let v2_undefined_ra =
                        oracle.version() == sframe::Version::V2 && got.outermost && !want.outermost;
                    if plt_got {
                        *r.explained.entry("ld-plt-got-sp16".into()).or_default() += 1;
                    } else if v2_undefined_ra {
                        *r.explained.entry("as-v2-undefined-ra".into()).or_default() += 1;
                    } else {
                        r.unexplained_count += 1;
                        if r.unexplained.len() < 20 {
                            r.unexplained
                                .push(format!("{pc:#x} ({section}): as {want:?}, ours {got:?}"));
                        }
                    }
                }
                None => match stats.refusal_at(pc) {
                    Some(reason) => {
                        *r.explained
                            .entry(format!("refused:{}", reason.as_str()))
                            .or_default() += 1
                    }
                    None => {
                        r.unexplained_count += 1;
                        if r.unexplained.len() < 20 {
                            let section = section_name(elf, pc).unwrap_or_default();
                            r.unexplained
                                .push(format!("{pc:#x} ({section}): as {want:?}, ours none"));
                        }
                    }
                },
            }
        }
    }
    for fde in ours.fdes() {
        let fde = fde.unwrap();
        for pc in (fde.start..fde.end()).step_by(step) {
            if oracle.find_row(pc).unwrap().is_none() && ours.find_row(pc).unwrap().is_some() {
                r.extra += 1;
            }
        }
    }
    r
}

/// Every reason mentioned in a report is a known one.
pub fn known_rule(name: &str) -> bool {
    name == "ld-plt-got-sp16"
        || name == "as-v2-undefined-ra"
        || Reason::ALL
            .iter()
            .any(|r| name == format!("refused:{}", r.as_str()))
}
