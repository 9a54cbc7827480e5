// SPDX-License-Identifier: GPL-2.0

//! `/dev/sframe`: the ioctl calls, each filling in the structure's `size`.
//!
//! Shared by the audit library and `sframectl`.  Errors are the kernel's
//! `errno` as [`io::Error`]; the callers turn them into their own messages.

use sframe_uapi::SframeList;
use sframe_uapi::SframeRegister;
use sframe_uapi::SframeSectionInfo;
use sframe_uapi::SframeStats;
use sframe_uapi::SframeUnregister;
use sframe_uapi::SframeVersion;
use sframe_uapi::SFRAME_ABI_VERSION;
use sframe_uapi::SFRAME_F_BY_ADDR;
use sframe_uapi::SFRAME_F_BY_TAG;
use sframe_uapi::SFRAME_F_PROCFD;
use sframe_uapi::SFRAME_F_TAGGED;
use sframe_uapi::SFRAME_IOC_LIST;
use sframe_uapi::SFRAME_IOC_REGISTER;
use sframe_uapi::SFRAME_IOC_STATS;
use sframe_uapi::SFRAME_IOC_UNREGISTER;
use sframe_uapi::SFRAME_IOC_VERSION;
use std::ffi::CStr;
use std::io;
use std::ops::Range;
use std::os::fd::AsRawFd;
use std::os::fd::BorrowedFd;
use std::os::fd::FromRawFd;
use std::os::fd::OwnedFd;
use std::os::fd::RawFd;
use std::sync::OnceLock;

/// The device node the module creates.
pub const DEVICE_PATH: &CStr = c"/dev/sframe";

/// An open `/dev/sframe`.
#[derive(Debug)]
pub struct Device {
    fd: OwnedFd,
    /// The module's `SFRAME_FEAT_*` bits, asked for at first use: a module
    /// cannot be unloaded while its device is open.
    features: OnceLock<u64>,
}

/// What to register: SFrame bytes in our memory, describing a text range of
/// a target process (ourselves unless `target` is given: an open
/// `/proc/PID/mem`, or for [`Device::list`] also `/proc/PID/auxv`).
///
/// The bytes are named by address, not borrowed: the audit library passes
/// an object's mapped `.sframe` without reading it (the module copies it and
/// answers `EFAULT` if it is not there); the caller keeps them mapped for
/// the call.
#[derive(Clone, Debug)]
pub struct Registration {
    /// The SFrame section's bytes, in our memory (by tag: `0..len`, no
    /// bytes, their length).
    pub data: Range<u64>,
    /// The address at which the target maps those bytes.
    pub sframe_addr: u64,
    /// The text they describe, in the target.
    pub text: Range<u64>,
    /// How the module's copy of the bytes is named.
    pub tag: Tag,
}

/// How a registration names the module's copy of its bytes
/// (`SFRAME_FEAT_TAG`): the tag is our account's own name for them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Tag {
    /// By the bytes.
    #[default]
    None,
    /// The bytes given, their copy filed under the tag
    /// (`SFRAME_F_TAGGED`).
    File(u64),
    /// No bytes: the copy our account filed under the tag
    /// (`SFRAME_F_BY_TAG`); `ENOENT` if it has none.
    Find(u64),
}

/// Which registration to remove.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unregister {
    /// The one [`Device::register`] returned this handle for.
    Handle(u64),
    /// The one whose text contains this address.
    Address(u64),
}

fn size_of<T>() -> u32 {
    // The ABI structures are a few hundred bytes at most.
    core::mem::size_of::<T>() as u32
}

fn target_fields(target: Option<BorrowedFd<'_>>) -> (u32, i32) {
    match target {
        Some(fd) => (SFRAME_F_PROCFD, fd.as_raw_fd()),
        None => (0, 0),
    }
}

impl Registration {
    /// Registers `data`, which the target maps at `sframe_addr`.
    pub fn from_slice(data: &[u8], sframe_addr: u64, text: Range<u64>) -> Self {
        let start = data.as_ptr() as u64;
        Self {
            data: start..start + data.len() as u64,
            sframe_addr,
            text,
            tag: Tag::None,
        }
    }
}

impl Device {
    /// Opens `/dev/sframe`, close-on-exec.
    pub fn open() -> io::Result<Self> {
        Self::open_path(DEVICE_PATH)
    }

    /// Opens the device at `path`, close-on-exec.
    pub fn open_path(path: &CStr) -> io::Result<Self> {
        // SAFETY: `path` is a NUL-terminated string; open() has no other
        // preconditions.
        let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: open() returned a new descriptor that nothing else owns.
        Ok(Self {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
            features: OnceLock::new(),
        })
    }

    /// Whether the module offers `feature` (an `SFRAME_FEAT_*` bit); no if
    /// it cannot say.
    pub fn supports(&self, feature: u64) -> bool {
        let features = self
            .features
            .get_or_init(|| self.version().map_or(0, |v| v.features));
        features & feature != 0
    }

