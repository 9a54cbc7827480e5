// SPDX-License-Identifier: GPL-2.0

//! What the module needs from the `kernel` crate, under one name whatever
//! the kernel it is built for.
//!
//! The `kernel` crate has no stable interface: Debian's 7.2 kernel (sid)
//! lacks what the module uses from 7.3's. `Kbuild` passes one `--cfg` per
//! missing piece, and this file supplies it from the C API, as the later
//! crate does. Without a cfg (7.3 on), the crate's own item is re-exported
//! and nothing here is compiled.
//!
//! - `sframe_no_kernel_srcu`: no `kernel::sync::Srcu` (7.3 added it);
//! - `sframe_no_kernel_rcu_sync`: no `rcu::synchronize_rcu()` or
//!   `rcu::rcu_barrier()`;
//! - `sframe_no_kernel_eopnotsupp`: no `EOPNOTSUPP` error code;
//! - `sframe_param_value_ref`: a module parameter's `value()` returns a
//!   reference, not a copy.

use kernel::prelude::*;

/// `EOPNOTSUPP`: "operation not supported".
#[cfg(not(sframe_no_kernel_eopnotsupp))]
#[inline]
pub(crate) fn eopnotsupp() -> Error {
    EOPNOTSUPP
}

/// `EOPNOTSUPP`: "operation not supported".
#[cfg(sframe_no_kernel_eopnotsupp)]
#[inline]
pub(crate) fn eopnotsupp() -> Error {
    Error::from_errno(-(kernel::bindings::EOPNOTSUPP as i32))
}

/// The value of a module parameter (`module_parameters::NAME`).
#[inline]
pub(crate) fn param<T: Copy>(param: &kernel::module_param::ModuleParamAccess<T>) -> T {
    #[cfg(sframe_param_value_ref)]
    {
        *param.value()
    }
    #[cfg(not(sframe_param_value_ref))]
    {
        param.value()
    }
}

/// Read-copy update: the crate's module, and its grace-period waits.
pub(crate) mod rcu {
    pub(crate) use kernel::sync::rcu::*;

    /// Whether the current context may be preempted.  One that may not
    /// (NMI, interrupt or softirq context, preemption or interrupts off; on
    /// a kernel without `CONFIG_PREEMPT_COUNT`, which preempts no task in
    /// the kernel, any) is an RCU read-side critical section for as long
    /// as it stays so and does not sleep: since RCU's flavours were
    /// consolidated (4.20), a grace period waits for such regions as for
    /// `rcu_read_lock()`'s.  Any context.
    pub(crate) fn preemptible() -> bool {
        // SAFETY: Reads the preemption count and the interrupt flag.
        unsafe { crate::abstractions::ffi::sframe_preemptible() }
    }

    /// Waits for an RCU grace period: every RCU reader that started before
    /// the call has finished. Sleeps.
    #[cfg(sframe_no_kernel_rcu_sync)]
    pub(crate) fn synchronize_rcu() {
        // SAFETY: No preconditions; the callers are in process context
        // (module exit), where sleeping is allowed.
        unsafe { crate::abstractions::ffi::synchronize_rcu() };
    }

    /// Waits for every RCU callback queued before the call to have run.
    /// Sleeps.
    #[cfg(sframe_no_kernel_rcu_sync)]
    pub(crate) fn rcu_barrier() {
        // SAFETY: As for `synchronize_rcu`.
        unsafe { crate::abstractions::ffi::rcu_barrier() };
    }
}

#[cfg(not(sframe_no_kernel_srcu))]
pub(crate) use kernel::{
    new_srcu,
    sync::{
        srcu,
        Srcu, //
    },
};

#[cfg(sframe_no_kernel_srcu)]
pub(crate) use srcu::Srcu;

/// Creates an [`Srcu`] initialiser with the given name and a new lock class.
#[cfg(sframe_no_kernel_srcu)]
macro_rules! new_srcu {
    ($($name:literal)?) => {
        $crate::abstractions::compat::Srcu::new(
            ::kernel::optional_name!($($name)?),
            ::kernel::static_lock_class!(),
        )
    };
}
#[cfg(sframe_no_kernel_srcu)]
pub(crate) use new_srcu;

