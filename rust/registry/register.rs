// SPDX-License-Identifier: GPL-2.0

//! Registration: a section's bytes read from user memory, copied, validated
//! (or shared with the same user's identical copy) and inserted into the
//! address space's tree, within the limits.
//!
//! Contexts: process context (the ioctl, an exec's task work); reads user
//! memory (or is given the bytes), takes the target's `mmap_lock` for
//! reading, then the registry lock.  The registration is held by the
//! account of the process it is for ([`RegisterRequest::holder`]), which
//! the limits on sections are checked against; the copy's bytes are
//! charged to the caller who registered them.

use super::{
    account::UserAccount,
    bound::BoundCopy,
    copy::{
        unreadable,
        SectionCopy, //
    },
    counters::{
        limit,
        Failure,
        COUNTERS,
        FAIL_MEM, //
    },
    maintenance::WRITER_MAINTENANCE,
    section::Section,
    state::{
        MmState,
        TextStart, //
    },
    Registry,
    Writer, //
};
use crate::{
    abstractions::compat::rcu,
    uapi::*, //
};
use core::sync::atomic::Ordering;
use kernel::{
    mm::{
        virt::flags as vm_flags,
        MmWithUser,
        MmapReadGuard, //
    },
    prelude::*,
    sync::Arc,
    uaccess::{
        UserPtr,
        UserSlice, //
    },
};

/// How a registration names its copy ([`crate::uapi::SFRAME_F_TAGGED`],
/// [`crate::uapi::SFRAME_F_BY_TAG`]).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tag {
    /// By its bytes, given.
    None,
    /// By the tag, the bytes given: compared with the copy filed under
    /// the tag, or validated as a new copy filed under it.
    File(u64),
    /// By the tag alone: the copy filed under it, no bytes given.
    Find(u64),
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
    /// How the copy is named.
    pub(crate) tag: Tag,
    /// The account of the process the section is for, which holds it:
    /// the caller's for its own process, the target's otherwise.
    pub(crate) holder: u32,
}

/// `req`'s text range as addresses.
fn text_range(req: &RegisterRequest) -> Result<(usize, usize), Failure> {
    let out_of_range = |_| Failure::new(EINVAL, SFRAME_FAIL_NOT_TEXT, "text out of range");
    Ok((
        usize::try_from(req.text_start).map_err(out_of_range)?,
        usize::try_from(req.text_end).map_err(out_of_range)?,
    ))
}

