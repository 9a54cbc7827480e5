// SPDX-License-Identifier: GPL-2.0

//! The architectures the generator converts CFI for, and the few facts it
//! needs of each: DWARF register numbers, the SFrame ABI and header.

/// DWARF register number of `rbp` on x86-64.
pub(crate) const X86_64_FP: u16 = 6;
/// DWARF register number of `rsp` on x86-64.
pub(crate) const X86_64_SP: u16 = 7;
/// DWARF return address column (`rip`) on x86-64.
pub(crate) const X86_64_RA: u16 = 16;
/// DWARF register number of the frame pointer `x29` on AArch64.
pub(crate) const AARCH64_FP: u16 = 29;
/// DWARF register number of the link register `x30` on AArch64, also its
/// return address column.
pub(crate) const AARCH64_LR: u16 = 30;
/// DWARF register number of `sp` on AArch64.
pub(crate) const AARCH64_SP: u16 = 31;

/// The architecture (and ABI) of the CFI to convert: little endian, 64-bit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Arch {
    /// x86-64 (`EM_X86_64`): SFrame ABI 3, `SFRAME_ABI_AMD64_ENDIAN_LITTLE`.
    #[default]
    X86_64,
    /// AArch64 (`EM_AARCH64`, little endian): SFrame ABI 2,
    /// `SFRAME_ABI_AARCH64_ENDIAN_LITTLE`.
    Aarch64,
}

impl Arch {
    /// The architecture this code runs on, that of the objects a loader
    /// maps next to it (the audit library's, the daemon's targets).
    #[cfg(target_arch = "aarch64")]
    pub const HOST: Arch = Arch::Aarch64;
    /// The architecture this code runs on, that of the objects a loader
    /// maps next to it (the audit library's, the daemon's targets).
    #[cfg(not(target_arch = "aarch64"))]
    pub const HOST: Arch = Arch::X86_64;

    /// DWARF number of the stack pointer.
    pub fn sp(self) -> u16 {
        match self {
            Arch::X86_64 => X86_64_SP,
            Arch::Aarch64 => AARCH64_SP,
        }
    }

    /// DWARF number of the frame pointer.
    pub fn fp(self) -> u16 {
        match self {
            Arch::X86_64 => X86_64_FP,
            Arch::Aarch64 => AARCH64_FP,
        }
    }

    /// The return address column a CIE must name.
    pub fn ra_column(self) -> u16 {
        match self {
            Arch::X86_64 => X86_64_RA,
            Arch::Aarch64 => AARCH64_LR,
        }
    }

    /// The SFrame header's ABI/arch identifier.
    pub(crate) fn sframe_abi(self) -> u8 {
        match self {
            Arch::X86_64 => 3,
            Arch::Aarch64 => 2,
        }
    }

    /// The SFrame header's fixed RA offset: on x86-64 the return address
    /// is always at CFA-8; on AArch64 every FRE says where it is (0: not
    /// fixed).
    pub(crate) fn fixed_ra_offset(self) -> i8 {
        match self {
            Arch::X86_64 => -8,
            Arch::Aarch64 => 0,
        }
    }

    /// The CFI vendor extensions gimli must parse: AArch64 reuses opcode
    /// 0x2d (`DW_CFA_GNU_window_save` elsewhere) for
    /// `DW_CFA_AARCH64_negate_ra_state`.
    pub(crate) fn vendor(self) -> gimli::Vendor {
        match self {
            Arch::X86_64 => gimli::Vendor::Default,
            Arch::Aarch64 => gimli::Vendor::AArch64,
        }
    }
}
