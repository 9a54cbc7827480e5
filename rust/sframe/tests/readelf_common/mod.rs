// SPDX-License-Identifier: GPL-2.0

//! Shared by the fixture tests: the fixture files, a minimal ELF64 reader to
//! find `.sframe`, and a parser for `readelf --sframe` output (binutils 2.40
//! to 2.47), which is the oracle the decoder is checked against.

// Each test crate that includes this module uses a different part of it.
#![allow(dead_code)]

use std::fs;
use std::path::Path;
use std::path::PathBuf;

/// The fixture directory, `rust/sframe/tests/fixtures`. This file is also
/// compiled into `samples/sframectl`'s tests; both crates sit two levels
/// below the repository root.
pub fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../rust/sframe/tests/fixtures")
}

/// A binary fixture and the readelf dump recorded beside it.
pub struct Fixture {
    /// `v2/chain` and the like, for messages.
    pub name: String,
    pub path: PathBuf,
    pub elf: Vec<u8>,
    pub readelf: String,
}

/// Every fixture of one kind (`v2`, `v3`, `v2-pcrel`, `v1`), sorted by name.
pub fn fixtures(kind: &str) -> Vec<Fixture> {
    let dir = fixtures_dir().join(kind);
    let mut paths: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().map_or(true, |ext| ext != "readelf"))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let file = path.file_name().unwrap().to_string_lossy().into_owned();
            let mut dump = path.clone().into_os_string();
            dump.push(".readelf");
            Fixture {
                name: format!("{kind}/{file}"),
                elf: fs::read(&path).unwrap(),
                readelf: fs::read_to_string(&dump)
                    .unwrap_or_else(|e| panic!("{}: {e}", Path::new(&dump).display())),
                path,
            }
        })
        .collect()
}

/// Where the `.sframe` section of an ELF file is.
pub struct SectionInfo {
    /// File offset of the section header (for tests that edit it).
    pub header_offset: usize,
    /// File offset and size of the contents.
    pub offset: usize,
    pub size: usize,
    /// Load address.
    pub addr: u64,
}

/// Offset of `sh_size` in an ELF64 section header.
pub const SH_SIZE: usize = 0x20;

/// Locates `.sframe` in a little-endian ELF64 file (all fixtures are x86-64).
pub fn sframe_section_info(elf: &[u8]) -> SectionInfo {
    let u16_at = |at: usize| u16::from_le_bytes(elf[at..at + 2].try_into().unwrap());
    let u32_at = |at: usize| u32::from_le_bytes(elf[at..at + 4].try_into().unwrap());
    let u64_at = |at: usize| u64::from_le_bytes(elf[at..at + 8].try_into().unwrap());
    assert_eq!(
        &elf[..6],
        b"\x7fELF\x02\x01",
        "not a little-endian ELF64 file"
    );
    let shoff = u64_at(0x28) as usize;
    let shentsize = u16_at(0x3a) as usize;
    let shnum = u16_at(0x3c) as usize;
    let shstrndx = u16_at(0x3e) as usize;
    let header = |index: usize| shoff + index * shentsize;
    let strtab = u64_at(header(shstrndx) + 0x18) as usize;
    for index in 0..shnum {
        let sh = header(index);
        let name_at = strtab + u32_at(sh) as usize;
        if elf[name_at..].starts_with(b".sframe\0") {
            return SectionInfo {
                header_offset: sh,
                addr: u64_at(sh + 0x10),
                offset: u64_at(sh + 0x18) as usize,
                size: u64_at(sh + SH_SIZE) as usize,
            };
        }
    }
    panic!("no .sframe section");
}

/// The bytes and load address of the `.sframe` section.
pub fn sframe_section(elf: &[u8]) -> (&[u8], u64) {
    let info = sframe_section_info(elf);
    (&elf[info.offset..info.offset + info.size], info.addr)
}

/// Where readelf says a register lives or how the CFA is computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Location {
    /// `sp`, `fp` or a DWARF register number (`r10`); readelf prints AMD64's
    /// DWARF 7 and 6 as `sp` and `fp`, and so does [`RegName::normalise`].
    pub reg: RegName,
    pub offset: i32,
    /// Printed in parentheses: the value is loaded from that address.
    pub deref: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegName {
    Sp,
    Fp,
    Dwarf(u16),
}

