// SPDX-License-Identifier: GPL-2.0

//! Locating the SFrame section of an ELF file.
//!
//! The `.sframe` section header is the normal source. Stripped files may have
//! lost their section headers, so the `PT_GNU_SFRAME` program header that ld
//! writes for the loader is the fallback.

use anyhow::anyhow;
use anyhow::bail;
use anyhow::Context;
use anyhow::Result;
use object::elf;
use object::read::elf::ElfFile;
use object::read::elf::FileHeader;
use object::read::elf::ProgramHeader;
use object::Endianness;
use object::FileKind;
use object::Object;
use object::ObjectSection;
use std::ops::Range;

/// `PT_GNU_SFRAME` (`PT_LOOS + 0x474e554`), not yet named by `object`.
pub(crate) const PT_GNU_SFRAME: u32 = 0x6474_e554;

/// Where an SFrame section sits in an ELF file.
pub(crate) struct SframeLocation {
    /// Byte range of the section in the file.
    pub(crate) file_range: Range<usize>,
    /// Virtual address the section is loaded at.
    pub(crate) address: u64,
    /// Where the location came from, for messages.
    pub(crate) source: &'static str,
}

/// Finds the SFrame section of the ELF image `data`.
pub(crate) fn find_sframe(data: &[u8]) -> Result<SframeLocation> {
    match FileKind::parse(data).context("not a recognised object file")? {
        FileKind::Elf64 => find_in::<elf::FileHeader64<Endianness>>(data),
        FileKind::Elf32 => find_in::<elf::FileHeader32<Endianness>>(data),
        kind => bail!("not an ELF file ({kind:?})"),
    }
}

fn find_in<H: FileHeader<Endian = Endianness>>(data: &[u8]) -> Result<SframeLocation> {
    let file = ElfFile::<H>::parse(data).context("malformed ELF file")?;
    if let Some(section) = file.section_by_name(".sframe") {
        let (offset, size) = section
            .file_range()
            .ok_or_else(|| anyhow!(".sframe section has no file contents"))?;
        return Ok(SframeLocation {
            file_range: to_range(offset, size, data.len())?,
            address: section.address(),
            source: ".sframe section",
        });
    }
    let endian = file.endian();
    for phdr in file.elf_program_headers() {
        if phdr.p_type(endian) != PT_GNU_SFRAME {
            continue;
        }
        let offset: u64 = phdr.p_offset(endian).into();
        let size: u64 = phdr.p_filesz(endian).into();
        return Ok(SframeLocation {
            file_range: to_range(offset, size, data.len())?,
            address: phdr.p_vaddr(endian).into(),
            source: "PT_GNU_SFRAME segment",
        });
    }
    bail!("no SFrame data: neither a .sframe section nor a PT_GNU_SFRAME program header (was it built with -Wa,--gsframe?)")
}

fn to_range(offset: u64, size: u64, file_len: usize) -> Result<Range<usize>> {
    let start = usize::try_from(offset).context("SFrame offset out of range")?;
    let len = usize::try_from(size).context("SFrame size out of range")?;
    let end = start
        .checked_add(len)
        .filter(|&end| end <= file_len)
        .ok_or_else(|| anyhow!("SFrame data at {offset:#x}+{size:#x} lies outside the file"))?;
    Ok(start..end)
}
