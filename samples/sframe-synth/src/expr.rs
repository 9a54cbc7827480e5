// SPDX-License-Identifier: GPL-2.0

//! The few DWARF expressions SFrame can express, recognised byte by byte.
//!
//! Not an evaluator: each function matches one exact shape and returns its
//! parameters, or `None`. Shapes:
//!
//! - PLT stubs (ld writes this for `.plt`, and with other constants for the
//!   IBT and BND variants): `DW_OP_breg7 N; DW_OP_breg16 0; DW_OP_lit<M>;
//!   DW_OP_and; DW_OP_lit<K>; DW_OP_ge; DW_OP_lit<S>; DW_OP_shl;
//!   DW_OP_plus`, that is CFA = `rsp + N + ((rip & M) >= K) << S`.
//! - DRAP CFA (GCC's stack realignment): `DW_OP_breg<R> N; DW_OP_deref`,
//!   CFA = `*(R + N)`.
//! - DRAP `rbp` save: `DW_OP_breg<R> N`, saved at `R + N`.

const DW_OP_CONST1U: u8 = 0x08;
const DW_OP_DEREF: u8 = 0x06;
const DW_OP_AND: u8 = 0x1a;
const DW_OP_PLUS: u8 = 0x22;
const DW_OP_SHL: u8 = 0x24;
const DW_OP_GE: u8 = 0x2a;
const DW_OP_LIT0: u8 = 0x30;
const DW_OP_LIT31: u8 = 0x4f;
const DW_OP_BREG0: u8 = 0x70;
const DW_OP_BREG31: u8 = 0x8f;
const DW_OP_BREGX: u8 = 0x92;

/// A PLT stub CFA: `rsp + offset` at offsets `0..high_from` of every
/// `rep_size`-byte stub, `rsp + high_offset` from `high_from` on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PltCfa {
    pub(crate) rep_size: u8,
    pub(crate) high_from: u8,
    pub(crate) offset: i32,
    pub(crate) high_offset: i32,
}

/// Matches the PLT stub pattern.
pub(crate) fn plt_cfa(bytes: &[u8]) -> Option<PltCfa> {
    let mut r = Cursor(bytes);
    let (sp, offset) = r.breg()?;
    let (ip, zero) = r.breg()?;
    if sp != 7 || ip != 16 || zero != 0 {
        return None;
    }
    let mask = r.literal()?;
    r.op(DW_OP_AND)?;
    let high_from = r.literal()?;
    r.op(DW_OP_GE)?;
    let shift = r.literal()?;
    r.op(DW_OP_SHL)?;
    r.op(DW_OP_PLUS)?;
    if !r.0.is_empty() {
        return None;
    }
    // The stub size is `mask + 1`, a power of two that fits rep_size (u8).
    let rep_size = u8::try_from(mask.checked_add(1)?).ok()?;
    if !rep_size.is_power_of_two() || rep_size < 2 || high_from == 0 || high_from > mask {
        return None;
    }
    let high_from = u8::try_from(high_from).ok()?;
    let step = 1i64.checked_shl(u32::try_from(shift).ok().filter(|&s| s < 32)?)?;
    let high_offset = i32::try_from(offset.checked_add(step)?).ok()?;
    Some(PltCfa {
        rep_size,
        high_from,
        offset: i32::try_from(offset).ok()?,
        high_offset,
    })
}

/// Matches `DW_OP_breg<R> N; DW_OP_deref`: returns `(R, N)`.
pub(crate) fn breg_deref(bytes: &[u8]) -> Option<(u16, i32)> {
    let mut r = Cursor(bytes);
    let (reg, offset) = r.breg()?;
    r.op(DW_OP_DEREF)?;
    if !r.0.is_empty() {
        return None;
    }
    Some((reg, i32::try_from(offset).ok()?))
}

/// Matches `DW_OP_breg<R> N`: returns `(R, N)`.
pub(crate) fn breg(bytes: &[u8]) -> Option<(u16, i32)> {
    let mut r = Cursor(bytes);
    let (reg, offset) = r.breg()?;
    if !r.0.is_empty() {
        return None;
    }
    Some((reg, i32::try_from(offset).ok()?))
}

