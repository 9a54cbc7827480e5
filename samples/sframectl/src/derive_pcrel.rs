// SPDX-License-Identifier: GPL-2.0

//! `sframectl derive-pcrel` (hidden): make an SFrame V2 section with
//! `SFRAME_F_FDE_FUNC_START_PCREL` out of one without it.
//!
//! Only binutils 2.45 emits that combination and no Debian release ships it,
//! so `scripts/sframe-corpus` derives the fixtures: every FDE's function
//! start, relative to the section start, becomes relative to the address of
//! the FDE's own start field, and the flag is set. The copy must decode to
//! exactly the rows of the original, which is checked before writing.

use crate::section::LoadedFile;
use anyhow::anyhow;
use anyhow::bail;
use anyhow::ensure;
use anyhow::Context;
use anyhow::Result;
use std::path::Path;

const MAGIC: u16 = 0xdee2;
const HEADER_LEN: usize = 28;
const V2_FDE_LEN: usize = 20;
const ABI_AMD64_LE: u8 = 3;
const FLAG_PCREL: u8 = 0x4;

/// Byte offsets of header fields.
const VERSION_AT: usize = 2;
const FLAGS_AT: usize = 3;
const ABI_AT: usize = 4;
const AUXHDR_LEN_AT: usize = 7;
const NUM_FDES_AT: usize = 8;
const FDEOFF_AT: usize = 20;

pub(crate) fn run(input: &Path, output: &Path) -> Result<()> {
    let file = LoadedFile::read(input, 0)?;
    let mut image =
        std::fs::read(input).with_context(|| format!("cannot read {}", input.display()))?;
    let range = file.location.file_range.clone();
    let sframe = image
        .get_mut(range)
        .ok_or_else(|| anyhow!("SFrame range outside the file"))?;
    rewrite_pcrel(sframe).with_context(|| input.display().to_string())?;

    let derived = sframe::Section::parse(sframe, file.location.address)
        .map_err(|err| anyhow!("derived section does not parse: {err}"))?;
    let original = file
        .parse()
        .map_err(|err| anyhow!("original section does not parse: {err}"))?;
    ensure!(
        rows(&original)? == rows(&derived)?,
        "derived section decodes to different rows than the original"
    );

    std::fs::write(output, &image).with_context(|| format!("cannot write {}", output.display()))?;
    let permissions = std::fs::metadata(input)
        .context("reading permissions")?
        .permissions();
    std::fs::set_permissions(output, permissions).context("setting permissions")?;
    Ok(())
}

/// Every FDE and FRE, rendered for comparison.
fn rows(section: &sframe::Section<'_>) -> Result<Vec<String>> {
    section
        .validate(&mut || {})
        .map_err(|err| anyhow!("validation: {err}"))?;
    let mut rows = Vec::new();
    for fde in section.fdes() {
        let fde = fde.map_err(anyhow::Error::msg)?;
        rows.push(format!("{fde:?}"));
        for fre in section.fres(&fde) {
            rows.push(format!("{:?}", fre.map_err(anyhow::Error::msg)?));
        }
    }
    Ok(rows)
}

fn read_u32(bytes: &[u8], at: usize) -> Result<u32> {
    let field = bytes
        .get(at..at.saturating_add(4))
        .and_then(|b| <[u8; 4]>::try_from(b).ok())
        .ok_or_else(|| anyhow!("truncated SFrame section at {at:#x}"))?;
    Ok(u32::from_le_bytes(field))
}

fn byte(bytes: &[u8], at: usize) -> Result<u8> {
    bytes
        .get(at)
        .copied()
        .ok_or_else(|| anyhow!("truncated SFrame header"))
}

fn rewrite_pcrel(sframe: &mut [u8]) -> Result<()> {
    let magic = sframe
        .get(0..2)
        .map(|b| u16::from_le_bytes([b[0], b[1]]))
        .ok_or_else(|| anyhow!("truncated SFrame header"))?;
    ensure!(magic == MAGIC, "not a little-endian SFrame section");
    ensure!(byte(sframe, VERSION_AT)? == 2, "not SFrame V2");
    ensure!(byte(sframe, ABI_AT)? == ABI_AMD64_LE, "not AMD64");
    let flags = byte(sframe, FLAGS_AT)?;
    if flags & FLAG_PCREL != 0 {
        bail!("function starts are already PC-relative");
    }
    let num_fdes = usize::try_from(read_u32(sframe, NUM_FDES_AT)?)?;
    let fdeoff = usize::try_from(read_u32(sframe, FDEOFF_AT)?)?;
    let fde_area = HEADER_LEN
        .checked_add(usize::from(byte(sframe, AUXHDR_LEN_AT)?))
        .and_then(|at| at.checked_add(fdeoff))
        .ok_or_else(|| anyhow!("FDE offset overflows"))?;
    for index in 0..num_fdes {
        let at = index
            .checked_mul(V2_FDE_LEN)
            .and_then(|off| off.checked_add(fde_area))
            .ok_or_else(|| anyhow!("FDE {index} offset overflows"))?;
        // The function start field is the first field of the FDE.
        let start = read_u32(sframe, at)? as i32;
        let field = i32::try_from(at)?;
        let pcrel = start
            .checked_sub(field)
            .ok_or_else(|| anyhow!("FDE {index}: start out of range"))?;
        sframe[at..at + 4].copy_from_slice(&pcrel.to_le_bytes());
    }
    sframe[FLAGS_AT] |= FLAG_PCREL;
    Ok(())
}
