// SPDX-License-Identifier: GPL-2.0

//! `sframectl check`: full validation with a one-line summary.

use crate::names::abi_name;
use crate::names::version_number;
use crate::section::LoadedFile;
use anyhow::anyhow;
use anyhow::Result;
use std::path::Path;

pub(crate) fn run(path: &Path) -> Result<()> {
    let file = LoadedFile::read(path)?;
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
    println!(
        "{}: ok: SFrame V{} {}, {} FDEs, {} FREs, {text} ({})",
        path.display(),
        version_number(section.version()),
        abi_name(section.abi()),
        section.num_fdes(),
        section.num_fres(),
        file.describe()
    );
    Ok(())
}
