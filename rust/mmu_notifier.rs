// SPDX-License-Identifier: GPL-2.0

//! One MMU notifier per address space, with state of the module's choosing.
//!
//! C header: [`include/linux/mmu_notifier.h`](srctree/include/linux/mmu_notifier.h)
//!
//! Built on the `mmu_notifier_get()`/`mmu_notifier_put()` life cycle: the
//! first [`NotifierRef::get`] on an mm allocates a [`Subscription`] holding a
//! `T` and registers it; later ones on the same mm return the same one with
//! its count raised.  The subscription is freed when the last reference is
//! dropped: the C code waits for an SRCU grace period (no callback still
//! running) and calls `free_notifier`, which here defers the free by one
//! more, ordinary RCU grace period, so lock-free readers that found the `T`
//! under `rcu_read_lock()` (from NMI, say) keep a valid reference.
//!
//! Callbacks: [`MmNotifier::release`] when the mm is torn down
//! (`exit_mmap`, process context), [`MmNotifier::unmap`] before a range is
//! unmapped (`munmap`, `mremap`'s source, `MAP_FIXED`).  The latter runs
//! with `mmap_lock` held, sometimes from the OOM reaper in a context that
//! may not block, and lockdep models it as reachable from reclaim: it must
//! not sleep, allocate, or take a lock that is held while allocating.
//!
//! Before the module is unloaded every reference must be dropped and
//! [`synchronize`] called: it waits until no callback runs and every
//! subscription is freed.

use core::marker::PhantomData;
use core::ops::Deref;
use core::ptr::NonNull;
use core::sync::atomic::{
    AtomicUsize,
    Ordering, //
};
use kernel::{
    bindings,
    error::from_err_ptr,
    mm::MmWithUser,
    prelude::*,
    types::Opaque, //
};

use crate::{
    compat::rcu,
    rcu_maple::TreeValue, //
};

/// What a module keeps per address space, and its callbacks.
pub(crate) trait MmNotifier: Send + Sync + Sized {
    /// Creates the state for a new subscription.
    fn new() -> impl PinInit<Self, Error>;

    /// `mm` is being torn down: no user of the address space remains.
    /// Process context; may sleep.
    fn release(&self, mm: *const bindings::mm_struct);

    /// `[start, end)` of the address space is about to be unmapped.  May run
    /// in a context that must not block: no sleeping, allocating or locking.
    fn unmap(&self, start: usize, end: usize);
}

/// The callback table of a notifier with state `T`.  Must live in a
/// `static`: the C code finds an mm's subscription by the table's address.
pub(crate) struct NotifierOps<T: MmNotifier> {
    ops: bindings::mmu_notifier_ops,
    _t: PhantomData<T>,
}

// SAFETY: The table is immutable and holds only function pointers.
unsafe impl<T: MmNotifier> Sync for NotifierOps<T> {}

impl<T: MmNotifier> NotifierOps<T> {
    /// The callback table for `T`.
    pub(crate) const fn new() -> Self {
        Self {
            ops: bindings::mmu_notifier_ops {
                release: Some(release_callback::<T>),
                invalidate_range_start: Some(invalidate_range_start_callback::<T>),
                alloc_notifier: Some(alloc_callback::<T>),
                free_notifier: Some(free_callback::<T>),
                // SAFETY: The remaining members are optional callbacks, for
                // which all-zero bytes mean "none".
                ..unsafe { core::mem::zeroed() }
            },
            _t: PhantomData,
        }
    }
}

/// Subscriptions allocated and not yet freed, of every notifier type.
static LIVE: AtomicUsize = AtomicUsize::new(0);

/// A registered `struct mmu_notifier` with the module's state for that mm.
///
/// # Invariants
///
/// - `raw` is the first field (`repr(C)`): the C code's `struct
///   mmu_notifier *` is a pointer to the whole subscription.
/// - A subscription is allocated by `alloc_callback`, counted in `LIVE`,
///   and freed only by `free_rcu_callback`, an RCU grace period after the C
///   code called `free_notifier` (itself an SRCU grace period after the last
///   `mmu_notifier_put()`).
#[repr(C)]
#[pin_data]
pub(crate) struct Subscription<T: MmNotifier> {
    #[pin]
    raw: Opaque<bindings::mmu_notifier>,
    #[pin]
    rcu: Opaque<bindings::callback_head>,
    #[pin]
    data: T,
}

