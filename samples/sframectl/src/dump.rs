// SPDX-License-Identifier: GPL-2.0

//! `sframectl dump`: every FDE and FRE, as text or as JSON.
//!
//! The JSON shape is a stable interface for tests and scripts:
//! `{"version", "flags": [...], "abi", "cfa_fixed_fp_offset",
//! "cfa_fixed_ra_offset", "fdes": [{"start", "size", "pc_type", "rep_size",
//! "fres": [{"start", "cfa_base", "cfa_offset", "ra_offset", "fp_offset",
//! "outermost"}]}]}`. Addresses are absolute; a PCMASK FDE's FRE starts at
//! its address in the function's first repetition.

use crate::names::abi_name;
use crate::names::cfa_slot;
use crate::names::flag_names;
use crate::names::pc_type_name;
use crate::names::version_number;
use crate::names::CfaText;
use crate::names::RegName;
use crate::names::RuleText;
use crate::section::LoadedFile;
use anyhow::Context;
use anyhow::Result;
use serde::Serialize;
use sframe::Fde;
use sframe::Fre;
use sframe::Section;
use std::io::Write;
use std::path::Path;

pub(crate) fn run(path: &Path, base: u64, json: bool) -> Result<()> {
    let file = LoadedFile::read(path, base)?;
    let section = file
        .parse()
        .map_err(anyhow::Error::msg)
        .with_context(|| format!("{}: {}", path.display(), file.describe()))?;
    let result = if json {
        print_json(&section)
    } else {
        print_text(path, &file, &section)
    };
    result.with_context(|| format!("{}: {}", path.display(), file.describe()))
}

#[derive(Serialize)]
struct JsonSection {
    version: u8,
    flags: Vec<String>,
    abi: &'static str,
    cfa_fixed_fp_offset: i8,
    cfa_fixed_ra_offset: i8,
    fdes: Vec<JsonFde>,
}

#[derive(Serialize)]
struct JsonFde {
    start: u64,
    size: u32,
    pc_type: &'static str,
    rep_size: u8,
    fres: Vec<JsonFre>,
}

#[derive(Serialize)]
struct JsonFre {
    start: u64,
    cfa_base: String,
    cfa_offset: i32,
    ra_offset: Option<i32>,
    fp_offset: Option<i32>,
    outermost: bool,
}

impl From<&Fre> for JsonFre {
    fn from(fre: &Fre) -> Self {
        let row = &fre.row;
        JsonFre {
            start: fre.start,
            cfa_base: RegName(row.cfa.base).to_string(),
            cfa_offset: row.cfa.offset,
            ra_offset: cfa_slot(row.ra),
            fp_offset: cfa_slot(row.fp),
            outermost: row.outermost,
        }
    }
}

fn decoded<T>(item: Result<T, sframe::Error>) -> Result<T> {
    item.map_err(anyhow::Error::msg)
}

fn print_json(section: &Section<'_>) -> Result<()> {
    let mut fdes = Vec::new();
    for fde in section.fdes() {
        let fde = decoded(fde)?;
        let fres = section
            .fres(&fde)
            .map(|fre| decoded(fre).map(|fre| JsonFre::from(&fre)))
            .collect::<Result<Vec<_>>>()
            .with_context(|| format!("FDE at {:#x}", fde.start))?;
        fdes.push(JsonFde {
            start: fde.start,
            size: fde.size,
            pc_type: pc_type_name(fde.pc_type),
            rep_size: fde.rep_size,
            fres,
        });
    }
    let out = JsonSection {
        version: version_number(section.version()),
        flags: flag_names(section.flags()),
        abi: abi_name(section.abi()),
        cfa_fixed_fp_offset: section.cfa_fixed_fp_offset(),
        cfa_fixed_ra_offset: section.cfa_fixed_ra_offset(),
        fdes,
    };
    let mut stdout = std::io::stdout().lock();
    serde_json::to_writer(&mut stdout, &out).context("writing JSON")?;
    writeln!(stdout).context("writing JSON")?;
    Ok(())
}

fn print_text(path: &Path, file: &LoadedFile, section: &Section<'_>) -> Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{}: {}", path.display(), file.describe())?;
    writeln!(out, "  version: {}", version_number(section.version()))?;
    writeln!(out, "  flags: {}", flag_names(section.flags()).join(" "))?;
    writeln!(out, "  abi: {}", abi_name(section.abi()))?;
    writeln!(
        out,
        "  cfa fixed offsets: fp {}, ra {}",
        section.cfa_fixed_fp_offset(),
        section.cfa_fixed_ra_offset()
    )?;
    writeln!(
        out,
        "  {} FDEs, {} FREs",
        section.num_fdes(),
        section.num_fres()
    )?;
    for (index, fde) in section.fdes().enumerate() {
        let fde = decoded(fde).with_context(|| format!("FDE {index}"))?;
        print_fde(&mut out, index, &fde)?;
        for fre in section.fres(&fde) {
            let fre = decoded(fre).with_context(|| format!("FDE {index} at {:#x}", fde.start))?;
            let row = &fre.row;
            let mut marks = String::new();
            if row.outermost {
                marks.push_str(" outermost");
            }
            if row.signal_frame {
                marks.push_str(" signal");
            }
            if row.mangled_ra {
                marks.push_str(" mangled-ra");
            }
            writeln!(
                out,
                "    {:#018x}  cfa {:<12} ra {:<8} fp {:<8}{marks}",
                fre.start,
                CfaText(row.cfa).to_string(),
                RuleText(row.ra).to_string(),
                RuleText(row.fp).to_string()
            )?;
        }
    }
    Ok(())
}

fn print_fde(out: &mut impl Write, index: usize, fde: &Fde) -> Result<()> {
    let end = fde.start.wrapping_add(u64::from(fde.size));
    write!(
        out,
        "  fde {index}: {:#x}..{end:#x} size {} pc_type {} fres {}",
        fde.start,
        fde.size,
        pc_type_name(fde.pc_type),
        fde.num_fres
    )?;
    if fde.rep_size != 0 {
        write!(out, " rep_size {}", fde.rep_size)?;
    }
    if matches!(fde.fde_type, sframe::FdeType::Flex) {
        write!(out, " flex")?;
    }
    if fde.signal_frame {
        write!(out, " signal")?;
    }
    if fde.pauth_key != 0 {
        write!(out, " pauth-key {}", fde.pauth_key)?;
    }
    writeln!(out)?;
    Ok(())
}
