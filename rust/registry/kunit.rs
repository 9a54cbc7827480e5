// SPDX-License-Identifier: GPL-2.0

//! KUnit suite for the registry: the decoder as registration uses it,
//! under the kernel's overflow checks.

use kernel::prelude::*;

#[kunit_tests(sframe_unwind_registry_decoder)]
mod registry_decoder_tests {
    use crate::sframe::Section;

    /// Real `.sframe` sections (gas 2.44 for V2, 2.47 for V3, from the
    /// decoder's `chain` fixture; `objcopy -O binary --only-section=.sframe`),
    /// both at address 0x2208 in their objects.
    const V2: &[u8] = include_bytes!("../../tests/kunit/chain-v2.sframe");
    const V3: &[u8] = include_bytes!("../../tests/kunit/chain-v3.sframe");
    const ADDR: u64 = 0x2208;

    /// What registration does, under the kernel's overflow checks: parse,
    /// validate, take the text range, then look up every PC around it.
    fn register_and_look_up(bytes: &[u8]) {
        let addr = ADDR;
        let s = Section::parse(bytes, addr);
        assert!(s.is_ok());
        let Ok(s) = s else {
            return;
        };
        assert!(s.validate(&mut || {}).is_ok());
        let range = s.text_range();
        assert!(matches!(range, Ok(Some(_))));
        let Ok(Some((lo, hi))) = range else {
            return;
        };
        assert!(lo < hi);
        let mut rows = 0;
        for pc in lo.saturating_sub(64)..hi.saturating_add(64) {
            if s.find_row(pc).ok().flatten().is_some() {
                rows += 1;
            }
        }
        assert!(rows > 0);
        // Far addresses, including the extremes.
        for pc in [
            0,
            1,
            u64::MAX,
            u64::MAX - 1,
            lo.wrapping_sub(1 << 40),
            hi.wrapping_add(1 << 40),
        ] {
            assert!(s.find_row(pc).ok().flatten().is_none());
        }
        // The same bytes at another address: the text range moves with it,
        // which is what sharing one copy between processes relies on.
        let moved = Section::parse(bytes, addr.wrapping_add(0x10_0000)).map(|m| m.text_range());
        assert!(matches!(moved, Ok(Ok(Some(_)))));
        let Ok(Ok(Some((lo2, hi2)))) = moved else {
            return;
        };
        assert_eq!(
            (lo2.wrapping_sub(lo), hi2.wrapping_sub(hi)),
            (0x10_0000, 0x10_0000)
        );
    }

    #[test]
    fn v2_section() {
        register_and_look_up(V2);
    }

    #[test]
    fn v3_section() {
        register_and_look_up(V3);
    }

    #[test]
    fn every_single_byte_corruption_is_handled() {
        // Validation either fails or yields a section whose lookups do not
        // panic: what registration relies on, for every byte of a real
        // section flipped in turn.
        let (addr, bytes) = (ADDR, V2);
        let mut copy = [0u8; 512];
        let n = bytes.len().min(copy.len());
        for i in 0..n {
            copy[..n].copy_from_slice(&bytes[..n]);
            copy[i] ^= 0xff;
            let Ok(s) = Section::parse(&copy[..n], addr) else {
                continue;
            };
            if s.validate(&mut || {}).is_err() {
                continue;
            }
            if let Ok(Some((lo, hi))) = s.text_range() {
                for pc in lo..hi.min(lo.saturating_add(256)) {
                    let _ = s.find_row(pc);
                }
            }
        }
    }
}
