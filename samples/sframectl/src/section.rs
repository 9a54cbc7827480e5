// SPDX-License-Identifier: GPL-2.0

//! Reading an ELF file and handing its SFrame bytes to the decoder.

use crate::elf::find_sframe;
use crate::elf::SframeLocation;
use anyhow::Context;
use anyhow::Result;
use std::path::Path;

/// An ELF file read into memory, with its SFrame section located.
pub(crate) struct LoadedFile {
    data: Vec<u8>,
    pub(crate) location: SframeLocation,
}

impl LoadedFile {
    /// Reads `path` and locates its SFrame section.
    pub(crate) fn read(path: &Path) -> Result<Self> {
        let data =
            std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        let location = find_sframe(&data).with_context(|| path.display().to_string())?;
        Ok(Self { data, location })
    }

    /// The raw SFrame bytes.
    pub(crate) fn sframe_bytes(&self) -> &[u8] {
        // The range was checked against the file length by `find_sframe`.
        self.data
            .get(self.location.file_range.clone())
            .unwrap_or_default()
    }

    /// Parses the SFrame header (no full validation).
    pub(crate) fn parse(&self) -> Result<sframe::Section<'_>, sframe::Error> {
        sframe::Section::parse(self.sframe_bytes(), self.location.address)
    }

    /// A short description of where the section came from.
    pub(crate) fn describe(&self) -> String {
        format!(
            "{} at {:#x}, {} bytes",
            self.location.source,
            self.location.address,
            self.location.file_range.len()
        )
    }
}
