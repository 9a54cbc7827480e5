// SPDX-License-Identifier: GPL-2.0

//! The registry: which SFrame section describes which text, per address space.
//!
//! One concept per file:
//!
//! - [`account`]: what one user holds (`UserAccount`), bounded per user as
//!   well as module-wide, so one user cannot take what the others need.
//! - [`copy`]: a `SectionCopy` is one distinct SFrame byte string of one
//!   user in kernel memory, validated once, shared by every registration of
//!   identical bytes by the same user (the C library's section, in each of
//!   their processes).  Copies are found by a keyed hash of the user and the
//!   bytes' length and ends, and count their own users.  Copies are never shared across
//!   users: how long a registration takes, and what `LIST` reports, tell a
//!   user nothing about what other users run.
//! - [`kept`]: a copy whose last user left is kept, within bounds, for the
//!   next registration of its bytes (the next start of the same program).
//! - [`copy_index`]: a copy's lookup index, built with the copy, charged
//!   with its bytes and used by every walk-time lookup in them.
//! - [`section`]: a `Section` is one registration: a text range of one mm,
//!   the copy that describes it and the address the copy's offsets are
//!   relative to; an `AdoptedSet` is what a fork child took in one step.
//! - [`state`]: an `MmState` holds an mm's sections in an RCU maple tree
//!   keyed by text range, and its adopted set.
//! - [`maintenance`]: a section whose text is unmapped is retired at once
//!   (`unmapped`, from a watch on `vm_area_free()`: marked dead, erased by
//!   the next writer); an mm torn down (`torn_down`, from the `exit_mmap`
//!   tracepoint) or left with no live section is forgotten by the
//!   maintenance work (`maintain`), which holds a reference to a torn down
//!   `mm_struct` until its entry is gone, so that no new mm takes its
//!   address meanwhile.  No MMU notifier: one would make every fork of a
//!   registered process pay for it (`Documentation/design.rst`).
//! - [`lookup`]: the walk-time side: the module-wide index maps an mm's
//!   address to its `MmState`, in an RCU maple tree; `live_state` (the
//!   sample hook's callback, which hands the state it finds to the walk),
//!   `mm_has_sections` and the row lookups run in NMI context with no
//!   lock.
//! - [`adopt`]: a fork child's inheritance: `snapshot` takes the parent's
//!   live sections (references to their copies) lock-free in the fork path,
//!   into one sorted array, and `Registry::adopt` makes that array the
//!   child's adopted set under the lock before its first return to user
//!   space (see `rust/lifecycle/`).
//! - [`register`], [`unregister`], [`list`]: the operations the ioctls and
//!   exec registration call.
//! - [`counters`]: `SFRAME_IOC_STATS`'s registry figures and the failure
//!   counters, with the failure type every operation returns.
//!
//! Locking: writers (register, unregister, list, adoption, maintenance,
//! unload) serialise on one mutex, taken after `mmap_lock` when both are
//! held, never from the unmap watch or the teardown probe (atomic
//! context).  Every change to the registry's trees needs a token that
//! only taking the mutex gives ([`locked`]), so the compiler checks that
//! no writer runs without having taken it; the writers are the methods of
//! [`Writer`], which holds both.  Loops over a process's sections (at
//! most `max_sections_per_mm`) take the RCU read lock one step at a time
//! and reschedule between steps.  Readers use RCU only.
//!
//! Memory: copies, sections, tree nodes, adopted sets and accounts are
//! charged to the memory cgroup of the task that made them
//! (`GFP_KERNEL_ACCOUNT`): the registering task's, or a fork child's for
//! its set.  A fork's snapshot (`GFP_ATOMIC`, in the fork path) is not; it
//! lives until the child's first return to user space.  Every section held
//! (retired ones until they are erased) counts against its holder's
//! limits: what one user can make the module hold is bounded.
//!
//! No `unsafe` here: what the registry needs from C is in
//! `rust/abstractions/`.  The few `unsafe impl`s (which drops may run in
//! an RCU callback) and the registry's own lifetime are marked one by one.

#![deny(unsafe_code)]

mod account;
mod adopt;
mod bound;
mod copy;
mod copy_index;
mod counters;
mod kept;
mod list;
mod locked;
pub(crate) mod lookup;
mod maintenance;
mod register;
mod section;
mod state;
mod unregister;

pub(crate) use adopt::{
    snapshot,
    Inherited, //
};
pub(crate) use counters::{
    fail,
    fill_own_stats,
    fill_stats,
    Failure, //
};
pub(crate) use maintenance::{
    maintain,
    torn_down,
    unmapped, //
};
pub(crate) use register::{
    RegisterRequest,
    Tag, //
};
pub(crate) use unregister::Which;

use crate::abstractions::{
    compat::rcu,
    keyed_hash::KeyedHash,
    ratelimit::Ratelimit,
    sched::cond_resched, //
};
use account::UserAccount;
use copy::SectionCopy;
use core::{
    ops::{
        Deref,
        DerefMut, //
    },
    ptr,
    sync::atomic::{
        AtomicPtr,
        Ordering, //
    },
};
use kernel::{
    new_mutex,
    prelude::*,
    sync::{
        Arc,
        Mutex,
        MutexGuard, //
    },
};
use locked::{
    Locked,
    WriteToken, //
};
use state::MmState;

