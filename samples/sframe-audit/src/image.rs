// SPDX-License-Identifier: GPL-2.0

//! An ELF object's layout read from its image in memory: where its SFrame
//! section and its text are, at run time.
//!
//! Both users read a loaded object, not a file: the audit library reads its
//! own process (the file may be gone, or seen through another mount
//! namespace), `sframectl register --pid` reads another process through
//! `/proc/PID/mem`.  The [`Memory`] trait hides which.  Only what
//! registration needs is parsed: the ELF header, the program headers, and
//! from them the executable `PT_LOAD` segments, `PT_GNU_SFRAME` and
//! `PT_DYNAMIC`.  Nothing here panics, and the only allocation is the
//! program headers' own (the size of their count): the audit library calls
//! it from inside the dynamic loader, once per object it maps.

use core::fmt;
use core::ops::Range;
use std::io;

/// `PT_GNU_SFRAME` (`PT_LOOS + 0x474e554`): the SFrame section, for loaders.
pub const PT_GNU_SFRAME: u32 = 0x6474_e554;
/// `PT_LOAD`.
pub const PT_LOAD: u32 = 1;
/// Where `e_machine` is in an ELF header.
const E_MACHINE_OFFSET: u64 = 18;
/// This machine's `e_machine`: `EM_X86_64` or `EM_AARCH64`.
#[cfg(target_arch = "x86_64")]
const EM_NATIVE: u16 = 62;
#[cfg(target_arch = "aarch64")]
const EM_NATIVE: u16 = 183;
/// `PT_DYNAMIC`.
pub const PT_DYNAMIC: u32 = 2;
/// `PT_NOTE`: notes, among them the build-id.
pub const PT_NOTE: u32 = 4;
/// `PT_PHDR`: the program headers themselves.
pub const PT_PHDR: u32 = 6;
/// `PT_GNU_EH_FRAME`: `.eh_frame_hdr`, for unwinders.
pub const PT_GNU_EH_FRAME: u32 = 0x6474_e550;
/// `PF_X`: the segment is executable.
pub const PF_X: u32 = 1;

/// Size of an ELF64 file header.
pub const EHDR_SIZE: usize = 64;
/// Size of an ELF64 program header.
pub const PHDR_SIZE: usize = 56;
/// Program headers we are prepared to read (real objects have about 12).
pub const MAX_PHDRS: usize = 64;
/// Executable segments we record (real objects have one).
pub const MAX_TEXT: usize = 4;
/// Loaded segments we record (real objects have four).
pub const MAX_LOADS: usize = 8;
/// Note segments we record (real objects have two or three).
pub const MAX_NOTES: usize = 4;

const ELFCLASS64: u8 = 2;
#[cfg(target_endian = "little")]
const ELFDATA_NATIVE: u8 = 1;
#[cfg(target_endian = "big")]
const ELFDATA_NATIVE: u8 = 2;
/// `e_phnum` value meaning "the real count is elsewhere" (not supported).
const PN_XNUM: u16 = 0xffff;

/// Reads bytes of an address space.
pub trait Memory {
    /// Fills `buf` from `addr`, completely or not at all.
    fn read(&self, addr: u64, buf: &mut [u8]) -> io::Result<()>;
}

/// A copy of memory starting at `base`: tests, and headers already read.
pub struct Snapshot<'a> {
    /// The address of `bytes[0]`.
    pub base: u64,
    /// The memory contents.
    pub bytes: &'a [u8],
}

impl Memory for Snapshot<'_> {
    fn read(&self, addr: u64, buf: &mut [u8]) -> io::Result<()> {
        let fault = || io::Error::from_raw_os_error(libc::EFAULT);
        let start = addr
            .checked_sub(self.base)
            .and_then(|off| usize::try_from(off).ok())
            .ok_or_else(fault)?;
        let end = start.checked_add(buf.len()).ok_or_else(fault)?;
        let src = self.bytes.get(start..end).ok_or_else(fault)?;
        buf.copy_from_slice(src);
        Ok(())
    }
}

/// Another process's memory through `/proc/PID/mem` (or any file whose
/// offsets are addresses).
impl Memory for std::fs::File {
    fn read(&self, addr: u64, buf: &mut [u8]) -> io::Result<()> {
        std::os::unix::fs::FileExt::read_exact_at(self, buf, addr)
    }
}

/// The calling process's own memory, read with `process_vm_readv()` so that
/// an address that turns out not to be mapped is an `EFAULT`, not a crash
/// of the program we are auditing.  Asks for the process's ID at every
/// read; [`OwnMemoryOf`] is told it.
pub struct OwnMemory;

impl Memory for OwnMemory {
    fn read(&self, addr: u64, buf: &mut [u8]) -> io::Result<()> {
        // SAFETY: getpid() has no preconditions.
        read_own(unsafe { libc::getpid() }, addr, buf)
    }
}

