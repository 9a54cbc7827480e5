// SPDX-License-Identifier: GPL-2.0

//! Redirecting a kernel function through an ftrace `IPMODIFY` hook, or
//! watching its calls.
//!
//! C header: [`include/linux/ftrace.h`](srctree/include/linux/ftrace.h).
//!
//! The pattern is livepatch's (`kernel/livepatch/patch.c`): an `ftrace_ops`
//! with `IPMODIFY` (and the architecture's register flags,
//! [`FTRACE_OPS_FLAGS`]: none where ftrace passes arguments,
//! `DYNAMIC_FTRACE_WITH_ARGS`), filtered by name on one function, whose
//! callback may set the saved instruction pointer to a replacement with the
//! same signature; the call then continues in the replacement, which
//! returns to the original caller. The target is found by ftrace's own
//! filter, not by `kallsyms_lookup_name()`.  A hook that only watches
//! ([`Redirect::REDIRECTS`] false) has no `IPMODIFY`: it coexists with a
//! livepatch of the same function.
//!
//! The filter is the target's name, which a module's function may share:
//! the callback ignores calls of functions in the module area.
//!
//! The callback also hands the replacement one word, in the register of
//! the argument after the target's own, which the trampoline restores with
//! the others: what the callback found out about the call, for the
//! replacement not to find it again.
//!
//! Unregistering waits for callbacks that are running, not for replacements
//! that a callback sent a task to: the user of this type guards its
//! replacements and waits for them itself (see `hooks.rs`).

use crate::{
    abstractions::ffi,
    arch::{
        FTRACE_ARG_REGISTERS,
        FTRACE_OPS_FLAGS, //
    },
};
use core::marker::PhantomData;
use kernel::{
    error::to_result,
    prelude::*,
    types::Opaque, //
};

/// Where a redirected call goes on.
pub(crate) struct Redirection {
    /// The replacement's address.
    pub(crate) to: usize,
    /// What the replacement receives after the target's arguments (its
    /// argument number [`Redirect::ARGS`]).
    pub(crate) word: usize,
}

/// What a hook does at the entry of its target.
///
/// # Safety
///
/// - [`Redirect::redirect`] returns `None` or a [`Redirection`] whose `to`
///   is the address of a function with the signature and calling
///   convention of `TARGET`, optionally followed by one more `usize`
///   argument: the hooked call continues there with the target's
///   arguments (and `word`) and returns to its caller.
/// - [`Redirect::ARGS`] is the number of `TARGET`'s arguments, all of them
///   integers or pointers.
pub(crate) unsafe trait Redirect {
    /// The hooked function's name.
    const TARGET: &'static CStr;

    /// How many arguments `TARGET` takes: [`Redirection::word`] is passed
    /// as the next one.
    const ARGS: u32;

    /// Whether [`Redirect::redirect`] may return a replacement.  If false,
    /// the hook only watches: it must always return `None`, and is
    /// registered without `IPMODIFY`.
    const REDIRECTS: bool = true;

    /// Decides whether this call of the target goes to the replacement:
    /// returns where it goes, or `None` to run the original.
    ///
    /// Runs at the target's entry, in any context the target is called in
    /// (NMI included): it must not sleep, lock or fault.
    fn redirect(args: &Args<'_>) -> Option<Redirection>;
}

/// The hooked call's arguments, as the callback sees them.
pub(crate) struct Args<'a> {
    fregs: *mut ffi::ftrace_regs,
    _regs: PhantomData<&'a ffi::ftrace_regs>,
}

impl Args<'_> {
    /// The `n`th integer or pointer argument (0-based) of the hooked call.
    pub(crate) fn get(&self, n: u32) -> usize {
        // SAFETY: `fregs` is the live `ftrace_regs` of the call ftrace is
        // reporting (the lifetime ties `self` to the callback's duration).
        unsafe { ffi::sframe_ftrace_regs_get_argument(self.fregs, n) as usize }
    }
}

/// An ftrace hook on `T::TARGET`.
///
/// # Invariants
///
/// - `ops` is an `ftrace_ops` whose `func` is [`callback::<T>`] and whose
///   flags are [`FTRACE_OPS_FLAGS`], with `IPMODIFY` if `T::REDIRECTS`; it is pinned
///   and never moved.
/// - `installed` is true exactly while `ops` is registered with ftrace, and
///   then its filter is `T::TARGET` alone (an ops with an empty filter
///   would trace every function, so it is never registered without one).
#[pin_data(PinnedDrop)]
pub(crate) struct FtraceHook<T: Redirect> {
    #[pin]
    ops: Opaque<ffi::ftrace_ops>,
    installed: bool,
    _t: PhantomData<T>,
}

// SAFETY: Registering and unregistering an `ftrace_ops` may happen on any
// task, so the hook may be installed, uninstalled or dropped on another
// thread than the one that made it. `T` is only a marker whose associated
// functions are used; no `T` value is held.
unsafe impl<T: Redirect> Send for FtraceHook<T> {}
// SAFETY: A shared reference gives nothing: every method takes
// `Pin<&mut Self>`. (ftrace itself reads the ops from any CPU through the
// raw pointer it was given, which `Opaque` allows.)
unsafe impl<T: Redirect> Sync for FtraceHook<T> {}