/// A counted reference to the subscription of one mm (one
/// `mmu_notifier_get()`, dropped by `mmu_notifier_put()`).
///
/// # Invariants
///
/// `sub` points to a live, registered [`Subscription<T>`] whose user count
/// includes this reference.
pub(crate) struct NotifierRef<T: MmNotifier> {
    sub: NonNull<Subscription<T>>,
}

// SAFETY: The reference may be dropped on any thread (in process context);
// it gives out `&T`, and `T: Send + Sync`.
unsafe impl<T: MmNotifier> Send for NotifierRef<T> {}
// SAFETY: As above.
unsafe impl<T: MmNotifier> Sync for NotifierRef<T> {}

// SAFETY: Dropping a reference calls `mmu_notifier_put()`, which takes a
// spinlock that process context takes with softirqs enabled: it is dropped
// at erase, never in an RCU callback.  The subscription (and so whatever
// `&T` reached) is freed only by `free_rcu_callback`, which runs an RCU
// grace period after `free_notifier`, itself called after the put: later
// than a grace period starting at the drop.
unsafe impl<T: MmNotifier> TreeValue for NotifierRef<T> {
    const DROP_AT_ERASE: bool = true;
}

impl<T: MmNotifier> NotifierRef<T> {
    /// The subscription of `mm` for `ops`, created (with `T::new()`) if
    /// there is none.  Takes `mmap_lock` for writing: may sleep.
    pub(crate) fn get(ops: &'static NotifierOps<T>, mm: &MmWithUser) -> Result<Self> {
        // SAFETY: `ops` is a static table; `mm` has users (so it is not being
        // torn down).  The function takes and releases `mmap_lock` itself.
        let raw = unsafe {
            crate::ffi::sframe_mmu_notifier_get((&raw const ops.ops).cast(), mm.as_raw().cast())
        };
        let raw = from_err_ptr(raw)?;
        let sub = NonNull::new(raw.cast::<Subscription<T>>()).ok_or(ENOMEM)?;
        // INVARIANT: `mmu_notifier_get()` returned a registered subscription
        // with one more user, allocated by `alloc_callback` for this table.
        Ok(Self { sub })
    }
}

impl<T: MmNotifier> Deref for NotifierRef<T> {
    type Target = T;

    fn deref(&self) -> &T {
        // SAFETY: By the type invariants the subscription is live.
        unsafe { &(*self.sub.as_ptr()).data }
    }
}

impl<T: MmNotifier> Drop for NotifierRef<T> {
    fn drop(&mut self) {
        // SAFETY: By the type invariants this reference is counted; the put
        // drops it.  `mmu_notifier_put()` takes a spinlock that process
        // context also takes, so this runs in process context.
        unsafe {
            bindings::mmu_notifier_put(Opaque::cast_into(&raw const (*self.sub.as_ptr()).raw))
        };
    }
}

/// Waits until no notifier callback runs and every subscription whose last
/// reference was dropped has been freed.  For module unload: the caller has
/// dropped every [`NotifierRef`].  Sleeps.
pub(crate) fn synchronize() {
    // SAFETY: No requirements; waits for an SRCU grace period.
    unsafe { bindings::mmu_notifier_synchronize() };
    // `free_notifier` runs from an SRCU callback, which the grace period
    // above does not wait for: poll until every subscription is freed.
    while LIVE.load(Ordering::Acquire) != 0 {
        rcu::rcu_barrier();
        kernel::time::delay::fsleep(kernel::time::Delta::from_millis(1));
    }
    rcu::rcu_barrier();
}

