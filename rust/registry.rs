// SPDX-License-Identifier: GPL-2.0

//! The registry: which SFrame section describes which text, per address space.
//!
//! - A [`SectionCopy`] is one distinct SFrame byte string of one user in
//!   kernel memory, validated once, shared by every registration of
//!   identical bytes by the same user (the C library's section, in each of
//!   their processes).  Copies are found by a keyed hash of the user and
//!   the bytes in [`Registry::copies`], and count their own users.
//! - A [`UserAccount`] is what one user (by real UID) holds: sections and
//!   copy bytes, bounded per user as well as module-wide, so one user cannot
//!   take what the others need.  Copies are never shared across users: how
//!   long a registration takes, and what `LIST` reports, tell a user nothing
//!   about what other users run.
//! - A [`Section`] is one registration: a text range of one mm, the copy
//!   that describes it and the address the copy's offsets are relative to.
//! - An [`MmState`] holds an mm's sections in an RCU maple tree keyed by
//!   text range.  A section whose text is unmapped is retired at once
//!   ([`unmapped`], from a watch on `vm_area_free()`: marked dead, erased by
//!   the next writer); an mm torn down ([`torn_down`], from the `exit_mmap`
//!   tracepoint) or left with no live section is forgotten by the
//!   maintenance work ([`maintain`]), which holds a reference to a torn
//!   down `mm_struct` until its entry is gone, so that no new mm takes its
//!   address meanwhile.  No MMU notifier: one would make every fork of a
//!   registered process pay for it (`Documentation/design.rst`).
//! - The module-wide index maps an mm's address to its [`MmState`], in an
//!   RCU maple tree: [`mm_has_sections`] and [`find_row`] run in NMI
//!   context with no lock.
//!
//! Writers (register, unregister, list, maintenance, unload) serialise on
//! one mutex, taken after `mmap_lock` when both are held, never from the
//! unmap watch or the teardown probe (atomic context).  Every lookup under it is
//! O(log n); loops over a process's sections (at most
//! `max_sections_per_mm`) take the RCU read lock one step at a time and
//! reschedule between steps.  Readers use RCU only.
//!
//! Memory: copies, sections, tree nodes and accounts are charged to the
//! registering task's memory cgroup (`GFP_KERNEL_ACCOUNT`); a fork's
//! snapshot (`GFP_ATOMIC`, in the fork path) is not, but its size is
//! bounded by the section limits like the rest.
//!
//! Fork: [`snapshot`] takes the parent's live sections (references to their
//! copies) lock-free in the fork path, into one sorted array, and
//! [`Registry::adopt`] makes that array the child's adopted set under the
//! lock before its first return to user space: a section the child
//! registers later goes into its tree, a section it unregisters (or
//! unmaps) of the set is retired in place; see
//! `rust/lifecycle.rs`.

use crate::{
    compat::rcu,
    ratelimit::{
        pr_warn_ratelimited,
        Ratelimit, //
    },
    rcu_maple::{
        RcuMapleTree,
        RcuSlot,
        TreeValue, //
    },
    sframe,
    uapi::*,
};
use core::ptr::{
    self,
    NonNull, //
};
use core::sync::atomic::{
    fence,
    AtomicBool,
    AtomicPtr,
    AtomicU32,
    AtomicU64,
    Ordering, //
};
use kernel::{
    bindings,
    mm::{
        virt::flags as vm_flags,
        Mm,
        MmWithUser,
        MmapReadGuard, //
    },
    new_mutex,
    prelude::*,
    sync::{
        aref::ARef,
        Arc,
        Mutex, //
    },
    uaccess::{
        UserPtr,
        UserSlice, //
    },
};

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
}

/// Module-wide counters for `SFRAME_IOC_STATS`.
struct Counters {
    sections: AtomicU64,
    copies: AtomicU64,
    bytes: AtomicU64,
    mms: AtomicU64,
    registered: AtomicU64,
    unregistered: AtomicU64,
    failures: [AtomicU64; SFRAME_FAIL_COUNT],
}

static COUNTERS: Counters = Counters {
    sections: AtomicU64::new(0),
    copies: AtomicU64::new(0),
    bytes: AtomicU64::new(0),
    mms: AtomicU64::new(0),
    registered: AtomicU64::new(0),
    unregistered: AtomicU64::new(0),
    failures: [const { AtomicU64::new(0) }; SFRAME_FAIL_COUNT],
};

/// Fills the registry's part of `SFRAME_IOC_STATS`, after what the
/// maintenance work had still to do (an exit just before counts as done).
pub(crate) fn fill_stats(s: &mut SframeStats) {
    maintain();
    let c = &COUNTERS;
    s.sections = c.sections.load(Ordering::Relaxed);
    s.copies = c.copies.load(Ordering::Relaxed);
    s.bytes = c.bytes.load(Ordering::Relaxed);
    s.mms = c.mms.load(Ordering::Relaxed);
    s.registered = c.registered.load(Ordering::Relaxed);
    s.unregistered = c.unregistered.load(Ordering::Relaxed);
    for (out, f) in s.failures.iter_mut().zip(c.failures.iter()) {
        *out = f.load(Ordering::Relaxed);
    }
}

/// A failed request: the errno, the `SFRAME_FAIL_*` counter, and the reason
/// for the log.
pub(crate) struct Failure {
    pub(crate) error: Error,
    kind: usize,
    reason: &'static str,
    /// Whether the log says it (an expected failure is only counted).
    log: bool,
}

impl Failure {
    pub(crate) fn new(error: Error, kind: usize, reason: &'static str) -> Self {
        Self {
            error,
            kind,
            reason,
            log: true,
        }
    }

    /// A failure callers expect in normal operation: counted, not logged.
    fn quiet(self) -> Self {
        Self { log: false, ..self }
    }
}

/// Counts a failure, logs it (rate-limited) and returns its errno.
pub(crate) fn fail(f: Failure, what: &str) -> Error {
    if let Some(c) = COUNTERS.failures.get(f.kind) {
        c.fetch_add(1, Ordering::Relaxed);
    }
    if let Some(reg) = registry_process().filter(|_| f.log) {
        pr_warn_ratelimited!(
            reg.warn,
            "{} by pid {} failed: {} (errno {})\n",
            what,
            kernel::current!().pid(),
            f.reason,
            -f.error.to_errno()
        );
    }
    f.error
}

/// What one user holds in the registry.
struct UserAccount {
    /// The user's real UID (a `kuid_t` value).
    uid: u32,
    /// Registrations alive: raised under the registry lock, lowered when a
    /// section is retired (possibly by the unmap watch, unlocked).
    sections: AtomicU32,
    /// Bytes of the user's copies; changed under the registry lock only.
    bytes: AtomicU64,
}

/// One distinct SFrame byte string of one user, validated.
struct SectionCopy {
    bytes: KVVec<u8>,
    /// The key of this copy in [`Registry::copies`], a keyed hash of the
    /// owner's UID and the bytes.
    key: usize,
    /// Whether the copy is in [`Registry::copies`] (a rare key collision
    /// leaves it out: it is then not shared, nothing else changes).
    indexed: bool,
    /// The user the bytes are charged to.
    owner: Arc<UserAccount>,
    /// Sections using the copy; changed under the registry lock only.  A
    /// copy whose count reached zero is dead: it is out of the table and
    /// its bytes are uncharged, and it is never used again.
    users: AtomicU32,
    info: CopyInfo,
}

/// What validation found out about a copy's bytes.
#[derive(Clone, Copy)]
struct CopyInfo {
    version: u32,
    num_fdes: u32,
    /// `text_range()` minus the address it was validated at: the text range
    /// for another address is this plus that address (every function start
    /// is an offset from the section's address or from a field in it).
    text_lo: u64,
    text_hi: u64,
}

