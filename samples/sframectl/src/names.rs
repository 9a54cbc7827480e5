// SPDX-License-Identifier: GPL-2.0

//! Names used for decoder values in both the text and the JSON output.

use sframe::Abi;
use sframe::CfaRule;
use sframe::PcType;
use sframe::Reg;
use sframe::RegRule;
use sframe::Version;
use std::fmt;

/// Header flag bits and their names in the SFrame specification.
const FLAG_NAMES: [(u8, &str); 3] = [
    (0x1, "SFRAME_F_FDE_SORTED"),
    (0x2, "SFRAME_F_FRAME_POINTER"),
    (0x4, "SFRAME_F_FDE_FUNC_START_PCREL"),
];

pub(crate) fn version_number(version: Version) -> u8 {
    match version {
        Version::V2 => 2,
        Version::V3 => 3,
    }
}

pub(crate) fn abi_name(abi: Abi) -> &'static str {
    match abi {
        Abi::Aarch64Be => "aarch64-be",
        Abi::Aarch64Le => "aarch64-le",
        Abi::Amd64Le => "amd64-le",
        Abi::S390xBe => "s390x-be",
    }
}

/// The names of the bits set in `flags`; unknown bits as hexadecimal.
pub(crate) fn flag_names(flags: u8) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = flags;
    for (bit, name) in FLAG_NAMES {
        if flags & bit != 0 {
            names.push(name.to_string());
            rest &= !bit;
        }
    }
    for bit in 0..8 {
        if rest & (1 << bit) != 0 {
            names.push(format!("{:#x}", 1u8 << bit));
        }
    }
    names
}

pub(crate) fn pc_type_name(pc_type: PcType) -> &'static str {
    match pc_type {
        PcType::Inc => "inc",
        PcType::Mask => "mask",
    }
}

/// A register as `sp`, `fp` or `r<DWARF number>`.
pub(crate) struct RegName(pub(crate) Reg);

impl fmt::Display for RegName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Reg::Sp => f.write_str("sp"),
            Reg::Fp => f.write_str("fp"),
            Reg::Dwarf(n) => write!(f, "r{n}"),
        }
    }
}

/// A CFA rule as `sp+16`, or `*(r6+8)` when the CFA is loaded from memory.
pub(crate) struct CfaText(pub(crate) CfaRule);

impl fmt::Display for CfaText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let CfaRule {
            base,
            offset,
            deref,
        } = self.0;
        if deref {
            write!(f, "*({}{offset:+})", RegName(base))
        } else {
            write!(f, "{}{offset:+}", RegName(base))
        }
    }
}

/// A register rule: `u` unchanged, `c-16` saved at CFA-16 (as readelf
/// prints them), `U` undefined, `=r6` in a register, `*(r6+8)` saved at a
/// register plus offset, `=r6+8` the value register plus offset
/// itself.
pub(crate) struct RuleText(pub(crate) RegRule);

impl fmt::Display for RuleText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            RegRule::Unchanged => f.write_str("u"),
            RegRule::AtCfa(offset) => write!(f, "c{offset:+}"),
            RegRule::Undefined => f.write_str("U"),
            RegRule::InReg(reg) => write!(f, "={}", RegName(reg)),
            RegRule::AtReg { reg, offset } => write!(f, "*({}{offset:+})", RegName(reg)),
            RegRule::ValReg { reg, offset } => write!(f, "={}{offset:+}", RegName(reg)),
        }
    }
}

/// The CFA offset a rule saves a register at, if it is that kind of rule.
pub(crate) fn cfa_slot(rule: RegRule) -> Option<i32> {
    match rule {
        RegRule::AtCfa(offset) => Some(offset),
        _ => None,
    }
}