/// Checks that every byte of `[start, end)` is mapped executable.
pub(super) fn text_is_mapped(
    mmap: &MmapReadGuard<'_>,
    start: usize,
    end: usize,
) -> Result<(), Failure> {
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

impl Registry {
    /// Registers `req` for `mm`, its bytes read from the caller's memory
    /// (or, by tag, the caller's account's copy filed under it); returns
    /// the handle.  Bytes the caller's account holds a copy of are
    /// compared where they are, not copied.
    pub(crate) fn register(&self, mm: &MmWithUser, req: &RegisterRequest) -> Result<u64, Failure> {
        let len = self.check_request(req)?;
        // What exited just before counts no more (bounded: nobody pays for
        // a storm of other processes' exits).
        self.maintain(WRITER_MAINTENANCE);
        let tag = match req.tag {
            Tag::Find(tag) => return self.register_by_tag(mm, req, len, tag),
            Tag::File(tag) => Some(tag),
            Tag::None => None,
        };
        let addr = usize::try_from(req.sframe_data)
            .map_err(|_| Failure::new(EFAULT, SFRAME_FAIL_FAULT, "section pointer out of range"))?;
        if let Some(copy) = self.shared_copy_from_user(addr, len, tag)? {
            return self.insert_copy(mm, req, copy);
        }
        let mut bytes = KVVec::new();
        UserSlice::new(UserPtr::from_addr(addr), len)
            .reader()
            .read_all(&mut bytes, GFP_KERNEL_ACCOUNT)
            .map_err(|e| if e == EFAULT { unreadable() } else { FAIL_MEM })?;
        self.register_read(mm, req, bytes)
    }

    /// Registers `req` for `mm` with the copy of `len` bytes the caller's
    /// account filed under `tag`: `ENOENT` (counted, not logged: the
    /// caller then gives the bytes) if it holds or keeps none.  Called
    /// by [`Registry::register`] once the writer's maintenance is done.
    fn register_by_tag(
        &self,
        mm: &MmWithUser,
        req: &RegisterRequest,
        len: usize,
        tag: u64,
    ) -> Result<u64, Failure> {
        let copy = self.tagged_copy(len, tag).ok_or_else(|| {
            Failure::new(ENOENT, SFRAME_FAIL_NOT_FOUND, "no copy under that tag").quiet()
        })?;
        let owner = copy.owner.clone();
        let handle = self.insert_copy(mm, req, copy)?;
        COUNTERS.by_tag.fetch_add(1, Ordering::Relaxed);
        owner.by_tag.fetch_add(1, Ordering::Relaxed);
        Ok(handle)
    }

    /// Registers `req` for `mm` with the section's `bytes`, read by the
    /// caller (exec registration reads them without waiting for I/O);
    /// returns the handle.
    pub(crate) fn register_bytes(
        &self,
        mm: &MmWithUser,
        req: &RegisterRequest,
        bytes: KVVec<u8>,
    ) -> Result<u64, Failure> {
        if bytes.len() as u64 != req.sframe_len {
            return Err(unreadable());
        }
        self.check_request(req)?;
        // What exited just before counts no more (bounded: nobody pays for
        // a storm of other processes' exits).
        self.maintain(WRITER_MAINTENANCE);
        self.register_read(mm, req, bytes)
    }

    /// Registers `req` for `mm` with its `bytes`, read whole and checked
    /// against the request, the maintenance done: shared with the
    /// account's copy of them, or validated as a new one.
    fn register_read(
        &self,
        mm: &MmWithUser,
        req: &RegisterRequest,
        bytes: KVVec<u8>,
    ) -> Result<u64, Failure> {
        text_range(req)?;
        let tag = match req.tag {
            Tag::File(tag) | Tag::Find(tag) => Some(tag),
            Tag::None => None,
        };
        let copy = self.get_copy(bytes, req.sframe_addr, tag)?;
        self.insert_copy(mm, req, copy)
    }

    /// Inserts a section of `copy`, whose use is counted, for `req` into
    /// `mm`'s tree; gives the use back if it cannot.
    fn insert_copy(
        &self,
        mm: &MmWithUser,
        req: &RegisterRequest,
        copy: Arc<SectionCopy>,
    ) -> Result<u64, Failure> {
        let result =
            text_range(req).and_then(|(start, end)| self.insert(mm, req, start, end, &copy));
        if result.is_err() {
            self.writer().put_copy(&copy);
        }
        result
    }

    /// The checks of `req` that need no memory read; the section's length.
    pub(crate) fn check_request(&self, req: &RegisterRequest) -> Result<usize, Failure> {
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
        if req.sframe_len > self.limits.max_section_bytes {
            return Err(Failure::new(
                E2BIG,
                SFRAME_FAIL_TOO_BIG,
                "section larger than max_section_bytes",
            ));
        }
        usize::try_from(req.sframe_len).map_err(|_| FAIL_MEM)
    }

    /// Inserts a section of `copy` for `req` into `mm`'s tree.
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
        let mut w = self.writer();
        let (result, state) = w.insert(mm, req, copy);
        drop(w);
        drop(mmap);
        // Our own reference, after the lock: the index may hold another.
        drop(state);
        result
    }

    /// Whether `state` may hold one more section of `holder`'s: the
    /// per-process, per-user and module-wide section limits (held
    /// sections, retired ones until they are erased included).
    pub(super) fn section_limits(
        &self,
        state: &MmState,
        holder: &UserAccount,
    ) -> Result<(), Failure> {
        if state.live.load(Ordering::Relaxed) >= self.limits.max_sections_per_mm {
            return Err(limit("per-process limit (max_sections_per_mm) reached"));
        }
        if holder.sections.load(Ordering::Relaxed) >= self.limits.max_sections_per_user {
            return Err(limit("per-user limit (max_sections_per_user) reached"));
        }
        if COUNTERS.sections.load(Ordering::Relaxed) >= self.limits.max_total_sections {
            return Err(limit("module-wide limit (max_total_sections) reached"));
        }
        Ok(())
    }
}

