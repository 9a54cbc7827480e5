// SPDX-License-Identifier: GPL-2.0

//! Where an exec'd program and its interpreter keep their SFrame sections,
//! read from the new process's own memory.
//!
//! The auxiliary vector gives the program's program headers (`AT_PHDR`,
//! `AT_PHNUM`) and the interpreter's load address (`AT_BASE`, its ELF
//! header: an interpreter is linked at zero).  Every byte is read from
//! user memory and untrusted: a malformed object yields an error, never a
//! wrong address outside what the headers say.  The same layout rules as
//! the audit library's (`samples/sframe-audit/src/image.rs`): the
//! `PT_GNU_SFRAME` segment, and each executable `PT_LOAD` as one text
//! range.

use crate::{
    abstractions::nowait_mem::NowaitUserMemory,
    arch,
    sframe::unwind::Memory, //
};
use kernel::prelude::*;

const PT_LOAD: u32 = 1;
const PT_PHDR: u32 = 6;
const PT_GNU_SFRAME: u32 = 0x6474_e554;
const PF_X: u32 = 1;
const EHDR_SIZE: usize = 64;
const PHDR_SIZE: usize = 56;
/// More program headers than any linker writes: refused.
const MAX_PHDRS: usize = 64;
/// Executable segments kept per object (linkers write one, or two).
pub(crate) const MAX_TEXT: usize = 4;

/// Why an object's layout could not be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ImageError {
    /// A header is not mapped readable.
    Unreadable,
    /// Not a 64-bit little-endian ELF object for this architecture.
    NotElf,
    /// Program headers that are absent, too many, or of the wrong size.
    BadPhdrs,
    /// An address computation overflows.
    Overflow,
    /// No memory for the program headers.
    NoMemory,
}

impl ImageError {
    /// The reason, for the log.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Unreadable => "headers not readable",
            Self::NotElf => arch::NOT_ELF,
            Self::BadPhdrs => "malformed program headers",
            Self::Overflow => "addresses overflow",
            Self::NoMemory => "out of memory",
        }
    }
}

/// One program header, the fields used here.
#[derive(Clone, Copy)]
struct Phdr {
    p_type: u32,
    p_flags: u32,
    p_offset: u64,
    p_vaddr: u64,
    p_filesz: u64,
    p_memsz: u64,
}

impl Phdr {
    fn parse(b: &[u8; PHDR_SIZE]) -> Self {
        let u32_at = |o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        let u64_at = |o: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[o..o + 8]);
            u64::from_le_bytes(w)
        };
        Self {
            p_type: u32_at(0),
            p_flags: u32_at(4),
            p_offset: u64_at(8),
            p_vaddr: u64_at(16),
            p_filesz: u64_at(32),
            p_memsz: u64_at(40),
        }
    }
}

/// Memory the headers are read from.
pub(crate) trait ImageMemory: Memory {
    /// Reads `len` bytes at `addr` into a new buffer.
    fn read_table(&mut self, addr: u64, len: usize) -> Result<KVec<u8>, ImageError> {
        let mut raw = KVec::from_elem(0u8, len, GFP_KERNEL).map_err(|_| ImageError::NoMemory)?;
        if !self.read(addr, &mut raw) {
            return Err(ImageError::Unreadable);
        }
        Ok(raw)
    }
}

/// The exec'd process's memory: read into a buffer that is not zeroed
/// first.  The zeroing loop (a byte at a time, as the compiler builds the
/// vector's fill for Debian's kernel) cost about 3,600 instructions per
/// object, as much as the read.
impl ImageMemory for NowaitUserMemory<'_> {
    fn read_table(&mut self, addr: u64, len: usize) -> Result<KVec<u8>, ImageError> {
        self.read_to_vec(addr, len, GFP_KERNEL).map_err(|e| {
            if e == ENOMEM {
                ImageError::NoMemory
            } else {
                ImageError::Unreadable
            }
        })
    }
}

/// The program headers of one object, read from user memory in one read
/// (into the heap: a table of them would not fit on the kernel stack).
/// At exec each read of the process's memory takes its `mmap_lock` and
/// walks its page tables: one per header was most of what an exec of a
/// program without `.sframe` cost the module.
struct Phdrs {
    raw: KVec<u8>,
    count: usize,
}

impl Phdrs {
    fn new(mem: &mut impl ImageMemory, addr: u64, count: usize) -> Result<Self, ImageError> {
        if count == 0 || count > MAX_PHDRS {
            return Err(ImageError::BadPhdrs);
        }
        // At most MAX_PHDRS headers: no overflow.
        let len = count * PHDR_SIZE;
        addr.checked_add(len as u64).ok_or(ImageError::Overflow)?;
        let raw = mem.read_table(addr, len)?;
        if raw.len() != len {
            return Err(ImageError::Unreadable);
        }
        Ok(Self { raw, count })
    }

    /// Header `i` (below `count`).
    fn get(&self, i: usize) -> Result<Phdr, ImageError> {
        let raw = i
            .checked_mul(PHDR_SIZE)
            .and_then(|at| self.raw.get(at..at.checked_add(PHDR_SIZE)?))
            .and_then(|b| <&[u8; PHDR_SIZE]>::try_from(b).ok())
            .ok_or(ImageError::BadPhdrs)?;
        Ok(Phdr::parse(raw))
    }

    /// The first header that `pred` accepts.
    fn find(&self, pred: impl Fn(&Phdr) -> bool) -> Result<Option<Phdr>, ImageError> {
        for i in 0..self.count {
            let p = self.get(i)?;
            if pred(&p) {
                return Ok(Some(p));
            }
        }
        Ok(None)
    }
}

