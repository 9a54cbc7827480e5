// SPDX-License-Identifier: GPL-2.0

//! Section copies: one distinct SFrame byte string of one user in kernel
//! memory, validated once, shared by every registration of the same bytes
//! by the same user.
//!
//! A copy is found by the keyed hash of its owner's UID and its bytes'
//! length and ends ([`copy_key`]) in [`Registry::copies`](super::Registry);
//! a comparison of the bytes decides.  A copy registered with a tag
//! (`SFRAME_F_TAGGED`) is filed under the keyed hash of its owner's UID,
//! its length and the tag instead ([`tag_key`]): found by the tag alone
//! (`SFRAME_F_BY_TAG`), without the caller's bytes, or by the tag and a
//! comparison of the bytes.  A copy counts its users (sections)
//! under the registry lock; the last one leaving uncharges its bytes and
//! keeps the copy for the next registration of the same bytes
//! ([`super::kept`]) or removes it from the table; the memory goes when
//! the table, the kept list and the last RCU-deferred section let go of
//! it.
//!
//! A copy keeps its lookup index ([`CopyIndex`]), built once when the
//! copy is made, and its owner is charged for both ([`copy_charge`]).
//!
//! Contexts: process context.  Nothing proportional to a section's size
//! runs under the registry lock: the hash, the validation, the index's
//! build, the comparison with an existing copy and the copy of a revived
//! one's bytes and index run before it, and the lock only counts the use
//! if the copy is still live.

use super::{
    account::UserAccount,
    copy_index::{
        copy_charge,
        CopyIndex,
        IndexError, //
    },
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
        cred::current_account,
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
    sync::Arc,
    uaccess::{
        UserPtr,
        UserSlice, //
    },
};

/// One distinct SFrame byte string of one user, validated, and its
/// lookup index.
pub(super) struct SectionCopy {
    pub(super) bytes: KVVec<u8>,
    /// The bytes' lookup index, which every lookup in them goes through.
    pub(super) index: CopyIndex,
    /// The key of this copy in [`Registry::copies`], a keyed hash of the
    /// owner's account and the bytes' length and ends ([`copy_key`]).
    pub(super) key: usize,
    /// Whether the copy is in [`Registry::copies`] (a rare key collision
    /// leaves it out: it is then not shared, nothing else changes).
    pub(super) indexed: bool,
    /// The tag its owner filed it under ([`tag_key`]), if any.  A tagged
    /// copy is found by its tag only, an untagged one by its bytes only.
    pub(super) tag: Option<u64>,
    /// The user who registered the bytes, charged for them.
    pub(super) owner: Arc<UserAccount>,
    /// Sections using the copy; changed under the registry lock only.  A
    /// copy whose count reached zero is uncharged, and either kept (in the
    /// table and the kept list, [`super::kept`]: taken back by the next
    /// registration of its bytes) or dead (out of the table, never used
    /// again; a fork child that inherited it revives its bytes as a new
    /// copy).
    pub(super) users: AtomicU32,
    pub(super) info: CopyInfo,
}

impl SectionCopy {
    /// The copy as a section mapped at `sframe_addr`, its row table and
    /// index attached (O(1), no allocation): what a walk searches, made
    /// once per registration ([`super::bound::BoundCopy`]).  Made from the
    /// layout its validation found (the header is not read again), so it
    /// cannot fail; if it did, the section would give no rows.
    pub(super) fn rows_at(&self, sframe_addr: u64) -> Option<sframe::Section<'_>> {
        let mut parsed =
            sframe::Section::with_layout(&self.bytes, &self.info.layout, sframe_addr).ok()?;
        self.index.attach(&mut parsed);
        Some(parsed)
    }

    /// What the copy is charged against its owner's and the module's byte
    /// limits: its bytes and its index.  Never changes: the last use
    /// gives back what the copy's making took.
    pub(super) fn charge(&self) -> u64 {
        copy_charge(self.bytes.len(), &self.index)
    }
}

// SAFETY: As for `Section`: the last reference frees memory only (the
// bytes and the index, with `kvfree()`).
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
    /// Where the header put the section's parts ([`SectionCopy::rows_at`]).
    pub(super) layout: sframe::Layout,
}

/// The most bytes of each end of a section that its key hashes.
const KEY_SPAN: usize = 4096;

/// Bytes hashed, or read from user memory and compared, at a time.
const CHUNK: usize = 512;

