// SPDX-License-Identifier: GPL-2.0

//! The conversion itself: one CFI row (the rules DWARF call frame
//! information gives for a PC range) to one SFrame row, or the reason it
//! has none.
//!
//! A pure function of the row, without gimli: [`map_row`] for x86-64
//! (this file), [`crate::aarch64::map_row`] for AArch64. SFrame describes
//! three things per PC: the CFA (a register plus an offset), where the
//! return address is (always CFA-8 on AMD64: the header's fixed RA
//! offset; per row on AArch64) and where the caller's frame pointer is.
//! Every other register's rule is irrelevant to a stack walk that only
//! needs PC, SP and FP.

use crate::arch;
use crate::expr;
use crate::Arch;
use crate::Reason;

/// DWARF register number of `rbp` on x86-64.
pub const REG_RBP: u16 = arch::X86_64_FP;
/// DWARF register number of `rsp` on x86-64.
pub const REG_RSP: u16 = arch::X86_64_SP;
/// DWARF register number of the return address column (`rip`) on x86-64.
pub const REG_RA: u16 = arch::X86_64_RA;

/// How to compute the CFA at one PC, as DWARF states it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CfiCfa<'a> {
    /// `register + offset` (`DW_CFA_def_cfa` and friends).
    RegOffset {
        /// DWARF register number.
        reg: u16,
        /// Signed offset.
        offset: i64,
    },
    /// A DWARF expression (`DW_CFA_def_cfa_expression`), its bytes.
    Expression(&'a [u8]),
}

/// How to recover one register, as DWARF states it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CfiRule<'a> {
    /// No rule, or `DW_CFA_undefined` (gimli does not tell them apart;
    /// for the AArch64 return address the reader does, and gives "no rule"
    /// as [`CfiRule::SameValue`]: the return address is still in `x30`).
    Undefined,
    /// `DW_CFA_same_value`.
    SameValue,
    /// Saved at `CFA + n`.
    Offset(i64),
    /// The value is `CFA + n`.
    ValOffset(i64),
    /// The value is in another register.
    Register(u16),
    /// Saved at the address an expression computes (its bytes).
    Expression(&'a [u8]),
    /// The value is what an expression computes.
    ValExpression(&'a [u8]),
    /// Any other rule (architectural, constant).
    Other,
}

/// The rules of one CFI row that matter to SFrame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CfiRow<'a> {
    /// The CFA rule.
    pub cfa: CfiCfa<'a>,
    /// The return address column's rule.
    pub ra: CfiRule<'a>,
    /// The frame pointer's rule (`rbp`, `x29`).
    pub fp: CfiRule<'a>,
    /// The CIE is a signal trampoline's (`S` augmentation).
    pub signal_frame: bool,
    /// AArch64: the return address is signed (`RA_SIGN_STATE` is 1, after
    /// an odd number of `DW_CFA_AARCH64_negate_ra_state`); always false on
    /// x86-64.
    pub ra_signed: bool,
}

/// The CFA of an SFrame row: `*(reg + offset)` if `deref`, else
/// `reg + offset`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cfa {
    /// DWARF register number (in DEFAULT FDEs the stack or frame pointer:
    /// 7 `rsp` or 6 `rbp`, 31 `sp` or 29 `x29`).
    pub reg: u16,
    /// Signed offset.
    pub offset: i32,
    /// The CFA is loaded from the address (FLEX FDEs only).
    pub deref: bool,
}

/// Where the return address is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RaRule {
    /// The ABI's default, which the FRE does not spell out: at CFA-8 on
    /// x86-64 (the header's fixed offset), still in the link register
    /// `x30` on AArch64.
    Default,
    /// Saved at `CFA + offset` (AArch64).
    AtCfa(i32),
}

/// Where the caller's frame pointer (`rbp`, `x29`) is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FpRule {
    /// Not saved: `rbp` still holds the caller's value.
    Unchanged,
    /// Saved at `CFA + offset`.
    AtCfa(i32),
    /// Saved at `reg + offset` (FLEX FDEs only).
    AtReg {
        /// DWARF register number.
        reg: u16,
        /// Signed offset.
        offset: i32,
    },
}

/// One SFrame row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Row {
    /// The CFA rule (ignored when `outermost`).
    pub cfa: Cfa,
    /// The return address rule (ignored when `outermost`): always
    /// [`RaRule::Default`] on x86-64.
    pub ra: RaRule,
    /// The frame pointer rule (ignored when `outermost`).
    pub fp: FpRule,
    /// The return address is undefined: nothing to unwind to.
    pub outermost: bool,
    /// AArch64: the return address is signed (FRE info bit 7); false on
    /// x86-64 and in outermost rows.
    pub mangled_ra: bool,
}