/// Where one loaded object's SFrame section and text are.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Layout {
    /// `PT_GNU_SFRAME` at run time: address and length; `None` if absent.
    pub(crate) sframe: Option<(u64, u64)>,
    /// The executable segments at run time, `[start, end)`.
    pub(crate) text: [(u64, u64); MAX_TEXT],
    pub(crate) text_len: usize,
}

impl Layout {
    fn new(phdrs: &Phdrs, bias: u64) -> Result<Self, ImageError> {
        let at = |p: &Phdr| -> Result<(u64, u64), ImageError> {
            let start = p.p_vaddr.checked_add(bias).ok_or(ImageError::Overflow)?;
            let end = start.checked_add(p.p_memsz).ok_or(ImageError::Overflow)?;
            Ok((start, end))
        };
        let mut layout = Self::default();
        for i in 0..phdrs.count {
            let p = phdrs.get(i)?;
            if p.p_type == PT_GNU_SFRAME && p.p_memsz != 0 && layout.sframe.is_none() {
                let (start, end) = at(&p)?;
                layout.sframe = Some((start, end - start));
            }
            if p.p_type != PT_LOAD || p.p_flags & PF_X == 0 || p.p_memsz == 0 {
                continue;
            }
            let range = at(&p)?;
            if let Some(slot) = layout.text.get_mut(layout.text_len) {
                *slot = range;
                layout.text_len += 1;
            }
        }
        Ok(layout)
    }

    /// The executable segments.
    pub(crate) fn text(&self) -> &[(u64, u64)] {
        self.text.get(..self.text_len).unwrap_or_default()
    }

    /// The program, from `AT_PHDR` and `AT_PHNUM`.  The load bias comes
    /// from `PT_PHDR`; a program without one (some static ones) has its
    /// ELF header just before the program headers, where the linker put
    /// them, which is checked.
    pub(crate) fn program(
        mem: &mut impl ImageMemory,
        at_phdr: u64,
        at_phnum: u64,
    ) -> Result<Self, ImageError> {
        let count = usize::try_from(at_phnum).map_err(|_| ImageError::BadPhdrs)?;
        let phdrs = Phdrs::new(mem, at_phdr, count)?;
        let bias = match phdrs.find(|p| p.p_type == PT_PHDR)? {
            Some(p) => at_phdr.checked_sub(p.p_vaddr).ok_or(ImageError::Overflow)?,
            None => {
                let header = at_phdr
                    .checked_sub(EHDR_SIZE as u64)
                    .ok_or(ImageError::Overflow)?;
                let ehdr = Ehdr::read(mem, header)?;
                if ehdr.phoff != EHDR_SIZE as u64 || usize::from(ehdr.phnum) != count {
                    return Err(ImageError::BadPhdrs);
                }
                Self::bias_from_first_load(&phdrs, header)?
            }
        };
        Self::new(&phdrs, bias)
    }

    /// An object whose ELF header is mapped at `header` (the interpreter,
    /// at `AT_BASE`).
    pub(crate) fn at_header(mem: &mut impl ImageMemory, header: u64) -> Result<Self, ImageError> {
        let ehdr = Ehdr::read(mem, header)?;
        let addr = header.checked_add(ehdr.phoff).ok_or(ImageError::Overflow)?;
        let phdrs = Phdrs::new(mem, addr, usize::from(ehdr.phnum))?;
        let bias = Self::bias_from_first_load(&phdrs, header)?;
        // The headers were read as if the first segment maps the file from
        // offset zero: true only if it covers them.
        let end = ehdr
            .phoff
            .checked_add(u64::from(ehdr.phnum) * PHDR_SIZE as u64)
            .ok_or(ImageError::Overflow)?;
        match phdrs.find(|p| p.p_type == PT_LOAD)? {
            Some(first) if first.p_offset == 0 && end <= first.p_filesz => {}
            _ => return Err(ImageError::BadPhdrs),
        }
        Self::new(&phdrs, bias)
    }

    /// The bias that puts file offset zero (the first `PT_LOAD`, which maps
    /// it) at `header`.
    fn bias_from_first_load(phdrs: &Phdrs, header: u64) -> Result<u64, ImageError> {
        let first = phdrs
            .find(|p| p.p_type == PT_LOAD)?
            .ok_or(ImageError::BadPhdrs)?;
        if first.p_offset != 0 {
            return Err(ImageError::BadPhdrs);
        }
        header
            .checked_sub(first.p_vaddr)
            .ok_or(ImageError::Overflow)
    }
}

/// The ELF header fields used here.
struct Ehdr {
    phoff: u64,
    phnum: u16,
}

impl Ehdr {
    fn read(mem: &mut impl Memory, addr: u64) -> Result<Self, ImageError> {
        let mut b = [0u8; EHDR_SIZE];
        if !mem.read(addr, &mut b) {
            return Err(ImageError::Unreadable);
        }
        // Magic, ELFCLASS64, ELFDATA2LSB, and the machine.
        if b[..4] != *b"\x7fELF" || b[4] != 2 || b[5] != 1 {
            return Err(ImageError::NotElf);
        }
        if u16::from_le_bytes([b[18], b[19]]) != arch::ELF_MACHINE {
            return Err(ImageError::NotElf);
        }
        if usize::from(u16::from_le_bytes([b[54], b[55]])) != PHDR_SIZE {
            return Err(ImageError::BadPhdrs);
        }
        let mut phoff = [0u8; 8];
        phoff.copy_from_slice(&b[32..40]);
        Ok(Self {
            phoff: u64::from_le_bytes(phoff),
            phnum: u16::from_le_bytes([b[56], b[57]]),
        })
    }
}
