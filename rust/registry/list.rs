// SPDX-License-Identifier: GPL-2.0

//! `SFRAME_IOC_LIST`: an address space's live registrations, in the order
//! of their text.
//!
//! Contexts: process context (the ioctl), under the registry lock, one RCU
//! read-side step per section.

use super::{
    counters::{
        Failure,
        FAIL_MEM, //
    },
    resched,
    section::Section,
    Registry, //
};
use crate::{
    abstractions::compat::rcu,
    uapi::SframeSectionInfo, //
};
use core::sync::atomic::Ordering;
use kernel::{
    mm::MmWithUser,
    prelude::*, //
};

impl Registry {
    /// The live registrations of `mm`, as account `viewer` may see them
    /// (`shared` counts the other registrations of the same bytes only if
    /// `viewer` registered them: see [`Section::info`]).  Up to
    /// `max_sections_per_mm` entries: a virtually contiguous buffer.
    pub(crate) fn list(
        &self,
        mm: &MmWithUser,
        viewer: u32,
    ) -> Result<KVVec<SframeSectionInfo>, Failure> {
        let mut out = KVVec::new();
        let mut w = self.writer();
        let Some(state) = self.indexed_state(mm.as_raw() as usize) else {
            return Ok(out);
        };
        w.purge(&state);
        // Sections are only added under the lock: this is the count.
        let n = state.live.load(Ordering::Relaxed) as usize;
        out.reserve(n, GFP_KERNEL_ACCOUNT).map_err(|_| FAIL_MEM)?;
        let live = |s: &&Section| s.is_live();
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
                        let _ = out.push_within_capacity(a.info(viewer));
                    }
                    next_adopted += 1;
                }
                match t {
                    Some(t) if live(&t) => {
                        let _ = out.push_within_capacity(t.info(viewer));
                    }
                    Some(_) => {}
                    None => break,
                }
            }
            resched();
        }
        drop(w);
        drop(state);
        Ok(out)
    }
}
