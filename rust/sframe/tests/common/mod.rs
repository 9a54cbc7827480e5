// SPDX-License-Identifier: GPL-2.0

//! Test-only builder of SFrame sections (V2, V2 + PCREL, V3), byte by byte
//! from the layout in binutils' `include/sframe.h`, independent of the
//! decoder's code.

#![allow(dead_code)]

pub mod corpus;
pub mod harness;
pub mod hostile;
pub mod stack;

/// One FRE to emit.
#[derive(Clone, Debug)]
pub struct FreB {
    /// Start offset from the function start.
    pub start: u32,
    /// CFA base bit (DEFAULT FDEs): true = SP.
    pub base_sp: bool,
    /// Data words (signed offsets, or FLEX control words).
    pub words: Vec<i64>,
    /// Data word size in bytes (1, 2, 4), or 0 for the smallest that fits.
    pub word_size: u8,
    /// Raw info override for corruption tests.
    pub info_override: Option<u8>,
    pub mangled_ra: bool,
}

impl FreB {
    pub fn new(start: u32, base_sp: bool, words: &[i64]) -> Self {
        FreB {
            start,
            base_sp,
            words: words.to_vec(),
            word_size: 0,
            info_override: None,
            mangled_ra: false,
        }
    }
    /// x86-64 row: CFA = SP + off.
    pub fn sp(start: u32, cfa: i64) -> Self {
        Self::new(start, true, &[cfa])
    }
    /// x86-64 row: CFA = base + cfa, FP saved at CFA + fp.
    pub fn with_fp(start: u32, base_sp: bool, cfa: i64, fp: i64) -> Self {
        Self::new(start, base_sp, &[cfa, fp])
    }
    pub fn size(mut self, size: u8) -> Self {
        self.word_size = size;
        self
    }

    fn word_size(&self) -> u8 {
        if self.word_size != 0 {
            return self.word_size;
        }
        let mut size = 1;
        for &w in &self.words {
            if i8::try_from(w).is_err() {
                size = size.max(2);
            }
            if i16::try_from(w).is_err() {
                size = 4;
            }
        }
        size
    }
}

/// FLEX control word.
pub fn ctl(regnum: u32, deref: bool, reg_p: bool) -> i64 {
    i64::from((regnum << 3) | (u32::from(deref) << 1) | u32::from(reg_p))
}

/// One FDE to emit.
#[derive(Clone, Debug)]
pub struct FdeB {
    /// Absolute start address.
    pub start: u64,
    pub size: u32,
    /// 0, 1, 2 (or anything for corruption tests).
    pub fre_type: u8,
    pub pc_mask: bool,
    pub rep_size: u8,
    /// V3 info2 FDE type (0 DEFAULT, 1 FLEX).
    pub fde_type: u8,
    pub signal: bool,
    pub pauth: u8,
    pub fres: Vec<FreB>,
    /// Override the FDE's num_fres field.
    pub num_fres_override: Option<u32>,
    /// Override the start_fre_off field.
    pub fre_off_override: Option<u32>,
}

impl FdeB {
    pub fn new(start: u64, size: u32, fres: Vec<FreB>) -> Self {
        let fre_type = if size <= 0x100 {
            0
        } else if size <= 0x10000 {
            1
        } else {
            2
        };
        FdeB {
            start,
            size,
            fre_type,
            pc_mask: false,
            rep_size: 0,
            fde_type: 0,
            signal: false,
            pauth: 0,
            fres,
            num_fres_override: None,
            fre_off_override: None,
        }
    }
}

/// A section to emit.
#[derive(Clone, Debug)]
pub struct SectionB {
    pub version: u8,
    pub abi: u8,
    pub sorted: bool,
    pub pcrel: bool,
    pub extra_flags: u8,
    pub fixed_fp: i8,
    pub fixed_ra: i8,
    pub aux: Vec<u8>,
    pub big_endian: bool,
    /// Address the section is placed at.
    pub addr: u64,
    pub fdes: Vec<FdeB>,
    /// Gap of unused bytes between the FDE array and the FRE area.
    pub gap: u32,
}

/// Where things ended up.
#[derive(Clone, Copy, Debug)]
pub struct Layout {
    pub header_end: usize,
    pub fde_off: usize,
    pub fde_len: usize,
    pub fre_off: usize,
    pub fre_len: usize,
}

impl SectionB {
    pub fn v2(addr: u64, fdes: Vec<FdeB>) -> Self {
        SectionB {
            version: 2,
            abi: 3,
            sorted: true,
            pcrel: false,
            extra_flags: 0,
            fixed_fp: 0,
            fixed_ra: -8,
            aux: Vec::new(),
            big_endian: false,
            addr,
            fdes,
            gap: 0,
        }
    }
    pub fn v2_pcrel(addr: u64, fdes: Vec<FdeB>) -> Self {
        SectionB {
            pcrel: true,
            ..Self::v2(addr, fdes)
        }
    }
    pub fn v3(addr: u64, fdes: Vec<FdeB>) -> Self {
        SectionB {
            version: 3,
            pcrel: true,
            ..Self::v2(addr, fdes)
        }
    }

    fn put16(&self, out: &mut Vec<u8>, v: u16) {
        if self.big_endian {
            out.extend_from_slice(&v.to_be_bytes())
        } else {
            out.extend_from_slice(&v.to_le_bytes())
        }
    }
    fn put32(&self, out: &mut Vec<u8>, v: u32) {
        if self.big_endian {
            out.extend_from_slice(&v.to_be_bytes())
        } else {
            out.extend_from_slice(&v.to_le_bytes())
        }
    }
    fn put64(&self, out: &mut Vec<u8>, v: u64) {
        if self.big_endian {
            out.extend_from_slice(&v.to_be_bytes())
        } else {
            out.extend_from_slice(&v.to_le_bytes())
        }
    }
    fn put_word(&self, out: &mut Vec<u8>, v: i64, size: u8) {
        match size {
            1 => out.push(v as u8),
            2 => self.put16(out, v as u16),
            _ => self.put32(out, v as u32),
        }
    }