/// [`OwnMemory`] for a caller that knows its process's ID, `.0`: no
/// `getpid()` a read.  The ID must be the caller's: another one reads that
/// process's memory, where the kernel allows it, not ours.
pub struct OwnMemoryOf(pub libc::pid_t);

impl Memory for OwnMemoryOf {
    fn read(&self, addr: u64, buf: &mut [u8]) -> io::Result<()> {
        read_own(self.0, addr, buf)
    }
}

/// Reads `buf.len()` bytes at `addr` in the process `pid` (ours), all or
/// an error.
fn read_own(pid: libc::pid_t, addr: u64, buf: &mut [u8]) -> io::Result<()> {
    let remote_base =
        usize::try_from(addr).map_err(|_| io::Error::from_raw_os_error(libc::EFAULT))?;
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let remote = libc::iovec {
        iov_base: remote_base as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: `local` describes `buf`, which we borrow mutably for the
    // call; the kernel checks `remote` and fails with `EFAULT` instead of
    // faulting on an unmapped address.
    let n = unsafe { libc::process_vm_readv(pid, &local, 1, &remote, 1, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    if usize::try_from(n).ok() != Some(buf.len()) {
        return Err(io::Error::from_raw_os_error(libc::EFAULT));
    }
    Ok(())
}

/// Bytes read ahead by [`ReadAhead`]: an object's ELF header, program
/// headers and notes are in its first kilobyte (gzip's, libc's and the
/// loader's end before byte 960).
const READ_AHEAD: usize = 1024;
/// The smallest page: a read that stays inside the 4 KiB block of an
/// address that is mapped is mapped too, with the same protection.
const MIN_PAGE: u64 = 4096;

/// [`Memory`] that, at its first read, reads up to `READ_AHEAD` bytes (1 KiB)
/// from there (never past that 4 KiB block) and answers later reads inside
/// them from its copy: the headers of an object, read one after the other
/// from its first page, cost one read of `mem` instead of three.  For
/// memory that does not change under us, such as the headers of a mapped
/// object; reads elsewhere go to `mem`.
pub struct ReadAhead<'m, M> {
    mem: &'m M,
    /// Where the copy starts, once the first read set it.
    base: core::cell::Cell<Option<u64>>,
    /// The bytes read ahead, and how many (0: none, the read failed).
    bytes: core::cell::RefCell<([u8; READ_AHEAD], usize)>,
}

impl<'m, M: Memory> ReadAhead<'m, M> {
    /// `mem`, read ahead at its first read.
    pub fn new(mem: &'m M) -> Self {
        Self {
            mem,
            base: core::cell::Cell::new(None),
            bytes: core::cell::RefCell::new(([0; READ_AHEAD], 0)),
        }
    }

    /// Fills `buf` from the copy if it holds `addr..addr + buf.len()`.
    fn copied(&self, addr: u64, buf: &mut [u8]) -> bool {
        let Some(base) = self.base.get() else {
            return false;
        };
        let Ok(copy) = self.bytes.try_borrow() else {
            return false;
        };
        let (bytes, len) = &*copy;
        let src = addr
            .checked_sub(base)
            .and_then(|off| usize::try_from(off).ok())
            .and_then(|off| bytes.get(..*len)?.get(off..off.checked_add(buf.len())?));
        match src {
            Some(src) => {
                buf.copy_from_slice(src);
                true
            }
            None => false,
        }
    }
}

impl<M: Memory> Memory for ReadAhead<'_, M> {
    fn read(&self, addr: u64, buf: &mut [u8]) -> io::Result<()> {
        if self.base.get().is_none() {
            self.base.set(Some(addr));
            let room = (MIN_PAGE - addr % MIN_PAGE).min(READ_AHEAD as u64) as usize;
            if buf.len() <= room {
                if let Ok(mut copy) = self.bytes.try_borrow_mut() {
                    let (bytes, len) = &mut *copy;
                    if let Some(ahead) = bytes.get_mut(..room) {
                        if self.mem.read(addr, ahead).is_ok() {
                            *len = room;
                        }
                    }
                }
            }
        }
        if self.copied(addr, buf) {
            return Ok(());
        }
        self.mem.read(addr, buf)
    }
}

/// Why an object's layout could not be read.
#[derive(Debug)]
pub enum ImageError {
    /// The memory could not be read.
    Read(io::Error),
    /// No ELF magic at the address.
    NotElf,
    /// An ELF object of another class, byte order or machine than ours.
    Foreign,
    /// `e_phentsize` is not the ELF64 program header size.
    BadPhentsize(u16),
    /// More program headers than [`MAX_PHDRS`] (or extended numbering).
    TooManyPhdrs(u16),
    /// The program headers are not in the part of the file that is mapped.
    PhdrsNotMapped,
    /// No `PT_LOAD` maps file offset zero.
    NoFirstLoad,
    /// Header fields that overflow the address space.
    Overflow,
    /// The headers found do not describe the object expected.
    Mismatch,
}

impl fmt::Display for ImageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Read(err) => write!(f, "cannot read its memory: {err}"),
            Self::NotElf => f.write_str("not an ELF object"),
            Self::Foreign => f.write_str("not a 64-bit object of this machine"),
            Self::BadPhentsize(n) => write!(f, "program header size {n}, expected {PHDR_SIZE}"),
            Self::TooManyPhdrs(n) => {
                write!(f, "{n} program headers (at most {MAX_PHDRS} supported)")
            }
            Self::PhdrsNotMapped => f.write_str("program headers outside the first loaded segment"),
            Self::NoFirstLoad => f.write_str("no loaded segment maps the ELF header"),
            Self::Overflow => f.write_str("program header values overflow"),
            Self::Mismatch => f.write_str("program headers do not match the loader's record"),
        }
    }
}