/// One registration.
pub(crate) struct Section {
    handle: u64,
    text_start: u64,
    text_end: u64,
    sframe_addr: u64,
    copy: Arc<SectionCopy>,
    /// `SFRAME_SECTION_*`: where the registration came from.
    flags: u32,
    /// Retired (unregistered, or its text unmapped): readers skip it, the
    /// next writer erases it.
    dead: AtomicBool,
}

// SAFETY: A section's drop releases its `Arc<SectionCopy>`, whose last
// reference frees memory with `kvfree()`/`kfree()` only (the copy leaves
// `Registry::copies` under the registry lock, in process context, before
// that): safe in an RCU callback.
unsafe impl TreeValue for Section {
    const DROP_AT_ERASE: bool = false;
}

// SAFETY: As for `Section`: the last reference frees memory only.
unsafe impl TreeValue for Arc<SectionCopy> {
    const DROP_AT_ERASE: bool = false;
}

// SAFETY: The last reference to an account frees its memory only.
unsafe impl TreeValue for Arc<UserAccount> {
    const DROP_AT_ERASE: bool = false;
}

/// The registrations a fork child took from its parent in one step
/// ([`Registry::adopt`]): sorted by text and not overlapping, never changed
/// once the state is published but for the sections' `dead` flags.  Each
/// section holds a use of its copy until the set is emptied
/// ([`Registry::drain`]), retired or not: its bytes stay charged while the
/// set holds them.
struct AdoptedSet {
    sections: KVec<Section>,
}

// SAFETY: Dropping the set drops its sections, which frees memory only (as
// for `Section`).
unsafe impl TreeValue for AdoptedSet {
    const DROP_AT_ERASE: bool = false;
}

impl AdoptedSet {
    /// The section whose text contains `pc`, retired or not.
    fn find(&self, pc: u64) -> Option<&Section> {
        let i = self.sections.partition_point(|s| s.text_start <= pc);
        self.sections
            .get(i.checked_sub(1)?)
            .filter(|s| s.covers(pc))
    }

    /// The sections whose text meets `[start, end)`, retired or not.
    fn meeting(&self, start: u64, end: u64) -> impl Iterator<Item = &Section> {
        let i = self.sections.partition_point(|s| s.text_end <= start);
        self.sections
            .get(i..)
            .unwrap_or(&[])
            .iter()
            .take_while(move |s| s.text_start < end)
    }
}

/// An address space's registrations.
///
/// # Invariants
///
/// - `exit_ref` is null or an `mm_struct` reference (`mmgrab`) on the mm at
///   `mm`, taken when it was torn down: [`maintain`] or unload drops it
///   after the state has left the index.
/// - A state leaves the index only with its tree and its adopted set
///   emptied (`drain`), and is then never inserted again: its last
///   reference, which may be dropped in an RCU callback, frees an empty
///   tree and nothing else.
/// - The live sections of the tree and of the adopted set do not overlap.
#[pin_data(PinnedDrop)]
pub(crate) struct MmState {
    #[pin]
    sections: RcuMapleTree<Section>,
    /// What a fork child adopted in one step, set before the state enters
    /// the index.
    adopted: RcuSlot<AdoptedSet>,
    /// The address of the `mm_struct`: the state's key in the index.
    mm: usize,
    /// Sections not retired.
    live: AtomicU32,
    /// Sections an unmap retired since the last purge, left in the tree
    /// for it (an overcount only costs a purge that finds nothing).
    retired: AtomicU32,
    /// The torn down mm, pinned until the state leaves the index.
    exit_ref: AtomicPtr<Mm>,
    /// On the maintenance list, or about to be.
    queued: AtomicBool,
    /// The next state on the maintenance list.
    next: AtomicPtr<MmState>,
}

// SAFETY: The last reference to a state frees an empty tree (the tree never
// takes its lock when dropped) and no `mm_struct` reference (type
// invariants): memory only, which an RCU callback may do.
unsafe impl TreeValue for Arc<MmState> {
    const DROP_AT_ERASE: bool = false;
}

#[pinned_drop]
impl PinnedDrop for MmState {
    fn drop(self: Pin<&mut Self>) {
        // Cannot happen (type invariants); dropping the reference here, in
        // what may be softirq context, could deadlock: keep the mm instead.
        if !self.exit_ref.load(Ordering::Relaxed).is_null() {
            pr_err!("a torn down mm's state freed with the mm still pinned: the mm is leaked\n");
        }
    }
}

impl MmState {
    fn new(mm: usize) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            sections <- RcuMapleTree::new(),
            adopted: RcuSlot::new(),
            mm,
            live: AtomicU32::new(0),
            retired: AtomicU32::new(0),
            exit_ref: AtomicPtr::new(ptr::null_mut()),
            queued: AtomicBool::new(false),
            next: AtomicPtr::new(ptr::null_mut()),
        }? Error)
    }

    /// Counts a section of `owner`'s just inserted into the tree: the
    /// reverse of the first half of [`MmState::retire`].
    fn admit(&self, owner: &UserAccount) {
        if self.live.fetch_add(1, Ordering::Relaxed) == 0 {
            COUNTERS.mms.fetch_add(1, Ordering::Relaxed);
        }
        owner.sections.fetch_add(1, Ordering::Relaxed);
    }

    /// Marks `s` retired, once, and updates the counters; whether this call
    /// retired it.  Any context.
    fn retire(&self, s: &Section) -> bool {
        let first = !s.dead.swap(true, Ordering::AcqRel);
        if first {
            if self.live.fetch_sub(1, Ordering::Relaxed) == 1 {
                COUNTERS.mms.fetch_sub(1, Ordering::Relaxed);
            }
            s.copy.owner.sections.fetch_sub(1, Ordering::Relaxed);
            COUNTERS.sections.fetch_sub(1, Ordering::Relaxed);
            COUNTERS.unregistered.fetch_add(1, Ordering::Relaxed);
        }
        first
    }

    /// Retires the sections whose text meets `[start, end)`, being
    /// unmapped, unless `kept` says the part they meet is still mapped
    /// as it was; whether the state was left without a live section by
    /// it.  Any context but NMI; no lock, no sleep.
    fn unmap(
        &self,
        start: usize,
        end: usize,
        kept: impl Fn(usize, usize) -> bool,
        guard: &rcu::Guard,
    ) -> bool {
        if end <= start {
            return false;
        }
        let mut emptied = false;
        let mut visit = |s: &Section| {
            if s.dead.load(Ordering::Acquire) {
                return;
            }
            let lo = start.max(s.text_start as usize);
            let hi = end.min(s.text_end as usize);
            if kept(lo, hi) {
                return;
            }
            // Left in the tree for the next writer's purge (or in the set
            // until it is emptied).
            if self.retire(s) {
                self.retired.fetch_add(1, Ordering::Relaxed);
                emptied = self.live.load(Ordering::Relaxed) == 0;
            }
        };
        self.sections.for_each(start, end - 1, guard, &mut visit);
        if let Some(set) = self.adopted.get(guard) {
            set.meeting(start as u64, end as u64).for_each(visit);
        }
        emptied
    }

    /// Calls `f` with every section of the tree and of the adopted set,
    /// retired or not, in the order of their text: a merge of the two,
    /// each sorted.  One RCU read-side section: for the fork path, which
    /// may not sleep anyway.
    fn for_each_in_order<'g>(&'g self, guard: &'g rcu::Guard, mut f: impl FnMut(&'g Section)) {
        let set: &[Section] = self.adopted.get(guard).map_or(&[], |set| &set.sections);
        let mut rest = set.iter().peekable();
        self.sections.for_each(0, usize::MAX, guard, |t| {
            while let Some(a) = rest.next_if(|a| a.text_start < t.text_start) {
                f(a);
            }
            f(t);
        });
        rest.for_each(f);
    }

    /// Empties the tree and the adopted set, calling `f` with each section
    /// taken out, retired or not; cannot fail.  Process context.
    fn take_all(&self, mut f: impl FnMut(&Section)) {
        self.sections.clear(|s| f(&s));
        if let Some(set) = self.adopted.take() {
            set.sections.iter().for_each(f);
        }
    }

    /// Takes the reference to the torn down mm, if any.
    fn take_exit_ref(&self) -> Option<ARef<Mm>> {
        let p = NonNull::new(self.exit_ref.swap(ptr::null_mut(), Ordering::AcqRel))?;
        // SAFETY: A non-null `exit_ref` is a reference taken with
        // `ARef::into_raw` (type invariants), given back once: the swap
        // cleared it.
        Some(unsafe { ARef::from_raw(p) })
    }
}

