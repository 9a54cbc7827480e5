// SPDX-License-Identifier: GPL-2.0

//! Reading a file and handing its SFrame bytes to the decoder: the SFrame
//! section of an ELF file, or a raw section (as `sframectl synth` writes).

use crate::elf::find_sframe;
use crate::elf::SframeLocation;
use anyhow::Context;
use anyhow::Result;
use std::path::Path;

/// The SFrame magic number in either byte order, as a raw section starts.
const SFRAME_MAGIC_LE: [u8; 2] = [0xe2, 0xde];
const SFRAME_MAGIC_BE: [u8; 2] = [0xde, 0xe2];

/// Whether `data` is a raw SFrame section rather than an ELF file.
pub(crate) fn is_raw_section(data: &[u8]) -> bool {
    matches!(data.get(..2), Some(m) if m == SFRAME_MAGIC_LE || m == SFRAME_MAGIC_BE)
}

/// A file read into memory, with its SFrame section located.
pub(crate) struct LoadedFile {
    data: Vec<u8>,
    pub(crate) location: SframeLocation,
}

impl LoadedFile {
    /// Reads `path` and locates its SFrame section. A raw section is
    /// placed at `raw_base` (its function starts are relative to it);
    /// `raw_base` is ignored for ELF files.
    pub(crate) fn read(path: &Path, raw_base: u64) -> Result<Self> {
        let data =
            std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        Self::from_bytes(data, raw_base).with_context(|| path.display().to_string())
    }

    /// As [`LoadedFile::read`], for bytes already read.
    pub(crate) fn from_bytes(data: Vec<u8>, raw_base: u64) -> Result<Self> {
        let location = if is_raw_section(&data) {
            SframeLocation {
                file_range: 0..data.len(),
                address: raw_base,
                source: "raw section file",
            }
        } else {
            find_sframe(&data)?
        };
        Ok(Self { data, location })
    }

    /// The raw SFrame bytes.
    pub(crate) fn sframe_bytes(&self) -> &[u8] {
        // The range was checked against the file length by `find_sframe`.
        self.data
            .get(self.location.file_range.clone())
            .unwrap_or_default()
    }

    /// Whether the file is a raw section rather than an ELF file.
    pub(crate) fn is_raw(&self) -> bool {
        is_raw_section(&self.data)
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