/// The key of account `owner`'s copy of a section of `len` bytes in
/// [`Registry::copies`], its bytes read by `read(offset, buf)`: SipHash
/// under a secret key of the length and the first and last [`KEY_SPAN`]
/// bytes (the header, the FDE table's start and the FREs' end), so keys
/// collide only by chance or between one owner's sections that differ in
/// their middle only; a comparison of the whole bytes decides.  A
/// collision costs only sharing, within the owner's own limits.  O(1) in
/// the section's size: a registration that shares a copy (every start of
/// a program after the first) hashes 8 KiB, not its libc's whole section.
/// A section of at most 2 [`KEY_SPAN`] is hashed once, whole: its two
/// spans would overlap (exec registration of a small program hashed its
/// bytes twice).
fn copy_key_with(
    hash_key: &KeyedHash,
    owner: u32,
    len: usize,
    mut read: impl FnMut(usize, &mut [u8]) -> Result<(), Failure>,
) -> Result<usize, Failure> {
    let mut h = hash_key.seed(u64::from(owner));
    h = hash_key.hash(h, &(len as u64).to_ne_bytes());
    let mut buf = [0u8; CHUNK];
    let spans = if len <= 2 * KEY_SPAN {
        [(0, len), (len, len)]
    } else {
        [(0, KEY_SPAN), (len - KEY_SPAN, len)]
    };
    for (start, end) in spans {
        let mut off = start;
        while off < end {
            let chunk = buf.get_mut(..(end - off).min(CHUNK)).ok_or(FAIL_MEM)?;
            read(off, chunk)?;
            h = hash_key.hash(h, chunk);
            off += chunk.len();
        }
    }
    Ok(h as usize)
}

/// The key of account `owner`'s copy of `len` bytes filed under `tag`:
/// SipHash under the secret key of the three (24 bytes, where
/// [`copy_key_with`] hashes 8 and then the bytes, so the two kinds of key
/// meet only by chance).  The tag is the owner's to choose: a tag that
/// names other bytes than the owner meant misleads only the owner's own
/// walks, within its own limits, as registering those bytes would.
fn tag_key(hash_key: &KeyedHash, owner: u32, len: usize, tag: u64) -> usize {
    let mut input = [0u8; 24];
    let (l, rest) = input.split_at_mut(8);
    let (t, mark) = rest.split_at_mut(8);
    l.copy_from_slice(&(len as u64).to_ne_bytes());
    t.copy_from_slice(&tag.to_ne_bytes());
    mark.copy_from_slice(b"sftag\0\0\0");
    hash_key.hash(hash_key.seed(u64::from(owner)), &input) as usize
}

/// The key of account `owner`'s copy of `len` bytes, filed under `tag`
/// ([`tag_key`]), or by the bytes, which `read(offset, buf)` reads
/// ([`copy_key_with`]).
fn key_with(
    hash_key: &KeyedHash,
    owner: u32,
    len: usize,
    tag: Option<u64>,
    read: impl FnMut(usize, &mut [u8]) -> Result<(), Failure>,
) -> Result<usize, Failure> {
    match tag {
        Some(tag) => Ok(tag_key(hash_key, owner, len, tag)),
        None => copy_key_with(hash_key, owner, len, read),
    }
}

/// [`key_with`] of `bytes`.
fn key_of(
    hash_key: &KeyedHash,
    owner: u32,
    bytes: &[u8],
    tag: Option<u64>,
) -> Result<usize, Failure> {
    key_with(hash_key, owner, bytes.len(), tag, |off, buf| {
        let from = bytes.get(off..off + buf.len()).ok_or(FAIL_MEM)?;
        buf.copy_from_slice(from);
        Ok(())
    })
}

/// `EFAULT` for section bytes that user memory does not give.
pub(super) fn unreadable() -> Failure {
    Failure::new(EFAULT, SFRAME_FAIL_FAULT, "section bytes unreadable")
}

/// Reads `buf.len()` bytes at `addr + off` of the caller's memory.
fn read_user(addr: usize, off: usize, buf: &mut [u8]) -> Result<(), Failure> {
    let at = addr.checked_add(off).ok_or_else(unreadable)?;
    UserSlice::new(UserPtr::from_addr(at), buf.len())
        .reader()
        .read_slice(buf)
        .map_err(|_| unreadable())
}

