// SPDX-License-Identifier: GPL-2.0

//! `sframectl check`: full validation with a one-line summary, then, for
//! an ELF file, what the generator would make of its `.eh_frame`.
//!
//! A file without an SFrame section passes if the generator can make one
//! from its `.eh_frame` (that is what a loader using the generator would
//! register); an invalid SFrame section fails before anything else.

use crate::names::abi_name;
use crate::names::version_number;
use crate::section::LoadedFile;
use anyhow::anyhow;
use anyhow::Context;
use anyhow::Result;
use std::io::Write;
use std::path::Path;

pub(crate) fn run(path: &Path, base: u64) -> Result<()> {
    let data = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let loaded = LoadedFile::from_bytes(data.clone(), base);
    let raw = crate::section::is_raw_section(&data);
    let mut out = std::io::stdout().lock();
    match loaded {
        Ok(file) => {
            let line = validate(path, &file)?;
            writeln!(out, "{line}")?;
            if file.is_raw() {
                return Ok(());
            }
        }
        // Not an ELF with SFrame: the generator may still cover it.
        Err(missing) if !raw => {
            return generate_only(&mut out, path, &data, missing);
        }
        Err(err) => return Err(err.context(path.display().to_string())),
    }
    match sframe_synth::synth_elf(&data, &sframe_synth::Options::default()) {
        Ok(gen) => crate::coverage::print(&mut out, &data, &gen)?,
        Err(err) => crate::coverage::print_failure(&mut out, &err)?,
    }
    Ok(())
}

/// No SFrame section: report the generator's section, or fail with both
/// reasons.
fn generate_only(
    out: &mut impl Write,
    path: &Path,
    data: &[u8],
    missing: anyhow::Error,
) -> Result<()> {
    match sframe_synth::synth_elf(data, &sframe_synth::Options::default()) {
        Ok(gen) => {
            writeln!(out, "{}: {missing:#}", path.display())?;
            crate::coverage::print(out, data, &gen)
        }
        Err(err) => Err(anyhow!("{}: {missing:#}; generator: {err}", path.display())),
    }
}

/// Validates the section as the kernel module would; the summary line.
fn validate(path: &Path, file: &LoadedFile) -> Result<String> {
    let invalid = |err: sframe::Error| {
        anyhow!(
            "{}: invalid SFrame data ({}): {err}",
            path.display(),
            file.describe()
        )
    };
    let section = file.parse().map_err(invalid)?;
    section.validate(&mut || {}).map_err(invalid)?;
    let text = match section.text_range().map_err(invalid)? {
        Some((start, end)) => format!("text {start:#x}..{end:#x}"),
        None => "no text".to_string(),
    };
    Ok(format!(
        "{}: ok: SFrame V{} {}, {} FDEs, {} FREs, {text} ({})",
        path.display(),
        version_number(section.version()),
        abi_name(section.abi()),
        section.num_fdes(),
        section.num_fres(),
        file.describe()
    ))
}