impl std::error::Error for ImageError {}

impl From<io::Error> for ImageError {
    fn from(err: io::Error) -> Self {
        Self::Read(err)
    }
}

/// The fields of an ELF64 file header we use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ElfHeader {
    /// `e_type`: `ET_EXEC`, `ET_DYN`...
    pub e_type: u16,
    /// File offset of the program headers.
    pub phoff: u64,
    /// Number of program headers.
    pub phnum: u16,
}

/// One program header (the fields we use).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProgramHeader {
    /// `p_type`.
    pub p_type: u32,
    /// `p_flags`: `PF_X`, `PF_W`, `PF_R`.
    pub p_flags: u32,
    /// File offset of the segment.
    pub p_offset: u64,
    /// Link-time address.
    pub p_vaddr: u64,
    /// Bytes in the file.
    pub p_filesz: u64,
    /// Bytes in memory.
    pub p_memsz: u64,
}

/// The program headers of one object.
///
/// As many as the object has, not a table of [`MAX_PHDRS`]: the audit
/// library reads them for every object a program maps, and a table of 64,
/// zeroed (and the bytes it was parsed from, zeroed too), cost more than
/// the rest of the object's layout.
#[derive(Clone, Debug)]
pub struct ProgramHeaders {
    entries: Vec<ProgramHeader>,
}

fn u16_at(bytes: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(
        bytes.get(at..at.checked_add(2)?)?.try_into().ok()?,
    ))
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(
        bytes.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

fn u64_at(bytes: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(
        bytes.get(at..at.checked_add(8)?)?.try_into().ok()?,
    ))
}

impl ElfHeader {
    /// Parses an ELF64 header of this machine's byte order.
    pub fn parse(bytes: &[u8; EHDR_SIZE]) -> Result<Self, ImageError> {
        if bytes.get(..4) != Some(b"\x7fELF".as_slice()) {
            return Err(ImageError::NotElf);
        }
        if bytes.get(4) != Some(&ELFCLASS64) || bytes.get(5) != Some(&ELFDATA_NATIVE) {
            return Err(ImageError::Foreign);
        }
        let field = |v: Option<u64>| v.ok_or(ImageError::NotElf);
        let e_type = field(u16_at(bytes, 16).map(u64::from))? as u16;
        let phoff = field(u64_at(bytes, 32))?;
        let phentsize = field(u16_at(bytes, 54).map(u64::from))? as u16;
        let phnum = field(u16_at(bytes, 56).map(u64::from))? as u16;
        if phnum != 0 && usize::from(phentsize) != PHDR_SIZE {
            return Err(ImageError::BadPhentsize(phentsize));
        }
        if phnum == PN_XNUM || usize::from(phnum) > MAX_PHDRS {
            return Err(ImageError::TooManyPhdrs(phnum));
        }
        Ok(Self {
            e_type,
            phoff,
            phnum,
        })
    }

    /// Reads and parses the header at `addr`.
    pub fn read(mem: &impl Memory, addr: u64) -> Result<Self, ImageError> {
        let mut bytes = [0u8; EHDR_SIZE];
        mem.read(addr, &mut bytes)?;
        Self::parse(&bytes)
    }
}

/// Program headers read at a time: an object's usual dozen in one read.
const PHDR_CHUNK: usize = 16;

/// The program header at `bytes[at..]`.
fn program_header(bytes: &[u8], at: usize) -> Result<ProgramHeader, ImageError> {
    let word = |off: usize| u64_at(bytes, at + off).ok_or(ImageError::PhdrsNotMapped);
    let half = |off: usize| u32_at(bytes, at + off).ok_or(ImageError::PhdrsNotMapped);
    Ok(ProgramHeader {
        p_type: half(0)?,
        p_flags: half(4)?,
        p_offset: word(8)?,
        p_vaddr: word(16)?,
        p_filesz: word(32)?,
        p_memsz: word(40)?,
    })
}

impl ProgramHeaders {
    /// Room for `count` program headers, if that many are supported.
    fn with_room(count: usize) -> Result<Vec<ProgramHeader>, ImageError> {
        if count > MAX_PHDRS {
            return Err(ImageError::TooManyPhdrs(
                u16::try_from(count).unwrap_or(u16::MAX),
            ));
        }
        let mut entries = Vec::new();
        entries
            .try_reserve_exact(count)
            .map_err(|_| ImageError::Read(io::Error::from_raw_os_error(libc::ENOMEM)))?;
        Ok(entries)
    }

