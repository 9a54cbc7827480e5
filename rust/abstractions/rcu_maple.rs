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
//! functions and the helpers in `rust/helpers.c` take it), so every method
//! takes `&self`.  Writing functions may allocate with `GFP_KERNEL` and must
//! be called from process context; lookups may be called from any context,
//! NMI included.
//!
//! Where an erased value is dropped is a property of its type
//! ([`TreeValue`]): at once in the process context that erased it, or in
//! the RCU callback after a grace period.  The tree itself never takes its
//! lock when dropped, so it may be dropped from an RCU callback; it must be
//! empty by then (see [`RcuMapleTree::clear`]).
//!
//! [`RcuSlot`] holds one optional value by the same rules: read without a
//! lock, released after a grace period once taken out.

use core::marker::PhantomData;
use core::mem::ManuallyDrop;
use core::ops::Deref;
use core::sync::atomic::{
    AtomicPtr,
    Ordering, //
};
use kernel::{
    bindings,
    error::to_result,
    ffi::c_void,
    prelude::*,
    sync::rcu,
    types::Opaque, //
};

/// A value as the tree stores it, with the RCU head that defers its release.
#[repr(C)]
struct Node<T> {
    rcu: Opaque<bindings::callback_head>,
    /// The next node of a list being taken out of the tree by `clear`.
    link: *mut Node<T>,
    value: ManuallyDrop<T>,
}

impl<T> Node<T> {
    /// A node holding `value`, charged to the caller's memory cgroup; the
    /// value is handed back if there is no memory.
    fn new_boxed(value: T) -> Result<KBox<Self>, T> {
        match KBox::<Self>::new_uninit(GFP_KERNEL_ACCOUNT) {
            Ok(slot) => Ok(KBox::write(
                slot,
                Node {
                    rcu: Opaque::uninit(),
                    link: core::ptr::null_mut(),
                    value: ManuallyDrop::new(value),
                },
            )),
            Err(_) => Err(value),
        }
    }
}

/// What an [`RcuMapleTree`] may hold, and where an erased value is dropped.
///
/// # Safety
///
/// If [`TreeValue::DROP_AT_ERASE`] is true, dropping a value must not
/// invalidate anything that a `&Self` obtained before the drop gives access
/// to, until an RCU grace period that starts after the drop has elapsed: for
/// example a reference-counted pointer whose pointee is freed through
/// `call_rcu` (or a longer chain of deferrals).  The value's own bytes stay
/// readable: the tree frees its node only after a grace period.
///
/// If it is false, the value's `Drop` must be callable from an RCU callback
/// (softirq): no sleeping, no lock that process context takes with softirqs
/// enabled.
pub(crate) unsafe trait TreeValue: Send + Sync {
    /// Whether an erased value is dropped at once, in the process context
    /// that drops its [`Erased`] (for values whose drop must sleep or lock,
    /// such as a reference whose last drop may sleep), rather than in the
    /// RCU callback that frees its node.
    const DROP_AT_ERASE: bool;
}

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
pub(crate) struct RcuMapleTree<T: TreeValue> {
    #[pin]
    tree: Opaque<bindings::maple_tree>,
    _t: PhantomData<KBox<Node<T>>>,
}

// SAFETY: The tree owns `T` values (sent to whichever CPU erases or frees
// them) and hands out `&T` to readers on any CPU: `T: Send + Sync` suffices.
unsafe impl<T: TreeValue> Send for RcuMapleTree<T> {}
// SAFETY: Writers are serialised by the internal spinlock; readers only get `&T`.
unsafe impl<T: TreeValue> Sync for RcuMapleTree<T> {}

/// Why [`RcuMapleTree::insert_range`] failed; the value is handed back.
pub(crate) struct InsertError<T> {
    /// The value that was not inserted.
    pub(crate) value: T,
    /// `EEXIST` (an overlapping range exists), `ENOMEM` or `EINVAL`.
    pub(crate) error: Error,
}

