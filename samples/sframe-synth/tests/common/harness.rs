// SPDX-License-Identifier: GPL-2.0

//! The fuzz harness, shared by the cargo-fuzz target (`fuzz/`) and by
//! `cargo test` (which replays the committed corpus).
//!
//! Input: one flag byte (bit 0: write V2; bit 1: the rest is an ELF file
//! image, for `synth_elf`; bit 2: a tiny work budget; bit 3: AArch64 CFI
//! for `synth_mapped`), then for `synth_mapped`: 8 bytes `.eh_frame`
//! address (little endian), 2 bytes `.eh_frame_hdr` length `n`, `n` bytes
//! of `.eh_frame_hdr` (placed just below `.eh_frame`), the rest
//! `.eh_frame`.
//!
//! Checks, besides "no panic, no overflow": a returned section parses and
//! validates with the decoder at its base, every FDE lies inside the text
//! range reported, every FRE start's row is found again by `find_row`,
//! and the counts add up.

use sframe::Section;
use sframe_synth::synth_elf;
use sframe_synth::synth_mapped;
use sframe_synth::Arch;
use sframe_synth::Options;
use sframe_synth::Version;

/// Builds a harness input for `synth_mapped`.
pub fn join(v2: bool, eh_frame_addr: u64, hdr: &[u8], eh_frame: &[u8]) -> Vec<u8> {
    let mut out = vec![u8::from(v2)];
    out.extend_from_slice(&eh_frame_addr.to_le_bytes());
    out.extend_from_slice(&(hdr.len() as u16).to_le_bytes());
    out.extend_from_slice(hdr);
    out.extend_from_slice(eh_frame);
    out
}

/// Builds a harness input for `synth_mapped` of AArch64 CFI.
pub fn join_aarch64(v2: bool, eh_frame_addr: u64, hdr: &[u8], eh_frame: &[u8]) -> Vec<u8> {
    let mut out = join(v2, eh_frame_addr, hdr, eh_frame);
    out[0] |= 8;
    out
}

/// Builds a harness input for `synth_elf`.
pub fn join_elf(v2: bool, elf: &[u8]) -> Vec<u8> {
    let mut out = vec![u8::from(v2) | 2];
    out.extend_from_slice(elf);
    out
}

/// Runs the generator on one input and checks what it promises; whether
/// it returned a section.
pub fn exercise(data: &[u8]) -> bool {
    let Some((&flags, rest)) = data.split_first() else {
        return false;
    };
    let opts = Options {
        version: if flags & 1 != 0 {
            Version::V2
        } else {
            Version::V3
        },
        // Small, so a fuzzer's inputs hit the budget too.
        max_work: if flags & 4 != 0 { Some(64) } else { None },
        arch: if flags & 8 != 0 {
            Arch::Aarch64
        } else {
            Arch::X86_64
        },
    };
    let result = if flags & 2 != 0 {
        // `object` reads ELF headers in place and wants them 8-byte
        // aligned, which `rest`, one byte into the input, never is: a
        // fresh allocation is (the system allocator aligns to 16).
        let aligned: Vec<u8> = rest.to_vec();
        synth_elf(&aligned, &opts)
    } else {
        if rest.len() < 10 {
            return false;
        }
        let (addr, rest) = rest.split_at(8);
        let addr = u64::from_le_bytes(addr.try_into().unwrap());
        let (len, rest) = rest.split_at(2);
        let len = usize::from(u16::from_le_bytes(len.try_into().unwrap())).min(rest.len());
        let (hdr, eh_frame) = rest.split_at(len);
        let hdr_addr = addr.wrapping_sub(len as u64);
        synth_mapped(hdr, hdr_addr, eh_frame, addr, &opts)
    };
    let Ok(out) = result else {
        return false;
    };
    let section = Section::parse(&out.section, out.base).expect("returned section parses");
    section
        .validate(&mut || {})
        .expect("returned section validates");
    assert_eq!(section.version(), opts.version);
    let (lo, hi) = out.text_range;
    let s = &out.stats;
    assert!(s.rows_emitted <= s.rows);
    assert_eq!(u64::from(section.num_fdes()), s.sframe_fdes);
    assert_eq!(u64::from(section.num_fres()), s.sframe_fres);
    let mut covered = 0u64;
    for fde in section.fdes() {
        let fde = fde.expect("validated FDE");
        assert!(fde.start >= lo && fde.end() <= hi, "FDE outside text range");
        covered += u64::from(fde.size);
        for fre in section.fres(&fde) {
            let fre = fre.expect("validated FRE");
            if fde.pc_type == sframe::PcType::Inc && fre.start < fde.end() {
                let row = section.find_row(fre.start).expect("lookup");
                assert_eq!(row, Some(fre.row));
            }
        }
    }
    assert_eq!(covered, s.bytes_covered);
    true
}