    /// Parses `count` ELF64 program headers from `bytes`.
    pub fn parse(bytes: &[u8], count: usize) -> Result<Self, ImageError> {
        let mut entries = Self::with_room(count)?;
        for i in 0..count {
            entries.push(program_header(bytes, i * PHDR_SIZE)?);
        }
        Ok(Self { entries })
    }

    /// Reads and parses `count` program headers at `addr`.
    pub fn read(mem: &impl Memory, addr: u64, count: usize) -> Result<Self, ImageError> {
        let mut entries = Self::with_room(count)?;
        let mut chunk = [0u8; PHDR_CHUNK * PHDR_SIZE];
        let mut at = addr;
        while entries.len() < count {
            let n = (count - entries.len()).min(PHDR_CHUNK);
            let bytes = chunk.get_mut(..n * PHDR_SIZE).ok_or(ImageError::Overflow)?;
            mem.read(at, bytes)?;
            for i in 0..n {
                entries.push(program_header(bytes, i * PHDR_SIZE)?);
            }
            at = at
                .checked_add(bytes.len() as u64)
                .ok_or(ImageError::Overflow)?;
        }
        Ok(Self { entries })
    }

    /// The program headers.
    pub fn iter(&self) -> impl Iterator<Item = &ProgramHeader> {
        self.entries.iter()
    }

    fn find(&self, p_type: u32) -> Option<&ProgramHeader> {
        self.iter().find(|ph| ph.p_type == p_type)
    }

    /// The `PT_LOAD` that maps file offset zero (the one holding the ELF
    /// header), if any.
    pub fn first_load(&self) -> Option<&ProgramHeader> {
        self.iter()
            .find(|ph| ph.p_type == PT_LOAD && ph.p_offset == 0)
    }
}

/// Where one loaded object's SFrame section and text are, at run time,
/// and what an object without SFrame needs to have one generated: its
/// `.eh_frame_hdr`, its loaded file bytes (`.eh_frame` runs to the end of
/// the segment that holds it) and its notes (the build-id).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Load bias: run-time address minus link-time address.
    pub bias: u64,
    /// The `PT_GNU_SFRAME` bytes, if the object has them.
    pub sframe: Option<Range<u64>>,
    /// The `PT_GNU_EH_FRAME` bytes (`.eh_frame_hdr`), if any.
    pub eh_frame_hdr: Option<Range<u64>>,
    /// The run-time address of `PT_DYNAMIC`, if any.
    pub dynamic: Option<u64>,
    text: [Range<u64>; MAX_TEXT],
    text_len: usize,
    loads: [Range<u64>; MAX_LOADS],
    loads_len: usize,
    notes: [Range<u64>; MAX_NOTES],
    notes_len: usize,
}

impl Layout {
    /// The layout the program headers describe when loaded with `bias`.
    pub fn new(phdrs: &ProgramHeaders, bias: u64) -> Result<Self, ImageError> {
        let at = |ph: &ProgramHeader, len: u64| -> Result<Range<u64>, ImageError> {
            let start = ph.p_vaddr.checked_add(bias).ok_or(ImageError::Overflow)?;
            let end = start.checked_add(len).ok_or(ImageError::Overflow)?;
            Ok(start..end)
        };
        let mut layout = Self {
            bias,
            sframe: None,
            eh_frame_hdr: None,
            dynamic: None,
            text: Default::default(),
            text_len: 0,
            loads: Default::default(),
            loads_len: 0,
            notes: Default::default(),
            notes_len: 0,
        };
        if let Some(ph) = phdrs.find(PT_GNU_SFRAME) {
            layout.sframe = Some(at(ph, ph.p_memsz)?).filter(|r| !r.is_empty());
        }
        if let Some(ph) = phdrs.find(PT_GNU_EH_FRAME) {
            layout.eh_frame_hdr = Some(at(ph, ph.p_memsz)?).filter(|r| !r.is_empty());
        }
        for ph in phdrs.iter() {
            let (slots, len, size) = match ph.p_type {
                // Only the file's bytes: `.eh_frame` is never in the part
                // of a segment that is zero-filled.
                PT_LOAD => (&mut layout.loads[..], &mut layout.loads_len, ph.p_filesz),
                PT_NOTE => (&mut layout.notes[..], &mut layout.notes_len, ph.p_filesz),
                _ => continue,
            };
            if size == 0 {
                continue;
            }
            let range = at(ph, size)?;
            if let Some(slot) = slots.get_mut(*len) {
                *slot = range;
                *len += 1;
            }
        }
        if let Some(ph) = phdrs.find(PT_DYNAMIC) {
            layout.dynamic = Some(at(ph, 0)?.start);
        }
        for ph in phdrs.iter() {
            if ph.p_type != PT_LOAD || ph.p_flags & PF_X == 0 || ph.p_memsz == 0 {
                continue;
            }
            let range = at(ph, ph.p_memsz)?;
            if let Some(slot) = layout.text.get_mut(layout.text_len) {
                *slot = range;
                layout.text_len += 1;
            }
        }
        Ok(layout)
    }