/// States waiting for [`maintain`], each holding one reference
/// (`Arc::into_raw`): a lock-free stack, taken whole.
static MAINTENANCE: AtomicPtr<MmState> = AtomicPtr::new(ptr::null_mut());

/// Puts `state` on the maintenance list (once until the work takes it) and
/// schedules the work.  Any context but NMI.
fn queue_maintenance(state: &Arc<MmState>) {
    // Pairs with the fence in `Registry::maintain`: either the work, taking
    // the state off the list, sees what the caller did (a section retired,
    // the mm torn down), or this sees the state off the list.
    fence(Ordering::SeqCst);
    if state.queued.swap(true, Ordering::AcqRel) {
        return;
    }
    let raw = Arc::into_raw(state.clone()).cast_mut();
    let mut head = MAINTENANCE.load(Ordering::Relaxed);
    loop {
        state.next.store(head, Ordering::Relaxed);
        match MAINTENANCE.compare_exchange_weak(head, raw, Ordering::AcqRel, Ordering::Relaxed) {
            Ok(_) => break,
            Err(h) => head = h,
        }
    }
    // SAFETY: Schedules a static work item; callable in atomic context.
    unsafe { crate::ffi::sframe_maintenance_schedule() };
}

/// The unmap watch: the mapping of `[start, end)` of `mm`, which still has
/// users, is being freed; `kept(lo, hi)` tells whether `[lo, hi)` is still
/// mapped as it was (the mapping was merged into another).  Process
/// context with `mmap_lock` held; must not sleep.
pub(crate) fn unmapped(
    mm: *const bindings::mm_struct,
    start: usize,
    end: usize,
    kept: impl Fn(usize, usize) -> bool,
) {
    let guard = rcu::Guard::new();
    let Some(state) = registry(&guard).and_then(|reg| reg.index.load(mm as usize, &guard)) else {
        return;
    };
    if state.unmap(start, end, kept, &guard) {
        queue_maintenance(state);
    }
}

/// The maintenance work: forgets the address spaces torn down, and those
/// an unmap left without a live section.  Process context.
pub(crate) fn maintain() {
    if let Some(reg) = registry_process() {
        reg.maintain(&mut reg.lock.lock());
    }
}

/// The teardown probe: `mm` has been torn down (`exit_mmap()`, preemption
/// off).  Its state, if any, is forgotten by the maintenance work, with
/// the `mm_struct` pinned until then.
pub(crate) fn torn_down(mm: *const bindings::mm_struct) {
    let guard = rcu::Guard::new();
    let Some(state) = registry(&guard).and_then(|reg| reg.index.load(mm as usize, &guard)) else {
        return;
    };
    // SAFETY: `exit_mmap()` runs with a reference on the `mm_struct` that
    // its caller drops after it returns.
    let pinned = ARef::from(unsafe { Mm::from_raw(mm) });
    let old = state
        .exit_ref
        .swap(ARef::into_raw(pinned).as_ptr(), Ordering::AcqRel);
    // An mm is torn down once: no reference can have been there.
    if !old.is_null() {
        pr_err!("an mm torn down twice: one reference to it is leaked\n");
    }
    queue_maintenance(state);
}

/// Writer state, under [`Registry::lock`].
struct Shared {
    /// Bytes held by all copies.
    bytes: u64,
    next_handle: u64,
    shutting_down: bool,
}

/// The module-wide registry.
#[pin_data]
pub(crate) struct Registry {
    /// mm address → its state.
    #[pin]
    index: RcuMapleTree<Arc<MmState>>,
    #[pin]
    lock: Mutex<Shared>,
    /// Copy key → the copy; changed under `lock`.
    #[pin]
    copies: RcuMapleTree<Arc<SectionCopy>>,
    /// UID → that user's account, while it holds anything; changed under
    /// `lock`.
    #[pin]
    users: RcuMapleTree<Arc<UserAccount>>,
    /// The key of the copy hash, random per load, so that no user can
    /// choose bytes whose keys collide.
    hash_key: (u64, u64),
    #[pin]
    warn: Ratelimit,
    limits: Limits,
}

/// The registry while the module is loaded; null before init and during
/// the end of unload.
static REGISTRY: AtomicPtr<Registry> = AtomicPtr::new(ptr::null_mut());

/// The registry, for a reader holding the RCU read lock.
fn registry<'a>(_guard: &'a rcu::Guard) -> Option<&'a Registry> {
    // SAFETY: A non-null pointer was published by `RegistryHandle::new` and
    // is freed by its `drop` only after clearing it and a grace period, which
    // `_guard` holds off.
    unsafe { REGISTRY.load(Ordering::Acquire).as_ref() }
}

/// The registry, for ioctls.
pub(crate) fn get() -> Option<&'static Registry> {
    registry_process()
}

/// The registry, for ioctls, the exec and fork works and the maintenance
/// work.
fn registry_process() -> Option<&'static Registry> {
    // SAFETY: `RegistryHandle::drop` frees the registry only after the device
    // is gone (an ioctl holds an open file, which pins the module: no ioctl
    // runs during unload), and after the exec and fork works and the
    // maintenance work have all run (the module's `Lifecycle` is dropped
    // before the registry: it removes what queues them, then waits).
    unsafe { REGISTRY.load(Ordering::Acquire).as_ref() }
}

/// Whether `mm` has a live registration.  Any context (NMI included), no
/// lock; for the ftrace callback, on every sample.
pub(crate) fn mm_has_sections(mm: *const bindings::mm_struct) -> bool {
    let guard = rcu::Guard::new();
    registry(&guard)
        .and_then(|reg| reg.index.load(mm as usize, &guard))
        .is_some_and(|state| state.live.load(Ordering::Relaxed) != 0)
}

/// The unwind row for `pc` in `mm`, copied out.  Any context (NMI
/// included), no lock; RCU is not held after the return.  For walks that
/// may fault between lookups; [`with_walk_rows`] is cheaper where none does.
pub(crate) fn find_row(
    mm: *const bindings::mm_struct,
    pc: u64,
    budget: &mut sframe::Budget,
) -> Option<sframe::Row> {
    with_walk_rows(mm, |rows| rows.find_row(pc, budget))
}

/// The rows of one mm for one walk that does not sleep: the RCU read lock
/// is held for the whole walk, the mm's state is looked up once and the
/// section last used stays parsed (consecutive frames are mostly in one
/// object), so a frame costs a range check and the row search.
pub(crate) struct WalkRows<'g> {
    guard: &'g rcu::Guard,
    state: Option<&'g MmState>,
    last: Option<(&'g Section, sframe::Section<'g>)>,
}

