// SPDX-License-Identifier: GPL-2.0

//! A misc device whose node has a chosen mode.
//!
//! C header: [`include/linux/miscdevice.h`](srctree/include/linux/miscdevice.h).
//!
//! [`kernel::miscdevice::MiscDeviceOptions`] carries only a name, and devtmpfs
//! reads the node's mode from `struct miscdevice` while `misc_register()`
//! runs, so it cannot be changed afterwards.  This type registers the raw
//! `struct miscdevice` that [`MiscDeviceOptions::into_raw`] builds, after
//! setting `mode`, with a copy of the file operations the `kernel` crate
//! generates for `T` whose `owner` is this module: an open file then holds
//! a reference on the module, so the module cannot be unloaded under it.
//! The crate sets `owner` itself from 7.3 on; 7.2's crate (Debian's sid
//! kernel) leaves it null, and `rmmod` succeeded with `/dev/sframe` open.

use core::marker::PhantomData;
use kernel::{
    bindings,
    error::to_result,
    miscdevice::{
        MiscDevice,
        MiscDeviceOptions,
        MiscDeviceRegistration, //
    },
    prelude::*,
    types::Opaque,
    ThisModule, //
};

/// A registered misc device with an explicit node mode.
///
/// # Invariants
///
/// - `inner` holds a `struct miscdevice` built by [`MiscDeviceOptions::into_raw`]
///   for `T` and registered with `misc_register()`; it stays registered for the
///   whole lifetime of this value and is deregistered exactly once in `drop`.
/// - `inner`'s `fops` points at `fops`: the file operations of `T` with
///   `owner` set to the module that holds this value.
/// - `inner` starts the structure (`#[repr(C)]`) and has the layout of
///   [`MiscDeviceRegistration<T>`] (`#[repr(transparent)]` over
///   `Opaque<bindings::miscdevice>`): the file operations of `T` find the
///   registration through `file->private_data`, which `misc_open()` points
///   at `inner`, and cast it to `MiscDeviceRegistration<T>`.
#[repr(C)]
#[pin_data(PinnedDrop)]
pub(crate) struct MiscDeviceWithMode<T> {
    #[pin]
    inner: Opaque<bindings::miscdevice>,
    #[pin]
    fops: Opaque<bindings::file_operations>,
    _t: PhantomData<T>,
}

// SAFETY: `misc_deregister()` may be called from any thread.
unsafe impl<T> Send for MiscDeviceWithMode<T> {}
// SAFETY: There are no `&self` methods that touch the registration.
unsafe impl<T> Sync for MiscDeviceWithMode<T> {}

impl<T: MiscDevice> MiscDeviceWithMode<T> {
    /// Registers a misc device named by `opts` whose node has `mode`, and
    /// whose open files hold a reference on `module`, the caller's.
    pub(crate) fn register(
        opts: MiscDeviceOptions,
        mode: u16,
        module: &'static ThisModule,
    ) -> impl PinInit<Self, Error> {
        const {
            assert!(
                core::mem::size_of::<MiscDeviceRegistration<T>>()
                    == core::mem::size_of::<Opaque<bindings::miscdevice>>()
            );
        }
        let init = move |slot: *mut Self| {
            let mut raw = opts.into_raw::<T>();
            // SAFETY: `slot` is valid for writes (the initialiser's
            // contract); the projections create no reference.
            let (inner, fops) = unsafe {
                (
                    Opaque::cast_into(&raw const (*slot).inner),
                    Opaque::cast_into(&raw const (*slot).fops),
                )
            };
            // SAFETY: `into_raw` points `fops` at the kernel crate's static
            // file operations for `T`, a plain C structure that is copied
            // bit for bit; `fops` is valid for writes.
            unsafe {
                fops.write(raw.fops.read());
                (*fops).owner = module.as_ptr();
            }
            raw.fops = fops;
            raw.mode = mode;
            // SAFETY: `inner` is valid for writes.
            unsafe { inner.write(raw) };
            // SAFETY: `inner` holds a valid `struct miscdevice` whose file
            // operations live as long as it does; it is pinned and
            // deregistered in `drop` before it is freed.
            // INVARIANT: On success `inner` holds a registered device using
            // `fops`; on failure nothing is registered, and neither field
            // needs dropping.
            to_result(unsafe { bindings::misc_register(inner) })
        };
        // SAFETY: The closure initialises every field (`_t` has no data)
        // before it returns `Ok`; on `Err` it has registered nothing, and
        // the plain C structures it wrote need no cleanup. `slot` is pinned
        // from the start, as `misc_register()` requires.
        unsafe { pin_init::pin_init_from_closure(init) }
    }
}

#[pinned_drop]
impl<T> PinnedDrop for MiscDeviceWithMode<T> {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: By the type invariants the device is registered.
        unsafe { bindings::misc_deregister(self.inner.get()) };
    }
}
