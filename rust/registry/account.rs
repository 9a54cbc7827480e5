// SPDX-License-Identifier: GPL-2.0

//! What one user holds in the registry, checked against the per-user
//! limits: the sections held in the user's processes, and the copies (and
//! their bytes) the user registered.
//!
//! A user is an account: a real user ID, or for a task in a user
//! namespace the real user who owns the outermost namespace above it
//! (`abstractions::cred`), so that the IDs mapped into a container share
//! one share of the limits.  Accounts live in
//! [`Registry::users`](super::Registry) while they hold anything.
//! Contexts: created and forgotten under the registry lock (process
//! context); the section count also falls when the teardown probe
//! releases a process's sections (atomic context, no lock).

use super::{
    counters::Failure,
    counters::FAIL_MEM,
    section::Section,
    state::MmState,
    Registry,
    Writer, //
};
use crate::abstractions::{
    compat::rcu,
    rcu_maple::TreeValue, //
};
use core::sync::atomic::{
    AtomicU32,
    AtomicU64,
    Ordering, //
};
use kernel::{
    prelude::*,
    sync::Arc, //
};

/// What one user holds in the registry.
pub(super) struct UserAccount {
    /// The account: a `kuid_t` value in the initial user namespace.
    pub(super) id: u32,
    /// Sections held in the user's processes, live or retired, until they
    /// are released: raised under the registry lock, lowered possibly
    /// unlocked (the teardown probe).
    pub(super) sections: AtomicU32,
    /// Copies the user registered; changed under the registry lock only.
    pub(super) copies: AtomicU32,
    /// Bytes of those copies; changed under the registry lock only.
    pub(super) bytes: AtomicU64,
    /// The user's kept copies ([`super::kept`]) and their bytes, and how
    /// many were taken back since the account was made; changed under the
    /// registry lock only.
    pub(super) kept: AtomicU32,
    pub(super) kept_bytes: AtomicU64,
    pub(super) kept_reused: AtomicU64,
    /// Registrations by tag of the user's copies since the account was
    /// made.
    pub(super) by_tag: AtomicU64,
    /// Sections registered and retired in the user's processes since load
    /// (or since the account was made), for the user's own figures.
    pub(super) registered: AtomicU64,
    pub(super) unregistered: AtomicU64,
}

#[expect(unsafe_code, reason = "an account's drop frees memory only")]
// SAFETY: The last reference to an account frees its memory only.
unsafe impl TreeValue for Arc<UserAccount> {
    const DROP_AT_ERASE: bool = false;
}

impl Writer<'_> {
    /// Forgets `owner` if it holds nothing (a registration that failed
    /// after creating it, or the last copy of the user gone, kept ones
    /// included).
    pub(super) fn forget_if_idle(&mut self, owner: &Arc<UserAccount>) {
        if owner.bytes.load(Ordering::Relaxed) != 0
            || owner.sections.load(Ordering::Relaxed) != 0
            || owner.kept.load(Ordering::Relaxed) != 0
        {
            return;
        }
        let same = {
            let guard = rcu::Guard::new();
            self.users
                .load(owner.id as usize, &guard)
                .is_some_and(|a| Arc::ptr_eq(a, owner))
        };
        // An account that cannot be erased now (no memory for the tree's
        // nodes) stays, idle, and is used again by the user's next request.
        if same {
            let _ = self.users.erase(self.t, owner.id as usize);
        }
    }

    /// Gives back what `s`, just taken out of `state`, held: its counts
    /// against its holder, its use of its copy; forgets the holder's and the
    /// copy owner's accounts if they hold nothing any more (the holder is
    /// not the copy's owner when a section was inherited or registered by
    /// another process, as the daemon does).
    pub(super) fn drop_section(&mut self, state: &MmState, s: &Section) {
        state.release(s);
        self.put_copy(&s.copy);
        self.forget_if_idle(&s.holder);
    }

    /// Account `id`, created if the user holds nothing yet.
    pub(super) fn account(&mut self, id: u32) -> Result<Arc<UserAccount>, Failure> {
        if let Some(a) = self.reg.find_account(id) {
            return Ok(a);
        }
        let a = Arc::new(
            UserAccount {
                id,
                sections: AtomicU32::new(0),
                copies: AtomicU32::new(0),
                bytes: AtomicU64::new(0),
                kept: AtomicU32::new(0),
                kept_bytes: AtomicU64::new(0),
                kept_reused: AtomicU64::new(0),
                by_tag: AtomicU64::new(0),
                registered: AtomicU64::new(0),
                unregistered: AtomicU64::new(0),
            },
            GFP_KERNEL_ACCOUNT,
        )
        .map_err(|_| FAIL_MEM)?;
        self.users
            .insert_range(self.t, id as usize, id as usize, a.clone())
            .map_err(|_| FAIL_MEM)?;
        Ok(a)
    }
}

impl Registry {
    /// Account `id`, if it holds anything.  RCU only: any context.
    pub(super) fn find_account(&self, id: u32) -> Option<Arc<UserAccount>> {
        let guard = rcu::Guard::new();
        self.users.load(id as usize, &guard).cloned()
    }
}
