// SPDX-License-Identifier: GPL-2.0

//! The DWARF CFI baseline: gimli, binary search in the `.eh_frame_hdr`
//! table built by ld, then the FDE's CFA program run up to the PC.

use crate::elf::Sections;
use crate::Cfa;
use anyhow::anyhow;
use anyhow::Result;
use gimli::BaseAddresses;
use gimli::CfaRule;
use gimli::EhFrame;
use gimli::EhFrameHdr;
use gimli::EndianSlice;
use gimli::LittleEndian;
use gimli::ParsedEhFrameHdr;
use gimli::UnwindContext;
use gimli::UnwindSection;

type Reader<'a> = EndianSlice<'a, LittleEndian>;

pub(crate) struct Table<'a> {
    bases: BaseAddresses,
    eh_frame: EhFrame<Reader<'a>>,
    hdr: ParsedEhFrameHdr<Reader<'a>>,
}

impl<'a> Table<'a> {
    pub(crate) fn new(sections: &Sections<'a>) -> Result<Self> {
        let bases = BaseAddresses::default()
            .set_eh_frame_hdr(sections.eh_frame_hdr_addr)
            .set_eh_frame(sections.eh_frame_addr)
            .set_text(sections.text_addr);
        let hdr = EhFrameHdr::new(sections.eh_frame_hdr, LittleEndian)
            .parse(&bases, 8)
            .map_err(|e| anyhow!(".eh_frame_hdr: {e}"))?;
        if hdr.table().is_none() {
            return Err(anyhow!(".eh_frame_hdr has no search table"));
        }
        Ok(Self {
            bases,
            eh_frame: EhFrame::new(sections.eh_frame, LittleEndian),
            hdr,
        })
    }

    /// Scratch space for the CFA programs, reused across lookups.
    pub(crate) fn context(&self) -> Box<UnwindContext<usize>> {
        Box::new(UnwindContext::new())
    }

    pub(crate) fn find_cfa(&self, context: &mut UnwindContext<usize>, pc: u64) -> Option<Cfa> {
        let table = self.hdr.table()?;
        let row = table
            .unwind_info_for_address(
                &self.eh_frame,
                &self.bases,
                context,
                pc,
                EhFrame::cie_from_offset,
            )
            .ok()?;
        match row.cfa() {
            CfaRule::RegisterAndOffset { register, offset } => Some(Cfa {
                reg: register.0,
                offset: *offset,
            }),
            CfaRule::Expression(_) => None,
        }
    }
}
