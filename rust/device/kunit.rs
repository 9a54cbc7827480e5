// SPDX-License-Identifier: GPL-2.0

//! KUnit suite for the ioctl ABI: the commands' encoding and the
//! structures' sizes, as the kernel's own macros see them.

use kernel::prelude::*;

#[kunit_tests(sframe_unwind_abi)]
mod abi_tests {
    use crate::uapi::*;
    use kernel::ioctl::_IOWR;

    /// The ABI crate encodes commands by hand (user space has no `_IOWR`);
    /// it must agree with the kernel's own encoding.
    #[test]
    fn ioctl_encoding_matches_kernel() {
        assert_eq!(
            SFRAME_IOC_VERSION,
            _IOWR::<SframeVersion>(SFRAME_IOC_MAGIC, SFRAME_NR_VERSION)
        );
        assert_eq!(sframe_ioc_nr(SFRAME_IOC_VERSION), SFRAME_NR_VERSION);
        assert_eq!(sframe_ioc_type(SFRAME_IOC_VERSION), SFRAME_IOC_MAGIC);
    }

    #[test]
    fn version_struct_size_is_version_0() {
        assert_eq!(
            core::mem::size_of::<SframeVersion>(),
            SFRAME_VERSION_SIZE_VER0 as usize
        );
    }
}
