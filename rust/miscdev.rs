// SPDX-License-Identifier: GPL-2.0

//! A misc device whose node has a chosen mode.
//!
//! C header: [`include/linux/miscdevice.h`](srctree/include/linux/miscdevice.h).
//!
//! [`kernel::miscdevice::MiscDeviceOptions`] carries only a name, and devtmpfs
//! reads the node's mode from `struct miscdevice` while `misc_register()`
//! runs, so it cannot be changed afterwards.  This type registers the raw
//! `struct miscdevice` that [`MiscDeviceOptions::into_raw`] builds, with the
//! file operations the `kernel` crate generates for `T`, after setting
//! `mode`.

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
};

/// A registered misc device with an explicit node mode.
///
/// # Invariants
///
/// - `inner` holds a `struct miscdevice` built by [`MiscDeviceOptions::into_raw`]
///   for `T` and registered with `misc_register()`; it stays registered for the
///   whole lifetime of this value and is deregistered exactly once in `drop`.
/// - The layout is that of [`MiscDeviceRegistration<T>`] (both are
///   `#[repr(transparent)]` over `Opaque<bindings::miscdevice>`): the file
///   operations of `T` find the registration through `file->private_data`,
///   which `misc_open()` points at `inner`, and cast it to
///   `MiscDeviceRegistration<T>`.
#[repr(transparent)]
#[pin_data(PinnedDrop)]
pub(crate) struct MiscDeviceWithMode<T> {
    #[pin]
    inner: Opaque<bindings::miscdevice>,
    _t: PhantomData<T>,
}

// SAFETY: `misc_deregister()` may be called from any thread.
unsafe impl<T> Send for MiscDeviceWithMode<T> {}
// SAFETY: There are no `&self` methods that touch the registration.
unsafe impl<T> Sync for MiscDeviceWithMode<T> {}

impl<T: MiscDevice> MiscDeviceWithMode<T> {
    /// Registers a misc device named by `opts` whose node has `mode`.
    pub(crate) fn register(opts: MiscDeviceOptions, mode: u16) -> impl PinInit<Self, Error> {
        const {
            assert!(
                core::mem::size_of::<MiscDeviceRegistration<T>>()
                    == core::mem::size_of::<Opaque<bindings::miscdevice>>()
            );
        }
        try_pin_init!(Self {
            inner <- Opaque::try_ffi_init(move |slot: *mut bindings::miscdevice| {
                let mut raw = opts.into_raw::<T>();
                raw.mode = mode;
                // SAFETY: The initializer may write to `slot`.
                unsafe { slot.write(raw) };
                // SAFETY: `slot` now holds a valid `struct miscdevice`; it is
                // pinned and deregistered in `drop` before it is freed.
                // INVARIANT: On success `inner` holds a registered device.
                to_result(unsafe { bindings::misc_register(slot) })
            }),
            _t: PhantomData,
        })
    }
}

#[pinned_drop]
impl<T> PinnedDrop for MiscDeviceWithMode<T> {
    fn drop(self: Pin<&mut Self>) {
        // SAFETY: By the type invariants the device is registered.
        unsafe { bindings::misc_deregister(self.inner.get()) };
    }
}
