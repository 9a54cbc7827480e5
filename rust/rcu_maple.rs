// SPDX-License-Identifier: GPL-2.0

//! A maple tree in RCU mode: lookups without locks, from any context.
//!
//! C header: [`include/linux/maple_tree.h`](srctree/include/linux/maple_tree.h)
//!
//! [`kernel::maple_tree::MapleTree`] frees a value as soon as it is erased,
//! so a reader must hold the tree's spinlock: useless in NMI context.  This
//! tree is created with `MT_FLAGS_USE_RCU` (the C code then frees its nodes
//! through RCU), keeps each value in a box with an `rcu_head`, and releases
//! an erased value only after an RCU grace period (`call_rcu`).  A reader
//! holding an [`rcu::Guard`] may therefore borrow a value for as long as the
//! guard lives, while writers insert and erase concurrently.
//!
//! Writers are serialised by the tree's internal spinlock (the `mtree_*`
//! functions take it), so every method takes `&self`.  Writing functions may
//! allocate with `GFP_KERNEL` (`mtree_erase` does) and must be called from
//! process context; lookups may be called from any context, NMI included.
//!
//! Values are dropped in RCU callback context (softirq): their `Drop` must
//! not sleep nor take locks that process context takes with softirqs
//! enabled.

use core::marker::PhantomData;
use core::mem::ManuallyDrop;
use core::ops::Deref;
use kernel::{
    alloc::Flags,
    bindings,
    error::to_result,
    prelude::*,
    sync::rcu,
    types::Opaque, //
};

/// A value as the tree stores it, with the RCU head that defers its release.
#[repr(C)]
struct Node<T> {
    rcu: Opaque<bindings::callback_head>,
    value: ManuallyDrop<T>,
}

/// Values that may leave an [`RcuMapleTree`] at once when erased.
///
/// # Safety
///
/// Dropping a value must not invalidate anything that a `&Self` obtained
/// before the drop gives access to, until an RCU grace period that starts
/// after the drop has elapsed: for example a reference-counted pointer whose
/// pointee is freed through `call_rcu` (or a longer chain of deferrals).
/// The value's own bytes stay readable: the tree frees its node only after a
/// grace period.
pub(crate) unsafe trait RcuSafeDrop {}

/// A maple tree of non-overlapping `usize` ranges, readable under RCU.
///
/// # Invariants
///
/// - `tree` was initialised by `mt_init_flags(MT_FLAGS_USE_RCU)`.
/// - Every entry of the tree is a pointer obtained from
///   `KBox::<Node<T>>::into_raw`, owned by the tree; it is freed only after it
///   has been erased (by whoever erased it, after an RCU grace period) or
///   when the tree is dropped.
#[pin_data(PinnedDrop)]
pub(crate) struct RcuMapleTree<T: Send + Sync> {
    #[pin]
    tree: Opaque<bindings::maple_tree>,
    _t: PhantomData<KBox<Node<T>>>,
}

// SAFETY: The tree owns `T` values (sent to whichever CPU erases or frees
// them) and hands out `&T` to readers on any CPU: `T: Send + Sync` suffices.
unsafe impl<T: Send + Sync> Send for RcuMapleTree<T> {}
// SAFETY: Writers are serialised by the internal spinlock; readers only get `&T`.
unsafe impl<T: Send + Sync> Sync for RcuMapleTree<T> {}

/// How [`RcuMapleTree::insert_range`] allocates (`kernel::alloc::Flags`
/// does not expose its bits to other crates).
#[derive(Clone, Copy)]
pub(crate) enum Gfp {
    /// `GFP_KERNEL`.
    Kernel,
    /// `GFP_KERNEL_ACCOUNT`: charged to the caller's memory cgroup.
    KernelAccount,
}

impl Gfp {
    fn flags(self) -> Flags {
        match self {
            Gfp::Kernel => GFP_KERNEL,
            Gfp::KernelAccount => GFP_KERNEL_ACCOUNT,
        }
    }

    fn raw(self) -> bindings::gfp_t {
        match self {
            Gfp::Kernel => bindings::GFP_KERNEL,
            Gfp::KernelAccount => bindings::GFP_KERNEL_ACCOUNT,
        }
    }
}

/// Why [`RcuMapleTree::insert_range`] failed; the value is handed back.
pub(crate) struct InsertError<T> {
    /// The value that was not inserted.
    pub(crate) value: T,
    /// `EEXIST` (an overlapping range exists), `ENOMEM` or `EINVAL`.
    pub(crate) error: Error,
}