impl Section {
    fn covers(&self, pc: u64) -> bool {
        (self.text_start..self.text_end).contains(&pc)
    }

    /// What `SFRAME_IOC_LIST` says of the section.
    fn info(&self) -> SframeSectionInfo {
        SframeSectionInfo {
            handle: self.handle,
            text_start: self.text_start,
            text_end: self.text_end,
            sframe_addr: self.sframe_addr,
            sframe_len: self.copy.bytes.len() as u64,
            kernel_bytes: self.copy.bytes.capacity() as u64,
            version: self.copy.info.version,
            num_fdes: self.copy.info.num_fdes,
            shared: self.copy.users.load(Ordering::Relaxed).saturating_sub(1),
            flags: self.flags,
        }
    }
}

impl<'g> WalkRows<'g> {
    /// The live section of `state` that covers `pc`, parsed.
    fn lookup(
        state: &'g MmState,
        pc: u64,
        guard: &'g rcu::Guard,
    ) -> Option<(&'g Section, sframe::Section<'g>)> {
        let live = |s: &&'g Section| !s.dead.load(Ordering::Acquire);
        let s = state
            .sections
            .load(usize::try_from(pc).ok()?, guard)
            .filter(live)
            .or_else(|| state.adopted.get(guard)?.find(pc).filter(live))?;
        // Validated at registration: parsing cannot fail; if it did, the
        // section gives no rows.
        let parsed = sframe::Section::parse(&s.copy.bytes, s.sframe_addr).ok()?;
        Some((s, parsed))
    }

    /// The unwind row for `pc`, the search paid from the walk's `budget`.
    pub(crate) fn find_row(&mut self, pc: u64, budget: &mut sframe::Budget) -> Option<sframe::Row> {
        let hit = self
            .last
            .as_ref()
            .is_some_and(|(s, _)| s.covers(pc) && !s.dead.load(Ordering::Acquire));
        if !hit {
            self.last = Self::lookup(self.state?, pc, self.guard);
        }
        let (_, parsed) = self.last.as_ref()?;
        parsed.find_row_within(pc, budget).ok().flatten()
    }
}

/// Runs `f` with the rows of `mm`, under one RCU read-side critical
/// section: `f` must not sleep (the sample path, NMI included).
pub(crate) fn with_walk_rows<R>(
    mm: *const bindings::mm_struct,
    f: impl FnOnce(&mut WalkRows<'_>) -> R,
) -> R {
    let guard = rcu::Guard::new();
    let state = registry(&guard)
        .and_then(|reg| reg.index.load(mm as usize, &guard))
        .map(|state| &**state);
    f(&mut WalkRows {
        guard: &guard,
        state,
        last: None,
    })
}

/// A parent's live registrations at fork, for the child: sorted by text.
/// Their copies are referenced, but their uses not counted: the child
/// counts them when it adopts them, under the lock.
pub(crate) struct Inherited {
    sections: KVec<Section>,
}

/// The live registrations of `parent` at this instant, or `None` if it has
/// none (or no memory could be had without sleeping).  Called in the fork
/// path with preemption off: no lock, no sleep.  A register or unregister
/// running in another thread of the parent is wholly in or wholly out (one
/// tree store each).  The references taken here are never the last ones
/// while the guard is held: the tree holds its own until a grace period
/// after the erase.
pub(crate) fn snapshot(parent: *const bindings::mm_struct) -> Option<Inherited> {
    let guard = rcu::Guard::new();
    let reg = registry(&guard)?;
    let state = reg.index.load(parent as usize, &guard)?;
    let n = state.live.load(Ordering::Relaxed) as usize;
    if n == 0 {
        return None;
    }
    let Ok(mut sections) = KVec::with_capacity(n, GFP_ATOMIC | __GFP_NOWARN) else {
        pr_warn_ratelimited!(
            reg.warn,
            "fork: no memory for the parent's {} sections: the child starts without\n",
            n
        );
        return None;
    };
    let take = |sections: &mut KVec<Section>, s: &Section| {
        if s.dead.load(Ordering::Acquire) {
            return;
        }
        // More sections than counted (a concurrent register): the rest
        // are left out, as if registered after the fork.
        let _ = sections.push_within_capacity(Section {
            handle: s.handle,
            text_start: s.text_start,
            text_end: s.text_end,
            sframe_addr: s.sframe_addr,
            copy: s.copy.clone(),
            flags: s.flags | SFRAME_SECTION_INHERITED,
            dead: AtomicBool::new(false),
        });
    };
    state.for_each_in_order(&guard, |s| take(&mut sections, s));
    Some(Inherited { sections })
}

/// A registration request, read from user space.
pub(crate) struct RegisterRequest {
    pub(crate) sframe_data: u64,
    pub(crate) sframe_len: u64,
    pub(crate) sframe_addr: u64,
    pub(crate) text_start: u64,
    pub(crate) text_end: u64,
    /// `SFRAME_SECTION_*` for `list`: zero for the ioctl.
    pub(crate) flags: u32,
}

/// Removal by handle or by an address inside the text.
#[derive(Clone, Copy)]
pub(crate) enum Which {
    Handle(u64),
    Addr(u64),
}

/// The key of `uid`'s copy of `bytes` in [`Registry::copies`]: SipHash
/// under a secret key, so keys collide only by chance; a comparison of the
/// bytes decides.  Reschedules between 256 KiB chunks.
fn copy_key(hash_key: (u64, u64), uid: u32, bytes: &[u8]) -> usize {
    let mut h = hash_key.0 ^ u64::from(uid);
    for chunk in bytes.chunks(256 << 10) {
        // SAFETY: `chunk` is valid for reads of its length.
        h = unsafe {
            crate::ffi::sframe_siphash(chunk.as_ptr().cast(), chunk.len(), h, hash_key.1)
        };
        resched();
    }
    h as usize
}

/// The caller's real UID, which registrations are charged to.
fn current_uid() -> u32 {
    // SAFETY: Reads the current task's credentials; no preconditions.
    unsafe { crate::ffi::sframe_current_kuid() }
}

/// Whether `a` and `b` are equal, compared 256 KiB at a time with a
/// reschedule between (a section may be up to `max_section_bytes`).
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len()
        && a.chunks(256 << 10).zip(b.chunks(256 << 10)).all(|(x, y)| {
            resched();
            x == y
        })
}

/// Checks that every byte of `[start, end)` is mapped executable.
fn text_is_mapped(mmap: &MmapReadGuard<'_>, start: usize, end: usize) -> Result<(), Failure> {
    let mut addr = start;
    while addr < end {
        let Some(vma) = mmap.vma_lookup(addr) else {
            return Err(Failure::new(
                EINVAL,
                SFRAME_FAIL_NOT_TEXT,
                "text range not mapped",
            ));
        };
        if vma.flags() & vm_flags::EXEC == 0 {
            return Err(Failure::new(
                EINVAL,
                SFRAME_FAIL_NOT_TEXT,
                "text range not executable",
            ));
        }
        addr = vma.end();
    }
    Ok(())
}

/// `EEXIST` for `req`, whose text overlaps that of `existing`.  A loader
/// registering what the module registered at exec (the program, the
/// interpreter), or the module at exec finding what a daemon registered
/// first, is normal: not logged.
fn overlap_failure(existing: Option<&Section>, req: &RegisterRequest) -> Failure {
    let overlap = Failure::new(
        EEXIST,
        SFRAME_FAIL_OVERLAP,
        "text overlaps a registered range",
    );
    match existing {
        Some(s)
            if (s.flags | req.flags) & SFRAME_SECTION_EXEC != 0
                && s.text_start == req.text_start
                && s.text_end == req.text_end =>
        {
            overlap.quiet()
        }
        _ => overlap,
    }
}

