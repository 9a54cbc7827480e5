// SPDX-License-Identifier: GPL-2.0

//! Section copies: one distinct SFrame byte string of one user in kernel
//! memory, validated once, shared by every registration of the same bytes
//! by the same user.
//!
//! A copy is found by the keyed hash of its owner's UID and its bytes in
//! [`Registry::copies`](super::Registry); a comparison of the bytes
//! decides.  A copy counts its users (sections) under the registry lock;
//! the last one leaving removes it from the table and uncharges its bytes,
//! and the memory goes when the last RCU-deferred section lets go of it.
//!
//! Contexts: process context, under the registry lock, but for
//! [`Registry::get_copy`]'s hash and validation, which run before it (a
//! large section takes a while).

use super::{
    account::UserAccount,
    counters::{
        limit,
        Failure,
        COUNTERS,
        FAIL_MEM, //
    },
    resched,
    Registry,
    Writer, //
};
use crate::{
    abstractions::{
        compat::rcu,
        cred::current_kuid,
        keyed_hash::KeyedHash,
        rcu_maple::TreeValue, //
    },
    arch,
    sframe,
    uapi::*, //
};
use core::sync::atomic::{
    AtomicU32,
    Ordering, //
};
use kernel::{
    prelude::*,
    sync::Arc, //
};

/// One distinct SFrame byte string of one user, validated.
pub(super) struct SectionCopy {
    pub(super) bytes: KVVec<u8>,
    /// The key of this copy in [`Registry::copies`], a keyed hash of the
    /// owner's UID and the bytes.
    key: usize,
    /// Whether the copy is in [`Registry::copies`] (a rare key collision
    /// leaves it out: it is then not shared, nothing else changes).
    indexed: bool,
    /// The user the bytes are charged to.
    pub(super) owner: Arc<UserAccount>,
    /// Sections using the copy; changed under the registry lock only.  A
    /// copy whose count reached zero is dead: it is out of the table and
    /// its bytes are uncharged, and it is never used again.
    pub(super) users: AtomicU32,
    pub(super) info: CopyInfo,
}

// SAFETY: As for `Section`: the last reference frees memory only.
#[expect(unsafe_code, reason = "a copy's drop frees memory only")]
unsafe impl TreeValue for Arc<SectionCopy> {
    const DROP_AT_ERASE: bool = false;
}

/// What validation found out about a copy's bytes.
#[derive(Clone, Copy)]
pub(super) struct CopyInfo {
    pub(super) version: u32,
    pub(super) num_fdes: u32,
    /// `text_range()` minus the address it was validated at: the text range
    /// for another address is this plus that address (every function start
    /// is an offset from the section's address or from a field in it).
    pub(super) text_lo: u64,
    pub(super) text_hi: u64,
}

