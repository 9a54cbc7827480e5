// SPDX-License-Identifier: GPL-2.0

//! Whether an address can be a return address: the instruction before it
//! is a call.
//!
//! A frame-pointer step trusts the return address of a frame record only
//! if it is plausible. The sample path cannot look up VMAs (no
//! `mmap_lock` in interrupt context), but it can read the instruction
//! before the candidate: a real return address follows a branch with
//! link, while data, stack addresses or stale words a garbage frame
//! pointer leads to almost never do.

/// Bytes read before a candidate return address: one instruction.
pub(crate) const CALL_WINDOW: usize = 4;

/// Whether `before` (the instruction at `ra - 4`, little endian) is a
/// branch with link: `bl imm26`, `blr Xn`, or pointer authentication's
/// `blraa`/`blrab Xn, Xm` and `blraaz`/`blrabz Xn`.
pub(crate) fn follows_call(before: &[u8; CALL_WINDOW]) -> bool {
    let insn = u32::from_le_bytes(*before);
    // BL: 100101 imm26.
    insn & 0xfc00_0000 == 0x9400_0000
        // BLR: 1101011 0 0 01 11111 0000 0 0 Rn 00000.
        || insn & 0xffff_fc1f == 0xd63f_0000
        // BLRAAZ, BLRABZ: 1101011 0 0 01 11111 0000 1 M Rn 11111.
        || insn & 0xffff_f81f == 0xd63f_081f
        // BLRAA, BLRAB: 1101011 1 0 01 11111 0000 1 M Rn Rm.
        || insn & 0xffff_f800 == 0xd73f_0800
}