/// Limits, from the module parameters.
#[derive(Clone, Copy)]
pub(crate) struct Limits {
    /// Largest SFrame section accepted, in bytes (`E2BIG` above).
    pub(crate) max_section_bytes: u64,
    /// Most registrations per address space (`ENOSPC` beyond).
    pub(crate) max_sections_per_mm: u32,
    /// Most kernel bytes held for distinct copies, module-wide (`ENOSPC`).
    pub(crate) max_total_bytes: u64,
    /// Most registrations alive, module-wide (`ENOSPC` beyond).
    pub(crate) max_total_sections: u64,
    /// Most kernel bytes held for one user's copies (`ENOSPC` beyond).
    pub(crate) max_bytes_per_user: u64,
    /// Most registrations alive made by one user (`ENOSPC` beyond).
    pub(crate) max_sections_per_user: u32,
    /// Most kernel bytes kept for copies no registration uses, module-wide
    /// (a quarter of it per user); the oldest go beyond.
    pub(crate) max_kept_bytes: u64,
}

/// Writer state, under [`Registry::lock`].
struct Shared {
    /// Bytes held by all copies in use.
    bytes: u64,
    /// Copies no registration uses, kept, oldest first ([`kept`]), and
    /// their bytes.
    kept: KVec<Arc<SectionCopy>>,
    kept_bytes: u64,
    next_handle: u64,
    shutting_down: bool,
}

/// The module-wide registry.
#[pin_data]
pub(crate) struct Registry {
    /// mm address → its state.
    #[pin]
    index: Locked<Arc<MmState>>,
    #[pin]
    lock: Mutex<Shared>,
    /// Copy key → the copy; changed under `lock`.
    #[pin]
    copies: Locked<Arc<SectionCopy>>,
    /// UID → that user's account, while it holds anything; changed under
    /// `lock`.
    #[pin]
    users: Locked<Arc<UserAccount>>,
    /// The key of the copy hash, random per load, so that no user can
    /// choose bytes whose keys collide.
    hash_key: KeyedHash,
    #[pin]
    warn: Ratelimit,
    limits: Limits,
}

/// The registry with its lock held: every write goes through one.
struct Writer<'a> {
    reg: &'a Registry,
    shared: MutexGuard<'a, Shared>,
    /// Proof of the lock, for the trees' writes.
    t: WriteToken<'a>,
}

impl Deref for Writer<'_> {
    type Target = Registry;

    fn deref(&self) -> &Registry {
        self.reg
    }
}

impl Writer<'_> {
    /// The writer state under the lock.
    fn shared(&mut self) -> &mut Shared {
        self.shared.deref_mut()
    }
}

/// The registry while the module is loaded; null before init and during
/// the end of unload.
static REGISTRY: AtomicPtr<Registry> = AtomicPtr::new(ptr::null_mut());

/// The registry, for a reader holding the RCU read lock.
#[expect(unsafe_code, reason = "the registry's lifetime, argued here")]
fn registry<'a>(_guard: &'a rcu::Guard) -> Option<&'a Registry> {
    // SAFETY: A non-null pointer was published by `RegistryHandle::new` and
    // is freed by its `drop` only after clearing it and a grace period, which
    // `_guard` holds off.
    unsafe { REGISTRY.load(Ordering::Acquire).as_ref() }
}

/// The registry, for ioctls, the exec and fork works and the maintenance
/// work.
#[expect(unsafe_code, reason = "the registry's lifetime, argued here")]
pub(crate) fn get() -> Option<&'static Registry> {
    // SAFETY: `RegistryHandle::drop` frees the registry only after the device
    // is gone (an ioctl holds an open file, which pins the module: no ioctl
    // runs during unload), and after the exec and fork works and the
    // maintenance work have all run (the module's `Lifecycle` is dropped
    // before the registry: it removes what queues them, then waits).
    unsafe { REGISTRY.load(Ordering::Acquire).as_ref() }
}

/// `cond_resched()`, between steps of a loop whose length a user controls.
pub(crate) fn resched() {
    cond_resched();
}

impl Registry {
    fn new(limits: Limits) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            index <- Locked::new(),
            lock <- new_mutex!(Shared {
                bytes: 0,
                kept: KVec::new(),
                kept_bytes: 0,
                next_handle: 1,
                shutting_down: false,
            }),
            copies <- Locked::new(),
            users <- Locked::new(),
            hash_key: KeyedHash::random(),
            warn <- Ratelimit::new(5000, 10),
            limits,
        }? Error)
    }

    /// Takes the registry lock: the only way to write.
    fn writer(&self) -> Writer<'_> {
        let (shared, t) = locked::lock(&self.lock);
        Writer {
            reg: self,
            shared,
            t,
        }
    }

    /// The indexed state of the mm at `key`, if any.
    fn indexed_state(&self, key: usize) -> Option<Arc<MmState>> {
        let guard = rcu::Guard::new();
        self.index.load(key, &guard).cloned()
    }
}

/// Owns the registry for the module's lifetime.
pub(crate) struct RegistryHandle {
    reg: Pin<KBox<Registry>>,
}

impl RegistryHandle {
    /// Creates the registry and publishes it.
    pub(crate) fn new(limits: Limits) -> Result<Self> {
        let reg = KBox::pin_init(Registry::new(limits), GFP_KERNEL)?;
        let p: *const Registry = &*reg;
        REGISTRY.store(p.cast_mut(), Ordering::Release);
        Ok(Self { reg })
    }
}

impl Drop for RegistryHandle {
    fn drop(&mut self) {
        let reg: &Registry = &self.reg;
        {
            let mut w = reg.writer();
            w.shared().shutting_down = true;
            w.empty_index();
            w.let_go_all_kept();
        }
        REGISTRY.store(ptr::null_mut(), Ordering::Release);
        // No lock-free reader holds the registry after this.
        rcu::synchronize_rcu();
        rcu::rcu_barrier();
    }
}
