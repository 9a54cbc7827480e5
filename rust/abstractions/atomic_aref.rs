// SPDX-License-Identifier: GPL-2.0

//! A slot holding at most one counted reference ([`ARef`]), set and taken
//! atomically from any context but NMI.
//!
//! The registry keeps a torn down address space's `mm_struct` pinned
//! (`mmgrab`) in one: the teardown probe sets it in atomic context, the
//! maintenance work takes it back.

use core::{
    marker::PhantomData,
    ptr::{
        self,
        NonNull, //
    },
    sync::atomic::{
        AtomicPtr,
        Ordering, //
    },
};
use kernel::sync::aref::{
    ARef,
    AlwaysRefCounted, //
};

/// An optional [`ARef<T>`], in an atomic pointer.
///
/// Dropping a slot that still holds a reference leaks it, on purpose: the
/// last release of some references must not run where the slot's owner is
/// freed (an RCU callback, say), so the owner empties the slot first.
///
/// # Invariants
///
/// `ptr` is null or a reference obtained with [`ARef::into_raw`], owned by
/// the slot until it is taken out.
pub(crate) struct AtomicARef<T: AlwaysRefCounted> {
    ptr: AtomicPtr<T>,
    _owns: PhantomData<ARef<T>>,
}

impl<T: AlwaysRefCounted> AtomicARef<T> {
    /// An empty slot.
    pub(crate) const fn new() -> Self {
        Self {
            ptr: AtomicPtr::new(ptr::null_mut()),
            _owns: PhantomData,
        }
    }

    /// Puts `r` in the slot; returns what was there.
    pub(crate) fn replace(&self, r: ARef<T>) -> Option<ARef<T>> {
        // INVARIANT: The slot owns the reference from here.
        let old = self.ptr.swap(ARef::into_raw(r).as_ptr(), Ordering::AcqRel);
        // SAFETY: A non-null pointer in the slot is a reference the slot
        // owned (type invariants), given back once: the swap removed it.
        NonNull::new(old).map(|p| unsafe { ARef::from_raw(p) })
    }

    /// Takes the reference out, if any.
    pub(crate) fn take(&self) -> Option<ARef<T>> {
        let old = self.ptr.swap(ptr::null_mut(), Ordering::AcqRel);
        // SAFETY: As in `replace`.
        NonNull::new(old).map(|p| unsafe { ARef::from_raw(p) })
    }

    /// Whether the slot holds a reference.
    pub(crate) fn is_set(&self) -> bool {
        !self.ptr.load(Ordering::Relaxed).is_null()
    }
}

// SAFETY: The slot only moves an `ARef<T>` between threads, which is
// `Send` and `Sync` when `T` is (the reference count is atomic).
unsafe impl<T: AlwaysRefCounted + Send + Sync> Send for AtomicARef<T> {}
// SAFETY: As above: every access is one atomic operation.
unsafe impl<T: AlwaysRefCounted + Send + Sync> Sync for AtomicARef<T> {}