fn limit(reason: &'static str) -> Failure {
    Failure::new(ENOSPC, SFRAME_FAIL_LIMIT, reason)
}

/// `cond_resched()`, between steps of a loop whose length a user controls.
pub(crate) fn resched() {
    // SAFETY: Called in process context without spinlocks held.
    unsafe { crate::ffi::sframe_cond_resched() };
}

const FAIL_MEM: Failure = Failure {
    error: ENOMEM,
    kind: SFRAME_FAIL_NOMEM,
    reason: "out of memory",
    log: true,
};

impl Registry {
    fn new(limits: Limits) -> impl PinInit<Self, Error> {
        // SAFETY: No preconditions.
        let hash_key = unsafe { (crate::ffi::get_random_u64(), crate::ffi::get_random_u64()) };
        try_pin_init!(Self {
            index <- RcuMapleTree::new(),
            lock <- new_mutex!(Shared {
                bytes: 0,
                next_handle: 1,
                shutting_down: false,
            }),
            copies <- RcuMapleTree::new(),
            users <- RcuMapleTree::new(),
            hash_key,
            warn <- Ratelimit::new(5000, 10),
            limits,
        }? Error)
    }

    /// The copy of `bytes` for the caller's user (shared if that user holds
    /// identical bytes), its user count raised.
    fn get_copy(&self, bytes: KVVec<u8>, sframe_addr: u64) -> Result<Arc<SectionCopy>, Failure> {
        let uid = current_uid();
        let key = copy_key(self.hash_key, uid, &bytes);
        if let Some(c) = self.find_copy(&self.lock.lock(), key, uid, &bytes) {
            return Ok(c);
        }
        // Validate outside the lock: a large section takes a while.
        let section = sframe::Section::parse(&bytes, sframe_addr)
            .map_err(|e| Failure::new(EINVAL, SFRAME_FAIL_FORMAT, e.as_str()))?;
        section
            .validate(&mut resched)
            .map_err(|e| Failure::new(EINVAL, SFRAME_FAIL_FORMAT, e.as_str()))?;
        #[cfg(CONFIG_X86_64)]
        if section.abi() != sframe::Abi::Amd64Le {
            return Err(Failure::new(
                EINVAL,
                SFRAME_FAIL_FORMAT,
                "not an x86-64 section",
            ));
        }
        let (lo, hi) = section
            .text_range()
            .map_err(|e| Failure::new(EINVAL, SFRAME_FAIL_FORMAT, e.as_str()))?
            .ok_or(Failure::new(
                EINVAL,
                SFRAME_FAIL_FORMAT,
                "section has no FDEs",
            ))?;
        let info = CopyInfo {
            version: match section.version() {
                sframe::Version::V2 => 2,
                sframe::Version::V3 => 3,
            },
            num_fdes: section.num_fdes(),
            text_lo: lo.wrapping_sub(sframe_addr),
            text_hi: hi.wrapping_sub(sframe_addr),
        };

        let mut shared = self.lock.lock();
        if let Some(c) = self.find_copy(&shared, key, uid, &bytes) {
            return Ok(c);
        }
        self.new_copy(&mut shared, bytes, key, uid, info)
    }

    /// A new copy of validated `bytes` for `uid`, in the table under `key`
    /// unless that key is taken, charged to the user's and the module's
    /// byte limits.  Under the registry lock.
    fn new_copy(
        &self,
        shared: &mut Shared,
        bytes: KVVec<u8>,
        key: usize,
        uid: u32,
        info: CopyInfo,
    ) -> Result<Arc<SectionCopy>, Failure> {
        let len = bytes.len() as u64;
        if shared.bytes.saturating_add(len) > self.limits.max_total_bytes {
            return Err(limit("module-wide byte limit (max_total_bytes) reached"));
        }
        let owner = self.account(uid)?;
        if owner.bytes.load(Ordering::Relaxed).saturating_add(len) > self.limits.max_bytes_per_user
        {
            self.forget_if_idle(&owner);
            return Err(limit("per-user byte limit (max_bytes_per_user) reached"));
        }
        let indexed = {
            let guard = rcu::Guard::new();
            self.copies.load(key, &guard).is_none()
        };
        let copy = match Arc::new(
            SectionCopy {
                bytes,
                key,
                indexed,
                owner: owner.clone(),
                users: AtomicU32::new(1),
                info,
            },
            GFP_KERNEL_ACCOUNT,
        ) {
            Ok(copy) => copy,
            Err(_) => {
                self.forget_if_idle(&owner);
                return Err(FAIL_MEM);
            }
        };
        if indexed {
            if let Err(e) = self.copies.insert_range(key, key, copy.clone()) {
                drop(e);
                drop(copy);
                self.forget_if_idle(&owner);
                return Err(FAIL_MEM);
            }
        }
        shared.bytes += len;
        copy.owner.bytes.fetch_add(len, Ordering::Relaxed);
        COUNTERS.copies.fetch_add(1, Ordering::Relaxed);
        COUNTERS.bytes.fetch_add(len, Ordering::Relaxed);
        Ok(copy)
    }

    /// A live copy with the bytes of `old`, a copy taken at a fork whose
    /// last user has left since: the owner's identical copy if there is
    /// one again, else a new one, charged again.  The bytes were validated
    /// when `old` was made.  Under the registry lock.
    fn revive(&self, shared: &mut Shared, old: &SectionCopy) -> Result<Arc<SectionCopy>, Failure> {
        let uid = old.owner.uid;
        if let Some(c) = self.find_copy(shared, old.key, uid, &old.bytes) {
            return Ok(c);
        }
        let mut bytes = KVVec::new();
        bytes
            .extend_from_slice(&old.bytes, GFP_KERNEL_ACCOUNT)
            .map_err(|_| FAIL_MEM)?;
        self.new_copy(shared, bytes, old.key, uid, old.info)
    }

    /// `uid`'s copy of `bytes`, its user count raised.  O(log n) in the
    /// number of copies, whoever holds them; the bytes are compared only
    /// with the same user's copy.
    fn find_copy(
        &self,
        _shared: &Shared,
        key: usize,
        uid: u32,
        bytes: &[u8],
    ) -> Option<Arc<SectionCopy>> {
        // The table changes only under the registry lock, which the caller
        // holds: the copy stays in it while the bytes are compared, outside
        // the table's spinlock.
        let c = {
            let guard = rcu::Guard::new();
            self.copies.load(key, &guard)?.clone()
        };
        // A copy whose last user left but that could not be erased (for
        // want of memory) is not found again.
        if c.users.load(Ordering::Relaxed) == 0
            || c.owner.uid != uid
            || !same_bytes(&c.bytes, bytes)
        {
            return None;
        }
        c.users.fetch_add(1, Ordering::Relaxed);
        Some(c)
    }

    /// Forgets `owner` if it holds nothing (a registration that failed
    /// after creating it, or the last copy of the user gone).
    fn forget_if_idle(&self, owner: &Arc<UserAccount>) {
        if owner.bytes.load(Ordering::Relaxed) != 0 || owner.sections.load(Ordering::Relaxed) != 0 {
            return;
        }
        let same = {
            let guard = rcu::Guard::new();
            self.users
                .load(owner.uid as usize, &guard)
                .is_some_and(|a| Arc::ptr_eq(a, owner))
        };
        // An account that cannot be erased now (no memory for the tree's
        // nodes) stays, idle, and is used again by the user's next request.
        if same {
            let _ = self.users.erase(owner.uid as usize);
        }
    }

