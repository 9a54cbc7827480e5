// SPDX-License-Identifier: GPL-2.0

//! The conversion for AArch64: one CFI row to one SFrame row (ABI 2,
//! `SFRAME_ABI_AARCH64_ENDIAN_LITTLE`), or the reason it has none.
//!
//! The header has no fixed RA or FP offset: every FRE gives the CFA
//! offset, then, once the frame record is saved, the RA offset and the FP
//! offset from the CFA. An FRE with the CFA offset only says the return
//! address is still in the link register `x30` and `x29` is unchanged,
//! which is right at the top of the stack only (as in the CFI). FRE info
//! bit 7 marks a return address signed with pointer authentication: CFI
//! toggles it with `DW_CFA_AARCH64_negate_ra_state`.
//!
//! GNU as (`gas/gen-sframe.c`) is the reference. It skips a function whose
//! return address moves to another register (`.cfi_register 30, N`),
//! whose CFA is based on another register, or which saves `x29` without
//! `x30` (a DEFAULT FRE cannot give an FP offset without an RA offset); so
//! does the generator for V2, row by row. In V3 the last two become FLEX
//! FDEs, as on x86-64.

use crate::arch::AARCH64_FP;
use crate::arch::AARCH64_SP;
use crate::expr;
use crate::row::map_fp;
use crate::row::Cfa;
use crate::row::CfiCfa;
use crate::row::CfiRow;
use crate::row::CfiRule;
use crate::row::FpRule;
use crate::row::Mapped;
use crate::row::RaRule;
use crate::row::Row;
use crate::Arch;
use crate::Reason;

/// Converts one AArch64 CFI row to SFrame, or says why not.
///
/// `cfi.ra` is `x30`'s rule: [`CfiRule::SameValue`] while the return
/// address is still in `x30` (no rule), [`CfiRule::Undefined`] only for
/// an explicit `DW_CFA_undefined` (the outermost frame). `flex`: V3 FLEX
/// FDEs may be used.
pub fn map_row(cfi: &CfiRow<'_>, flex: bool) -> Result<Mapped, Reason> {
    if cfi.signal_frame {
        return Err(Reason::SignalFrame);
    }
    let ra = match cfi.ra {
        CfiRule::SameValue => RaRule::Default,
        CfiRule::Offset(k) => RaRule::AtCfa(i32::try_from(k).map_err(|_| Reason::RaRule)?),
        // `.cfi_undefined x30` marks the outermost frame (`_start`).
        CfiRule::Undefined => return Ok(Mapped::Row(Row::OUTERMOST_AARCH64)),
        // Moved to another register, or a value or expression rule.
        _ => return Err(Reason::RaRule),
    };
    let fp = map_fp(cfi.fp, flex)?;
    if !flex && ra == RaRule::Default && fp != FpRule::Unchanged {
        return Err(Reason::FpWithoutRa);
    }
    let cfa = match cfi.cfa {
        CfiCfa::RegOffset { reg, offset } => {
            let offset = i32::try_from(offset).map_err(|_| Reason::CfaOffset)?;
            if !flex && reg != AARCH64_SP && reg != AARCH64_FP {
                return Err(Reason::CfaRegister);
            }
            Cfa {
                reg,
                offset,
                deref: false,
            }
        }
        // No PLT pattern: ld writes no CFI for AArch64 PLT stubs.
        CfiCfa::Expression(bytes) => match expr::breg_deref(bytes) {
            Some((reg, offset)) if flex => Cfa {
                reg,
                offset,
                deref: true,
            },
            _ => return Err(Reason::CfaExpression),
        },
    };
    Ok(Mapped::Row(Row {
        cfa,
        ra,
        fp,
        outermost: false,
        mangled_ra: cfi.ra_signed,
    }))
}

impl Row {
    /// The AArch64 outermost row (no data words).
    pub const OUTERMOST_AARCH64: Row = Row {
        cfa: Cfa {
            reg: AARCH64_SP,
            offset: 0,
            deref: false,
        },
        ..Row::OUTERMOST
    };

    /// An AArch64 row with the frame record saved: CFA `sp + cfa`, RA at
    /// `CFA + ra`, FP at `CFA + fp`.
    pub fn aarch64_frame(cfa: i32, ra: i32, fp: i32) -> Row {
        Row {
            ra: RaRule::AtCfa(ra),
            fp: FpRule::AtCfa(fp),
            ..Row::sp_of(Arch::Aarch64, cfa)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::AARCH64_LR;

    fn row<'a>(cfa: CfiCfa<'a>, ra: CfiRule<'a>, fp: CfiRule<'a>) -> CfiRow<'a> {
        CfiRow {
            cfa,
            ra,
            fp,
            signal_frame: false,
            ra_signed: false,
        }
    }

