// SPDX-License-Identifier: GPL-2.0

//! The registry's trees, writable only with the registry lock held.
//!
//! [`Locked`] and [`LockedSlot`] wrap an RCU maple tree and an RCU slot:
//! anyone may read them under RCU, but every method that changes them asks
//! for a [`WriteToken`], and the only way to get one is [`lock`], which
//! takes the registry mutex.  A token borrows the guard and stays on its
//! thread, so it cannot outlive the lock: the compiler checks that no
//! write to the registry's trees runs without it.

use crate::abstractions::{
    compat::rcu,
    rcu_maple::{
        Erased,
        InsertError,
        RcuMapleTree,
        RcuSlot,
        TreeValue, //
    },
};
use core::marker::PhantomData;
use kernel::{
    prelude::*,
    sync::{
        Mutex,
        MutexGuard, //
    },
};

/// Proof that the registry lock is held, for as long as `'a`.
///
/// # Invariants
///
/// Made only by [`lock`], from the guard it returns alongside; not `Send`.
#[derive(Clone, Copy)]
pub(super) struct WriteToken<'a> {
    _guard: PhantomData<&'a ()>,
    _not_send: PhantomData<*const ()>,
}

/// Takes `mutex` (the registry's), and the token that proves it.
pub(super) fn lock<T>(mutex: &Mutex<T>) -> (MutexGuard<'_, T>, WriteToken<'_>) {
    // INVARIANT: The token is made with the guard it proves.
    (
        mutex.lock(),
        WriteToken {
            _guard: PhantomData,
            _not_send: PhantomData,
        },
    )
}

/// An RCU maple tree that only the registry lock's holder changes.
#[pin_data]
pub(super) struct Locked<T: TreeValue> {
    #[pin]
    tree: RcuMapleTree<T>,
}

impl<T: TreeValue> Locked<T> {
    pub(super) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            tree <- RcuMapleTree::new(),
        })
    }

    /// See [`RcuMapleTree::load`].  Any context.
    pub(super) fn load<'a>(&'a self, index: usize, guard: &'a rcu::Guard) -> Option<&'a T> {
        self.tree.load(index, guard)
    }

    /// See [`RcuMapleTree::for_each`].  Any context.
    pub(super) fn for_each<'a>(
        &'a self,
        first: usize,
        last: usize,
        guard: &'a rcu::Guard,
        f: impl FnMut(&'a T),
    ) {
        self.tree.for_each(first, last, guard, f)
    }

    /// See [`RcuMapleTree::next`].  Any context.
    pub(super) fn next<'a>(
        &'a self,
        at: &mut Option<usize>,
        guard: &'a rcu::Guard,
    ) -> Option<&'a T> {
        self.tree.next(at, guard)
    }

    /// See [`RcuMapleTree::insert_range`].  Under the registry lock.
    pub(super) fn insert_range(
        &self,
        _w: WriteToken<'_>,
        first: usize,
        last: usize,
        value: T,
    ) -> Result<(), InsertError<T>> {
        self.tree.insert_range(first, last, value)
    }

    /// See [`RcuMapleTree::erase`].  Under the registry lock.
    pub(super) fn erase(&self, _w: WriteToken<'_>, index: usize) -> Result<Option<Erased<T>>> {
        self.tree.erase(index)
    }

    /// See [`RcuMapleTree::clear`].  Under the registry lock.
    pub(super) fn clear(&self, _w: WriteToken<'_>, f: impl FnMut(Erased<T>)) {
        self.tree.clear(f)
    }
}

/// An RCU slot that only the registry lock's holder changes.
pub(super) struct LockedSlot<T: TreeValue> {
    slot: RcuSlot<T>,
}

impl<T: TreeValue> LockedSlot<T> {
    pub(super) const fn new() -> Self {
        Self {
            slot: RcuSlot::new(),
        }
    }

    /// See [`RcuSlot::get`].  Any context.
    pub(super) fn get<'a>(&'a self, guard: &'a rcu::Guard) -> Option<&'a T> {
        self.slot.get(guard)
    }

    /// See [`RcuSlot::set`].  Under the registry lock.
    pub(super) fn set(&self, _w: WriteToken<'_>, value: T) -> Result<(), T> {
        self.slot.set(value)
    }

    /// See [`RcuSlot::take`].  Under the registry lock.
    pub(super) fn take(&self, _w: WriteToken<'_>) -> Option<Erased<T>> {
        self.slot.take()
    }
}
