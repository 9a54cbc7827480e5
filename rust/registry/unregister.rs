// SPDX-License-Identifier: GPL-2.0

//! Unregistration, by handle or by an address inside the text: both
//! O(log n), through the state's handle index or its tree, and its
//! adopted set's.
//!
//! Contexts: process context (the ioctl), under the registry lock.

use super::{
    counters::Failure,
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
        let start = tree_start(&state, which);
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
            // Not in the tree: an adopted section is retired in place,
            // still counted, until its set goes with the state, which is
            // forgotten as soon as nothing in it is live.
            None => {
                if !retire_adopted(&state, which) {
                    return Err(not_found);
                }
                w.forget(&state);
                return Ok(());
            }
        };
        let _ = state.handles.erase(w.t, s.handle as usize);
        w.drop_section(&state, &s);
        w.forget(&state);
        drop(w);
        drop(s);
        drop(state);
        Ok(())
    }
}

/// Where the live section of `state`'s tree that `which` names starts.
fn tree_start(state: &MmState, which: Which) -> Option<usize> {
    let guard = rcu::Guard::new();
    match which {
        Which::Addr(a) => usize::try_from(a)
            .ok()
            .and_then(|a| state.sections.load(a, &guard))
            .filter(|s| s.is_live())
            .map(|s| s.text_start as usize),
        Which::Handle(h) => {
            let start = state.handles.load(usize::try_from(h).ok()?, &guard)?.0;
            state
                .sections
                .load(start, &guard)
                .filter(|s| s.handle == h && s.is_live())
                .map(|s| s.text_start as usize)
        }
    }
}

/// Retires the live section of `state`'s adopted set that `which` names;
/// whether there was one.
fn retire_adopted(state: &MmState, which: Which) -> bool {
    let guard = rcu::Guard::new();
    let Some(set) = state.adopted.get(&guard) else {
        return false;
    };
    let adopted = match which {
        Which::Addr(a) => set.find(a),
        Which::Handle(h) => set.by_handle(h),
    };
    match adopted.filter(|s| s.is_live()) {
        Some(s) => {
            state.retire(s);
            true
        }
        None => false,
    }
}
