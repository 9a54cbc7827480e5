// SPDX-License-Identifier: GPL-2.0

//! A section's copy bound to the registration's addresses: its bytes
//! parsed where the registration maps them, once, when it is made.
//!
//! A walk that reaches a section uses these rows as they are
//! ([`BoundCopy::rows`]): the sample path's under its RCU read lock, the
//! deferred path's through a counted reference.  Made again at every
//! change of section, they cost a walk about 250 instructions each time:
//! the header's layout, two area bounds, the index's, the row table's and
//! the hints' headers, and 200 bytes written.
//!
//! A registration makes one, in its own allocation; a fork child's
//! adopted sections share their parent's (a fork copies no rows), but for
//! a copy the child takes again from its bytes (a revived one), which it
//! parses.
//!
//! The rows borrow the copy's bytes, index, row table and hint slots, which
//! the copy owns and this type keeps alive with it.  That borrow of a
//! field's owner is the one `unsafe` here ([`BoundCopy::new`]).

use super::{
    copy::SectionCopy,
    counters::{
        Failure,
        FAIL_MEM, //
    },
};
use crate::sframe;
use core::ops::Deref;
use kernel::{
    prelude::*,
    sync::Arc, //
};

/// A copy, and its bytes parsed at one address with its index, row table
/// and hints, made once per registration ([`super::section::Section`]).
///
/// Derefs to the copy: everything else in the registry reads it as it
/// did the copy itself.
///
/// # Invariants
///
/// `rows` and `hints` borrow only from `*copy` (its bytes, index words,
/// row table and hint slots), never from the `BoundCopy` itself; they are
/// handed out only with the lifetime of a borrow of `self`
/// ([`BoundCopy::rows`], [`BoundCopy::hints`]).
pub(super) struct BoundCopy {
    /// The copy's bytes parsed at the registration's `sframe_addr`, its
    /// index and row table attached; `None` if that failed (never for a
    /// validated copy: the walk then finds no rows, as before).
    rows: Option<sframe::Section<'static>>,
    /// The hints of `rows`' table for the registration's text range.
    hints: sframe::Hints<'static>,
    copy: Arc<SectionCopy>,
}

impl BoundCopy {
    /// `copy` parsed at `sframe_addr`, with the hints for `text`, in an
    /// allocation of its own (charged to the caller's memory cgroup).
    /// O(1).  Process context.
    pub(super) fn new_shared(
        copy: Arc<SectionCopy>,
        sframe_addr: u64,
        text: (u64, u64),
    ) -> Result<Arc<Self>, Failure> {
        Arc::new(Self::new(copy, sframe_addr, text), GFP_KERNEL_ACCOUNT).map_err(|_| FAIL_MEM)
    }

    /// `copy` parsed at `sframe_addr`, with the hints for `text`. O(1),
    /// no allocation.
    #[expect(unsafe_code, reason = "rows that borrow the copy this keeps")]
    fn new(copy: Arc<SectionCopy>, sframe_addr: u64, text: (u64, u64)) -> Self {
        // SAFETY: The copy is in the `Arc`'s allocation, which `copy`,
        // stored below next to what borrows from it, keeps alive and in
        // place for as long as the result lives: it is never given away
        // or replaced.  The copy is only ever shared (no `&mut` to it
        // while an `Arc` to it lives: it changes only through its
        // atomics), so what it owns (its bytes, index, row table and hint
        // slots, in buffers of their own) neither changes nor moves.
        // `'static` never escapes: the accessors give the borrows back
        // with the lifetime of `&self` (type invariant).
        let shared: &'static SectionCopy = unsafe { &*Arc::as_ptr(&copy) };
        let rows = shared.rows_at(sframe_addr);
        let hints = rows
            .as_ref()
            .map_or(sframe::Hints::NONE, |r| r.hints_within(text.0, text.1));
        // INVARIANT: `rows` and `hints` borrow from `*copy` only.
        Self { rows, hints, copy }
    }

    /// The copy's rows at the registration's address, for as long as this
    /// is borrowed.
    #[inline(always)]
    pub(super) fn rows(&self) -> Option<&sframe::Section<'_>> {
        self.rows.as_ref()
    }

    /// Their hints for the registration's text range.
    #[inline(always)]
    pub(super) fn hints(&self) -> sframe::Hints<'_> {
        self.hints
    }

    /// The copy itself.
    pub(super) fn copy(&self) -> &Arc<SectionCopy> {
        &self.copy
    }
}

impl Deref for BoundCopy {
    type Target = Arc<SectionCopy>;

    fn deref(&self) -> &Arc<SectionCopy> {
        &self.copy
    }
}