impl RegName {
    /// AMD64 DWARF numbering: 6 is %rbp, 7 is %rsp.
    pub fn normalise(self) -> Self {
        match self {
            RegName::Dwarf(6) => RegName::Fp,
            RegName::Dwarf(7) => RegName::Sp,
            other => other,
        }
    }
}

/// The FP or RA column of a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Column {
    /// `u`: not tracked, unchanged from the callee.
    Untracked,
    /// `f`: at the header's fixed offset from the CFA.
    Fixed,
    /// `U`: a padding data word (FLEX FDEs): nothing recorded, so the
    /// ABI default applies.
    Padding,
    /// `c-16`: saved at CFA + offset.
    AtCfa(i32),
    /// `(fp+0)` / `r3+8`: register based (FLEX FDEs).
    Location(Location),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Row {
    /// `RA undefined`: an FRE without offsets, the outermost frame.
    Outermost,
    Rule {
        cfa: Location,
        fp: Column,
        ra: Column,
        /// `[s]`: RA signed (AArch64 pointer authentication).
        mangled_ra: bool,
    },
}

#[derive(Clone, Debug)]
pub struct DumpFre {
    /// Absolute start address; for a PCMASK FDE, the FDE start plus the
    /// offset readelf prints.
    pub start: u64,
    pub row: Row,
}

#[derive(Clone, Debug)]
pub struct DumpFde {
    pub start: u64,
    pub size: u32,
    pub pc_mask: bool,
    /// `attr = "S"`.
    pub signal_frame: bool,
    /// `attr = "F"`.
    pub flex: bool,
    pub pauth_b_key: bool,
    pub fres: Vec<DumpFre>,
}

impl DumpFde {
    pub fn end(&self) -> u64 {
        self.start + u64::from(self.size)
    }
}

#[derive(Clone, Debug)]
pub struct Dump {
    pub version: u8,
    pub flags: Vec<String>,
    pub cfa_fixed_fp_offset: Option<i8>,
    pub cfa_fixed_ra_offset: Option<i8>,
    pub num_fdes: u32,
    pub num_fres: u32,
    pub fdes: Vec<DumpFde>,
}

/// Parses the output of `readelf --sframe` for a file with one section.
pub fn parse_readelf(text: &str) -> Dump {
    let mut dump = Dump {
        version: 0,
        flags: Vec::new(),
        cfa_fixed_fp_offset: None,
        cfa_fixed_ra_offset: None,
        num_fdes: 0,
        num_fres: 0,
        fdes: Vec::new(),
    };
    let mut in_flags = false;
    for (number, line) in text.lines().enumerate() {
        let context = || format!("readelf line {}: {line:?}", number + 1);
        let trimmed = line.trim();
        if let Some(rest) = trimmed.strip_prefix("Version: SFRAME_VERSION_") {
            dump.version = rest.parse().unwrap_or_else(|_| panic!("{}", context()));
            continue;
        }
        if let Some(rest) = trimmed.strip_prefix("Flags:") {
            in_flags = true;
            push_flags(&mut dump.flags, rest);
            continue;
        }
        if in_flags && trimmed.starts_with("SFRAME_F_") {
            push_flags(&mut dump.flags, trimmed);
            continue;
        }
        in_flags = false;
        if let Some(rest) = trimmed.strip_prefix("CFA fixed FP offset:") {
            dump.cfa_fixed_fp_offset = Some(rest.trim().parse().unwrap());
        } else if let Some(rest) = trimmed.strip_prefix("CFA fixed RA offset:") {
            dump.cfa_fixed_ra_offset = Some(rest.trim().parse().unwrap());
        } else if let Some(rest) = trimmed.strip_prefix("Num FDEs:") {
            dump.num_fdes = rest.trim().parse().unwrap();
        } else if let Some(rest) = trimmed.strip_prefix("Num FREs:") {
            dump.num_fres = rest.trim().parse().unwrap();
        } else if trimmed.starts_with("func idx [") {
            dump.fdes
                .push(parse_fde_line(trimmed).unwrap_or_else(|| panic!("{}", context())));
        } else if trimmed.starts_with("STARTPC") {
            let fde = dump
                .fdes
                .last_mut()
                .unwrap_or_else(|| panic!("{}", context()));
            fde.pc_mask = trimmed.starts_with("STARTPC[m]");
        } else if is_fre_line(trimmed) {
            let fde = dump
                .fdes
                .last_mut()
                .unwrap_or_else(|| panic!("{}", context()));
            let fre = parse_fre_line(trimmed, fde).unwrap_or_else(|| panic!("{}", context()));
            fde.fres.push(fre);
        }
    }
    assert!(dump.version != 0, "no version line in readelf output");
    dump
}

