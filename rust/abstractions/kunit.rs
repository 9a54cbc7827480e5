// SPDX-License-Identifier: GPL-2.0

//! KUnit suites for the abstractions: the RCU maple tree wrapper and slot,
//! the per-CPU counters, and the sample path's small user reads.

use kernel::prelude::*;

#[kunit_tests(sframe_unwind_rcu_maple)]
mod rcu_maple_tests {
    use crate::abstractions::rcu_maple::{
        RcuMapleTree,
        RcuSlot,
        TreeValue, //
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

    // SAFETY: Dropping a `Value` only counts, which is safe in an RCU
    // callback.
    unsafe impl TreeValue for Value {
        const DROP_AT_ERASE: bool = false;
    }

    /// A value dropped as soon as it is erased.
    struct AtErase(u32);

    static AT_ERASE_DROPS: AtomicUsize = AtomicUsize::new(0);

    impl Drop for AtErase {
        fn drop(&mut self) {
            AT_ERASE_DROPS.fetch_add(1, Ordering::Relaxed);
        }
    }

    // SAFETY: Dropping an `AtErase` invalidates nothing a reader could hold.
    unsafe impl TreeValue for AtErase {
        const DROP_AT_ERASE: bool = true;
    }

    /// Fails the `n`th fault-injection site the test thread reaches;
    /// `false` without `CONFIG_FAULT_INJECTION`.
    fn fail_nth(n: u32) -> bool {
        // SAFETY: Sets the current task's own counter.
        unsafe { crate::abstractions::ffi::sframe_set_fail_nth(n) }
    }

    /// How many sites remain before the injected failure (0: it fired, or
    /// none was armed).
    fn fail_nth_left() -> u32 {
        // SAFETY: Reads the current task's own counter.
        unsafe { crate::abstractions::ffi::sframe_fail_nth() }
    }

    fn count(t: &RcuMapleTree<Value>) -> usize {
        let g = rcu::Guard::new();
        let mut n = 0;
        t.for_each(0, usize::MAX, &g, |_| n += 1);
        n
    }

    fn tree() -> Result<Pin<KBox<RcuMapleTree<Value>>>> {
        KBox::pin_init(RcuMapleTree::new(), GFP_KERNEL)
    }

    #[test]
    fn insert_load_overlap() -> Result {
        let t = tree()?;
        assert!(t.insert_range(0x1000, 0x1fff, Value(1)).is_ok());
        assert!(t.insert_range(0x3000, 0x3fff, Value(2)).is_ok());
        let e = t.insert_range(0x1800, 0x27ff, Value(3)).err();
        assert_eq!(e.map(|e| (e.value.0, e.error == EEXIST)), Some((3, true)));
        assert!(t.insert_range(0x2000, 0x2fff, Value(4)).is_ok());
        assert!(t.insert_range(9, 8, Value(5)).is_err());
        let g = rcu::Guard::new();
        assert_eq!(t.load(0xfff, &g).map(|v| v.0), None);
        assert_eq!(t.load(0x1000, &g).map(|v| v.0), Some(1));
        assert_eq!(t.load(0x1fff, &g).map(|v| v.0), Some(1));
        assert_eq!(t.load(0x2000, &g).map(|v| v.0), Some(4));
        assert_eq!(t.load(0x3fff, &g).map(|v| v.0), Some(2));
        assert_eq!(t.load(0x4000, &g).map(|v| v.0), None);
        drop(g);
        // A tree must be emptied before it is dropped.
        t.clear(drop);
        Ok(())
    }

    /// A slot holds one value, lends it under RCU, and releases it after a
    /// grace period once taken out, or when dropped full.
    #[test]
    fn slot_set_get_take() -> Result {
        // Values earlier tests erased are dropped after a grace period.
        rcu::rcu_barrier();
        let drops = DROPS.load(Ordering::Relaxed);
        let slot = RcuSlot::<Value>::new();
        {
            let g = rcu::Guard::new();
            assert!(slot.get(&g).is_none());
        }
        assert!(slot.set(Value(7)).is_ok());
        // Full: the value comes back.
        assert_eq!(slot.set(Value(8)).err().map(|v| v.0), Some(8));
        {
            let g = rcu::Guard::new();
            assert_eq!(slot.get(&g).map(|v| v.0), Some(7));
        }
        let taken = slot.take();
        assert_eq!(taken.as_ref().map(|v| v.0), Some(7));
        assert!(slot.take().is_none());
        drop(taken);
        assert!(slot.set(Value(9)).is_ok());
        drop(slot);
        rcu::rcu_barrier();
        // Values 8 (handed back), 7 (taken) and 9 (dropped with the slot).
        assert_eq!(DROPS.load(Ordering::Relaxed) - drops, 3);
        Ok(())
    }

    #[test]
    fn for_each_in_order_and_overlapping() -> Result {
        let t = tree()?;
        for i in (0..10u32).rev() {
            let base = 0x10000 * (i as usize + 1);
            assert!(t.insert_range(base, base + 0xfff, Value(i)).is_ok());
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
        drop(g);
        t.clear(drop);
        Ok(())
    }

    #[test]
    fn erase_defers_the_drop() -> Result {
        let t = tree()?;
        assert!(t.insert_range(0x1000, 0x1fff, Value(7)).is_ok());
        // Values of the suite's earlier trees still waiting for their
        // grace period would count here too.
        rcu::rcu_barrier();
        let before = DROPS.load(Ordering::Relaxed);
        let e = t.erase(0x1800)?;
        assert_eq!(e.as_ref().map(|v| v.0), Some(7));
        assert!(t.erase(0x1800)?.is_none());
        assert_eq!(DROPS.load(Ordering::Relaxed), before);
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
            assert!(t.insert_range(base, base + 0x7ff, Value(i)).is_ok());
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
        assert!(t.insert_range(0x1000, 0x1fff, Value(1)).is_ok());
        t.clear(drop);
        drop(t);
        rcu::rcu_barrier();
        Ok(())
    }

    #[test]
    fn next_steps_through_every_range() -> Result {
        let t = tree()?;
        for i in 0..20u32 {
            let base = 0x1000 * (i as usize + 1);
            assert!(t.insert_range(base, base + 0xff, Value(i)).is_ok());
        }
        assert!(t
            .insert_range(usize::MAX - 0xff, usize::MAX, Value(20))
            .is_ok());
        let mut at = Some(0usize);
        let mut seen = 0u32;
        while at.is_some() {
            let g = rcu::Guard::new();
            if let Some(v) = t.next(&mut at, &g) {
                assert_eq!(v.0, seen);
                seen += 1;
            }
        }
        // The range ending at `usize::MAX` ends the walk rather than
        // wrapping to the start.
        assert_eq!(seen, 21);
        t.clear(drop);
        Ok(())
    }

    #[test]
    fn at_erase_values_drop_at_once() -> Result {
        let t = KBox::pin_init(RcuMapleTree::<AtErase>::new(), GFP_KERNEL)?;
        assert!(t.insert_range(0x1000, 0x1fff, AtErase(1)).is_ok());
        assert!(t.insert_range(0x3000, 0x3fff, AtErase(2)).is_ok());
        let before = AT_ERASE_DROPS.load(Ordering::Relaxed);
        let e = t.erase(0x1000)?;
        assert_eq!(e.as_ref().map(|v| v.0), Some(1));
        drop(e);
        assert_eq!(AT_ERASE_DROPS.load(Ordering::Relaxed), before + 1);
        let v = t.erase(0x3000)?.map(|e| e.into_inner());
        assert_eq!(v.as_ref().map(|v| v.0), Some(2));
        assert_eq!(AT_ERASE_DROPS.load(Ordering::Relaxed), before + 1);
        drop(v);
        assert_eq!(AT_ERASE_DROPS.load(Ordering::Relaxed), before + 2);
        rcu::rcu_barrier();
        Ok(())
    }

    /// Inserts and erases with each allocation failing in turn: a failed
    /// insert hands the value back and leaves the tree as it was; an erase
    /// either removes the range or reports `ENOMEM` and leaves it (the tree
    /// still owning it); every value is dropped exactly once.
    #[test]
    fn allocation_failures_keep_the_tree_whole() -> Result {
        if !fail_nth(0) {
            // No CONFIG_FAULT_INJECTION: nothing to inject.
            return Ok(());
        }
        let t = tree()?;
        // As in `erase_defers_the_drop`: earlier trees' values first.
        rcu::rcu_barrier();
        let before = DROPS.load(Ordering::Relaxed);
        let (mut inserted, mut insert_failed) = (0usize, 0usize);
        let (mut fired_in_insert, mut fired_in_erase) = (0usize, 0usize);
        for i in 0..64u32 {
            let base = 0x10000 * (i as usize + 1);
            fail_nth(i % 8 + 1);
            let r = t.insert_range(base, base + 0xfff, Value(i));
            if fail_nth_left() == 0 {
                fired_in_insert += 1;
            }
            fail_nth(0);
            let ok = r.is_ok();
            match r {
                Ok(()) => inserted += 1,
                Err(e) => {
                    assert!(e.error == ENOMEM);
                    assert_eq!(e.value.0, i);
                    insert_failed += 1;
                }
            }
            let g = rcu::Guard::new();
            assert_eq!(t.load(base, &g).is_some(), ok);
        }
        assert_eq!(count(&t), inserted);
        let mut erased = 0usize;
        for i in 0..64u32 {
            let base = 0x10000 * (i as usize + 1);
            let present = {
                let g = rcu::Guard::new();
                t.load(base, &g).is_some()
            };
            fail_nth(i % 4 + 1);
            let r = t.erase(base + 0x10);
            let left = fail_nth_left();
            fail_nth(0);
            if left == 0 {
                fired_in_erase += 1;
            }
            let g = rcu::Guard::new();
            match r {
                Ok(Some(e)) => {
                    assert!(present);
                    assert_eq!(e.0, i);
                    assert!(t.load(base, &g).is_none());
                    drop(e);
                    erased += 1;
                }
                Ok(None) => assert!(!present),
                Err(e) => {
                    assert!(e == ENOMEM);
                    assert!(t.load(base, &g).is_some());
                }
            }
        }
        // Whatever was left (an erase that failed) goes with `clear`, which
        // does not allocate: an armed failure is still armed after it.
        let left = count(&t);
        assert_eq!(left + erased, inserted);
        fail_nth(1);
        let mut cleared = 0usize;
        t.clear(|e| {
            cleared += 1;
            drop(e);
        });
        let still_armed = fail_nth_left();
        fail_nth(0);
        assert_eq!(still_armed, 1);
        assert_eq!(cleared, left);
        drop(t);
        rcu::rcu_barrier();
        assert_eq!(DROPS.load(Ordering::Relaxed) - before, 64);
        // The injected failures reached the tree's allocations (whether a
        // failed allocation fails the insert depends on failslab's
        // ignore-gfp-wait, which tests/guest/20-kunit.sh turns off).
        assert!(fired_in_insert > 0);
        assert!(fired_in_erase > 0);
        pr_info!(
            "fault injection: {} of 64 inserts met a failure, {} failed; {} erases met one\n",
            fired_in_insert,
            insert_failed,
            fired_in_erase
        );
        Ok(())
    }
}

#[kunit_tests(sframe_unwind_percpu_counters)]
mod percpu_counters_tests {
    use crate::abstractions::percpu_counters::{
        self,
        SLOTS, //
    };

    /// Slots the unwinder never adds to (from `SFRAME_UNWIND_COUNT` on):
    /// no walk running meanwhile changes them.
    const FIRST_FREE: usize = crate::uapi::SFRAME_UNWIND_COUNT;

    #[test]
    fn adds_land_in_their_slots_and_sum() {
        let before = percpu_counters::read::<SLOTS>();
        percpu_counters::add(&[(FIRST_FREE, 5), (SLOTS - 1, 7), (FIRST_FREE, 0)]);
        percpu_counters::add(&[(FIRST_FREE, 2)]);
        let after = percpu_counters::read::<SLOTS>();
        let pairs = after.iter().zip(before.iter()).enumerate();
        for (slot, (a, b)) in pairs.skip(FIRST_FREE) {
            let added = a.wrapping_sub(*b);
            let expected = match slot {
                s if s == FIRST_FREE => 7,
                s if s == SLOTS - 1 => 7,
                _ => 0,
            };
            assert_eq!((slot, added), (slot, expected));
        }
    }

    #[test]
    fn slots_out_of_range_are_ignored_and_read_as_zero() {
        let before = percpu_counters::read::<SLOTS>();
        percpu_counters::add(&[(SLOTS, 1), (usize::MAX, 1)]);
        let wide = percpu_counters::read::<{ SLOTS + 4 }>();
        assert_eq!(wide[SLOTS..], [0; 4]);
        assert_eq!(wide[FIRST_FREE..SLOTS], before[FIRST_FREE..]);
    }
}

#[kunit_tests(sframe_unwind_user_mem)]
mod user_mem_tests {
    use crate::abstractions::user_mem::fill_from_words;

    #[test]
    fn small_reads_take_their_bytes_from_two_words() {
        // Memory whose byte at address `a` is `a + 1`.
        let mem: [u8; 24] = core::array::from_fn(|i| i as u8 + 1);
        let word = |at: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&mem[at..at + 8]);
            u64::from_le_bytes(w)
        };
        for at in 0..4 {
            for len in 1..=16 {
                let mut buf = [0u8; 16];
                let last = word(at + len.max(8) - 8);
                assert!(fill_from_words(&mut buf[..len], word(at), last));
                assert_eq!(buf[..len], mem[at..at + len]);
                // Nothing past `len` is written.
                assert!(buf[len..].iter().all(|&b| b == 0));
            }
        }
        let mut long = [0u8; 17];
        assert!(!fill_from_words(&mut long, word(0), word(9)));
    }
}