    /// Reads the layout of the object whose file offset zero (its ELF
    /// header) is mapped at `header_addr`: a shared object's `l_addr` (they
    /// are linked at zero), or the start of an object's first mapping in
    /// `/proc/PID/maps`.
    pub fn read_at_header(mem: &impl Memory, header_addr: u64) -> Result<Self, ImageError> {
        let ehdr = ElfHeader::read(mem, header_addr)?;
        let phdrs_len = u64::from(ehdr.phnum) * PHDR_SIZE as u64;
        let phdrs_end = ehdr
            .phoff
            .checked_add(phdrs_len)
            .ok_or(ImageError::Overflow)?;
        let phdrs_addr = header_addr
            .checked_add(ehdr.phoff)
            .ok_or(ImageError::Overflow)?;
        let phdrs = ProgramHeaders::read(mem, phdrs_addr, usize::from(ehdr.phnum))?;
        // The headers were read as if the first segment maps the file from
        // offset zero contiguously: true only if it covers them.
        let first = phdrs.first_load().ok_or(ImageError::NoFirstLoad)?;
        if phdrs_end > first.p_filesz {
            return Err(ImageError::PhdrsNotMapped);
        }
        let bias = header_addr
            .checked_sub(first.p_vaddr)
            .ok_or(ImageError::Overflow)?;
        Self::new(&phdrs, bias)
    }

    /// The executable segments, at run time.
    pub fn text(&self) -> &[Range<u64>] {
        self.text.get(..self.text_len).unwrap_or_default()
    }

    /// The file bytes of each `PT_LOAD` segment, at run time.
    pub fn loads(&self) -> &[Range<u64>] {
        self.loads.get(..self.loads_len).unwrap_or_default()
    }

    /// The `PT_NOTE` segments, at run time.
    pub fn notes(&self) -> &[Range<u64>] {
        self.notes.get(..self.notes_len).unwrap_or_default()
    }
}

/// An ELF file's image as the loader would map it at its link-time
/// addresses (bias 0), read from the file: an address in the file bytes
/// of a `PT_LOAD` segment is read at the segment's offset, any other is
/// an `EFAULT`.  What the generator reads of it (`.eh_frame_hdr`,
/// `.eh_frame`, the notes) is what it reads of the object loaded, so
/// `sframectl fill-cache` makes from the file the section the audit
/// library would make from the object in memory.
pub struct FileImage {
    file: std::fs::File,
    phdrs: ProgramHeaders,
}

impl FileImage {
    /// The image of `file`, and its layout at bias 0; an object for
    /// another machine is [`ImageError::Foreign`] (a loaded object never
    /// is).
    pub fn new(file: std::fs::File) -> Result<(Self, Layout), ImageError> {
        // The ELF header and the program headers are read by file offset.
        let ehdr = ElfHeader::read(&file, 0)?;
        let mut machine = [0u8; 2];
        Memory::read(&file, E_MACHINE_OFFSET, &mut machine)?;
        if u16::from_ne_bytes(machine) != EM_NATIVE {
            return Err(ImageError::Foreign);
        }
        let phdrs = ProgramHeaders::read(&file, ehdr.phoff, usize::from(ehdr.phnum))?;
        let layout = Layout::new(&phdrs, 0)?;
        Ok((Self { file, phdrs }, layout))
    }
}

impl Memory for FileImage {
    fn read(&self, addr: u64, buf: &mut [u8]) -> io::Result<()> {
        let fault = || io::Error::from_raw_os_error(libc::EFAULT);
        let end = addr.checked_add(buf.len() as u64).ok_or_else(fault)?;
        let ph = self
            .phdrs
            .iter()
            .find(|ph| {
                ph.p_type == PT_LOAD
                    && ph.p_vaddr <= addr
                    && ph
                        .p_vaddr
                        .checked_add(ph.p_filesz)
                        .is_some_and(|e| end <= e)
            })
            .ok_or_else(fault)?;
        let offset = ph
            .p_offset
            .checked_add(addr - ph.p_vaddr)
            .ok_or_else(fault)?;
        std::os::unix::fs::FileExt::read_exact_at(&self.file, buf, offset)
    }
}

/// The layout of the running test binary, found through the auxiliary
/// vector (for the tests of the modules that read a loaded object).
#[cfg(test)]
pub(crate) fn this_program() -> Layout {
    // SAFETY: getauxval() has no preconditions.
    let (phdr, phnum) = unsafe {
        (
            libc::getauxval(libc::AT_PHDR),
            libc::getauxval(libc::AT_PHNUM),
        )
    };
    let phdrs = ProgramHeaders::read(&OwnMemory, phdr, phnum as usize).unwrap();
    let pt_phdr = phdrs.iter().find(|p| p.p_type == PT_PHDR).unwrap();
    Layout::new(&phdrs, phdr - pt_phdr.p_vaddr).unwrap()
}

