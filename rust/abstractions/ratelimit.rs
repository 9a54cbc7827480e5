// SPDX-License-Identifier: GPL-2.0

//! Rate-limited log lines: the `kernel` crate has no `pr_*_ratelimited`.
//!
//! C header: [`include/linux/ratelimit.h`](srctree/include/linux/ratelimit.h)
//!
//! A [`Ratelimit`] is one `struct ratelimit_state`: at most `burst` messages
//! per `interval`; [`pr_warn_ratelimited!`] prints through it.  A caller
//! that can be driven by an unprivileged user (every failed ioctl is) must
//! log through one, or it floods the log.

use kernel::{
    bindings,
    prelude::*,
    types::Opaque, //
};

/// One rate limit: `burst` events per `interval_ms`.
///
/// # Invariants
///
/// `state` was initialised by `ratelimit_state_init()`.
#[pin_data]
pub(crate) struct Ratelimit {
    #[pin]
    state: Opaque<bindings::ratelimit_state>,
}

// SAFETY: `___ratelimit()` serialises on the state's own raw spinlock.
unsafe impl Send for Ratelimit {}
// SAFETY: As above.
unsafe impl Sync for Ratelimit {}

impl Ratelimit {
    /// A limit of `burst` events per `interval_ms` milliseconds.
    pub(crate) fn new(interval_ms: u32, burst: u32) -> impl PinInit<Self> {
        pin_init!(Self {
            // SAFETY: `slot` is valid for writes and pinned.
            // INVARIANT: The state is initialised here.
            state <- Opaque::ffi_init(move |slot: *mut bindings::ratelimit_state| unsafe {
                crate::abstractions::ffi::sframe_ratelimit_init(
                    slot.cast(),
                    interval_ms.min(i32::MAX as u32) as i32,
                    burst.min(i32::MAX as u32) as i32,
                )
            }),
        })
    }

    /// Whether one more event may be reported now.  Suppressed events are
    /// counted and reported by the C code when the interval ends.
    pub(crate) fn allow(&self) -> bool {
        // SAFETY: By the type invariants the state is initialised; the
        // function name is a static NUL-terminated string.
        unsafe { bindings::___ratelimit(self.state.get(), c"sframe_unwind".as_char_ptr()) != 0 }
    }
}

/// `pr_warn!` through a [`Ratelimit`].
macro_rules! pr_warn_ratelimited {
    ($rl:expr, $($arg:tt)*) => {
        if $rl.allow() {
            ::kernel::pr_warn!($($arg)*);
        }
    };
}
pub(crate) use pr_warn_ratelimited;
