// SPDX-License-Identifier: GPL-2.0

//! KUnit suite for x86-64's call-site check.

use kernel::prelude::*;

#[kunit_tests(sframe_unwind_call_site)]
mod call_site_tests {
    use crate::arch::{
        follows_call,
        CALL_WINDOW, //
    };

    /// `insn` as the last bytes before a return address, after `nop`s.
    fn window(insn: &[u8]) -> [u8; CALL_WINDOW] {
        let mut w = [0x90u8; CALL_WINDOW];
        let start = CALL_WINDOW - insn.len();
        if let Some(tail) = w.get_mut(start..) {
            tail.copy_from_slice(insn);
        }
        w
    }

    #[test]
    fn direct_call() {
        assert!(follows_call(&window(&[0xe8, 0x98, 0xff, 0xff, 0xff])));
    }

    #[test]
    fn indirect_calls() {
        let calls: [&[u8]; 9] = [
            &[0xff, 0xd0],                               // call *%rax
            &[0x41, 0xff, 0xd3],                         // call *%r11
            &[0xff, 0x10],                               // call *(%rax)
            &[0xff, 0x15, 0x12, 0x34, 0x00, 0x00],       // call *x(%rip)
            &[0xff, 0x55, 0x08],                         // call *0x8(%rbp)
            &[0xff, 0x14, 0x24],                         // call *(%rsp)
            &[0xff, 0x54, 0x24, 0x08],                   // call *0x8(%rsp)
            &[0xff, 0x94, 0x24, 0x00, 0x01, 0x00, 0x00], // call *0x100(%rsp)
            &[0xff, 0x14, 0x25, 0x00, 0x10, 0x40, 0x00], // call *0x401000
        ];
        for insn in calls {
            assert!(follows_call(&window(insn)));
        }
    }

    #[test]
    fn not_calls() {
        let others: [&[u8]; 5] = [
            &[0xff, 0xe0],                         // jmp *%rax
            &[0xff, 0x25, 0x00, 0x00, 0x00, 0x00], // jmp *x(%rip)
            &[0x55],                               // push %rbp
            &[0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00],
            &[0xfc, 0x7f, 0x00, 0x00, 0x10, 0x20, 0x30], // stack address bytes
        ];
        for insn in others {
            assert!(!follows_call(&window(insn)));
        }
    }
}
