// SPDX-License-Identifier: GPL-2.0

//! `sframectl synth`: generate an SFrame section from an ELF file's
//! `.eh_frame` and write it as a raw section file.
//!
//! The function starts of the written section are relative to the base
//! address it prints; `sframectl dump --base BASE OUT` reads it back, and
//! a registration uses `sframe_addr` = load bias + base.

use anyhow::Context;
use anyhow::Result;
use sframe_synth::Options;
use sframe_synth::Version;
use std::io::Write;
use std::path::Path;
use std::path::PathBuf;

pub(crate) fn run(path: &Path, output: Option<PathBuf>, v2: bool) -> Result<()> {
    let elf = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let opts = Options {
        version: if v2 { Version::V2 } else { Version::V3 },
        ..Options::default()
    };
    let gen = sframe_synth::synth_elf(&elf, &opts)
        .map_err(anyhow::Error::msg)
        .with_context(|| path.display().to_string())?;
    let output = output.unwrap_or_else(|| {
        let mut name = path.as_os_str().to_owned();
        name.push(".sframe");
        PathBuf::from(name)
    });
    std::fs::write(&output, &gen.section)
        .with_context(|| format!("cannot write {}", output.display()))?;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "{}: wrote {} ({} bytes, base {:#x}: sframectl dump --base {:#x} {})",
        path.display(),
        output.display(),
        gen.section.len(),
        gen.base,
        gen.base,
        output.display()
    )?;
    crate::coverage::print(&mut out, &elf, &gen)?;
    Ok(())
}