struct Cursor<'a>(&'a [u8]);

impl Cursor<'_> {
    fn byte(&mut self) -> Option<u8> {
        let (&b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(b)
    }

    fn op(&mut self, op: u8) -> Option<()> {
        (self.byte()? == op).then_some(())
    }

    fn uleb(&mut self) -> Option<u64> {
        let mut value = 0u64;
        // At most 10 bytes encode 64 bits; longer encodings are refused.
        for shift in (0..70).step_by(7) {
            let b = self.byte()?;
            let bits = u64::from(b & 0x7f);
            if shift == 63 && bits > 1 {
                return None;
            }
            value |= bits.checked_shl(shift)?;
            if b & 0x80 == 0 {
                return Some(value);
            }
        }
        None
    }

    fn sleb(&mut self) -> Option<i64> {
        let mut value = 0i64;
        for shift in (0u32..70).step_by(7) {
            let b = self.byte()?;
            if shift < 64 {
                value |= i64::from(b & 0x7f).wrapping_shl(shift);
            }
            if b & 0x80 == 0 {
                let end = shift.saturating_add(7);
                if end < 64 && b & 0x40 != 0 {
                    value |= (-1i64).wrapping_shl(end);
                }
                return Some(value);
            }
        }
        None
    }

    /// `DW_OP_breg0..31 sleb` or `DW_OP_bregx uleb sleb`.
    fn breg(&mut self) -> Option<(u16, i64)> {
        let op = self.byte()?;
        let reg = match op {
            DW_OP_BREG0..=DW_OP_BREG31 => u16::from(op - DW_OP_BREG0),
            DW_OP_BREGX => u16::try_from(self.uleb()?).ok()?,
            _ => return None,
        };
        Some((reg, self.sleb()?))
    }

    /// `DW_OP_lit0..31` or `DW_OP_const1u`.
    fn literal(&mut self) -> Option<u64> {
        let op = self.byte()?;
        match op {
            DW_OP_LIT0..=DW_OP_LIT31 => Some(u64::from(op - DW_OP_LIT0)),
            DW_OP_CONST1U => self.byte().map(u64::from),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plt_variants() {
        let lazy = [0x77, 8, 0x80, 0, 0x3f, 0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22];
        assert_eq!(
            plt_cfa(&lazy),
            Some(PltCfa {
                rep_size: 16,
                high_from: 11,
                offset: 8,
                high_offset: 16
            })
        );
        // IBT lazy PLT: lit10; const1u spelled masks too.
        let ibt = [
            0x77, 8, 0x80, 0, 0x08, 15, 0x1a, 0x3a, 0x2a, 0x33, 0x24, 0x22,
        ];
        assert_eq!(plt_cfa(&ibt).map(|p| p.high_from), Some(10));
        // Not a power-of-two stub, trailing bytes, wrong registers.
        let odd = [0x77, 8, 0x80, 0, 0x3e, 0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22];
        assert_eq!(plt_cfa(&odd), None);
        let mut tail = lazy.to_vec();
        tail.push(0x96);
        assert_eq!(plt_cfa(&tail), None);
        let fp = [0x76, 8, 0x80, 0, 0x3f, 0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22];
        assert_eq!(plt_cfa(&fp), None);
        assert_eq!(plt_cfa(&lazy[..5]), None);
        assert_eq!(plt_cfa(&[]), None);
    }

    #[test]
    fn drap_shapes() {
        assert_eq!(breg_deref(&[0x76, 0x78, 0x06]), Some((6, -8)));
        assert_eq!(breg_deref(&[0x92, 10, 0x10, 0x06]), Some((10, 16)));
        assert_eq!(breg_deref(&[0x76, 0x78]), None);
        assert_eq!(breg(&[0x76, 0x00]), Some((6, 0)));
        assert_eq!(breg(&[0x76, 0x00, 0x06]), None);
        // Overlong LEB128 and out-of-range offsets.
        let long = [
            0x76, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f,
        ];
        assert_eq!(breg(&long), None);
        assert_eq!(breg(&[0x76, 0x80, 0x80, 0x80, 0x80, 0x40]), None);
    }
}