impl<T: Send + Sync> RcuMapleTree<T> {
    /// Creates an empty tree in RCU mode.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            // SAFETY: `slot` is valid for writes and pinned; the tree is
            // destroyed in `drop` before the memory goes away.
            // INVARIANT: The tree is initialised in RCU mode.
            tree <- Opaque::ffi_init(|slot| unsafe {
                bindings::mt_init_flags(slot, bindings::MT_FLAGS_USE_RCU)
            }),
            _t: PhantomData,
        })
    }

    /// Inserts `value` for the range `[first, last]`, which must not overlap
    /// any range in the tree (`EEXIST`).
    pub(crate) fn insert_range(
        &self,
        first: usize,
        last: usize,
        value: T,
        gfp: Gfp,
    ) -> Result<(), InsertError<T>> {
        if last < first {
            return Err(InsertError {
                value,
                error: EINVAL,
            });
        }
        let node = match KBox::<Node<T>>::new_uninit(gfp.flags()) {
            Ok(slot) => KBox::write(
                slot,
                Node {
                    rcu: Opaque::uninit(),
                    value: ManuallyDrop::new(value),
                },
            ),
            Err(_) => {
                return Err(InsertError {
                    value,
                    error: ENOMEM,
                })
            }
        };
        let ptr = KBox::into_raw(node);
        // SAFETY: The tree is initialised; `ptr` is a valid, non-null,
        // 4-byte-aligned pointer (an internal maple tree value would need
        // its low two bits to be `10`).
        let ret = to_result(unsafe {
            bindings::mtree_insert_range(self.tree.get(), first, last, ptr.cast(), gfp.raw())
        });
        match ret {
            // INVARIANT: The tree now owns the node.
            Ok(()) => Ok(()),
            Err(error) => {
                // SAFETY: The insertion failed, so the tree did not take the
                // pointer; it came from `KBox::into_raw` above.
                let node = unsafe { KBox::from_raw(ptr) };
                Err(InsertError {
                    value: ManuallyDrop::into_inner(KBox::into_inner(node).value),
                    error,
                })
            }
        }
    }

    /// Removes the range containing `index` and returns its value, which is
    /// released after an RCU grace period when the [`Erased`] is dropped.
    pub(crate) fn erase(&self, index: usize) -> Option<Erased<T>> {
        // SAFETY: The tree is initialised; `mtree_erase` takes the lock.
        let ptr = unsafe { bindings::mtree_erase(self.tree.get(), index) };
        if ptr.is_null() {
            return None;
        }
        // INVARIANT: Erased under the tree lock, so this caller alone owns
        // the node now; readers may still hold references to it.
        Some(Erased { node: ptr.cast() })
    }

    /// The value whose range contains `index`, borrowed for as long as the
    /// RCU read lock `_guard` is held.
    pub(crate) fn load<'a>(&'a self, index: usize, _guard: &'a rcu::Guard) -> Option<&'a T> {
        // SAFETY: The tree is initialised; the RCU read lock is held.
        let ptr = unsafe { bindings::mtree_load(self.tree.get(), index) };
        // SAFETY: By the type invariants a non-null entry is a live node; it
        // is freed only after a grace period that `_guard` holds off.
        unsafe { ptr.cast::<Node<T>>().as_ref() }.map(|node| &*node.value)
    }

    /// Calls `f` for every value whose range lies in or overlaps
    /// `[first, last]`, in ascending order, under the RCU read lock `_guard`.
    pub(crate) fn for_each<'a>(
        &'a self,
        first: usize,
        last: usize,
        _guard: &'a rcu::Guard,
        mut f: impl FnMut(&'a T),
    ) {
        let mut index = first;
        loop {
            let before = index;
            // SAFETY: The tree is initialised; `index` is a valid pointer.
            let ptr = unsafe { bindings::mt_find(self.tree.get(), &mut index, last) };
            // SAFETY: As in `load`.
            let Some(node) = (unsafe { ptr.cast::<Node<T>>().as_ref() }) else {
                return;
            };
            f(&*node.value);
            // `mt_find` moved `index` past the range; it wraps to 0 after a
            // range ending at `usize::MAX`.
            if index <= before {
                return;
            }
        }
    }

    /// Erases every range, handing each value to `f`.  Afterwards the tree
    /// holds no nodes (its memory is returned through RCU) and may be reused.
    pub(crate) fn clear(&self, mut f: impl FnMut(Erased<T>)) {
        loop {
            let mut index = 0usize;
            // SAFETY: The tree is initialised; `index` is a valid pointer.
            let ptr = unsafe { bindings::mt_find(self.tree.get(), &mut index, usize::MAX) };
            if ptr.is_null() {
                break;
            }
            // `index` is one past the found range (0 if it ended at the top).
            match self.erase(index.wrapping_sub(1)) {
                Some(erased) => f(erased),
                None => break,
            }
        }
        // SAFETY: The tree is initialised; `mtree_destroy` takes the lock, and
        // in RCU mode frees the nodes after a grace period.  It holds no
        // values any more, and stays usable (empty) afterwards.
        unsafe { bindings::mtree_destroy(self.tree.get()) };
    }

    fn is_empty_raw(&self) -> bool {
        // SAFETY: Reading the root pointer of an initialised tree; a racing
        // writer would make the answer stale, not invalid.
        unsafe { (*self.tree.get()).ma_root.is_null() }
    }
}