#[cfg(test)]
// One text segment is the usual case.
#[allow(clippy::single_range_in_vec_init)]
mod tests {
    use super::*;

    /// Builds an ELF64 image as a linker lays out a shared object: header,
    /// program headers, then segments, with offset zero mapped at vaddr
    /// `first_vaddr`.
    fn image(first_vaddr: u64, phdrs: &[ProgramHeader]) -> Vec<u8> {
        let mut bytes = vec![0u8; 0x3000];
        bytes[..4].copy_from_slice(b"\x7fELF");
        bytes[4] = ELFCLASS64;
        bytes[5] = ELFDATA_NATIVE;
        bytes[6] = 1;
        bytes[16..18].copy_from_slice(&3u16.to_ne_bytes());
        bytes[32..40].copy_from_slice(&64u64.to_ne_bytes());
        bytes[54..56].copy_from_slice(&(PHDR_SIZE as u16).to_ne_bytes());
        bytes[56..58].copy_from_slice(&(phdrs.len() as u16).to_ne_bytes());
        for (i, ph) in phdrs.iter().enumerate() {
            let at = 64 + i * PHDR_SIZE;
            let mut ph = *ph;
            if ph.p_type == PT_LOAD && ph.p_offset == 0 {
                ph.p_vaddr = first_vaddr;
            }
            bytes[at..at + 4].copy_from_slice(&ph.p_type.to_ne_bytes());
            bytes[at + 4..at + 8].copy_from_slice(&ph.p_flags.to_ne_bytes());
            bytes[at + 8..at + 16].copy_from_slice(&ph.p_offset.to_ne_bytes());
            bytes[at + 16..at + 24].copy_from_slice(&ph.p_vaddr.to_ne_bytes());
            bytes[at + 24..at + 32].copy_from_slice(&ph.p_vaddr.to_ne_bytes());
            bytes[at + 32..at + 40].copy_from_slice(&ph.p_filesz.to_ne_bytes());
            bytes[at + 40..at + 48].copy_from_slice(&ph.p_memsz.to_ne_bytes());
        }
        bytes
    }

    fn ph(p_type: u32, p_flags: u32, p_offset: u64, p_vaddr: u64, size: u64) -> ProgramHeader {
        ProgramHeader {
            p_type,
            p_flags,
            p_offset,
            p_vaddr,
            p_filesz: size,
            p_memsz: size,
        }
    }

    fn shared_object() -> Vec<ProgramHeader> {
        vec![
            ph(PT_LOAD, 4, 0, 0, 0x1000),
            ph(PT_LOAD, 5, 0x1000, 0x1000, 0x800),
            ph(PT_LOAD, 4, 0x2000, 0x2000, 0x400),
            ph(PT_DYNAMIC, 6, 0x2100, 0x2100, 0x100),
            ph(PT_GNU_SFRAME, 4, 0x2200, 0x2200, 0x80),
        ]
    }

    #[test]
    fn shared_object_at_its_base() {
        let bytes = image(0, &shared_object());
        let mem = Snapshot {
            base: 0x7f00_0000_0000,
            bytes: &bytes,
        };
        let layout = Layout::read_at_header(&mem, 0x7f00_0000_0000).unwrap();
        assert_eq!(layout.bias, 0x7f00_0000_0000);
        assert_eq!(
            layout.text(),
            [0x7f00_0000_1000..0x7f00_0000_1800].as_slice()
        );
        assert_eq!(layout.sframe, Some(0x7f00_0000_2200..0x7f00_0000_2280));
        assert_eq!(layout.dynamic, Some(0x7f00_0000_2100));
    }

    #[test]
    fn executable_linked_at_nonzero_address() {
        let mut phdrs = shared_object();
        for ph in &mut phdrs {
            ph.p_vaddr += 0x40_0000;
        }
        let bytes = image(0x40_0000, &phdrs);
        let mem = Snapshot {
            base: 0x40_0000,
            bytes: &bytes,
        };
        let layout = Layout::read_at_header(&mem, 0x40_0000).unwrap();
        assert_eq!(layout.bias, 0);
        assert_eq!(layout.text(), &[(0x40_1000..0x40_1800)]);
        assert_eq!(layout.sframe, Some(0x40_2200..0x40_2280));
    }

    #[test]
    fn object_without_sframe() {
        let phdrs: Vec<_> = shared_object()
            .into_iter()
            .filter(|p| p.p_type != PT_GNU_SFRAME)
            .collect();
        let bytes = image(0, &phdrs);
        let mem = Snapshot {
            base: 0x1000_0000,
            bytes: &bytes,
        };
        let layout = Layout::read_at_header(&mem, 0x1000_0000).unwrap();
        assert_eq!(layout.sframe, None);
        assert_eq!(layout.text().len(), 1);
    }