    const fn sp(offset: i64) -> CfiCfa<'static> {
        CfiCfa::RegOffset {
            reg: AARCH64_SP,
            offset,
        }
    }

    #[test]
    fn prologue_rows() {
        // Entry: CFA = sp, RA in x30.
        let entry = row(sp(0), CfiRule::SameValue, CfiRule::Undefined);
        let want = Row::sp_of(Arch::Aarch64, 0);
        assert_eq!(map_row(&entry, false), Ok(Mapped::Row(want)));
        assert!(!want.needs_flex(Arch::Aarch64));
        // After paciasp: the same, signed.
        let signed = CfiRow {
            ra_signed: true,
            ..entry
        };
        let Ok(Mapped::Row(r)) = map_row(&signed, false) else {
            panic!("signed entry row refused");
        };
        assert!(r.mangled_ra);
        assert_eq!(r.ra, RaRule::Default);
        // stp x29, x30, [sp, -32]!: RA at CFA-24, FP at CFA-32.
        let saved = row(sp(32), CfiRule::Offset(-24), CfiRule::Offset(-32));
        let want = Row::aarch64_frame(32, -24, -32);
        assert_eq!(map_row(&saved, false), Ok(Mapped::Row(want)));
        assert!(!want.needs_flex(Arch::Aarch64));
        // mov x29, sp: CFA = x29 + 32.
        let fp = row(
            CfiCfa::RegOffset {
                reg: AARCH64_FP,
                offset: 32,
            },
            CfiRule::Offset(-24),
            CfiRule::Offset(-32),
        );
        let Ok(Mapped::Row(r)) = map_row(&fp, false) else {
            panic!("FP-based row refused");
        };
        assert_eq!(r.cfa.reg, AARCH64_FP);
        // RA saved, x29 not (-fomit-frame-pointer: str x30, [sp, -16]!).
        let ra_only = row(sp(16), CfiRule::Offset(-16), CfiRule::SameValue);
        let Ok(Mapped::Row(r)) = map_row(&ra_only, false) else {
            panic!("RA-only row refused");
        };
        assert_eq!((r.ra, r.fp), (RaRule::AtCfa(-16), FpRule::Unchanged));
    }

    #[test]
    fn outermost() {
        let r = row(sp(0), CfiRule::Undefined, CfiRule::Undefined);
        assert_eq!(map_row(&r, false), Ok(Mapped::Row(Row::OUTERMOST_AARCH64)));
    }

    #[test]
    fn refusals() {
        let ra_in_x9 = row(sp(0), CfiRule::Register(9), CfiRule::Undefined);
        assert_eq!(map_row(&ra_in_x9, true), Err(Reason::RaRule));
        let ra_val = row(sp(0), CfiRule::ValOffset(8), CfiRule::Undefined);
        assert_eq!(map_row(&ra_val, true), Err(Reason::RaRule));
        let ra_far = row(sp(0), CfiRule::Offset(1 << 40), CfiRule::Undefined);
        assert_eq!(map_row(&ra_far, true), Err(Reason::RaRule));
        let fp_only = row(sp(16), CfiRule::SameValue, CfiRule::Offset(-16));
        assert_eq!(map_row(&fp_only, false), Err(Reason::FpWithoutRa));
        // V3: a FLEX FDE says it (RA padding, FP at CFA-16).
        let Ok(Mapped::Row(r)) = map_row(&fp_only, true) else {
            panic!("FLEX FP-only row refused");
        };
        assert!(r.needs_flex(Arch::Aarch64));
        let x16 = row(
            CfiCfa::RegOffset { reg: 16, offset: 0 },
            CfiRule::SameValue,
            CfiRule::Undefined,
        );
        assert_eq!(map_row(&x16, false), Err(Reason::CfaRegister));
        assert!(map_row(&x16, true).is_ok());
        // x86-64's PLT expression means nothing here.
        let plt = [0x77, 8, 0x80, 0, 0x3f, 0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22];
        let e = row(
            CfiCfa::Expression(&plt),
            CfiRule::SameValue,
            CfiRule::Undefined,
        );
        assert_eq!(map_row(&e, true), Err(Reason::CfaExpression));
        let mut s = row(sp(0), CfiRule::SameValue, CfiRule::Undefined);
        s.signal_frame = true;
        assert_eq!(map_row(&s, true), Err(Reason::SignalFrame));
        let huge = row(sp(1 << 40), CfiRule::SameValue, CfiRule::Undefined);
        assert_eq!(map_row(&huge, true), Err(Reason::CfaOffset));
        assert_eq!(AARCH64_LR, Arch::Aarch64.ra_column());
    }
}
