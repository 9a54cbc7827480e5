// SPDX-License-Identifier: GPL-2.0

//! `/dev/sframe`: the misc device, its ioctls and who may name which
//! process.
//!
//! - `ioctl.rs`: dispatch and each command's checks (see
//!   `Documentation/ioctl.rst`); `user_struct.rs`: the extensible argument
//!   structures' copy rules.
//! - `permission.rs`: another process named by an open `/proc/PID/mem`
//!   file, with the permission the kernel checked when it was opened; who
//!   may change the switches.
//!
//! Contexts: process context only (open and ioctl); an ioctl may sleep.
//! The device keeps no per-open state: registrations belong to the mm.

mod ioctl;
mod permission;
mod user_struct;

pub(crate) use ioctl::MODULE_VERSION;

use crate::abstractions::miscdev::MiscDeviceWithMode;
use kernel::{
    fs::File,
    miscdevice::{
        MiscDevice,
        MiscDeviceOptions,
        MiscDeviceRegistration, //
    },
    prelude::*,
    ThisModule, //
};

/// The node is for every user: a process registers only its own sections
/// and those of processes whose `/proc/PID/mem` it could open.
const DEVICE_MODE: u16 = 0o666;

/// `/dev/sframe` keeps no per-open state: registrations belong to the mm.
pub(crate) struct SframeDevice;

#[vtable]
impl MiscDevice for SframeDevice {
    type Ptr = ();

    fn open(_file: &File, _misc: &MiscDeviceRegistration<Self>) -> Result<()> {
        Ok(())
    }

    fn ioctl(_device: (), _file: &File, cmd: u32, arg: usize) -> Result<isize> {
        ioctl::dispatch(cmd, arg)
    }
}

/// The registered device.
pub(crate) type Device = MiscDeviceWithMode<SframeDevice>;

/// Learns what the permission checks need (before the device exists: an
/// ioctl may name another process at once).  Process context (load).
pub(crate) fn init() {
    permission::init();
}

/// Registers `/dev/sframe`, whose open files hold a reference on `module`.
pub(crate) fn register(module: &'static ThisModule) -> impl PinInit<Device, Error> {
    MiscDeviceWithMode::register(MiscDeviceOptions { name: c"sframe" }, DEVICE_MODE, module)
}