/// Sleepable read-copy update, as 7.3's `kernel::sync::srcu`.
///
/// C header: [`include/linux/srcu.h`](srctree/include/linux/srcu.h)
#[cfg(sframe_no_kernel_srcu)]
pub(crate) mod srcu {
    use crate::abstractions::ffi;
    use core::marker::PhantomData;
    use kernel::{
        error::to_result,
        prelude::*,
        sync::LockClassKey,
        types::Opaque, //
    };

    /// Sleepable read-copy update primitive: readers may sleep while they
    /// hold the read-side guard.
    ///
    /// # Invariants
    ///
    /// `inner` is a `struct srcu_struct` initialised by the C SRCU API,
    /// pinned and valid until the pinned destructor runs.
    #[repr(transparent)]
    #[pin_data(PinnedDrop)]
    pub(crate) struct Srcu {
        #[pin]
        inner: Opaque<ffi::srcu_struct>,
    }

    impl Srcu {
        /// Creates a new SRCU instance.
        pub(crate) fn new(
            name: &'static CStr,
            key: Pin<&'static LockClassKey>,
        ) -> impl PinInit<Self, Error> {
            try_pin_init!(Self {
                // INVARIANT: On success, the C initialiser made a valid
                // `srcu_struct`, pinned until `PinnedDrop` runs.
                inner <- Opaque::try_ffi_init(|ptr: *mut ffi::srcu_struct| {
                    // SAFETY: `ptr` points to pinned, uninitialised memory
                    // for a `srcu_struct`; `name` and `key` are static.
                    to_result(unsafe {
                        ffi::sframe_init_srcu_struct(
                            ptr,
                            name.as_char_ptr(),
                            key.as_ptr().cast(),
                        )
                    })
                }),
            })
        }

        /// Enters an SRCU read-side critical section.
        pub(crate) fn read_lock(&self) -> Guard<'_> {
            // SAFETY: By the type invariants, `inner` is a valid
            // `srcu_struct`.
            let idx = unsafe { ffi::sframe_srcu_read_lock(self.inner.get()) };
            // INVARIANT: `idx` was returned by `srcu_read_lock()` for `self`.
            Guard {
                srcu: self,
                idx,
                _not_send: PhantomData,
            }
        }

        /// Waits until all pre-existing SRCU readers have completed.
        pub(crate) fn synchronize(&self) {
            // SAFETY: By the type invariants, `inner` is a valid
            // `srcu_struct`.
            unsafe { ffi::synchronize_srcu(self.inner.get()) };
        }
    }

    #[pinned_drop]
    impl PinnedDrop for Srcu {
        fn drop(self: Pin<&mut Self>) {
            let ptr = self.inner.get();
            // SAFETY: By the type invariants, `inner` is a valid, pinned
            // `srcu_struct`. A guard borrows the `Srcu`, so none is held
            // now unless it was leaked (`cleanup_srcu_struct()` warns then).
            unsafe {
                ffi::srcu_barrier(ptr);
                ffi::cleanup_srcu_struct(ptr);
            }
        }
    }

    // SAFETY: A `srcu_struct` may be used from any thread.
    unsafe impl Send for Srcu {}
    // SAFETY: A `srcu_struct` may be used concurrently.
    unsafe impl Sync for Srcu {}

    /// An active SRCU read-side critical section on an [`Srcu`].
    ///
    /// # Invariants
    ///
    /// `idx` is the index `srcu_read_lock()` returned for `srcu`.
    #[must_use = "if unused, the lock is released at once"]
    pub(crate) struct Guard<'a> {
        srcu: &'a Srcu,
        idx: i32,
        /// Unlocked on the CPU-independent index, but by the same task.
        _not_send: PhantomData<*mut ()>,
    }

    impl Drop for Guard<'_> {
        fn drop(&mut self) {
            // SAFETY: By the type invariants, `idx` came from
            // `srcu_read_lock()` on this `Srcu`, which the borrow keeps
            // valid.
            unsafe { ffi::sframe_srcu_read_unlock(self.srcu.inner.get(), self.idx) };
        }
    }
}
