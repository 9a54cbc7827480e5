// SPDX-License-Identifier: GPL-2.0

//! KUnit suite for exec registration: where an exec'd program and its
//! interpreter keep their SFrame sections.

use kernel::prelude::*;

#[kunit_tests(sframe_unwind_exec_image)]
mod exec_image_tests {
    use crate::lifecycle::exec_image::*;
    use crate::sframe::unwind::Memory;
    use kernel::prelude::*;

    /// An address space of one mapping: `bytes` at `base`.
    struct Image {
        base: u64,
        bytes: KVec<u8>,
    }

    impl ImageMemory for Image {}

    impl Memory for Image {
        fn read_u64(&mut self, addr: u64) -> Option<u64> {
            let mut w = [0u8; 8];
            self.read(addr, &mut w).then(|| u64::from_le_bytes(w))
        }

        fn read(&mut self, addr: u64, buf: &mut [u8]) -> bool {
            let Some(off) = addr.checked_sub(self.base) else {
                return false;
            };
            let Ok(off) = usize::try_from(off) else {
                return false;
            };
            match self.bytes.get(off..off.saturating_add(buf.len())) {
                Some(src) if src.len() == buf.len() => {
                    buf.copy_from_slice(src);
                    true
                }
                _ => false,
            }
        }
    }

    const PT_LOAD: u32 = 1;
    const PT_PHDR: u32 = 6;
    const PT_GNU_SFRAME: u32 = 0x6474_e554;

    /// (type, flags, offset, vaddr, filesz, memsz)
    type Ph = (u32, u32, u64, u64, u64, u64);

    /// An ELF header and `phdrs` right after it, mapped at `base`, as a
    /// linker lays out the start of a file.
    fn image(base: u64, phdrs: &[Ph]) -> Result<Image> {
        let mut b = KVec::new();
        b.extend_from_slice(&[0u8; 64], GFP_KERNEL)?;
        b[..4].copy_from_slice(b"\x7fELF");
        b[4] = 2; // ELFCLASS64
        b[5] = 1; // ELFDATA2LSB
        b[18..20].copy_from_slice(&crate::arch::ELF_MACHINE.to_le_bytes());
        b[32..40].copy_from_slice(&64u64.to_le_bytes()); // e_phoff
        b[54..56].copy_from_slice(&56u16.to_le_bytes()); // e_phentsize
        b[56..58].copy_from_slice(&(phdrs.len() as u16).to_le_bytes());
        for &(t, f, off, vaddr, filesz, memsz) in phdrs {
            let mut ph = [0u8; 56];
            ph[0..4].copy_from_slice(&t.to_le_bytes());
            ph[4..8].copy_from_slice(&f.to_le_bytes());
            ph[8..16].copy_from_slice(&off.to_le_bytes());
            ph[16..24].copy_from_slice(&vaddr.to_le_bytes());
            ph[32..40].copy_from_slice(&filesz.to_le_bytes());
            ph[40..48].copy_from_slice(&memsz.to_le_bytes());
            b.extend_from_slice(&ph, GFP_KERNEL)?;
        }
        Ok(Image { base, bytes: b })
    }

    /// A PIE: PT_PHDR, text, .sframe in the read-only segment.
    const PIE: [Ph; 5] = [
        (PT_PHDR, 4, 64, 64, 280, 280),
        (PT_LOAD, 4, 0, 0, 0x800, 0x800),
        (PT_LOAD, 5, 0x1000, 0x1000, 0x900, 0x900),
        (PT_LOAD, 4, 0x2000, 0x2000, 0x400, 0x400),
        (PT_GNU_SFRAME, 4, 0x2100, 0x2100, 0x80, 0x80),
    ];

    #[test]
    fn program_with_pt_phdr() -> Result {
        let bias = 0x5555_0000_0000;
        let mut mem = image(bias, &PIE)?;
        let l = Layout::program(&mut mem, bias + 64, 5).map_err(|_| EINVAL)?;
        assert_eq!(l.sframe, Some((bias + 0x2100, 0x80)));
        assert_eq!(l.text(), &[(bias + 0x1000, bias + 0x1900)]);
        Ok(())
    }

    #[test]
    fn static_program_without_pt_phdr() -> Result {
        // Linked at 0x400000, no PT_PHDR: the ELF header sits before the
        // program headers.
        let phdrs: [Ph; 3] = [
            (PT_LOAD, 4, 0, 0x40_0000, 0x200, 0x200),
            (PT_LOAD, 5, 0x1000, 0x40_1000, 0x8000, 0x8000),
            (PT_GNU_SFRAME, 4, 0x9000, 0x40_9000, 0x300, 0x300),
        ];
        let mut mem = image(0x40_0000, &phdrs)?;
        let l = Layout::program(&mut mem, 0x40_0040, 3).map_err(|_| EINVAL)?;
        assert_eq!(l.sframe, Some((0x40_9000, 0x300)));
        assert_eq!(l.text(), &[(0x40_1000, 0x40_9000)]);
        // A count that is not the header's: refused, not guessed.
        assert_eq!(
            Layout::program(&mut mem, 0x40_0040, 2),
            Err(ImageError::BadPhdrs)
        );
        Ok(())
    }

    #[test]
    fn interpreter_at_its_header() -> Result {
        let base = 0x7f00_0000_0000;
        let mut mem = image(base, &PIE[1..])?;
        let l = Layout::at_header(&mut mem, base).map_err(|_| EINVAL)?;
        assert_eq!(l.sframe, Some((base + 0x2100, 0x80)));
        assert_eq!(l.text(), &[(base + 0x1000, base + 0x1900)]);
        Ok(())
    }

    #[test]
    fn malformed_objects() -> Result {
        let base = 0x1000_0000;
        let mut mem = image(base, &PIE)?;
        assert_eq!(
            Layout::program(&mut mem, base + 64, 0),
            Err(ImageError::BadPhdrs)
        );
        assert_eq!(
            Layout::program(&mut mem, base + 64, 65),
            Err(ImageError::BadPhdrs)
        );
        // Headers beyond the mapping.
        assert_eq!(
            Layout::program(&mut mem, base + 64, 6),
            Err(ImageError::Unreadable)
        );
        assert_eq!(
            Layout::at_header(&mut mem, base + 8),
            Err(ImageError::NotElf)
        );
        mem.bytes[18] = 3; // EM_386
        assert_eq!(Layout::at_header(&mut mem, base), Err(ImageError::NotElf));
        mem.bytes[18..20].copy_from_slice(&crate::arch::ELF_MACHINE.to_le_bytes());
        // A first PT_LOAD too short to hold the headers it was read from.
        mem.bytes[64 + 56 + 32..64 + 56 + 40].copy_from_slice(&0x10u64.to_le_bytes());
        assert_eq!(Layout::at_header(&mut mem, base), Err(ImageError::BadPhdrs));
        // A segment whose end wraps the address space.
        let mut wrap = image(base, &[(PT_LOAD, 5, 0, u64::MAX - 8, 0x100, 0x100)])?;
        assert!(Layout::at_header(&mut wrap, base).is_err());
        Ok(())
    }
}
