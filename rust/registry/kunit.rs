// SPDX-License-Identifier: GPL-2.0

//! KUnit suites for the registry: the decoder as registration uses it,
//! under the kernel's overflow checks, and a copy's lookup index.

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

#[kunit_tests(sframe_unwind_registry_index)]
mod registry_index_tests {
    use crate::registry::copy_index::{
        copy_charge,
        CopyIndex, //
    };
    use crate::sframe::{
        Budget,
        Section, //
    };

    /// The decoder suite's real sections (gas 2.44 for V2, 2.47 for V3),
    /// at address 0x2208 in their objects.
    const V2: &[u8] = include_bytes!("../../tests/kunit/chain-v2.sframe");
    const V3: &[u8] = include_bytes!("../../tests/kunit/chain-v3.sframe");
    const ADDR: u64 = 0x2208;

    /// A validated section of `bytes` at `addr`.
    fn section(bytes: &[u8], addr: u64) -> Option<Section<'_>> {
        let s = Section::parse(bytes, addr).ok()?;
        s.validate(&mut || {}).ok()?;
        Some(s)
    }

    /// The index and the row table as registration builds them
    /// (`GFP_KERNEL_ACCOUNT`, with the rescheduling callback), then, at the
    /// copy's own address and at another one (a shared copy registered
    /// elsewhere): the same rows through them as without at every PC
    /// around the text, every lookup through them charged at least one
    /// unit and at most one plus a binary search over every entry (no FRE
    /// scan) beyond what the decoder pays for the lookups it is sent, and
    /// the lookups of hits less in all than the decoder's.
    fn same_rows(bytes: &[u8]) {
        let s = section(bytes, ADDR);
        assert!(s.is_some());
        let Some(s) = s else {
            return;
        };
        let mut resched = 0u32;
        let index = CopyIndex::build(&s, &mut || resched += 1);
        assert!(index.is_ok());
        let Ok(index) = index else {
            return;
        };
        for addr in [ADDR, ADDR.wrapping_add(0x7f00_0000_0000)] {
            let plain = section(bytes, addr);
            assert!(plain.is_some());
            let Some(plain) = plain else {
                return;
            };
            let mut fast = plain;
            index.attach(&mut fast);
            assert!(fast.has_index() && fast.has_table());
            assert!(!plain.has_index() && !plain.has_table());
            // Entries: at most one per FRE and two per FDE.
            let entries = plain
                .num_fres()
                .saturating_add(plain.num_fdes().saturating_mul(2));
            let most = 1 + (u32::BITS - entries.leading_zeros());
            let range = plain.text_range();
            assert!(matches!(range, Ok(Some(_))));
            let Ok(Some((lo, hi))) = range else {
                return;
            };
            let (mut rows, mut fast_spent, mut plain_spent) = (0u32, 0u32, 0u32);
            for pc in lo.saturating_sub(64)..hi.saturating_add(64) {
                let row = plain.find_row(pc);
                assert_eq!(fast.find_row(pc), row);
                let (mut a, mut b) = (Budget::unlimited(), Budget::unlimited());
                assert_eq!(
                    fast.find_row_within(pc, &mut a),
                    plain.find_row_within(pc, &mut b)
                );
                assert!(a.spent() >= 1);
                // Plus the decoder's own work where the table sends a
                // lookup on to it (the PLT's PCMASK function).
                assert!(a.spent() <= most.saturating_add(b.spent()));
                if matches!(row, Ok(Some(_))) {
                    rows += 1;
                    fast_spent = fast_spent.saturating_add(a.spent());
                    plain_spent = plain_spent.saturating_add(b.spent());
                }
            }
            assert!(rows > 0);
            // Summed over every PC with a row: the table pays.
            assert!(fast_spent < plain_spent);
        }
    }

    #[test]
    fn v2_indexed_rows_are_the_plain_rows() {
        same_rows(V2);
    }

    #[test]
    fn v3_indexed_rows_are_the_plain_rows() {
        same_rows(V3);
    }

    /// A copy is charged its index's, row table's and hints' bytes as well
    /// as its own: their words, all of them (a copy's owner pays for what it makes the
    /// module hold), and a revived copy's index costs what the original
    /// did.  The same `charge` is what the last use gives back.
    fn index_is_charged(bytes: &[u8]) {
        let s = section(bytes, ADDR);
        assert!(s.is_some());
        let Some(s) = s else {
            return;
        };
        let words = s.index_words();
        assert!(matches!(words, Ok(n) if n > 8));
        let Ok(words) = words else {
            return;
        };
        let index = CopyIndex::build(&s, &mut || {});
        assert!(index.is_ok());
        let Ok(index) = index else {
            return;
        };
        let shape = s.table_shape(&mut || {});
        assert!(matches!(shape, Ok(ref shape) if shape.words() > 10));
        let Ok(shape) = shape else {
            return;
        };
        // The table's words and its hint slots (a power of two, 4 at
        // least).
        let slots = shape.hint_slots();
        assert!(slots.is_power_of_two() && slots >= 4);
        let index_bytes = 4 * (words + shape.words()) as u64 + 8 * slots as u64;
        assert_eq!(index.kernel_bytes(), index_bytes);
        assert_eq!(
            copy_charge(bytes.len(), &index),
            bytes.len() as u64 + index_bytes
        );
        let clone = index.try_clone();
        assert!(clone.is_ok());
        let Ok(clone) = clone else {
            return;
        };
        assert_eq!(clone.kernel_bytes(), index_bytes);
        let attached = |ix: &CopyIndex| {
            let mut a = s;
            ix.attach(&mut a);
            a.has_index() && a.has_table() && a.has_hints()
        };
        assert!(attached(&index) && attached(&clone));
    }

    #[test]
    fn v2_index_bytes_are_charged() {
        index_is_charged(V2);
    }

    #[test]
    fn v3_index_bytes_are_charged() {
        index_is_charged(V3);
    }
}