    /// The descriptor, for checks such as `fstat()`.
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Issues `cmd` with `arg`, a `repr(C)` ABI structure.
    fn ioctl<T>(&self, cmd: u32, arg: &mut T) -> io::Result<()> {
        // SAFETY: `arg` is a valid, exclusively borrowed ABI structure whose
        // `size` field tells the module how much of it to read and write.
        let rc = unsafe { libc::ioctl(self.fd.as_raw_fd(), cmd as _, core::ptr::from_mut(arg)) };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// `SFRAME_IOC_VERSION`.
    pub fn version(&self) -> io::Result<SframeVersion> {
        let mut v = SframeVersion {
            size: size_of::<SframeVersion>(),
            ..Default::default()
        };
        self.ioctl(SFRAME_IOC_VERSION, &mut v)?;
        Ok(v)
    }

    /// `SFRAME_IOC_VERSION`, failing with `EPROTO` on an ABI we do not speak.
    pub fn check_version(&self) -> io::Result<SframeVersion> {
        let v = self.version()?;
        if v.abi_version != SFRAME_ABI_VERSION {
            return Err(io::Error::from_raw_os_error(libc::EPROTO));
        }
        Ok(v)
    }

    /// `SFRAME_IOC_REGISTER`: returns the handle.
    pub fn register(&self, reg: &Registration, target: Option<BorrowedFd<'_>>) -> io::Result<u64> {
        let (flags, pidfd) = target_fields(target);
        let (tag_flag, tag) = match reg.tag {
            Tag::None => (0, 0),
            Tag::File(tag) => (SFRAME_F_TAGGED, tag),
            Tag::Find(tag) => (SFRAME_F_BY_TAG, tag),
        };
        let mut arg = SframeRegister {
            size: size_of::<SframeRegister>(),
            flags: flags | tag_flag,
            pidfd,
            tag,
            sframe_data: reg.data.start,
            sframe_len: reg.data.end.saturating_sub(reg.data.start),
            sframe_addr: reg.sframe_addr,
            text_start: reg.text.start,
            text_end: reg.text.end,
            ..Default::default()
        };
        self.ioctl(SFRAME_IOC_REGISTER, &mut arg)?;
        Ok(arg.handle)
    }

    /// `SFRAME_IOC_UNREGISTER`.
    pub fn unregister(&self, which: Unregister, target: Option<BorrowedFd<'_>>) -> io::Result<()> {
        let (flags, pidfd) = target_fields(target);
        let mut arg = SframeUnregister {
            size: size_of::<SframeUnregister>(),
            flags,
            pidfd,
            ..Default::default()
        };
        match which {
            Unregister::Handle(handle) => arg.handle = handle,
            Unregister::Address(addr) => {
                arg.flags |= SFRAME_F_BY_ADDR;
                arg.addr = addr;
            }
        }
        self.ioctl(SFRAME_IOC_UNREGISTER, &mut arg)
    }

    /// `SFRAME_IOC_LIST`: every section of the target, ordered as the module
    /// reports them.
    pub fn list(&self, target: Option<BorrowedFd<'_>>) -> io::Result<Vec<SframeSectionInfo>> {
        let (flags, pidfd) = target_fields(target);
        let mut entries: Vec<SframeSectionInfo> = Vec::new();
        // The set may grow between the call that counts and the one that
        // copies: retry with the larger count a few times.
        for _ in 0..8 {
            let capacity = u32::try_from(entries.len())
                .map_err(|_| io::Error::from_raw_os_error(libc::E2BIG))?;
            let mut arg = SframeList {
                size: size_of::<SframeList>(),
                flags,
                pidfd,
                entry_size: size_of::<SframeSectionInfo>(),
                entries: entries.as_mut_ptr() as u64,
                capacity,
                count: 0,
            };
            self.ioctl(SFRAME_IOC_LIST, &mut arg)?;
            if arg.count <= capacity {
                entries.truncate(arg.count as usize);
                return Ok(entries);
            }
            entries.resize(arg.count as usize + 16, SframeSectionInfo::default());
        }
        Err(io::Error::from_raw_os_error(libc::EAGAIN))
    }

    /// `SFRAME_IOC_STATS`.
    pub fn stats(&self) -> io::Result<SframeStats> {
        let mut s = SframeStats {
            size: size_of::<SframeStats>(),
            ..Default::default()
        };
        self.ioctl(SFRAME_IOC_STATS, &mut s)?;
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_device_is_an_error_not_a_panic() {
        let err = Device::open_path(c"/nonexistent/sframe").unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOENT));
    }

    #[test]
    fn another_file_answers_enotty() {
        // The ioctls on something that is not our device fail cleanly.
        let dev = Device::open_path(c"/dev/null").unwrap();
        let err = dev.version().unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOTTY));
        let err = dev.stats().unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOTTY));
    }
}