    #[test]
    fn program_headers_given_directly() {
        // The main program: AT_PHDR points at the headers already mapped.
        let bytes = image(0, &shared_object());
        let phdrs = ProgramHeaders::parse(&bytes[64..], 5).unwrap();
        let layout = Layout::new(&phdrs, 0x5555_0000_0000).unwrap();
        assert_eq!(
            layout.text(),
            [0x5555_0000_1000..0x5555_0000_1800].as_slice()
        );
        assert_eq!(layout.sframe, Some(0x5555_0000_2200..0x5555_0000_2280));
    }

    #[test]
    fn rejects_what_is_not_an_elf64_object() {
        let mut bytes = image(0, &shared_object());
        let read =
            |bytes: &[u8]| Layout::read_at_header(&Snapshot { base: 0, bytes }, 0).map(|_| ());
        bytes[4] = 1;
        assert!(matches!(read(&bytes), Err(ImageError::Foreign)));
        bytes[0] = 0;
        assert!(matches!(read(&bytes), Err(ImageError::NotElf)));
    }

    #[test]
    fn rejects_odd_program_header_tables() {
        let mut bytes = image(0, &shared_object());
        bytes[54..56].copy_from_slice(&32u16.to_ne_bytes());
        let read =
            |bytes: &[u8]| Layout::read_at_header(&Snapshot { base: 0, bytes }, 0).map(|_| ());
        assert!(matches!(read(&bytes), Err(ImageError::BadPhentsize(32))));
        bytes[54..56].copy_from_slice(&(PHDR_SIZE as u16).to_ne_bytes());
        bytes[56..58].copy_from_slice(&PN_XNUM.to_ne_bytes());
        assert!(matches!(
            read(&bytes),
            Err(ImageError::TooManyPhdrs(PN_XNUM))
        ));
        // Program headers beyond the end of the first segment's file bytes.
        bytes[56..58].copy_from_slice(&5u16.to_ne_bytes());
        bytes[32..40].copy_from_slice(&0x1000u64.to_ne_bytes());
        assert!(read(&bytes).is_err());
        // An offset that wraps the address space.
        bytes[32..40].copy_from_slice(&u64::MAX.to_ne_bytes());
        assert!(matches!(read(&bytes), Err(ImageError::Overflow)));
    }

    #[test]
    fn no_first_load_segment() {
        let phdrs: Vec<_> = shared_object()
            .into_iter()
            .filter(|p| p.p_offset != 0)
            .collect();
        let bytes = image(0, &phdrs);
        let mem = Snapshot {
            base: 0,
            bytes: &bytes,
        };
        assert!(matches!(
            Layout::read_at_header(&mem, 0),
            Err(ImageError::NoFirstLoad)
        ));
    }

    #[test]
    fn truncated_memory_is_a_read_error() {
        let bytes = image(0, &shared_object());
        let mem = Snapshot {
            base: 0x1000,
            bytes: &bytes[..100],
        };
        assert!(matches!(
            Layout::read_at_header(&mem, 0x1000),
            Err(ImageError::Read(_))
        ));
        assert!(matches!(
            Layout::read_at_header(&mem, 0),
            Err(ImageError::Read(_))
        ));
    }

    #[test]
    fn own_memory_reads_mapped_and_refuses_unmapped() {
        let data = *b"some bytes in our own memory";
        let mut buf = [0u8; 28];
        OwnMemory.read(data.as_ptr() as u64, &mut buf).unwrap();
        assert_eq!(buf, data);
        // Page zero is never mapped: an error, not a crash.
        assert!(OwnMemory.read(0, &mut buf).is_err());
        assert!(OwnMemory.read(u64::MAX - 4, &mut buf).is_err());
    }

    #[test]
    fn own_memory_finds_this_test_binary() {
        // The test binary's program headers, found through the auxiliary
        // vector, describe text that contains this function.
        // SAFETY: getauxval has no preconditions.
        let (at_phdr, at_phnum) = unsafe {
            (
                libc::getauxval(libc::AT_PHDR),
                libc::getauxval(libc::AT_PHNUM),
            )
        };
        let phdrs = ProgramHeaders::read(&OwnMemory, at_phdr, at_phnum as usize).unwrap();
        let pt_phdr = phdrs.iter().find(|p| p.p_type == PT_PHDR).unwrap();
        let layout = Layout::new(&phdrs, at_phdr - pt_phdr.p_vaddr).unwrap();
        let here = own_memory_finds_this_test_binary as *const () as u64;
        assert!(layout.text().iter().any(|r| r.contains(&here)));
        let first = phdrs.first_load().unwrap();
        let again = Layout::read_at_header(&OwnMemory, layout.bias + first.p_vaddr).unwrap();
        assert_eq!(again, layout);
    }

