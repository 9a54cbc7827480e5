// SPDX-License-Identifier: GPL-2.0

//! Finding the CFI sections of an ELF file image.
//!
//! Section headers first (`.eh_frame`, `.eh_frame_hdr`, `.text`); a file
//! without them (stripped with `sstrip`, or a memory image) is read the
//! way a loader sees it: `PT_GNU_EH_FRAME` gives `.eh_frame_hdr`, which
//! points to `.eh_frame`, which runs at most to the end of the `PT_LOAD`
//! segment holding it.

use crate::cfi;
use crate::Arch;
use crate::CfiSections;
use crate::Error;
use object::elf;
use object::read::elf::ElfFile64;
use object::read::elf::FileHeader;
use object::read::elf::ProgramHeader;
use object::LittleEndian;
use object::Object;
use object::ObjectSection;

/// The CFI sections of the ELF image `data`, at link-time addresses, and
/// its architecture.
pub(crate) fn cfi_sections(data: &[u8]) -> Result<(CfiSections<'_>, Arch), Error> {
    match object::FileKind::parse(data) {
        Ok(object::FileKind::Elf64) => {}
        Ok(_) => return Err(Error::UnsupportedMachine),
        Err(e) => return Err(Error::Elf(e.to_string())),
    }
    let file = ElfFile64::<LittleEndian>::parse(data).map_err(|e| Error::Elf(e.to_string()))?;
    let endian = file.endian();
    let header = file.elf_header();
    if !file.is_little_endian() {
        return Err(Error::UnsupportedMachine);
    }
    let arch = match header.e_machine(endian) {
        elf::EM_X86_64 => Arch::X86_64,
        elf::EM_AARCH64 => Arch::Aarch64,
        _ => return Err(Error::UnsupportedMachine),
    };
    if header.e_type(endian) == elf::ET_REL {
        return Err(Error::Relocatable);
    }
    let phdrs = file.elf_program_headers();
    // The span of the executable segments.
    let exec_range = phdrs
        .iter()
        .filter(|p| p.p_type(endian) == elf::PT_LOAD && p.p_flags(endian) & elf::PF_X != 0)
        .map(|p| {
            let start = p.p_vaddr(endian);
            (start, start.saturating_add(p.p_memsz(endian)))
        })
        .reduce(|a, b| (a.0.min(b.0), a.1.max(b.1)));
    let text_addr = file.section_by_name(".text").map(|s| s.address());
    let hdr = file
        .section_by_name(".eh_frame_hdr")
        .and_then(|s| Some((s.data().ok()?, s.address())))
        .filter(|(d, _)| !d.is_empty());
    if let Some(section) = file.section_by_name(".eh_frame") {
        let bytes = section.data().map_err(|e| Error::Elf(e.to_string()))?;
        if !bytes.is_empty() {
            let sections = CfiSections {
                eh_frame: bytes,
                eh_frame_addr: section.address(),
                eh_frame_hdr: hdr,
                text_addr,
                exec_range,
            };
            return Ok((sections, arch));
        }
    }
    // No section headers: follow the program headers as a loader would.
    let eh = phdrs
        .iter()
        .find(|p| p.p_type(endian) == elf::PT_GNU_EH_FRAME)
        .ok_or(Error::NoEhFrame)?;
    let hdr_bytes = eh.data(endian, data).map_err(|_| Error::BadEhFrameHdr)?;
    let hdr_addr = eh.p_vaddr(endian);
    let eh_frame_addr = cfi::eh_frame_ptr(hdr_bytes, hdr_addr).ok_or(Error::BadEhFrameHdr)?;
    let load = phdrs
        .iter()
        .filter(|p| p.p_type(endian) == elf::PT_LOAD)
        .find(|p| {
            let start = p.p_vaddr(endian);
            let end = start.saturating_add(p.p_filesz(endian));
            (start..end).contains(&eh_frame_addr)
        })
        .ok_or(Error::NoEhFrame)?;
    let segment = load.data(endian, data).map_err(|_| Error::NoEhFrame)?;
    let skip = usize::try_from(eh_frame_addr.saturating_sub(load.p_vaddr(endian)))
        .map_err(|_| Error::NoEhFrame)?;
    let eh_frame = segment.get(skip..).ok_or(Error::NoEhFrame)?;
    let sections = CfiSections {
        eh_frame,
        eh_frame_addr,
        eh_frame_hdr: Some((hdr_bytes, hdr_addr)),
        text_addr,
        exec_range,
    };
    Ok((sections, arch))
}