    /// `uid`'s account, created if the user holds nothing yet.
    fn account(&self, uid: u32) -> Result<Arc<UserAccount>, Failure> {
        {
            let guard = rcu::Guard::new();
            if let Some(a) = self.users.load(uid as usize, &guard) {
                return Ok(a.clone());
            }
        }
        let a = Arc::new(
            UserAccount {
                uid,
                sections: AtomicU32::new(0),
                bytes: AtomicU64::new(0),
            },
            GFP_KERNEL_ACCOUNT,
        )
        .map_err(|_| FAIL_MEM)?;
        self.users
            .insert_range(uid as usize, uid as usize, a.clone())
            .map_err(|_| FAIL_MEM)?;
        Ok(a)
    }

    /// Drops one use of `copy`; the last one removes it from the table and
    /// uncharges its bytes (the memory goes when the last RCU-deferred
    /// section lets go of it).  O(log n).
    fn put_copy(&self, shared: &mut Shared, copy: &Arc<SectionCopy>) {
        if copy.users.fetch_sub(1, Ordering::Relaxed) != 1 {
            return;
        }
        // A copy that cannot be erased now (no memory for the tree's nodes)
        // stays in the table, unused, until unload; `find_copy` skips it.
        if copy.indexed {
            let _ = self.copies.erase(copy.key);
        }
        let len = copy.bytes.len() as u64;
        shared.bytes -= len;
        COUNTERS.copies.fetch_sub(1, Ordering::Relaxed);
        COUNTERS.bytes.fetch_sub(len, Ordering::Relaxed);
        copy.owner.bytes.fetch_sub(len, Ordering::Relaxed);
        // The sections and copies still waiting for a grace period keep
        // their references to the account.
        self.forget_if_idle(&copy.owner);
    }