/// The key of `uid`'s copy of `bytes` in [`Registry::copies`]: SipHash
/// under a secret key, so keys collide only by chance; a comparison of the
/// bytes decides.  Reschedules between 256 KiB chunks.
fn copy_key(hash_key: &KeyedHash, uid: u32, bytes: &[u8]) -> usize {
    let mut h = hash_key.seed(u64::from(uid));
    for chunk in bytes.chunks(256 << 10) {
        h = hash_key.hash(h, chunk);
        resched();
    }
    h as usize
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

/// `EINVAL` for a section that does not validate.
fn format(reason: &'static str) -> Failure {
    Failure::new(EINVAL, SFRAME_FAIL_FORMAT, reason)
}

/// Validates `bytes` as a section at `sframe_addr`: what it says of itself.
fn validate(bytes: &[u8], sframe_addr: u64) -> Result<CopyInfo, Failure> {
    let section = sframe::Section::parse(bytes, sframe_addr).map_err(|e| format(e.as_str()))?;
    section
        .validate(&mut resched)
        .map_err(|e| format(e.as_str()))?;
    if section.abi() != arch::SFRAME_ABI {
        return Err(format(arch::SFRAME_ABI_MISMATCH));
    }
    let (lo, hi) = section
        .text_range()
        .map_err(|e| format(e.as_str()))?
        .ok_or(format("section has no FDEs"))?;
    Ok(CopyInfo {
        version: match section.version() {
            sframe::Version::V2 => 2,
            sframe::Version::V3 => 3,
        },
        num_fdes: section.num_fdes(),
        text_lo: lo.wrapping_sub(sframe_addr),
        text_hi: hi.wrapping_sub(sframe_addr),
    })
}

impl Registry {
    /// The copy of `bytes` for the caller's user (shared if that user holds
    /// identical bytes), its user count raised.
    pub(super) fn get_copy(
        &self,
        bytes: KVVec<u8>,
        sframe_addr: u64,
    ) -> Result<Arc<SectionCopy>, Failure> {
        let uid = current_kuid();
        let key = copy_key(&self.hash_key, uid, &bytes);
        if let Some(c) = self.writer().find_copy(key, uid, &bytes) {
            return Ok(c);
        }
        // Validate outside the lock: a large section takes a while.
        let info = validate(&bytes, sframe_addr)?;
        let mut w = self.writer();
        if let Some(c) = w.find_copy(key, uid, &bytes) {
            return Ok(c);
        }
        w.new_copy(bytes, key, uid, info)
    }
}

impl Writer<'_> {
    /// A new copy of validated `bytes` for `uid`, in the table under `key`
    /// unless that key is taken, charged to the user's and the module's
    /// byte limits.
    fn new_copy(
        &mut self,
        bytes: KVVec<u8>,
        key: usize,
        uid: u32,
        info: CopyInfo,
    ) -> Result<Arc<SectionCopy>, Failure> {
        let len = bytes.len() as u64;
        if self.shared().bytes.saturating_add(len) > self.limits.max_total_bytes {
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
            if let Err(e) = self.copies.insert_range(self.t, key, key, copy.clone()) {
                drop(e);
                drop(copy);
                self.forget_if_idle(&owner);
                return Err(FAIL_MEM);
            }
        }
        self.shared().bytes += len;
        copy.owner.bytes.fetch_add(len, Ordering::Relaxed);
        COUNTERS.copies.fetch_add(1, Ordering::Relaxed);
        COUNTERS.bytes.fetch_add(len, Ordering::Relaxed);
        Ok(copy)
    }

    /// A live copy with the bytes of `old`, a copy taken at a fork whose
    /// last user has left since: the owner's identical copy if there is
    /// one again, else a new one, charged again.  The bytes were validated
    /// when `old` was made.
    pub(super) fn revive(&mut self, old: &SectionCopy) -> Result<Arc<SectionCopy>, Failure> {
        let uid = old.owner.uid;
        if let Some(c) = self.find_copy(old.key, uid, &old.bytes) {
            return Ok(c);
        }
        let mut bytes = KVVec::new();
        bytes
            .extend_from_slice(&old.bytes, GFP_KERNEL_ACCOUNT)
            .map_err(|_| FAIL_MEM)?;
        self.new_copy(bytes, old.key, uid, old.info)
    }

    /// `uid`'s copy of `bytes`, its user count raised.  O(log n) in the
    /// number of copies, whoever holds them; the bytes are compared only
    /// with the same user's copy.
    fn find_copy(&mut self, key: usize, uid: u32, bytes: &[u8]) -> Option<Arc<SectionCopy>> {
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

    /// Drops one use of `copy`; the last one removes it from the table and
    /// uncharges its bytes (the memory goes when the last RCU-deferred
    /// section lets go of it).  O(log n).
    pub(super) fn put_copy(&mut self, copy: &Arc<SectionCopy>) {
        if copy.users.fetch_sub(1, Ordering::Relaxed) != 1 {
            return;
        }
        // A copy that cannot be erased now (no memory for the tree's nodes)
        // stays in the table, unused, until unload; `find_copy` skips it.
        if copy.indexed {
            let _ = self.copies.erase(self.t, copy.key);
        }
        let len = copy.bytes.len() as u64;
        self.shared().bytes -= len;
        COUNTERS.copies.fetch_sub(1, Ordering::Relaxed);
        COUNTERS.bytes.fetch_sub(len, Ordering::Relaxed);
        copy.owner.bytes.fetch_sub(len, Ordering::Relaxed);
        // The sections and copies still waiting for a grace period keep
        // their references to the account.
        self.forget_if_idle(&copy.owner);
    }
}