/// Recovers the subscription from the C pointer.
///
/// # Safety
///
/// `raw` is the `raw` field of a live [`Subscription<T>`].
unsafe fn subscription<'a, T: MmNotifier>(raw: *mut bindings::mmu_notifier) -> &'a Subscription<T> {
    // SAFETY: `raw` is the first field of the `repr(C)` subscription.
    unsafe { &*raw.cast::<Subscription<T>>() }
}

/// `alloc_notifier`: a new subscription with a fresh `T`.
///
/// # Safety
///
/// Called by the C code only, from `mmu_notifier_get_locked()`.
unsafe extern "C" fn alloc_callback<T: MmNotifier>(
    _mm: *mut bindings::mm_struct,
) -> *mut bindings::mmu_notifier {
    let init = pin_init!(Subscription::<T> {
        raw: Opaque::zeroed(),
        rcu: Opaque::uninit(),
        data <- T::new(),
    }? Error);
    match KBox::pin_init(init, GFP_KERNEL_ACCOUNT) {
        Ok(sub) => {
            LIVE.fetch_add(1, Ordering::Relaxed);
            // SAFETY: The C code owns the subscription from now on and
            // returns it through `free_notifier`; it never moves it.
            // INVARIANT: Allocated here and counted in `LIVE`.
            let sub = KBox::into_raw(unsafe { Pin::into_inner_unchecked(sub) });
            sub.cast()
        }
        Err(e) => e.to_ptr(),
    }
}

/// `free_notifier`: the last reference is gone and no callback runs.
///
/// # Safety
///
/// `raw` is a subscription made by [`alloc_callback`]; called once.
unsafe extern "C" fn free_callback<T: MmNotifier>(raw: *mut bindings::mmu_notifier) {
    // SAFETY: `free_notifier` is called once per subscription `alloc_callback`
    // made, after an SRCU grace period: no callback runs on it any more.
    // Lock-free readers may still hold references to `data`, so the memory
    // is released after an RCU grace period.
    unsafe {
        let sub = raw.cast::<Subscription<T>>();
        bindings::call_rcu(
            Opaque::cast_into(&raw const (*sub).rcu),
            Some(free_rcu_callback::<T>),
        );
    }
}

/// Frees a subscription, a grace period after [`free_callback`].
///
/// # Safety
///
/// `head` is the `rcu` field of a subscription queued by [`free_callback`].
unsafe extern "C" fn free_rcu_callback<T: MmNotifier>(head: *mut bindings::callback_head) {
    let offset = core::mem::offset_of!(Subscription<T>, rcu);
    // SAFETY: `head` is the `rcu` field of a subscription passed to
    // `call_rcu` by `free_callback`, once; no reader can reach it any more.
    drop(unsafe { KBox::from_raw(head.byte_sub(offset).cast::<Subscription<T>>()) });
    LIVE.fetch_sub(1, Ordering::Release);
}

/// `release`: the mm is torn down.
///
/// # Safety
///
/// `raw` is a live subscription made by [`alloc_callback`].
unsafe extern "C" fn release_callback<T: MmNotifier>(
    raw: *mut bindings::mmu_notifier,
    mm: *mut bindings::mm_struct,
) {
    // SAFETY: The C code calls back only on registered, live subscriptions.
    let sub = unsafe { subscription::<T>(raw) };
    sub.data.release(mm);
}

/// `invalidate_range_start`: forwards unmaps to [`MmNotifier::unmap`].
///
/// # Safety
///
/// `raw` is a live subscription made by [`alloc_callback`]; `range` is valid.
unsafe extern "C" fn invalidate_range_start_callback<T: MmNotifier>(
    raw: *mut bindings::mmu_notifier,
    range: *const bindings::mmu_notifier_range,
) -> kernel::ffi::c_int {
    // SAFETY: The C code passes a valid range for the duration of the call.
    let range = unsafe { &*range };
    if range.event == bindings::mmu_notifier_event_MMU_NOTIFY_UNMAP {
        // SAFETY: As in `release_callback`.
        let sub = unsafe { subscription::<T>(raw) };
        sub.data.unmap(range.start, range.end);
    }
    0
}