impl Row {
    /// The outermost row (no data words).
    pub const OUTERMOST: Row = Row {
        cfa: Cfa {
            reg: REG_RSP,
            offset: 0,
            deref: false,
        },
        ra: RaRule::Default,
        fp: FpRule::Unchanged,
        outermost: true,
        mangled_ra: false,
    };

    /// `rsp + offset`, `rbp` unchanged.
    pub fn sp(offset: i32) -> Row {
        Row::sp_of(Arch::X86_64, offset)
    }

    /// `sp + offset` on `arch`: the return address where the ABI has it
    /// (x86-64: CFA-8; AArch64: in `x30`), the frame pointer unchanged.
    pub fn sp_of(arch: Arch, offset: i32) -> Row {
        Row {
            cfa: Cfa {
                reg: arch.sp(),
                offset,
                deref: false,
            },
            ra: RaRule::Default,
            fp: FpRule::Unchanged,
            outermost: false,
            mangled_ra: false,
        }
    }

    /// Whether the row needs a V3 FLEX FDE (a DEFAULT FDE cannot say it):
    /// a CFA not `sp`/`fp + offset`, a frame pointer saved relative to a
    /// register, or (AArch64) one saved while the return address is still
    /// in `x30` (DEFAULT FREs give the FP offset only after an RA offset).
    pub fn needs_flex(&self, arch: Arch) -> bool {
        if self.outermost {
            return false;
        }
        let cfa_reg = self.cfa.reg;
        let cfa_default = !self.cfa.deref && (cfa_reg == arch.sp() || cfa_reg == arch.fp());
        let fp_default = match self.fp {
            FpRule::Unchanged => true,
            FpRule::AtCfa(_) => arch == Arch::X86_64 || self.ra != RaRule::Default,
            FpRule::AtReg { .. } => false,
        };
        !(cfa_default && fp_default)
    }
}

/// What one CFI row becomes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mapped {
    /// One row for the whole range.
    Row(Row),
    /// A PLT stub pattern: the row depends on `pc % rep_size` (a PCMASK
    /// FDE): `low` below `high_from`, `high` from there.
    Mask {
        /// Size of one stub (a power of two).
        rep_size: u8,
        /// The row at offsets `0..high_from` of each stub.
        low: Row,
        /// First offset in each stub where `high` applies.
        high_from: u8,
        /// The row at offsets `high_from..rep_size` of each stub.
        high: Row,
    },
}

/// Converts one CFI row to SFrame, or says why not.
///
/// `flex`: FLEX FDEs may be used (SFrame V3), which describe a CFA based on
/// any register or loaded from memory and `rbp` saved relative to a
/// register (DRAP stack realignment).
pub fn map_row(cfi: &CfiRow<'_>, flex: bool) -> Result<Mapped, Reason> {
    if cfi.signal_frame {
        return Err(Reason::SignalFrame);
    }
    match cfi.ra {
        CfiRule::Offset(-8) => {}
        // `DW_CFA_undefined rip` marks the outermost frame (`_start`).
        CfiRule::Undefined => return Ok(Mapped::Row(Row::OUTERMOST)),
        _ => return Err(Reason::RaRule),
    }
    let fp = map_fp(cfi.fp, flex)?;
    match cfi.cfa {
        CfiCfa::RegOffset { reg, offset } => {
            let offset = i32::try_from(offset).map_err(|_| Reason::CfaOffset)?;
            if !flex && !matches!(reg, REG_RSP | REG_RBP) {
                return Err(Reason::CfaRegister);
            }
            Ok(Mapped::Row(Row {
                fp,
                cfa: Cfa {
                    reg,
                    offset,
                    deref: false,
                },
                ..Row::sp(0)
            }))
        }
        CfiCfa::Expression(bytes) => {
            if let Some(plt) = expr::plt_cfa(bytes) {
                let low = Row {
                    fp,
                    ..Row::sp(plt.offset)
                };
                let high = Row {
                    fp,
                    ..Row::sp(plt.high_offset)
                };
                return Ok(Mapped::Mask {
                    rep_size: plt.rep_size,
                    low,
                    high_from: plt.high_from,
                    high,
                });
            }
            match expr::breg_deref(bytes) {
                Some((reg, offset)) if flex => Ok(Mapped::Row(Row {
                    fp,
                    cfa: Cfa {
                        reg,
                        offset,
                        deref: true,
                    },
                    ..Row::sp(0)
                })),
                _ => Err(Reason::CfaExpression),
            }
        }
    }
}