    /// Erases `state`'s retired sections: one step of the RCU read lock
    /// per section, rescheduling between steps.  A section that cannot be
    /// erased now (no memory for the tree's nodes) stays, retired, for the
    /// next purge or the mm's teardown.
    fn purge(&self, shared: &mut Shared, state: &MmState) {
        if state.retired.swap(0, Ordering::Relaxed) == 0 {
            return;
        }
        let mut at = Some(0usize);
        while at.is_some() {
            let victim = {
                let guard = rcu::Guard::new();
                state
                    .sections
                    .next(&mut at, &guard)
                    .filter(|s| s.dead.load(Ordering::Acquire))
                    .map(|s| s.text_start as usize)
            };
            if let Some(start) = victim {
                match state.sections.erase(start) {
                    Ok(Some(s)) => self.put_copy(shared, &s.copy),
                    Ok(None) => {}
                    Err(_) => {
                        state.retired.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            resched();
        }
    }

    /// Erases every section of `state`, of the tree and of the adopted
    /// set; cannot fail.
    fn drain(&self, shared: &mut Shared, state: &MmState) {
        state.take_all(|s| {
            state.retire(s);
            self.put_copy(shared, &s.copy);
            resched();
        });
        state.retired.store(0, Ordering::Relaxed);
    }

    /// Handles the states on the maintenance list.
    fn maintain(&self, shared: &mut Shared) {
        let mut p = MAINTENANCE.swap(ptr::null_mut(), Ordering::AcqRel);
        while !p.is_null() {
            // SAFETY: Every pointer on the list came from `Arc::into_raw` in
            // `queue_maintenance` and is taken off once, here (the swap took
            // the whole list).
            let state = unsafe { Arc::from_raw(p) };
            p = state.next.load(Ordering::Relaxed);
            state.queued.store(false, Ordering::Relaxed);
            // Pairs with the fence in `queue_maintenance`: either this sees
            // what made the state queued again, or that queues it again.
            fence(Ordering::SeqCst);
            self.forget(shared, &state);
            resched();
        }
    }

    /// Forgets `state` if its mm was torn down or it has no live section
    /// left: empties it and erases it from the index (unless another state
    /// took its place since), then drops the pin on a torn down mm.
    fn forget(&self, shared: &mut Shared, state: &Arc<MmState>) {
        let exit = state.take_exit_ref();
        if exit.is_none() && state.live.load(Ordering::Relaxed) != 0 {
            return;
        }
        let indexed = {
            let guard = rcu::Guard::new();
            self.index
                .load(state.mm, &guard)
                .is_some_and(|s| Arc::ptr_eq(s, state))
        };
        if indexed {
            self.drain(shared, state);
            if self.index.erase(state.mm).is_err() {
                // The empty state stays indexed, with the torn down mm
                // pinned, until the next time or unload.
                pr_warn_ratelimited!(
                    self.warn,
                    "out of memory forgetting an address space: its empty entry stays\n"
                );
                if let Some(mm) = exit {
                    state
                        .exit_ref
                        .store(ARef::into_raw(mm).as_ptr(), Ordering::Release);
                }
                return;
            }
        }
        // The mm may go now: its address is out of the index.
        drop(exit);
    }

    /// The state of `mm`, and whether it is indexed: a new, unindexed one if
    /// it has none.  Under the registry lock, so it is not forgotten
    /// meanwhile.
    fn state_of(&self, _shared: &Shared, mm: &MmWithUser) -> Result<(Arc<MmState>, bool), Failure> {
        let key = mm.as_raw() as usize;
        if let Some(state) = self.indexed_state(key) {
            return Ok((state, true));
        }
        let state = Arc::pin_init(MmState::new(key), GFP_KERNEL_ACCOUNT).map_err(|_| FAIL_MEM)?;
        Ok((state, false))
    }

    /// The indexed state of the mm at `key`, if any.
    fn indexed_state(&self, key: usize) -> Option<Arc<MmState>> {
        let guard = rcu::Guard::new();
        self.index.load(key, &guard).cloned()
    }

    /// Registers `req` for `mm`; returns the handle.
    pub(crate) fn register(&self, mm: &MmWithUser, req: &RegisterRequest) -> Result<u64, Failure> {
        let l = &self.limits;
        if req.sframe_len == 0 {
            return Err(Failure::new(EINVAL, SFRAME_FAIL_ARGUMENT, "empty section"));
        }
        if req.text_start >= req.text_end {
            return Err(Failure::new(
                EINVAL,
                SFRAME_FAIL_ARGUMENT,
                "empty text range",
            ));
        }
        if req.sframe_len > l.max_section_bytes {
            return Err(Failure::new(
                E2BIG,
                SFRAME_FAIL_TOO_BIG,
                "section larger than max_section_bytes",
            ));
        }
        let len = usize::try_from(req.sframe_len).map_err(|_| FAIL_MEM)?;
        let addr = usize::try_from(req.sframe_data)
            .map_err(|_| Failure::new(EFAULT, SFRAME_FAIL_FAULT, "section pointer out of range"))?;
        let text_start = usize::try_from(req.text_start)
            .map_err(|_| Failure::new(EINVAL, SFRAME_FAIL_NOT_TEXT, "text out of range"))?;
        let text_end = usize::try_from(req.text_end)
            .map_err(|_| Failure::new(EINVAL, SFRAME_FAIL_NOT_TEXT, "text out of range"))?;

        let mut bytes = KVVec::new();
        UserSlice::new(UserPtr::from_addr(addr), len)
            .reader()
            .read_all(&mut bytes, GFP_KERNEL_ACCOUNT)
            .map_err(|e| {
                if e == EFAULT {
                    Failure::new(EFAULT, SFRAME_FAIL_FAULT, "section bytes unreadable")
                } else {
                    FAIL_MEM
                }
            })?;
        let copy = self.get_copy(bytes, req.sframe_addr)?;
        let result = self.insert(mm, req, text_start, text_end, &copy);
        if result.is_err() {
            self.put_copy(&mut self.lock.lock(), &copy);
        }
        result
    }

    fn insert(
        &self,
        mm: &MmWithUser,
        req: &RegisterRequest,
        text_start: usize,
        text_end: usize,
        copy: &Arc<SectionCopy>,
    ) -> Result<u64, Failure> {
        let lo = copy.info.text_lo.wrapping_add(req.sframe_addr);
        let hi = copy.info.text_hi.wrapping_add(req.sframe_addr);
        if lo >= req.text_end || hi <= req.text_start || lo > hi {
            return Err(Failure::new(
                EINVAL,
                SFRAME_FAIL_ARGUMENT,
                "the section's functions lie outside the text range",
            ));
        }
        let mmap = mm.mmap_read_lock();
        text_is_mapped(&mmap, text_start, text_end)?;

        let mut shared = self.lock.lock();
        if shared.shutting_down {
            return Err(Failure::new(
                ENODEV,
                SFRAME_FAIL_ARGUMENT,
                "module unloading",
            ));
        }
        // What exited before counts no more against the limits.
        self.maintain(&mut shared);
        let (state, indexed) = self.state_of(&shared, mm)?;
        self.purge(&mut shared, &state);
        let owner = &copy.owner;
        self.section_limits(&state, owner)?;
        {
            let guard = rcu::Guard::new();
            let adopted = state.adopted.get(&guard).and_then(|set| {
                set.meeting(req.text_start, req.text_end)
                    .find(|s| !s.dead.load(Ordering::Acquire))
            });
            if let Some(s) = adopted {
                return Err(overlap_failure(Some(s), req));
            }
        }
        let handle = shared.next_handle;
        let section = Section {
            handle,
            text_start: req.text_start,
            text_end: req.text_end,
            sframe_addr: req.sframe_addr,
            copy: copy.clone(),
            flags: req.flags,
            dead: AtomicBool::new(false),
        };
        if let Err(e) = state
            .sections
            .insert_range(text_start, text_end - 1, section)
        {
            return Err(if e.error == EEXIST {
                let guard = rcu::Guard::new();
                overlap_failure(state.sections.load(text_start, &guard), req)
            } else {
                Failure::new(e.error, SFRAME_FAIL_NOMEM, "cannot insert the section")
            });
        }
        state.admit(owner);
        let key = state.mm;
        let extra = if indexed {
            Some(state)
        } else if let Err(e) = self.index.insert_range(key, key, state) {
            // Undo: the section is unreachable without the index entry.
            // Nothing else is in this tree (writers hold the lock, and an
            // unindexed state gets sections only here); empty it fully, so
            // the state can be freed from an RCU callback without locking.
            let state = e.value;
            state.sections.clear(|s| {
                state.retire(&s);
                COUNTERS.unregistered.fetch_sub(1, Ordering::Relaxed);
                COUNTERS.sections.fetch_add(1, Ordering::Relaxed);
            });
            drop(shared);
            drop(mmap);
            drop(state);
            return Err(Failure::new(
                e.error,
                SFRAME_FAIL_NOMEM,
                "cannot index the address space",
            ));
        } else {
            None
        };
        shared.next_handle += 1;
        COUNTERS.sections.fetch_add(1, Ordering::Relaxed);
        COUNTERS.registered.fetch_add(1, Ordering::Relaxed);
        drop(shared);
        drop(mmap);
        // Our own reference, if the index already had one.
        drop(extra);
        Ok(handle)
    }

    /// Gives `mm`, a fork child's on its first way to user space, the
    /// registrations `inherited` its parent had at the fork: the same
    /// copies (a copy the parent has let go of since is taken again from
    /// its bytes), the same handles, charged to the same limits.  A section
    /// that cannot be adopted is left out, said in the log; the child then
    /// falls back to frame pointers there, as an unregistered task would.
    /// The sections become the child's adopted set, the snapshot's own
    /// array, in one step: no allocation or tree store per section.  The
    /// child's state is published whole, after its last section.
    pub(crate) fn adopt(&self, mm: &MmWithUser, inherited: Inherited) {
        let entries = inherited.sections;
        let mmap = mm.mmap_read_lock();
        let mut shared = self.lock.lock();
        self.maintain(&mut shared);
        let Ok((state, indexed)) = self.state_of(&shared, mm) else {
            drop(shared);
            drop(mmap);
            self.adopt_failed(entries.len() as u32);
            return;
        };
        // A child's state is new but where something registered for it
        // first (a daemon, through its PID): then one section at a time.
        let (added, mut dropped) = if indexed {
            self.adopt_into_tree(&mut shared, &mmap, &state, entries)
        } else {
            self.adopt_as_set(&mut shared, &mmap, &state, entries)
        };
        if added > 0 && !indexed {
            let key = state.mm;
            if let Err(e) = self.index.insert_range(key, key, state) {
                // Unreachable without the index entry: empty the state.
                let state = e.value;
                state.take_all(|s| self.unadmit(&mut shared, &state, s));
                dropped += added;
                drop(shared);
                drop(mmap);
                drop(state);
                self.adopt_failed(dropped);
                return;
            }
        }
        COUNTERS
            .sections
            .fetch_add(u64::from(added), Ordering::Relaxed);
        COUNTERS
            .registered
            .fetch_add(u64::from(added), Ordering::Relaxed);
        drop(shared);
        drop(mmap);
        self.adopt_failed(dropped);
    }

    /// Gives the child's new `state` the `entries` as its adopted set, in
    /// one allocation whatever their number; the sections added and left
    /// out.  Under the lock and the child's `mmap_lock`.
    fn adopt_as_set(
        &self,
        shared: &mut Shared,
        mmap: &MmapReadGuard<'_>,
        state: &MmState,
        mut entries: KVec<Section>,
    ) -> (u32, u32) {
        let mut dropped = 0u32;
        // An entry left out is marked dead here, with no use of its copy
        // counted, and removed below.
        for e in entries.iter_mut() {
            let taken = !shared.shutting_down && self.take_use(shared, e);
            if taken && self.may_adopt(mmap, state, e).is_ok() {
                state.admit(&e.copy.owner);
            } else {
                if taken {
                    self.put_copy(shared, &e.copy);
                }
                *e.dead.get_mut() = true;
                dropped += 1;
            }
            resched();
        }
        entries.retain(|e| !e.dead.load(Ordering::Relaxed));
        let added = entries.len() as u32;
        if added == 0 {
            return (0, dropped);
        }
        match state.adopted.set(AdoptedSet { sections: entries }) {
            Ok(()) => (added, dropped),
            Err(set) => {
                for s in set.sections.iter() {
                    self.unadmit(shared, state, s);
                }
                (0, dropped + added)
            }
        }
    }

    /// Inserts the `entries` one by one into the tree of the child's
    /// `state`; the sections added and left out.  Under the lock and the
    /// child's `mmap_lock`.
    fn adopt_into_tree(
        &self,
        shared: &mut Shared,
        mmap: &MmapReadGuard<'_>,
        state: &MmState,
        mut entries: KVec<Section>,
    ) -> (u32, u32) {
        let (mut added, mut dropped) = (0u32, 0u32);
        for mut e in entries.drain_all() {
            if shared.shutting_down || !self.take_use(shared, &mut e) {
                dropped += 1;
                continue;
            }
            let copy = e.copy.clone();
            let inserted = self.may_adopt(mmap, state, &e).and_then(|()| {
                let (start, end) = (e.text_start as usize, e.text_end as usize);
                state
                    .sections
                    .insert_range(start, end - 1, e)
                    .map_err(|_| FAIL_MEM)
            });
            if inserted.is_err() {
                self.put_copy(shared, &copy);
                dropped += 1;
                continue;
            }
            state.admit(&copy.owner);
            added += 1;
            resched();
        }
        (added, dropped)
    }

    /// Counts a use of `e`'s copy for the child.  Use counts change under
    /// the lock only: a copy still used is used once more; a dead one (the
    /// parent let go of it since the fork) is taken again, and replaces
    /// `e`'s.  False if it could not be.
    fn take_use(&self, shared: &mut Shared, e: &mut Section) -> bool {
        if e.copy.users.load(Ordering::Relaxed) != 0 {
            e.copy.users.fetch_add(1, Ordering::Relaxed);
            return true;
        }
        match self.revive(shared, &e.copy) {
            Ok(c) => {
                e.copy = c;
                true
            }
            Err(_) => false,
        }
    }

    /// Whether the child's `state` may take `e`: its text is mapped in the
    /// child (text the parent marked `MADV_DONTFORK` is not), within the
    /// limits.  Under the lock and the child's `mmap_lock`.
    fn may_adopt(
        &self,
        mmap: &MmapReadGuard<'_>,
        state: &MmState,
        e: &Section,
    ) -> Result<(), Failure> {
        let start = usize::try_from(e.text_start).map_err(|_| FAIL_MEM)?;
        let end = usize::try_from(e.text_end).map_err(|_| FAIL_MEM)?;
        if end <= start {
            return Err(FAIL_MEM);
        }
        text_is_mapped(mmap, start, end)?;
        self.section_limits(state, &e.copy.owner)
    }

    /// Undoes the adoption of `s` into a state that never entered the
    /// index: retired without counting it as unregistered (it was never
    /// counted as registered), and its copy's use dropped.
    fn unadmit(&self, shared: &mut Shared, state: &MmState, s: &Section) {
        state.retire(s);
        COUNTERS.unregistered.fetch_sub(1, Ordering::Relaxed);
        COUNTERS.sections.fetch_add(1, Ordering::Relaxed);
        self.put_copy(shared, &s.copy);
    }

    /// Whether `state` may hold one more section of `owner`'s: the
    /// per-process, per-user and module-wide section limits.
    fn section_limits(&self, state: &MmState, owner: &UserAccount) -> Result<(), Failure> {
        if state.live.load(Ordering::Relaxed) >= self.limits.max_sections_per_mm {
            return Err(limit("per-process limit (max_sections_per_mm) reached"));
        }
        if owner.sections.load(Ordering::Relaxed) >= self.limits.max_sections_per_user {
            return Err(limit("per-user limit (max_sections_per_user) reached"));
        }
        if COUNTERS.sections.load(Ordering::Relaxed) >= self.limits.max_total_sections {
            return Err(limit("module-wide limit (max_total_sections) reached"));
        }
        Ok(())
    }

    fn adopt_failed(&self, dropped: u32) {
        if dropped > 0 {
            pr_warn_ratelimited!(
                self.warn,
                "fork: {} of the parent's sections not given to child {} (limits or memory)\n",
                dropped,
                kernel::current!().pid()
            );
        }
    }

    /// Removes one registration of `mm`.
    pub(crate) fn unregister(&self, mm: &MmWithUser, which: Which) -> Result<(), Failure> {
        let not_found = Failure::new(ENOENT, SFRAME_FAIL_NOT_FOUND, "no such registration");
        let mut shared = self.lock.lock();
        let Some(state) = self.indexed_state(mm.as_raw() as usize) else {
            return Err(not_found);
        };
        let live = |s: &Section| !s.dead.load(Ordering::Acquire);
        let start = match which {
            Which::Addr(a) => {
                let guard = rcu::Guard::new();
                usize::try_from(a)
                    .ok()
                    .and_then(|a| state.sections.load(a, &guard))
                    .filter(|s| live(s))
                    .map(|s| s.text_start as usize)
            }
            Which::Handle(h) => Self::find_live(&state, |s| s.handle == h && live(s)),
        };
        // Writers hold the lock: the section found is still there.
        let s = match start.map(|start| state.sections.erase(start)) {
            Some(Ok(Some(s))) => s,
            Some(Err(e)) => {
                return Err(Failure::new(
                    e,
                    SFRAME_FAIL_NOMEM,
                    "cannot remove the section",
                ))
            }
            Some(Ok(None)) => return Err(not_found),
            // Not in the tree: an adopted section is retired in place; its
            // copy's use goes with the set.
            None => {
                let guard = rcu::Guard::new();
                let set = state.adopted.get(&guard);
                let adopted = match which {
                    Which::Addr(a) => set.and_then(|set| set.find(a)),
                    Which::Handle(h) => {
                        set.and_then(|set| set.sections.iter().find(|s| s.handle == h && live(s)))
                    }
                };
                return match adopted.filter(|s| live(s)) {
                    Some(s) => {
                        state.retire(s);
                        Ok(())
                    }
                    None => Err(not_found),
                };
            }
        };
        state.retire(&s);
        self.put_copy(&mut shared, &s.copy);
        drop(shared);
        drop(s);
        drop(state);
        Ok(())
    }

    /// The start of the first section of `state` that `pred` accepts: one
    /// RCU read-side step per section, rescheduling between steps.
    fn find_live(state: &MmState, pred: impl Fn(&Section) -> bool) -> Option<usize> {
        let mut at = Some(0usize);
        while at.is_some() {
            {
                let guard = rcu::Guard::new();
                if let Some(s) = state.sections.next(&mut at, &guard).filter(|s| pred(s)) {
                    return Some(s.text_start as usize);
                }
            }
            resched();
        }
        None
    }

    /// The live registrations of `mm`.  `shared` counts only the same
    /// user's registrations of the same bytes: copies are per user.
    pub(crate) fn list(&self, mm: &MmWithUser) -> Result<KVec<SframeSectionInfo>, Failure> {
        let mut out = KVec::new();
        let mut shared = self.lock.lock();
        let Some(state) = self.indexed_state(mm.as_raw() as usize) else {
            return Ok(out);
        };
        self.purge(&mut shared, &state);
        // Sections are only added under the lock: this is the count.
        let n = state.live.load(Ordering::Relaxed) as usize;
        out.reserve(n, GFP_KERNEL).map_err(|_| FAIL_MEM)?;
        let live = |s: &&Section| !s.dead.load(Ordering::Acquire);
        // The tree one step at a time, the adopted set merged in between:
        // in the order of their text.  The set does not change under the
        // lock.
        let mut at = Some(0usize);
        let mut next_adopted = 0usize;
        loop {
            {
                let guard = rcu::Guard::new();
                let set: &[Section] = state.adopted.get(&guard).map_or(&[], |set| &set.sections);
                let t = state.sections.next(&mut at, &guard);
                let until = t.map_or(u64::MAX, |t| t.text_start);
                while let Some(a) = set.get(next_adopted).filter(|a| a.text_start < until) {
                    if live(&a) {
                        let _ = out.push_within_capacity(a.info());
                    }
                    next_adopted += 1;
                }
                match t {
                    Some(t) if live(&t) => {
                        let _ = out.push_within_capacity(t.info());
                    }
                    Some(_) => {}
                    None => break,
                }
            }
            resched();
        }
        drop(shared);
        drop(state);
        Ok(out)
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
            let mut shared = reg.lock.lock();
            shared.shutting_down = true;
            // What the maintenance work left: nothing queues more now.
            reg.maintain(&mut shared);
            reg.index.clear(|erased| {
                let state: Arc<MmState> = (*erased).clone();
                reg.drain(&mut shared, &state);
                drop(state.take_exit_ref());
                drop(erased);
            });
        }
        REGISTRY.store(ptr::null_mut(), Ordering::Release);
        // No lock-free reader holds the registry after this.
        rcu::synchronize_rcu();
        rcu::rcu_barrier();
    }
}
