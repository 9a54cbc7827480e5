// SPDX-License-Identifier: GPL-2.0

//! What one user holds in the registry: registrations alive and bytes of
//! copies, per real UID, checked against the per-user limits.
//!
//! Accounts live in [`Registry::users`](super::Registry) while they hold
//! anything.  Contexts: created and forgotten under the registry lock
//! (process context); the section count also falls when the unmap watch or
//! the teardown path retires a section (atomic context, no lock).

use super::{
    counters::Failure,
    counters::FAIL_MEM,
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
    /// The user's real UID (a `kuid_t` value).
    pub(super) uid: u32,
    /// Registrations alive: raised under the registry lock, lowered when a
    /// section is retired (possibly by the unmap watch, unlocked).
    pub(super) sections: AtomicU32,
    /// Bytes of the user's copies; changed under the registry lock only.
    pub(super) bytes: AtomicU64,
}

#[expect(unsafe_code, reason = "an account's drop frees memory only")]
// SAFETY: The last reference to an account frees its memory only.
unsafe impl TreeValue for Arc<UserAccount> {
    const DROP_AT_ERASE: bool = false;
}

impl Writer<'_> {
    /// Forgets `owner` if it holds nothing (a registration that failed
    /// after creating it, or the last copy of the user gone).
    pub(super) fn forget_if_idle(&mut self, owner: &Arc<UserAccount>) {
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
            let _ = self.users.erase(self.t, owner.uid as usize);
        }
    }

    /// `uid`'s account, created if the user holds nothing yet.
    pub(super) fn account(&mut self, uid: u32) -> Result<Arc<UserAccount>, Failure> {
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
            .insert_range(self.t, uid as usize, uid as usize, a.clone())
            .map_err(|_| FAIL_MEM)?;
        Ok(a)
    }
}
