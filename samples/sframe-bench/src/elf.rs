// SPDX-License-Identifier: GPL-2.0

//! The sections the benchmark reads.

use anyhow::anyhow;
use anyhow::Context;
use anyhow::Result;
use object::Object;
use object::ObjectSection;

pub(crate) struct Sections<'a> {
    pub(crate) sframe: &'a [u8],
    pub(crate) sframe_addr: u64,
    pub(crate) eh_frame: &'a [u8],
    pub(crate) eh_frame_addr: u64,
    pub(crate) eh_frame_hdr: &'a [u8],
    pub(crate) eh_frame_hdr_addr: u64,
    pub(crate) text_addr: u64,
}

/// The bytes and address of section `name` of `file`.
fn section<'a>(file: &object::File<'a>, name: &str) -> Result<(&'a [u8], u64)> {
    let section = file
        .section_by_name(name)
        .ok_or_else(|| anyhow!("no {name} section"))?;
    let bytes = section.data().with_context(|| format!("{name} contents"))?;
    Ok((bytes, section.address()))
}

/// The `.sframe` section of the object file `data`: its bytes and address
/// (for the examples, which read no other section; the benchmark itself
/// reads it through [`Sections::find`]).
#[allow(dead_code)]
pub(crate) fn sframe(data: &[u8]) -> Result<(&[u8], u64)> {
    let file = object::File::parse(data).context("not an object file")?;
    section(&file, ".sframe")
}

impl<'a> Sections<'a> {
    pub(crate) fn find(data: &'a [u8]) -> Result<Self> {
        let file = object::File::parse(data).context("not an object file")?;
        let section = |name: &str| section(&file, name);
        let (sframe, sframe_addr) = section(".sframe")?;
        let (eh_frame, eh_frame_addr) = section(".eh_frame")?;
        let (eh_frame_hdr, eh_frame_hdr_addr) = section(".eh_frame_hdr")?;
        let (_, text_addr) = section(".text")?;
        Ok(Self {
            sframe,
            sframe_addr,
            eh_frame,
            eh_frame_addr,
            eh_frame_hdr,
            eh_frame_hdr_addr,
            text_addr,
        })
    }
}
