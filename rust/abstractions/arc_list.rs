// SPDX-License-Identifier: GPL-2.0

//! A lock-free list of [`Arc`]s, pushed from any context but NMI and taken
//! whole, each item on it at most once.
//!
//! The registry's maintenance list: the unmap watch and the teardown probe
//! (atomic context) push an address space's state, the maintenance work
//! takes the whole list.  An item carries its [`Link`]; pushing an item
//! already on the list does nothing, so the list never holds a cycle and
//! each reference it holds is given back once.

use core::{
    marker::PhantomData,
    ptr,
    sync::atomic::{
        fence,
        AtomicBool,
        AtomicPtr,
        Ordering, //
    },
};
use kernel::sync::Arc;

/// What an item needs to be on an [`ArcList`]; only the list touches it.
pub(crate) struct Link<T> {
    /// The next item on the list.
    next: AtomicPtr<T>,
    /// On the list, or about to be.
    queued: AtomicBool,
}

impl<T> Link<T> {
    /// A link of an item on no list.
    pub(crate) const fn new() -> Self {
        Self {
            next: AtomicPtr::new(ptr::null_mut()),
            queued: AtomicBool::new(false),
        }
    }
}

/// An item of an [`ArcList`].
///
/// # Safety
///
/// [`Linked::link`] returns the same link, a part of the item, every time:
/// the list relies on it to keep an item on it at most once.
pub(crate) unsafe trait Linked: Sized {
    /// The item's link: the same one every time.
    fn link(&self) -> &Link<Self>;
}

/// A lock-free stack of `Arc<T>`, taken whole.
///
/// # Invariants
///
/// `head` and every `next` reachable from it are null or pointers from
/// `Arc::into_raw`, one per item, owned by the list; an item whose
/// pointer is on the list has `queued` set.
pub(crate) struct ArcList<T: Linked> {
    head: AtomicPtr<T>,
    _owns: PhantomData<Arc<T>>,
}

// SAFETY: The list holds `Arc<T>`s, handed to whichever CPU takes them.
unsafe impl<T: Linked + Send + Sync> Send for ArcList<T> {}
// SAFETY: Every access is an atomic operation; see `push` and `take_all`.
unsafe impl<T: Linked + Send + Sync> Sync for ArcList<T> {}

impl<T: Linked> ArcList<T> {
    /// An empty list.
    pub(crate) const fn new() -> Self {
        Self {
            head: AtomicPtr::new(ptr::null_mut()),
            _owns: PhantomData,
        }
    }

    /// Puts a reference to `item` on the list, unless it is on it already;
    /// whether it was put.  Either whoever takes the item off the list
    /// afterwards sees what the caller did before this call, or this call
    /// sees the item off the list and puts it on again.  Any context but
    /// NMI.
    pub(crate) fn push(&self, item: &Arc<T>) -> bool {
        let link = item.link();
        // Pairs with the fence in `Taken::next`.
        fence(Ordering::SeqCst);
        if link.queued.swap(true, Ordering::AcqRel) {
            return false;
        }
        // INVARIANT: The list owns this reference from the exchange on, and
        // `queued` is set.
        let raw = Arc::into_raw(item.clone()).cast_mut();
        let mut head = self.head.load(Ordering::Relaxed);
        loop {
            link.next.store(head, Ordering::Relaxed);
            match self
                .head
                .compare_exchange_weak(head, raw, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(h) => head = h,
            }
        }
    }

    /// Takes every item off the list, newest first.
    pub(crate) fn take_all(&self) -> Taken<T> {
        // INVARIANT: The swap gives the whole chain to the iterator.
        Taken {
            next: self.head.swap(ptr::null_mut(), Ordering::AcqRel),
            _owns: PhantomData,
        }
    }
}

/// Items taken off an [`ArcList`]; the ones not iterated are released when
/// this is dropped.
///
/// # Invariants
///
/// `next` is null or the first of a chain of pointers from `Arc::into_raw`
/// that this value alone owns.
pub(crate) struct Taken<T: Linked> {
    next: *mut T,
    _owns: PhantomData<Arc<T>>,
}

impl<T: Linked> Iterator for Taken<T> {
    type Item = Arc<T>;

    fn next(&mut self) -> Option<Arc<T>> {
        if self.next.is_null() {
            return None;
        }
        // SAFETY: `next` is a pointer from `Arc::into_raw` that this value
        // owns (type invariants), given back once: it is replaced below.
        let item = unsafe { Arc::from_raw(self.next) };
        let link = item.link();
        // INVARIANT: The rest of the chain, still owned by this value.
        self.next = link.next.load(Ordering::Relaxed);
        // Release: the load of `next` above is done before the item can be
        // pushed again, which overwrites `next` (on a weakly ordered CPU a
        // relaxed store could be seen first, and the rest of the chain
        // lost).  Pairs with the acquire in `push`'s swap.
        link.queued.store(false, Ordering::Release);
        // Pairs with the fence in `ArcList::push`: either the taker sees
        // what made the item queued again, or that push queues it again.
        fence(Ordering::SeqCst);
        Some(item)
    }
}

impl<T: Linked> Drop for Taken<T> {
    fn drop(&mut self) {
        for item in self.by_ref() {
            drop(item);
        }
    }
}