#[pinned_drop]
impl<T: Send + Sync> PinnedDrop for RcuMapleTree<T> {
    fn drop(self: Pin<&mut Self>) {
        // A tree emptied by `clear` holds no nodes and needs no lock: that is
        // how a tree embedded in RCU-freed memory is dropped in softirq.
        if !self.is_empty_raw() {
            self.clear(drop);
        }
    }
}

/// A value erased from an [`RcuMapleTree`], still readable by RCU readers
/// that found it before the erase.  Dropping it releases the value after an
/// RCU grace period.
///
/// # Invariants
///
/// `node` came from `KBox::<Node<T>>::into_raw`, was erased from its tree,
/// and is owned by this value alone.
pub(crate) struct Erased<T: Send + Sync> {
    node: *mut Node<T>,
}

// SAFETY: `Erased` owns the node and gives out `&T`: as for the tree.
unsafe impl<T: Send + Sync> Send for Erased<T> {}
// SAFETY: As above.
unsafe impl<T: Send + Sync> Sync for Erased<T> {}

impl<T: Send + Sync> Deref for Erased<T> {
    type Target = T;

    fn deref(&self) -> &T {
        // SAFETY: By the type invariants the node is live until `drop`.
        unsafe { &(*self.node).value }
    }
}

impl<T: Send + Sync + RcuSafeDrop> Erased<T> {
    /// Takes the value out at once; only the node's memory waits for a
    /// grace period.  For values that must be dropped in process context.
    pub(crate) fn into_inner(self) -> T {
        let mut this = ManuallyDrop::new(self);
        // SAFETY: By the type invariants we own the node.  The value is
        // moved out exactly once (the node is released below without
        // dropping it); readers may still read the old bytes, which
        // `RcuSafeDrop` allows.
        let value = unsafe { ManuallyDrop::take(&mut (*this.node).value) };
        // SAFETY: As in `drop`, but the callback frees only the memory.
        unsafe {
            bindings::call_rcu(
                Opaque::cast_into(&raw const (*this.node).rcu),
                Some(free_node_memory::<T>),
            )
        };
        value
    }
}

impl<T: Send + Sync> Drop for Erased<T> {
    fn drop(&mut self) {
        // SAFETY: By the type invariants we own the node; `rcu` is within it
        // and unused until now.  The callback frees the node once.
        unsafe {
            bindings::call_rcu(
                Opaque::cast_into(&raw const (*self.node).rcu),
                Some(free_node::<T>),
            )
        };
    }
}

/// RCU callback: frees a node after the grace period that followed its erase.
///
/// # Safety
///
/// `head` is the `rcu` field of a `Node<T>` passed to `call_rcu` by
/// [`Erased::drop`], and this is its only release.
unsafe extern "C" fn free_node<T: Send + Sync>(head: *mut bindings::callback_head) {
    // `rcu` is the first field of the `repr(C)` `Node<T>`.
    let node = head.cast::<Node<T>>();
    // SAFETY: By the function's safety requirements the node came from
    // `KBox::into_raw` and no reader can reach it any more.
    let mut node = unsafe { KBox::from_raw(node) };
    // SAFETY: The value was not taken out (that path uses
    // `free_node_memory`); it is dropped once, here.
    unsafe { ManuallyDrop::drop(&mut node.value) };
}

/// RCU callback: frees a node whose value [`Erased::into_inner`] took out.
///
/// # Safety
///
/// As for [`free_node`], and the value was moved out of the node.
unsafe extern "C" fn free_node_memory<T: Send + Sync>(head: *mut bindings::callback_head) {
    // SAFETY: As in `free_node`; `ManuallyDrop` keeps the moved-out value
    // from being dropped again.
    drop(unsafe { KBox::from_raw(head.cast::<Node<T>>()) });
}
