// SPDX-License-Identifier: GPL-2.0

//! KUnit suite for arm64's call-site check and return-address stripping.

use kernel::prelude::*;

#[kunit_tests(sframe_unwind_call_site)]
mod call_site_tests {
    use crate::arch::{
        follows_call,
        strip_return_address, //
    };

    fn follows(insn: u32) -> bool {
        follows_call(&insn.to_le_bytes())
    }

    #[test]
    fn calls() {
        let calls = [
            0x9400_0010, // bl .+0x40
            0x97ff_fff0, // bl .-0x40
            0xd63f_0020, // blr x1
            0xd63f_0200, // blr x16
            0xd63f_083f, // blraaz x1
            0xd63f_0c3f, // blrabz x1
            0xd73f_0822, // blraa x1, x2
            0xd73f_0c22, // blrab x1, x2
        ];
        for insn in calls {
            assert!(follows(insn));
        }
    }

    #[test]
    fn not_calls() {
        let others = [
            0x1400_0010, // b .+0x40
            0xd61f_0020, // br x1
            0xd65f_03c0, // ret
            0xd503_201f, // nop
            0xa9bf_7bfd, // stp x29, x30, [sp, #-16]!
            0x0000_0000,
            0x0000_ffff, // stack address bytes
        ];
        for insn in others {
            assert!(!follows(insn));
        }
    }

    #[test]
    fn stripping_keeps_plain_user_addresses() {
        // Whatever the CPU's pointer authentication, an address without a
        // code is returned as it is.
        for addr in [0x40_0000u64, 0xffff_f7ff_f000, 0] {
            assert_eq!(strip_return_address(addr), addr);
        }
    }
}
