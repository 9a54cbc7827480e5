// SPDX-License-Identifier: GPL-2.0

//! Unregistration, by handle or by an address inside the text.
//!
//! Contexts: process context (the ioctl), under the registry lock.

use super::{
    counters::Failure,
    resched,
    section::Section,
    state::MmState,
    Registry, //
};
use crate::{
    abstractions::compat::rcu,
    uapi::*, //
};
use kernel::{
    mm::MmWithUser,
    prelude::*, //
};

/// Removal by handle or by an address inside the text.
#[derive(Clone, Copy)]
pub(crate) enum Which {
    Handle(u64),
    Addr(u64),
}

impl Registry {
    /// Removes one registration of `mm`.
    pub(crate) fn unregister(&self, mm: &MmWithUser, which: Which) -> Result<(), Failure> {
        let not_found = Failure::new(ENOENT, SFRAME_FAIL_NOT_FOUND, "no such registration");
        let mut w = self.writer();
        let Some(state) = self.indexed_state(mm.as_raw() as usize) else {
            return Err(not_found);
        };
        let start = match which {
            Which::Addr(a) => {
                let guard = rcu::Guard::new();
                usize::try_from(a)
                    .ok()
                    .and_then(|a| state.sections.load(a, &guard))
                    .filter(|s| s.is_live())
                    .map(|s| s.text_start as usize)
            }
            Which::Handle(h) => find_live(&state, |s| s.handle == h && s.is_live()),
        };
        // Writers hold the lock: the section found is still there.
        let s = match start.map(|start| state.sections.erase(w.t, start)) {
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
                return match find_adopted(&state, which) {
                    true => Ok(()),
                    false => Err(not_found),
                };
            }
        };
        state.retire(&s);
        w.put_copy(&s.copy);
        drop(w);
        drop(s);
        drop(state);
        Ok(())
    }
}

/// Retires the live section of `state`'s adopted set that `which` names;
/// whether there was one.
fn find_adopted(state: &MmState, which: Which) -> bool {
    let guard = rcu::Guard::new();
    let set = state.adopted.get(&guard);
    let adopted = match which {
        Which::Addr(a) => set.and_then(|set| set.find(a)),
        Which::Handle(h) => {
            set.and_then(|set| set.sections.iter().find(|s| s.handle == h && s.is_live()))
        }
    };
    match adopted.filter(|s| s.is_live()) {
        Some(s) => {
            state.retire(s);
            true
        }
        None => false,
    }
}

/// The start of the first section of `state` that `pred` accepts: one RCU
/// read-side step per section, rescheduling between steps.
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