impl<T: TreeValue> RcuMapleTree<T> {
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
    /// any range in the tree (`EEXIST`).  The value's node and the tree's
    /// nodes are charged to the caller's memory cgroup.
    pub(crate) fn insert_range(
        &self,
        first: usize,
        last: usize,
        value: T,
    ) -> Result<(), InsertError<T>> {
        if last < first {
            return Err(InsertError {
                value,
                error: EINVAL,
            });
        }
        let node = match Node::new_boxed(value) {
            Ok(node) => node,
            Err(value) => {
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
            bindings::mtree_insert_range(
                self.tree.get(),
                first,
                last,
                ptr.cast(),
                bindings::GFP_KERNEL_ACCOUNT,
            )
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
    /// released when the [`Erased`] is dropped (see [`TreeValue`]).
    /// `Ok(None)` if no range contains `index`; `ENOMEM` if the tree could
    /// not allocate the nodes the removal needs: the value then stays in the
    /// tree, which still owns it.
    pub(crate) fn erase(&self, index: usize) -> Result<Option<Erased<T>>> {
        let mut erased = false;
        // SAFETY: The tree is initialised; the helper takes the tree lock and
        // reports whether the entry it returns really left the tree (older
        // kernels' `mas_erase()` return it in place when out of memory).
        let ptr = unsafe {
            crate::abstractions::ffi::sframe_mt_erase(self.tree.get().cast(), index, &mut erased)
        };
        if ptr.is_null() {
            return Ok(None);
        }
        if !erased {
            return Err(ENOMEM);
        }
        // INVARIANT: Erased under the tree lock, so this caller alone owns
        // the node now; readers may still hold references to it.
        Ok(Some(Erased { node: ptr.cast() }))
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
    /// The whole walk is one read-side section: for short ranges (an unmap);
    /// loops over a whole tree use [`RcuMapleTree::next`].
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

    /// The first value whose range ends at or after `*index`, and moves
    /// `*index` past that range (`None` once the tree is done, including
    /// after a range that ends at `usize::MAX`).  One lookup per call, so a
    /// loop over a whole tree can drop the RCU read lock and reschedule
    /// between steps.
    pub(crate) fn next<'a>(
        &'a self,
        index: &mut Option<usize>,
        _guard: &'a rcu::Guard,
    ) -> Option<&'a T> {
        let mut at = (*index)?;
        let before = at;
        // SAFETY: The tree is initialised; `at` is a valid pointer.
        let ptr = unsafe { bindings::mt_find(self.tree.get(), &mut at, usize::MAX) };
        // SAFETY: As in `load`: `_guard` keeps a found node alive.
        let node = unsafe { ptr.cast::<Node<T>>().as_ref() };
        // `mt_find` moved `at` past the range; it wraps to 0 after a range
        // ending at `usize::MAX`.
        *index = (node.is_some() && at > before).then_some(at);
        node.map(|node| &*node.value)
    }

    /// Erases every range, handing each value to `f`, without allocating:
    /// the values are unlinked under the tree lock and the nodes freed
    /// (through RCU) in one step, so this cannot fail.  Afterwards the tree
    /// is empty and may be reused.  Process context.
    pub(crate) fn clear(&self, mut f: impl FnMut(Erased<T>)) {
        let mut taken: *mut Node<T> = core::ptr::null_mut();
        // SAFETY: The tree is initialised; the helper takes the tree lock,
        // calls `take_entry` with every entry (each a node of this tree, by
        // the type invariants) and `&mut taken`, then destroys the tree
        // under the same lock, so the entries are ours alone afterwards.
        unsafe {
            crate::abstractions::ffi::sframe_mt_take_all(
                self.tree.get().cast(),
                Some(take_entry::<T>),
                (&raw mut taken).cast(),
            )
        };
        while !taken.is_null() {
            // SAFETY: `taken` is a node `take_entry` linked; its `link` was
            // written there and nothing else uses the node.
            let next = unsafe { (*taken).link };
            // INVARIANT: Out of the tree, and owned by this value alone.
            f(Erased { node: taken });
            taken = next;
        }
    }

    fn is_empty_raw(&self) -> bool {
        // SAFETY: Reading the root pointer of an initialised tree, once, as
        // `READ_ONCE()` would; a racing writer makes the answer stale, not
        // invalid.
        unsafe { core::ptr::read_volatile(&raw const (*self.tree.get()).ma_root).is_null() }
    }
}

/// Called by `sframe_mt_take_all()` for each entry of a tree being emptied:
/// pushes the node onto the list at `list`.
///
/// # Safety
///
/// `entry` is a node of an `RcuMapleTree<T>` that the caller is removing
/// from the tree under its lock; `list` points to a `*mut Node<T>`.
unsafe extern "C" fn take_entry<T: TreeValue>(entry: *mut c_void, list: *mut c_void) {
    let node = entry.cast::<Node<T>>();
    let list = list.cast::<*mut Node<T>>();
    // SAFETY: By the function's safety requirements; `link` is written only
    // here, while the node leaves the tree.
    unsafe {
        (*node).link = *list;
        *list = node;
    }
}

#[pinned_drop]
impl<T: TreeValue> PinnedDrop for RcuMapleTree<T> {
    fn drop(self: Pin<&mut Self>) {
        // Never lock here: a tree embedded in RCU-freed memory is dropped in
        // softirq, where taking the tree lock (which process context takes
        // with softirqs enabled) could deadlock.  Its owner empties it with
        // `clear` in process context first; one that did not has a bug, which
        // leaks the values rather than risk that.
        if !self.is_empty_raw() {
            pr_err!("RcuMapleTree dropped while not empty: its values are leaked\n");
            kernel::warn_on!(true);
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
pub(crate) struct Erased<T: TreeValue> {
    node: *mut Node<T>,
}

// SAFETY: `Erased` owns the node and gives out `&T`: as for the tree.
unsafe impl<T: TreeValue> Send for Erased<T> {}
// SAFETY: As above.
unsafe impl<T: TreeValue> Sync for Erased<T> {}

impl<T: TreeValue> Deref for Erased<T> {
    type Target = T;

    fn deref(&self) -> &T {
        // SAFETY: By the type invariants the node is live until `drop`.
        unsafe { &(*self.node).value }
    }
}

impl<T: TreeValue> Erased<T> {
    /// Takes the value out at once; only the node's memory waits for a
    /// grace period.  Only for values dropped at erase.
    #[allow(
        dead_code,
        reason = "no value of the module is dropped at erase; the KUnit tests' are"
    )]
    pub(crate) fn into_inner(self) -> T {
        const {
            assert!(
                T::DROP_AT_ERASE,
                "this value is dropped after a grace period"
            )
        };
        let mut this = ManuallyDrop::new(self);
        // SAFETY: By the type invariants we own the node.  The value is
        // moved out exactly once (the node is released below without
        // dropping it); readers may still read the old bytes, which
        // `TreeValue::DROP_AT_ERASE` allows.
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

impl<T: TreeValue> Drop for Erased<T> {
    fn drop(&mut self) {
        if T::DROP_AT_ERASE {
            // SAFETY: By the type invariants we own the node; the value is
            // dropped once, here, in the dropper's (process) context, which
            // `TreeValue::DROP_AT_ERASE` allows while readers may still see
            // it.
            unsafe { ManuallyDrop::drop(&mut (*self.node).value) };
            // SAFETY: We own the node; `rcu` is within it and unused until
            // now.  The callback frees only the memory, once.
            unsafe {
                bindings::call_rcu(
                    Opaque::cast_into(&raw const (*self.node).rcu),
                    Some(free_node_memory::<T>),
                )
            };
            return;
        }
        // SAFETY: By the type invariants we own the node; `rcu` is within it
        // and unused until now.  The callback drops the value (which
        // `TreeValue` allows in an RCU callback) and frees the node, once.
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
/// [`Erased::drop`] for a value not dropped at erase, and this is its only
/// release.
unsafe extern "C" fn free_node<T: TreeValue>(head: *mut bindings::callback_head) {
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
/// As for [`free_node`], and the value was moved out of the node or dropped
/// already.
unsafe extern "C" fn free_node_memory<T: TreeValue>(head: *mut bindings::callback_head) {
    // SAFETY: As in `free_node`; `ManuallyDrop` keeps the moved-out value
    // from being dropped again.
    drop(unsafe { KBox::from_raw(head.cast::<Node<T>>()) });
}

/// One optional value, readable under RCU from any context (NMI included):
/// a writer sets it, readers borrow it for as long as their guard lives,
/// and a writer takes it out as an [`Erased`], which releases it after a
/// grace period.  Writers are serialised by the caller.
///
/// # Invariants
///
/// `node` is null or a pointer from `KBox::<Node<T>>::into_raw`, owned by
/// the slot; a node leaves the slot only as an `Erased`.
pub(crate) struct RcuSlot<T: TreeValue> {
    node: AtomicPtr<Node<T>>,
}

// SAFETY: As for the tree: the slot owns a `T` and lends `&T` to readers on
// any CPU.
unsafe impl<T: TreeValue> Send for RcuSlot<T> {}
// SAFETY: As above; writers are serialised by the caller.
unsafe impl<T: TreeValue> Sync for RcuSlot<T> {}

impl<T: TreeValue> RcuSlot<T> {
    /// An empty slot.
    pub(crate) const fn new() -> Self {
        Self {
            node: AtomicPtr::new(core::ptr::null_mut()),
        }
    }

    /// Puts `value` into the slot, which must be empty: the value is handed
    /// back if it is not, or if there is no memory.  Readers see the value
    /// whole.  Process context.
    pub(crate) fn set(&self, value: T) -> Result<(), T> {
        if !self.node.load(Ordering::Relaxed).is_null() {
            return Err(value);
        }
        let node = Node::new_boxed(value)?;
        // INVARIANT: The slot owns the node from here.
        self.node.store(KBox::into_raw(node), Ordering::Release);
        Ok(())
    }

    /// The value, borrowed for as long as the RCU read lock `_guard` is
    /// held.
    pub(crate) fn get<'a>(&'a self, _guard: &'a rcu::Guard) -> Option<&'a T> {
        // SAFETY: By the type invariants a non-null pointer is a live node,
        // freed only after a grace period following its removal, which
        // `_guard` holds off.
        unsafe { self.node.load(Ordering::Acquire).as_ref() }.map(|node| &*node.value)
    }

    /// Takes the value out; readers that found it may use it until a grace
    /// period has elapsed, and dropping the [`Erased`] releases it after
    /// one (see [`TreeValue`]).
    pub(crate) fn take(&self) -> Option<Erased<T>> {
        let node = self.node.swap(core::ptr::null_mut(), Ordering::AcqRel);
        if node.is_null() {
            return None;
        }
        // INVARIANT: The swap gave the node to this caller alone.
        Some(Erased { node })
    }
}

impl<T: TreeValue> Drop for RcuSlot<T> {
    fn drop(&mut self) {
        drop(self.take());
    }
}
