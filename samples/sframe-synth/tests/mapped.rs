// SPDX-License-Identifier: GPL-2.0

//! The mapped-object path, as the audit library will use it: each fixture
//! is "loaded" at a bias (its PT_LOAD segments copied into a buffer),
//! `.eh_frame_hdr` found through PT_GNU_EH_FRAME, `.eh_frame` through the
//! header's pointer and bounded by its PT_LOAD segment. The section must be
//! the one `synth_elf` makes from the file, placed at base + bias.

mod common;

use object::read::elf::ElfFile64;
use object::read::elf::FileHeader;
use object::read::elf::ProgramHeader;
use object::LittleEndian;
use sframe_synth::eh_frame_address;
use sframe_synth::synth_elf;
use sframe_synth::synth_mapped;
use sframe_synth::Options;
use sframe_synth::Version;

const BIAS: u64 = 0x7f12_3456_0000;

struct Image {
    /// The segments at their link-time addresses (index = vaddr).
    mem: Vec<u8>,
    /// PT_GNU_EH_FRAME: vaddr, memsz.
    eh_hdr: (u64, u64),
    /// PT_LOAD segments: vaddr, memsz.
    loads: Vec<(u64, u64)>,
}

fn load(elf: &[u8]) -> Image {
    let file = ElfFile64::<LittleEndian>::parse(elf).unwrap();
    let e = file.endian();
    let mut img = Image {
        mem: Vec::new(),
        eh_hdr: (0, 0),
        loads: Vec::new(),
    };
    for p in file.elf_header().program_headers(e, elf).unwrap() {
        let (vaddr, memsz) = (p.p_vaddr(e), p.p_memsz(e));
        match p.p_type(e) {
            object::elf::PT_LOAD => {
                let end = (vaddr + memsz) as usize;
                if img.mem.len() < end {
                    img.mem.resize(end, 0);
                }
                let data = p.data(e, elf).unwrap();
                img.mem[vaddr as usize..vaddr as usize + data.len()].copy_from_slice(data);
                img.loads.push((vaddr, memsz));
            }
            object::elf::PT_GNU_EH_FRAME => img.eh_hdr = (vaddr, memsz),
            _ => {}
        }
    }
    img
}

#[test]
fn mapped_objects_give_the_files_section() {
    for kind in ["v2", "v3"] {
        for path in common::fixtures(kind) {
            let elf = std::fs::read(&path).unwrap();
            let img = load(&elf);
            let (hv, hs) = img.eh_hdr;
            let hdr = &img.mem[hv as usize..(hv + hs) as usize];
            // Run-time addresses: everything shifted by the load bias.
            let eh_addr = eh_frame_address(hdr, BIAS + hv).unwrap();
            let eh_vaddr = eh_addr - BIAS;
            let &(lv, ls) = img
                .loads
                .iter()
                .find(|(v, s)| (*v..v + s).contains(&eh_vaddr))
                .unwrap();
            let eh = &img.mem[eh_vaddr as usize..(lv + ls) as usize];
            for version in [Version::V3, Version::V2] {
                let opts = Options {
                    version,
                    ..Options::default()
                };
                let file = synth_elf(&elf, &opts).unwrap();
                for with_hdr in [true, false] {
                    let h = if with_hdr { hdr } else { &[][..] };
                    let mapped = synth_mapped(h, BIAS + hv, eh, eh_addr, &opts).unwrap();
                    let name = format!("{}: {version:?} hdr {with_hdr}", path.display());
                    assert_eq!(mapped.base, file.base + BIAS, "{name}");
                    // Function starts are relative, so the bytes are equal.
                    assert_eq!(mapped.section, file.section, "{name}");
                    assert_eq!(mapped.stats.rows, file.stats.rows, "{name}");
                }
            }
        }
    }
}