/// The frame pointer rule (any architecture: the registers are DWARF's).
pub(crate) fn map_fp(rule: CfiRule<'_>, flex: bool) -> Result<FpRule, Reason> {
    match rule {
        CfiRule::Undefined | CfiRule::SameValue => Ok(FpRule::Unchanged),
        CfiRule::Offset(k) => i32::try_from(k)
            .map(FpRule::AtCfa)
            .map_err(|_| Reason::FpOffset),
        // DRAP: `rbp` saved at `rbp + 0` after `push %rbp; mov %rsp, %rbp`.
        CfiRule::Expression(bytes) if flex => match expr::breg(bytes) {
            Some((reg, offset)) => Ok(FpRule::AtReg { reg, offset }),
            None => Err(Reason::FpRule),
        },
        _ => Err(Reason::FpRule),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row<'a>(cfa: CfiCfa<'a>, fp: CfiRule<'a>) -> CfiRow<'a> {
        CfiRow {
            cfa,
            ra: CfiRule::Offset(-8),
            fp,
            signal_frame: false,
            ra_signed: false,
        }
    }

    const SP8: CfiCfa<'static> = CfiCfa::RegOffset {
        reg: REG_RSP,
        offset: 8,
    };

    #[test]
    fn plain_rows() {
        assert_eq!(
            map_row(&row(SP8, CfiRule::Undefined), false),
            Ok(Mapped::Row(Row::sp(8)))
        );
        let fp = map_row(
            &row(
                CfiCfa::RegOffset {
                    reg: REG_RBP,
                    offset: 16,
                },
                CfiRule::Offset(-16),
            ),
            false,
        );
        assert_eq!(
            fp,
            Ok(Mapped::Row(Row {
                cfa: Cfa {
                    reg: REG_RBP,
                    offset: 16,
                    deref: false
                },
                fp: FpRule::AtCfa(-16),
                ..Row::sp(0)
            }))
        );
    }

    #[test]
    fn refusals() {
        let mut r = row(SP8, CfiRule::Undefined);
        r.ra = CfiRule::Offset(-16);
        assert_eq!(map_row(&r, true), Err(Reason::RaRule));
        r.ra = CfiRule::Register(0);
        assert_eq!(map_row(&r, true), Err(Reason::RaRule));
        let r10 = CfiCfa::RegOffset { reg: 10, offset: 0 };
        assert_eq!(
            map_row(&row(r10, CfiRule::Undefined), false),
            Err(Reason::CfaRegister)
        );
        assert!(map_row(&row(r10, CfiRule::Undefined), true).is_ok());
        let huge = CfiCfa::RegOffset {
            reg: REG_RSP,
            offset: 1 << 40,
        };
        assert_eq!(
            map_row(&row(huge, CfiRule::Undefined), true),
            Err(Reason::CfaOffset)
        );
        assert_eq!(
            map_row(&row(SP8, CfiRule::Register(3)), true),
            Err(Reason::FpRule)
        );
        assert_eq!(
            map_row(&row(SP8, CfiRule::Offset(1 << 33)), true),
            Err(Reason::FpOffset)
        );
        assert_eq!(
            map_row(&row(CfiCfa::Expression(&[0x96]), CfiRule::Undefined), true),
            Err(Reason::CfaExpression)
        );
        let mut s = row(SP8, CfiRule::Undefined);
        s.signal_frame = true;
        assert_eq!(map_row(&s, true), Err(Reason::SignalFrame));
    }

    #[test]
    fn outermost() {
        let mut r = row(CfiCfa::Expression(&[]), CfiRule::Register(1));
        r.ra = CfiRule::Undefined;
        assert_eq!(map_row(&r, false), Ok(Mapped::Row(Row::OUTERMOST)));
    }

    #[test]
    fn plt_expression() {
        // ld's lazy .plt: CFA = rsp + 8 + ((rip & 15) >= 11 ? 8 : 0).
        let e = [0x77, 8, 0x80, 0, 0x3f, 0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22];
        assert_eq!(
            map_row(&row(CfiCfa::Expression(&e), CfiRule::Undefined), false),
            Ok(Mapped::Mask {
                rep_size: 16,
                low: Row::sp(8),
                high_from: 11,
                high: Row::sp(16)
            })
        );
    }

    #[test]
    fn drap() {
        // CFA = *(rbp - 8); rbp saved at rbp + 0.
        let cfa = [0x76, 0x78, 0x06];
        let fp = [0x76, 0x00];
        let r = row(CfiCfa::Expression(&cfa), CfiRule::Expression(&fp));
        assert_eq!(map_row(&r, false), Err(Reason::FpRule));
        let want = Row {
            cfa: Cfa {
                reg: REG_RBP,
                offset: -8,
                deref: true,
            },
            fp: FpRule::AtReg {
                reg: REG_RBP,
                offset: 0,
            },
            ..Row::sp(0)
        };
        assert_eq!(map_row(&r, true), Ok(Mapped::Row(want)));
        assert!(want.needs_flex(Arch::X86_64));
        let r = row(CfiCfa::Expression(&cfa), CfiRule::Undefined);
        assert_eq!(map_row(&r, false), Err(Reason::CfaExpression));
    }
}