impl Writer<'_> {
    /// The state of `mm`, and whether it is indexed: a new, unindexed one if
    /// it has none.  Under the lock, so it is not forgotten meanwhile.
    pub(super) fn state_of(&mut self, mm: &MmWithUser) -> Result<(Arc<MmState>, bool), Failure> {
        let key = mm.as_raw() as usize;
        if let Some(state) = self.indexed_state(key) {
            return Ok((state, true));
        }
        let state = Arc::pin_init(MmState::new(key), GFP_KERNEL_ACCOUNT).map_err(|_| FAIL_MEM)?;
        Ok((state, false))
    }

    /// [`Registry::insert`] under the lock, with `mm`'s `mmap_lock` held;
    /// also returns the state, for the caller to release after the locks.
    fn insert(
        &mut self,
        mm: &MmWithUser,
        req: &RegisterRequest,
        copy: &Arc<SectionCopy>,
    ) -> (Result<u64, Failure>, Option<Arc<MmState>>) {
        if self.shared().shutting_down {
            return (
                Err(Failure::new(
                    ENODEV,
                    SFRAME_FAIL_ARGUMENT,
                    "module unloading",
                )),
                None,
            );
        }
        let (state, indexed) = match self.state_of(mm) {
            Ok(s) => s,
            Err(f) => return (Err(f), None),
        };
        let holder = match self.account(req.holder) {
            Ok(h) => h,
            Err(f) => return (Err(f), Some(state)),
        };
        self.purge(&state);
        if let Err(f) = self.section_limits(&state, &holder) {
            self.forget_if_idle(&holder);
            return (Err(f), Some(state));
        }
        if let Some(f) = self.adopted_overlap(&state, req) {
            self.forget_if_idle(&holder);
            return (Err(f), Some(state));
        }
        let text = (req.text_start, req.text_end);
        let bound = match BoundCopy::new_shared(copy.clone(), req.sframe_addr, text) {
            Ok(b) => b,
            Err(f) => {
                self.forget_if_idle(&holder);
                return (Err(f), Some(state));
            }
        };
        let handle = self.shared().next_handle;
        let s = Section::new(
            handle,
            text,
            req.sframe_addr,
            bound,
            holder.clone(),
            req.flags,
        );
        if let Err((_, e)) = self.insert_section(&state, s) {
            let f = if e == EEXIST {
                let guard = rcu::Guard::new();
                overlap_failure(state.sections.load(req.text_start as usize, &guard), req)
            } else {
                Failure::new(e, SFRAME_FAIL_NOMEM, "cannot insert the section")
            };
            self.forget_if_idle(&holder);
            return (Err(f), Some(state));
        }
        if !indexed {
            if let Err(f) = self.publish(&state) {
                self.forget_if_idle(&holder);
                return (Err(f), Some(state));
            }
        }
        self.shared().next_handle += 1;
        (Ok(handle), Some(state))
    }

    /// Inserts `s` into `state`'s tree and its handle index, and counts it;
    /// hands it back with the tree's error (`EEXIST` for an overlap) if it
    /// cannot be.
    pub(super) fn insert_section(
        &mut self,
        state: &MmState,
        s: Section,
    ) -> Result<(), (Section, Error)> {
        let (start, end, handle) = (s.text_start as usize, s.text_end as usize, s.handle);
        if let Err(e) = self.index_handle(state, handle, start) {
            return Err((s, e));
        }
        if let Err(e) = state.sections.insert_range(self.t, start, end - 1, s) {
            let _ = state.handles.erase(self.t, handle as usize);
            return Err((e.value, e.error));
        }
        let guard = rcu::Guard::new();
        if let Some(s) = state.sections.load(start, &guard) {
            state.admit(s);
        }
        Ok(())
    }

    /// Records `handle` → `start` in `state`'s handle index.
    fn index_handle(&mut self, state: &MmState, handle: u64, start: usize) -> Result {
        let key = usize::try_from(handle).map_err(|_| EINVAL)?;
        state
            .handles
            .insert_range(self.t, key, key, TextStart(start))
            .map_err(|e| e.error)
    }

    /// `EEXIST` if `req` overlaps a live section of `state`'s adopted set.
    fn adopted_overlap(&self, state: &MmState, req: &RegisterRequest) -> Option<Failure> {
        let guard = rcu::Guard::new();
        let adopted = state.adopted.get(&guard).and_then(|set| {
            set.meeting(req.text_start, req.text_end)
                .find(|s| s.is_live())
        })?;
        Some(overlap_failure(Some(adopted), req))
    }

    /// Puts a new `state`, which holds the one section just inserted, into
    /// the index.  On failure the section is unreachable: the state is
    /// emptied fully and uncounted, so that it can be freed from an RCU
    /// callback without locking.  Nothing else is in its tree (writers
    /// hold the lock, and an unindexed state gets sections only here).
    fn publish(&mut self, state: &Arc<MmState>) -> Result<(), Failure> {
        let key = state.mm;
        let Err(e) = self.index.insert_range(self.t, key, key, state.clone()) else {
            return Ok(());
        };
        state.handles.clear(self.t, drop);
        state.sections.clear(self.t, |s| state.unadmit(&s));
        Err(Failure::new(
            e.error,
            SFRAME_FAIL_NOMEM,
            "cannot index the address space",
        ))
    }
}