    pub fn fde_len(&self) -> usize {
        if self.version == 3 {
            16
        } else {
            20
        }
    }

    pub fn build(&self) -> Vec<u8> {
        self.build_with_layout().0
    }

    pub fn build_with_layout(&self) -> (Vec<u8>, Layout) {
        // FRE area first, remembering each function's offset.
        let mut fre_area = Vec::new();
        let mut fre_offs = Vec::new();
        let mut num_fres = 0u32;
        for fde in &self.fdes {
            fre_offs.push(fre_area.len() as u32);
            let n = fde.num_fres_override.unwrap_or(fde.fres.len() as u32);
            if self.version == 3 {
                self.put16(&mut fre_area, n as u16);
                fre_area.push(self.fde_info(fde));
                fre_area.push(fde.fde_type);
                fre_area.push(fde.rep_size);
            }
            num_fres += fde.fres.len() as u32;
            for fre in &fde.fres {
                match fde.fre_type {
                    0 => fre_area.push(fre.start as u8),
                    1 => self.put16(&mut fre_area, fre.start as u16),
                    _ => self.put32(&mut fre_area, fre.start),
                }
                let size = fre.word_size();
                let size_code = match size {
                    1 => 0u8,
                    2 => 1,
                    _ => 2,
                };
                let info = fre.info_override.unwrap_or(
                    (u8::from(fre.mangled_ra) << 7)
                        | (size_code << 5)
                        | ((fre.words.len() as u8 & 0xf) << 1)
                        | u8::from(fre.base_sp),
                );
                fre_area.push(info);
                for &w in &fre.words {
                    self.put_word(&mut fre_area, w, size);
                }
            }
        }

        let header_end = 28 + self.aux.len();
        let fde_len = self.fde_len() * self.fdes.len();
        let fde_off = header_end;
        let fre_off = fde_off + fde_len + self.gap as usize;

        let mut out = Vec::new();
        self.put16(&mut out, 0xdee2);
        out.push(self.version);
        let flags = u8::from(self.sorted) | if self.pcrel { 0x4 } else { 0 } | self.extra_flags;
        out.push(flags);
        out.push(self.abi);
        out.push(self.fixed_fp as u8);
        out.push(self.fixed_ra as u8);
        out.push(self.aux.len() as u8);
        self.put32(&mut out, self.fdes.len() as u32);
        self.put32(&mut out, num_fres);
        self.put32(&mut out, fre_area.len() as u32);
        self.put32(&mut out, 0);
        self.put32(&mut out, (fde_len + self.gap as usize) as u32);
        out.extend_from_slice(&self.aux);

        for (i, fde) in self.fdes.iter().enumerate() {
            let field = self.addr.wrapping_add(out.len() as u64);
            let base = if self.pcrel { field } else { self.addr };
            let raw = fde.start.wrapping_sub(base) as i64;
            let fre_off_field = fde.fre_off_override.unwrap_or(fre_offs[i]);
            if self.version == 3 {
                self.put64(&mut out, raw as u64);
                self.put32(&mut out, fde.size);
                self.put32(&mut out, fre_off_field);
            } else {
                self.put32(&mut out, raw as i32 as u32);
                self.put32(&mut out, fde.size);
                self.put32(&mut out, fre_off_field);
                self.put32(
                    &mut out,
                    fde.num_fres_override.unwrap_or(fde.fres.len() as u32),
                );
                out.push(self.fde_info(fde));
                out.push(fde.rep_size);
                self.put16(&mut out, 0);
            }
        }
        out.resize(fre_off, 0);
        out.extend_from_slice(&fre_area);
        let layout = Layout {
            header_end,
            fde_off,
            fde_len,
            fre_off,
            fre_len: fre_area.len(),
        };
        (out, layout)
    }

    fn fde_info(&self, fde: &FdeB) -> u8 {
        (u8::from(fde.signal && self.version == 3) << 7)
            | ((fde.pauth & 1) << 5)
            | (u8::from(fde.pc_mask) << 4)
            | (fde.fre_type & 0xf)
    }
}

/// A typical x86-64 function compiled without frame pointer changes, and
/// one with a frame pointer, plus a PLT-like PCMASK stub.
pub fn sample_fdes() -> Vec<FdeB> {
    let f1 = FdeB::new(
        0x401000,
        0x40,
        vec![
            FreB::sp(0, 8),
            FreB::sp(1, 16),
            FreB::sp(5, 48),
            FreB::sp(0x30, 16),
            FreB::sp(0x3f, 8),
        ],
    );
    let f2 = FdeB::new(
        0x401040,
        0x30,
        vec![
            FreB::sp(0, 8),
            FreB::with_fp(1, true, 16, -16),
            FreB::with_fp(4, false, 16, -16),
            FreB::sp(0x2f, 8),
        ],
    );
    let mut plt = FdeB::new(0x401080, 0x40, vec![FreB::sp(0, 8), FreB::sp(11, 16)]);
    plt.pc_mask = true;
    plt.rep_size = 16;
    // A big function: 2-byte FRE starts and 2-byte offsets.
    let big = FdeB::new(
        0x402000,
        0x2000,
        vec![FreB::sp(0, 8), FreB::sp(1, 0x1008), FreB::sp(0x1ff0, 8)],
    );
    vec![f1, f2, plt, big]
}