/// The ftrace callback: asks `T` and moves the saved instruction pointer.
///
/// The filter is a name, and a module may have a function of the same
/// name (`ftrace_set_filter()` matches it too): a call of a function in
/// the module area is left alone, so only the core kernel's `T::TARGET`
/// is watched or redirected.
///
/// # Safety
///
/// Called by ftrace only, with the `ftrace_regs` of the hooked call.
unsafe extern "C" fn callback<T: Redirect>(
    ip: usize,
    _parent_ip: usize,
    _ops: *mut ffi::ftrace_ops,
    fregs: *mut ffi::ftrace_regs,
) {
    // SAFETY: Compares an address with the module area's bounds.
    if fregs.is_null() || unsafe { ffi::sframe_in_module_area(ip) } {
        return;
    }
    let args = Args {
        fregs,
        _regs: PhantomData,
    };
    // A watcher's `redirect` is called for what it sees; a redirection
    // needs `IPMODIFY`, and a register the trampoline restores for its word.
    let redirection = T::redirect(&args);
    if !T::REDIRECTS || T::ARGS >= FTRACE_ARG_REGISTERS {
        return;
    }
    if let Some(redirection) = redirection {
        // SAFETY: `fregs` is the live register set of this call, saved with
        // the architecture's flags; argument `T::ARGS` is not one of the
        // target's (`Redirect`'s safety requirement), so the original,
        // should it run, does not read it, and it is an argument register.
        unsafe { ffi::sframe_ftrace_regs_set_argument(fregs, T::ARGS, redirection.word) };
        // SAFETY: As above, with its instruction pointer; `IPMODIFY` (set
        // as `T::REDIRECTS` is) allows changing it, and `to` has the
        // target's signature, then perhaps the word's (`Redirect`'s
        // safety requirement).
        unsafe { ffi::sframe_ftrace_regs_set_ip(fregs, redirection.to) };
    }
}

impl<T: Redirect> FtraceHook<T> {
    /// A hook that is not installed yet.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            ops <- Opaque::ffi_init(|slot: *mut ffi::ftrace_ops| {
                let ipmodify = if T::REDIRECTS {
                    ffi::FTRACE_OPS_FL_IPMODIFY
                } else {
                    0
                };
                let ops = ffi::ftrace_ops {
                    func: Some(callback::<T>),
                    flags: (FTRACE_OPS_FLAGS | ipmodify) as usize,
                    ..Default::default()
                };
                // SAFETY: The initializer may write to `slot`.
                // INVARIANT: `func` and the flags are as documented.
                unsafe { slot.write(ops) };
            }),
            installed: false,
            _t: PhantomData,
        })
    }

    /// Filters the ops on `T::TARGET` and registers it. Fails (with the
    /// hook left uninstalled) when the running kernel has no such
    /// traceable function or another `IPMODIFY` user owns it.
    pub(crate) fn install(self: Pin<&mut Self>) -> Result {
        // SAFETY: Nothing is moved out of `this`: `ops` is only used in
        // place, and `installed` is not structurally pinned.
        let this = unsafe { self.get_unchecked_mut() };
        if this.installed {
            return Ok(());
        }
        let ops = this.ops.get();
        // `ftrace_set_filter()` parses its buffer in place: give it a copy.
        let name = T::TARGET.to_bytes();
        let mut buf = [0u8; 64];
        let len = name.len();
        if len >= buf.len() {
            return Err(EINVAL);
        }
        buf.get_mut(..len).ok_or(EINVAL)?.copy_from_slice(name);
        // SAFETY: `ops` is a valid, pinned `ftrace_ops`, not registered
        // (`installed` is false); `buf` is writable and holds `len` bytes
        // and, as `len` is below its size, a NUL after them.
        let filtered = unsafe { ffi::ftrace_set_filter(ops, buf.as_mut_ptr(), len as i32, 1) };
        if let Err(e) = to_result(filtered) {
            // SAFETY: `ops` is valid and not registered.
            unsafe { ffi::ftrace_free_filter(ops) };
            return Err(e);
        }
        // SAFETY: `ops` is valid and pinned, its filter names only the
        // target; it stays registered until `uninstall` or `drop`.
        if let Err(e) = to_result(unsafe { ffi::register_ftrace_function(ops) }) {
            // SAFETY: `ops` is valid and not registered.
            unsafe { ffi::ftrace_free_filter(ops) };
            return Err(e);
        }
        // INVARIANT: Registered with a filter on the target.
        this.installed = true;
        Ok(())
    }

    /// Unregisters the hook. Afterwards no callback runs any more, but
    /// tasks it redirected may still be inside a replacement.
    pub(crate) fn uninstall(self: Pin<&mut Self>) {
        // SAFETY: Nothing is moved out of `this`: `ops` is only used in
        // place, and `installed` is not structurally pinned.
        let this = unsafe { self.get_unchecked_mut() };
        if !this.installed {
            return;
        }
        let ops = this.ops.get();
        // SAFETY: `ops` is registered (type invariant). For an ops outside
        // core kernel data (`FTRACE_OPS_FL_DYNAMIC`) this waits until no
        // CPU is in its trampoline or callback.
        let ret = unsafe { ffi::unregister_ftrace_function(ops) };
        if ret != 0 {
            // Cannot happen for a registered ops; keep it registered rather
            // than free memory ftrace still uses.
            pr_err!(
                "unregister_ftrace_function({}) failed: {}\n",
                T::TARGET,
                ret
            );
            return;
        }
        // SAFETY: `ops` is no longer registered.
        unsafe { ffi::ftrace_free_filter(ops) };
        // INVARIANT: Unregistered.
        this.installed = false;
    }
}

#[pinned_drop]
impl<T: Redirect> PinnedDrop for FtraceHook<T> {
    fn drop(self: Pin<&mut Self>) {
        self.uninstall();
    }
}