fn push_flags(flags: &mut Vec<String>, text: &str) {
    for flag in text.split(',').map(str::trim).filter(|f| !f.is_empty()) {
        if flag != "NONE" {
            flags.push(flag.to_string());
        }
    }
}

/// `func idx [3]: pc = 0x1170, size = 43 bytes, attr = "F"`
fn parse_fde_line(line: &str) -> Option<DumpFde> {
    let rest = line.split_once("pc = 0x")?.1;
    let (pc, rest) = rest.split_once(',')?;
    let size = rest.split_once("size = ")?.1.split_once(" bytes")?.0;
    let attrs = rest
        .split_once("attr = \"")
        .and_then(|(_, a)| a.split_once('"'))
        .map_or("", |(a, _)| a);
    Some(DumpFde {
        start: u64::from_str_radix(pc, 16).ok()?,
        size: size.parse().ok()?,
        pc_mask: false,
        signal_frame: attrs.contains('S'),
        flex: attrs.contains('F'),
        pauth_b_key: rest.contains("pauth = B key"),
        fres: Vec::new(),
    })
}

fn is_fre_line(line: &str) -> bool {
    line.len() > 16 && line.as_bytes()[..16].iter().all(u8::is_ascii_hexdigit)
}

/// `0000000000001183  (fp-8)    (fp+0)    U`; columns may run together when
/// a value is wider than its column (`sp+2999896u`).
fn parse_fre_line(line: &str, fde: &DumpFde) -> Option<DumpFre> {
    let offset = u64::from_str_radix(&line[..16], 16).ok()?;
    let start = if fde.pc_mask {
        fde.start + offset
    } else {
        offset
    };
    let mut rest = line[16..].trim_start();
    if rest.starts_with("RA undefined") {
        return Some(DumpFre {
            start,
            row: Row::Outermost,
        });
    }
    let cfa = parse_location(&mut rest)?;
    rest = rest.trim_start();
    let fp = parse_column(&mut rest)?;
    rest = rest.trim_start();
    let ra = parse_column(&mut rest)?;
    let mangled_ra = rest.starts_with("[s]");
    Some(DumpFre {
        start,
        row: Row::Rule {
            cfa,
            fp,
            ra,
            mangled_ra,
        },
    })
}

fn parse_column(text: &mut &str) -> Option<Column> {
    let first = text.chars().next()?;
    let second = text.chars().nth(1);
    let column = match (first, second) {
        ('c', Some('+' | '-')) => {
            *text = &text[1..];
            return Some(Column::AtCfa(parse_signed(text)?));
        }
        ('u', _) => Column::Untracked,
        ('f', _) => Column::Fixed,
        ('U', _) => Column::Padding,
        _ => return parse_location(text).map(Column::Location),
    };
    *text = &text[1..];
    Some(column)
}

/// `sp+16`, `r10+0`, `(fp-8)`.
fn parse_location(text: &mut &str) -> Option<Location> {
    let deref = text.starts_with('(');
    if deref {
        *text = &text[1..];
    }
    let name_len = text.find(['+', '-'])?;
    let reg = match &text[..name_len] {
        "sp" => RegName::Sp,
        "fp" => RegName::Fp,
        name => RegName::Dwarf(name.strip_prefix('r')?.parse().ok()?),
    };
    *text = &text[name_len..];
    let offset = parse_signed(text)?;
    if deref {
        *text = text.strip_prefix(')')?;
    }
    Some(Location { reg, offset, deref })
}

/// A sign and decimal digits, consumed from the front of `text`.
fn parse_signed(text: &mut &str) -> Option<i32> {
    let digits = text[1..]
        .find(|c: char| !c.is_ascii_digit())
        .map_or(text.len(), |n| n + 1);
    let value = text[..digits].parse().ok()?;
    *text = &text[digits..];
    Some(value)
}
