// SPDX-License-Identifier: GPL-2.0

//! Whether an address can be a return address: the instruction before it
//! is a call.
//!
//! A frame-pointer step trusts the word at FP + 8 only if it is plausible.
//! The sample path cannot look up VMAs (no `mmap_lock` in NMI), but it can
//! read the bytes before the candidate without faulting: a real
//! return address follows a `call`, while data, stack addresses or stale
//! words a garbage frame pointer leads to almost never do.

/// Bytes read before a candidate return address.
pub(crate) const CALL_WINDOW: usize = 7;

/// Whether `before` (the [`CALL_WINDOW`] bytes up to `ra - 1`, last byte
/// at `ra - 1`) ends with a call: `call rel32` (`e8`), or `call *r/m`
/// (`ff /2`) in its register, indirect, disp8, disp32, SIB and
/// RIP-relative forms. A REX prefix before `ff` (`41 ff d3` is
/// `call *%r11`) does not change the length of the rest, so it needs no
/// case of its own.
pub(crate) fn follows_call(before: &[u8; CALL_WINDOW]) -> bool {
    // The byte `back` bytes before the return address.
    let at = |back: usize| {
        CALL_WINDOW
            .checked_sub(back)
            .and_then(|i| before.get(i))
            .copied()
            .unwrap_or(0)
    };
    if at(5) == 0xe8 {
        return true;
    }
    (2..=CALL_WINDOW).any(|len| {
        // `ff modrm [sib] [disp]`, `len` bytes ending at the return address.
        let modrm = at(len - 1);
        if at(len) != 0xff || (modrm >> 3) & 7 != 2 {
            return false;
        }
        let (md, rm) = (modrm >> 6, modrm & 7);
        let sib = md != 3 && rm == 4;
        let disp = match (md, rm) {
            // RIP-relative.
            (0, 5) => 4,
            // SIB with base 5 and mod 0: a disp32 follows.
            (0, 4) if at(len - 2) & 7 == 5 => 4,
            (1, _) => 1,
            (2, _) => 4,
            _ => 0,
        };
        2 + usize::from(sib) + disp == len
    })
}
