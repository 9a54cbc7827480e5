// SPDX-License-Identifier: GPL-2.0

//! KUnit suites for the registry: the RCU maple tree wrapper, and the
//! decoder as registration uses it, under the kernel's overflow checks.

use kernel::prelude::*;

#[kunit_tests(sframe_unwind_rcu_maple)]
mod rcu_maple_tests {
    use crate::rcu_maple::{
        Gfp,
        RcuMapleTree, //
    };
    use core::sync::atomic::{
        AtomicUsize,
        Ordering, //
    };
    use kernel::{
        prelude::*,
        sync::rcu, //
    };

    static DROPS: AtomicUsize = AtomicUsize::new(0);

    struct Value(u32);

    impl Drop for Value {
        fn drop(&mut self) {
            DROPS.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn tree() -> Result<Pin<KBox<RcuMapleTree<Value>>>> {
        KBox::pin_init(RcuMapleTree::new(), GFP_KERNEL)
    }

    #[test]
    fn insert_load_overlap() -> Result {
        let t = tree()?;
        assert!(t
            .insert_range(0x1000, 0x1fff, Value(1), Gfp::Kernel)
            .is_ok());
        assert!(t
            .insert_range(0x3000, 0x3fff, Value(2), Gfp::Kernel)
            .is_ok());
        let e = t.insert_range(0x1800, 0x27ff, Value(3), Gfp::Kernel).err();
        assert_eq!(e.map(|e| (e.value.0, e.error == EEXIST)), Some((3, true)));
        assert!(t
            .insert_range(0x2000, 0x2fff, Value(4), Gfp::Kernel)
            .is_ok());
        assert!(t.insert_range(9, 8, Value(5), Gfp::Kernel).is_err());
        let g = rcu::Guard::new();
        assert_eq!(t.load(0xfff, &g).map(|v| v.0), None);
        assert_eq!(t.load(0x1000, &g).map(|v| v.0), Some(1));
        assert_eq!(t.load(0x1fff, &g).map(|v| v.0), Some(1));
        assert_eq!(t.load(0x2000, &g).map(|v| v.0), Some(4));
        assert_eq!(t.load(0x3fff, &g).map(|v| v.0), Some(2));
        assert_eq!(t.load(0x4000, &g).map(|v| v.0), None);
        Ok(())
    }

    #[test]
    fn for_each_in_order_and_overlapping() -> Result {
        let t = tree()?;
        for i in (0..10u32).rev() {
            let base = 0x10000 * (i as usize + 1);
            assert!(t
                .insert_range(base, base + 0xfff, Value(i), Gfp::Kernel)
                .is_ok());
        }
        let g = rcu::Guard::new();
        let mut seen = KVec::new();
        t.for_each(0, usize::MAX, &g, |v| {
            let _ = seen.push_within_capacity(v.0);
        });
        // No capacity reserved: count instead.
        let mut n = 0u32;
        let mut last = None;
        t.for_each(0, usize::MAX, &g, |v| {
            assert!(last.is_none_or(|l| l < v.0));
            last = Some(v.0);
            n += 1;
        });
        assert_eq!(n, 10);
        // [0x20800, 0x40000] overlaps the ranges of values 1, 2 and 3.
        let mut hits = 0u32;
        t.for_each(0x20800, 0x40000, &g, |v| hits |= 1 << v.0);
        assert_eq!(hits, 0b1110);
        drop(seen);
        Ok(())
    }

    #[test]
    fn erase_defers_the_drop() -> Result {
        let t = tree()?;
        assert!(t
            .insert_range(0x1000, 0x1fff, Value(7), Gfp::Kernel)
            .is_ok());
        let before = DROPS.load(Ordering::Relaxed);
        let e = t.erase(0x1800);
        assert_eq!(e.as_ref().map(|v| v.0), Some(7));
        assert!(t.erase(0x1800).is_none());
        {
            let g = rcu::Guard::new();
            assert!(t.load(0x1000, &g).is_none());
        }
        drop(e);
        rcu::rcu_barrier();
        assert_eq!(DROPS.load(Ordering::Relaxed), before + 1);
        Ok(())
    }

    #[test]
    fn clear_and_reuse() -> Result {
        let t = tree()?;
        for i in 0..100u32 {
            let base = 0x1000 * (i as usize + 1);
            assert!(t
                .insert_range(base, base + 0x7ff, Value(i), Gfp::Kernel)
                .is_ok());
        }
        let mut n = 0;
        t.clear(|e| {
            n += 1;
            drop(e);
        });
        assert_eq!(n, 100);
        {
            let g = rcu::Guard::new();
            let mut left = 0;
            t.for_each(0, usize::MAX, &g, |_| left += 1);
            assert_eq!(left, 0);
        }
        assert!(t
            .insert_range(0x1000, 0x1fff, Value(1), Gfp::Kernel)
            .is_ok());
        drop(t);
        rcu::rcu_barrier();
        Ok(())
    }
}

#[kunit_tests(sframe_unwind_registry_decoder)]
mod registry_decoder_tests {
    use crate::sframe::Section;

    /// Real `.sframe` sections (gas 2.44 for V2, 2.47 for V3, from the
    /// decoder's `chain` fixture; `objcopy -O binary --only-section=.sframe`),
    /// both at address 0x2208 in their objects.
    const V2: &[u8] = include_bytes!("../tests/kunit/chain-v2.sframe");
    const V3: &[u8] = include_bytes!("../tests/kunit/chain-v3.sframe");
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