/// Whether the caller's memory at `addr` holds `bytes`, read and compared
/// [`CHUNK`] bytes at a time (nothing allocated), with a reschedule every
/// 256 KiB.
fn same_as_user(bytes: &[u8], addr: usize) -> Result<bool, Failure> {
    let mut buf = [0u8; CHUNK];
    for (i, want) in bytes.chunks(CHUNK).enumerate() {
        let got = buf.get_mut(..want.len()).ok_or(FAIL_MEM)?;
        read_user(addr, i * CHUNK, got)?;
        if got != want {
            return Ok(false);
        }
        if i % 512 == 511 {
            resched();
        }
    }
    Ok(true)
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

/// `EINVAL` or `ENOMEM` for an index that could not be built.
fn index_failure(e: IndexError) -> Failure {
    match e {
        IndexError::Format(e) => format(e.as_str()),
        IndexError::NoMemory => FAIL_MEM,
    }
}

/// Validates `bytes` as a section at `sframe_addr`, then builds its lookup
/// index: what it says of itself, and the index.  Both reschedule as they
/// go; the index is charged to the caller's memory cgroup.
fn validate(bytes: &[u8], sframe_addr: u64) -> Result<(CopyInfo, CopyIndex), Failure> {
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
    let info = CopyInfo {
        version: match section.version() {
            sframe::Version::V2 => 2,
            sframe::Version::V3 => 3,
        },
        num_fdes: section.num_fdes(),
        text_lo: lo.wrapping_sub(sframe_addr),
        text_hi: hi.wrapping_sub(sframe_addr),
        layout: section.layout(),
    };
    let index = CopyIndex::build(&section, &mut resched).map_err(index_failure)?;
    Ok((info, index))
}

impl Registry {
    /// The copy of `bytes` for the caller's account, filed under `tag` or
    /// by the bytes (shared if it holds identical bytes filed the same
    /// way), its use counted.
    pub(super) fn get_copy(
        &self,
        bytes: KVVec<u8>,
        sframe_addr: u64,
        tag: Option<u64>,
    ) -> Result<Arc<SectionCopy>, Failure> {
        let owner = current_account();
        let key = key_of(&self.hash_key, owner, &bytes, tag)?;
        if let Some(c) = self.shared_copy(key, owner, &bytes, tag) {
            return Ok(c);
        }
        let (info, index) = validate(&bytes, sframe_addr)?;
        // The same bytes may have come meanwhile (a registration racing
        // this one): share them.  A copy of the owner's that entered the
        // table under `key` after the comparison is compared in turn,
        // outside the lock; a different one there (a collision of keys)
        // leaves this copy out of the table, unshared.
        let mut tries = 0;
        loop {
            if let Some(c) = self.shared_copy(key, owner, &bytes, tag) {
                return Ok(c);
            }
            let mut w = self.writer();
            let taken = {
                let guard = rcu::Guard::new();
                w.copies
                    .load(key, &guard)
                    .is_some_and(|c| c.owner.id == owner && c.users.load(Ordering::Relaxed) != 0)
            };
            tries += 1;
            if !taken || tries > 2 {
                return w.new_copy(bytes, index, (key, tag), owner, info);
            }
        }
    }

    /// Account `owner`'s copy of `bytes` filed at `key` under `tag` (or
    /// none) in the table, its use counted.  The bytes are compared
    /// outside the lock (a copy's bytes never change), with that owner's
    /// copy only; the lock counts the use if the copy is still live.
    fn shared_copy(
        &self,
        key: usize,
        owner: u32,
        bytes: &[u8],
        tag: Option<u64>,
    ) -> Option<Arc<SectionCopy>> {
        let c = self.copy_at(key, owner, bytes.len(), tag)?;
        if !same_bytes(&c.bytes, bytes) {
            return None;
        }
        self.use_copy(c)
    }

    /// The caller's account's copy of the `len` bytes at `addr` in its
    /// memory, its use counted, if it holds one: found by the key and
    /// compared with the caller's bytes a chunk at a time, without copying
    /// them into the kernel (a registration that shares a copy: every start
    /// of a program after the first).  `None` if there is none, and the
    /// bytes are to be read, validated and copied as for a new copy.
    pub(super) fn shared_copy_from_user(
        &self,
        addr: usize,
        len: usize,
        tag: Option<u64>,
    ) -> Result<Option<Arc<SectionCopy>>, Failure> {
        let owner = current_account();
        let key = key_with(&self.hash_key, owner, len, tag, |off, buf| {
            read_user(addr, off, buf)
        })?;
        let Some(c) = self.copy_at(key, owner, len, tag) else {
            return Ok(None);
        };
        if !same_as_user(&c.bytes, addr)? {
            return Ok(None);
        }
        Ok(self.use_copy(c))
    }

    /// The caller's account's copy of `len` bytes filed under `tag`, its
    /// use counted, if it holds or keeps one: the bytes are not compared
    /// (the tag is the caller's name for them).  O(log n).
    pub(super) fn tagged_copy(&self, len: usize, tag: u64) -> Option<Arc<SectionCopy>> {
        let owner = current_account();
        let key = tag_key(&self.hash_key, owner, len, tag);
        self.use_copy(self.copy_at(key, owner, len, Some(tag))?)
    }

    /// The copy at `key` in the table, if it is account `owner`'s, `len`
    /// bytes long and filed under `tag` (or none).
    fn copy_at(
        &self,
        key: usize,
        owner: u32,
        len: usize,
        tag: Option<u64>,
    ) -> Option<Arc<SectionCopy>> {
        let guard = rcu::Guard::new();
        self.copies
            .load(key, &guard)
            .filter(|c| c.owner.id == owner && c.bytes.len() == len && c.tag == tag)
            .cloned()
    }

    /// Counts one more use of `c`, found in the table, under the lock.  A
    /// copy whose last user left is taken back if it is kept; if not
    /// (erased meanwhile, or left in the table for want of memory), it is
    /// not used again.
    fn use_copy(&self, c: Arc<SectionCopy>) -> Option<Arc<SectionCopy>> {
        let mut w = self.writer();
        if c.users.load(Ordering::Relaxed) == 0 {
            return w.take_kept(&c).then_some(c);
        }
        c.users.fetch_add(1, Ordering::Relaxed);
        Some(c)
    }

    /// A live copy with the bytes of `old`, a copy taken at a fork whose
    /// last user has left since, its use counted: the owner's identical
    /// copy if there is one again, else a new one, charged again.  The
    /// bytes were validated and indexed when `old` was made; they and the
    /// index are copied outside the lock.
    pub(super) fn revive(&self, old: &SectionCopy) -> Result<Arc<SectionCopy>, Failure> {
        if let Some(c) = self.shared_copy(old.key, old.owner.id, &old.bytes, old.tag) {
            return Ok(c);
        }
        let mut bytes = KVVec::new();
        bytes
            .extend_from_slice(&old.bytes, GFP_KERNEL_ACCOUNT)
            .map_err(|_| FAIL_MEM)?;
        let index = old.index.try_clone().map_err(index_failure)?;
        self.writer()
            .new_copy(bytes, index, (old.key, old.tag), old.owner.id, old.info)
    }
}

impl Writer<'_> {
    /// A new copy of validated `bytes` and their `index` for account
    /// `owner`, filed under `tag` (or none) in the table under `key` unless
    /// that key is taken, its use counted, charged (bytes and index) to the
    /// owner's and the module's byte limits.
    fn new_copy(
        &mut self,
        bytes: KVVec<u8>,
        index: CopyIndex,
        (key, tag): (usize, Option<u64>),
        owner: u32,
        info: CopyInfo,
    ) -> Result<Arc<SectionCopy>, Failure> {
        let len = copy_charge(bytes.len(), &index);
        // Kept copies give way to a copy in use.
        while self
            .shared()
            .bytes
            .saturating_add(self.shared().kept_bytes)
            .saturating_add(len)
            > self.limits.max_total_bytes
            && self.let_go_oldest(None)
        {}
        if self.shared().bytes.saturating_add(len) > self.limits.max_total_bytes {
            return Err(limit("module-wide byte limit (max_total_bytes) reached"));
        }
        let owner = self.account(owner)?;
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
                index,
                key,
                indexed,
                tag,
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
        self.charge_copy(&copy);
        Ok(copy)
    }

    /// Charges `copy` (in use) to its owner's and the module's figures:
    /// `copy.charge()`, which `put_copy` gives back.
    pub(super) fn charge_copy(&mut self, copy: &SectionCopy) {
        let len = copy.charge();
        self.shared().bytes += len;
        copy.owner.bytes.fetch_add(len, Ordering::Relaxed);
        copy.owner.copies.fetch_add(1, Ordering::Relaxed);
        COUNTERS.copies.fetch_add(1, Ordering::Relaxed);
        COUNTERS.bytes.fetch_add(len, Ordering::Relaxed);
    }

    /// Drops one use of `copy`; the last one uncharges its bytes and index
    /// and keeps the copy ([`super::kept`]) or removes it from the table
    /// (the memory goes when the last RCU-deferred section lets go of it).
    /// O(log n + kept).
    pub(super) fn put_copy(&mut self, copy: &Arc<SectionCopy>) {
        if copy.users.fetch_sub(1, Ordering::Relaxed) != 1 {
            return;
        }
        self.uncharge_copy(copy);
        // A copy that cannot be erased now (no memory for the tree's nodes)
        // stays in the table, unused, until unload; `shared_copy` skips it.
        if !self.keep(copy) && copy.indexed {
            let _ = self.copies.erase(self.t, copy.key);
        }
        // The sections and copies still waiting for a grace period keep
        // their references to the account.
        self.forget_if_idle(&copy.owner);
    }

    /// Gives back what [`Self::charge_copy`] took.
    fn uncharge_copy(&mut self, copy: &SectionCopy) {
        let len = copy.charge();
        self.shared().bytes -= len;
        COUNTERS.copies.fetch_sub(1, Ordering::Relaxed);
        COUNTERS.bytes.fetch_sub(len, Ordering::Relaxed);
        copy.owner.bytes.fetch_sub(len, Ordering::Relaxed);
        copy.owner.copies.fetch_sub(1, Ordering::Relaxed);
    }
}