    /// Memory that counts the reads that reach it.
    struct Counted<'a> {
        mem: Snapshot<'a>,
        reads: core::cell::Cell<usize>,
    }

    impl Memory for Counted<'_> {
        fn read(&self, addr: u64, buf: &mut [u8]) -> io::Result<()> {
            self.reads.set(self.reads.get() + 1);
            self.mem.read(addr, buf)
        }
    }

    fn counted(base: u64, bytes: &[u8]) -> Counted<'_> {
        Counted {
            mem: Snapshot { base, bytes },
            reads: core::cell::Cell::new(0),
        }
    }

    #[test]
    fn read_ahead_reads_the_headers_once() {
        // Five program headers and a note at 0x200: all in the first KiB.
        let mut phdrs = shared_object();
        phdrs.push(ph(PT_NOTE, 4, 0x200, 0x200, 0x24));
        let bytes = image(0, &phdrs);
        let mem = counted(0x7f00_0000_0000, &bytes);
        let ahead = ReadAhead::new(&mem);
        let layout = Layout::read_at_header(&ahead, 0x7f00_0000_0000).unwrap();
        let mut note = [0u8; 0x24];
        ahead.read(layout.notes()[0].start, &mut note).unwrap();
        assert_eq!(mem.reads.get(), 1);
        assert_eq!(note, bytes[0x200..0x224]);
        // The same answers as reading each header.
        let direct = counted(0x7f00_0000_0000, &bytes);
        assert_eq!(
            Layout::read_at_header(&direct, 0x7f00_0000_0000).unwrap(),
            layout
        );
        assert_eq!(direct.reads.get(), 2);
        // Beyond the copy: from the memory, each time.
        let mut word = [0u8; 8];
        ahead.read(0x7f00_0000_0400, &mut word).unwrap();
        ahead.read(0x7f00_0000_03fc, &mut word).unwrap();
        assert_eq!(word, bytes[0x3fc..0x404]);
        assert_eq!(mem.reads.get(), 3);
        assert!(ahead.read(0x7f00_0000_3000, &mut word).is_err());
    }

    #[test]
    fn read_ahead_stays_in_the_first_4k_block() {
        // Memory that ends 16 bytes after the first read, at a 4 KiB
        // boundary: reading ahead a whole KiB would fail.
        let bytes: Vec<u8> = (0..0x1010u32).map(|i| i as u8).collect();
        let mem = counted(0x1_0000 - 0x1000, &bytes);
        let ahead = ReadAhead::new(&mem);
        let mut buf = [0u8; 8];
        ahead.read(0xfff0, &mut buf).unwrap();
        ahead.read(0xfff8, &mut buf).unwrap();
        assert_eq!(buf, bytes[0xff8..0x1000]);
        assert_eq!(mem.reads.get(), 1);
        // Past the block: the memory's own answer.
        ahead.read(0x1_0000, &mut buf).unwrap();
        assert_eq!(buf, bytes[0x1000..0x1008]);
        assert!(ahead.read(0x1_000c, &mut buf).is_err());
    }

    #[test]
    fn read_ahead_that_fails_leaves_reads_to_the_memory() {
        // 64 bytes of memory: the KiB ahead of the first read cannot be
        // read, the reads themselves can.
        let bytes: Vec<u8> = (0..64u8).collect();
        let mem = counted(0x5000, &bytes);
        let ahead = ReadAhead::new(&mem);
        let mut buf = [0u8; 16];
        ahead.read(0x5000, &mut buf).unwrap();
        assert_eq!(buf, bytes[..16]);
        ahead.read(0x5030, &mut buf).unwrap();
        assert_eq!(buf, bytes[0x30..0x40]);
        assert!(ahead.read(0x5038, &mut buf).is_err());
        // The failed read ahead, then each read.
        assert_eq!(mem.reads.get(), 4);
        // A first read larger than the read ahead: not read ahead.
        let big = counted(0x5000, &bytes);
        let ahead = ReadAhead::new(&big);
        let mut large = vec![0u8; READ_AHEAD + 1];
        assert!(ahead.read(0x5000, &mut large).is_err());
        let mut all = [0u8; 64];
        ahead.read(0x5000, &mut all).unwrap();
        assert_eq!(big.reads.get(), 2);
    }

    #[test]
    fn program_headers_past_a_chunk() {
        // More program headers than one read takes.
        let mut phdrs = shared_object();
        for i in 0..(2 * PHDR_CHUNK as u64) {
            phdrs.push(ph(PT_NOTE, 4, 0x200 + 8 * i, 0x200 + 8 * i, 8));
        }
        let bytes = image(0, &phdrs);
        let mem = counted(0, &bytes);
        let read = ProgramHeaders::read(&mem, 64, phdrs.len()).unwrap();
        assert_eq!(mem.reads.get(), 3);
        let parsed = ProgramHeaders::parse(&bytes[64..], phdrs.len()).unwrap();
        assert_eq!(read.iter().count(), phdrs.len());
        assert!(read.iter().eq(parsed.iter()));
        assert_eq!(read.iter().nth(7).unwrap().p_vaddr, 0x210);
    }
}
