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

impl<'a> Sections<'a> {
    pub(crate) fn find(data: &'a [u8]) -> Result<Self> {
        let file = object::File::parse(data).context("not an object file")?;
        let section = |name: &str| -> Result<(&'a [u8], u64)> {
            let section = file
                .section_by_name(name)
                .ok_or_else(|| anyhow!("no {name} section"))?;
            let bytes = section.data().with_context(|| format!("{name} contents"))?;
            Ok((bytes, section.address()))
        };
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
