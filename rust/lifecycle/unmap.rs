// SPDX-License-Identifier: GPL-2.0

//! The unmap watch: an ftrace hook on `vm_area_free()` that redirects
//! nothing (no `IPMODIFY`, so it coexists with a livepatch) and retires a
//! registration whose text is unmapped.
//!
//! Contexts: `vm_area_free()`'s caller's, with the mm's `mmap_lock` held
//! (or the address space being torn down, which the teardown probe
//! handles): no sleeping, no lock taken here.  (`remove_vma()`, which only
//! unmapping calls, would need no merge check, but a compiler may inline
//! it into `munmap()`'s path, as clang does for the test kernel.)

use crate::{
    abstractions::{
        ffi,
        ftrace::{
            Args,
            Redirect,
            Redirection, //
        },
    },
    registry,
};
use kernel::prelude::*;

/// The unmap watch on `vm_area_free()`, which frees a mapping taken out of
/// its address space: unmapped, merged into a neighbour, or never inserted
/// (an error path), under `mmap_lock`; or torn down by `exit_mmap()` (the
/// address space has no user left then, and the teardown probe does the
/// rest).
pub(super) struct UnmapWatch;

// SAFETY: `redirect` always returns `None`, and `REDIRECTS` is false.
unsafe impl Redirect for UnmapWatch {
    const TARGET: &'static CStr = c"vm_area_free";
    const ARGS: u32 = 1;
    const REDIRECTS: bool = false;

    fn redirect(args: &Args<'_>) -> Option<Redirection> {
        let vma = args.get(0) as *const ffi::vm_area_struct;
        if vma.is_null() {
            return None;
        }
        let mut mm = core::ptr::null_mut();
        let (mut start, mut end) = (0, 0);
        // SAFETY: `vm_area_free()`'s argument is a VMA its caller owns and
        // frees in this call; its fields are stable until then.
        if unsafe { ffi::sframe_vma_freed(vma, &mut mm, &mut start, &mut end) } {
            registry::unmapped(mm.cast(), start, end, |lo, hi| {
                // SAFETY: As above.  The callers of `vm_area_free()` on an
                // address space with users hold its `mmap_lock` (munmap may
                // have downgraded it to read); the helper checks that it is
                // held at all, not by whom, before `find_vma()`.
                unsafe { ffi::sframe_vma_range_kept(vma, lo, hi) }
            });
        }
        None
    }
}
