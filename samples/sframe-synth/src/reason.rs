// SPDX-License-Identifier: GPL-2.0

//! Why a CFI row, or a whole FDE, produced no SFrame row, and the counts
//! of each reason.
//!
//! Nothing the generator refuses is fatal: the PCs of a refused row get no
//! SFrame row, and the kernel unwinds them with frame pointers as it does
//! for an object without SFrame.

use core::fmt;

/// The reason a CFI row (or an FDE, or a whole part of `.eh_frame`) was
/// left out of the generated section.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reason {
    /// `DW_CFA_def_cfa_expression` that is neither a PLT stub pattern nor
    /// (V3) a DRAP pattern.
    CfaExpression,
    /// The CFA is based on a register other than `rsp`/`rbp` (V2; V3 uses a
    /// FLEX FDE).
    CfaRegister,
    /// The CFA offset does not fit the 32-bit SFrame offset.
    CfaOffset,
    /// The return address is not saved at CFA-8 (the fixed RA offset of
    /// the AMD64 SFrame header), nor undefined (outermost frame); on
    /// AArch64: neither in `x30`, nor saved at a 32-bit offset from the
    /// CFA, nor undefined (moved to another register, say).
    RaRule,
    /// The CIE's return-address column is not `rip` (16) or, on AArch64,
    /// `x30` (30).
    RaColumn,
    /// `rbp` is recovered by a rule SFrame cannot express: from another
    /// register, as a value, or by an expression other than a DRAP save.
    FpRule,
    /// The FP save offset does not fit the 32-bit SFrame offset.
    FpOffset,
    /// The CIE has the `S` augmentation (signal trampoline): the kernel
    /// unwinder recognises `rt_sigreturn` trampolines itself.
    SignalFrame,
    /// A PLT stub expression over a range that does not start at a
    /// multiple of its repetition size.
    PltUnaligned,
    /// The CIE or FDE could not be parsed.
    BadEntry,
    /// The FDE's CFI program failed to evaluate (bad opcode, register or
    /// state stack overflow, address going backwards or overflowing).
    BadProgram,
    /// The FDE overlaps an FDE that starts at a lower address.
    Overlap,
    /// The function cannot be placed: its end overflows, it is larger than
    /// 4 GiB, or (V2) it lies more than 2 GiB from the section's base.
    AddressRange,
    /// The work budget for the object ran out (hostile or huge input).
    WorkLimit,
    /// The FDE is not inside the object's executable range (a stale FDE
    /// of a discarded section, or a corrupt address).
    OutsideText,
    /// AArch64, SFrame V2: `x29` saved while the return address is still
    /// in `x30` (a DEFAULT FRE gives the FP offset only after an RA
    /// offset; V3 uses a FLEX FDE).
    FpWithoutRa,
    /// AArch64: the FDE uses `DW_CFA_AARCH64_negate_ra_state_with_pc`
    /// (PAuth_LR signing), which gimli cannot evaluate and SFrame V2 cannot
    /// express; the whole FDE is left out, as GNU as 2.44 does.
    PauthLr,
}

impl Reason {
    /// Every reason, in report order.
    pub const ALL: [Reason; 17] = [
        Reason::CfaExpression,
        Reason::CfaRegister,
        Reason::CfaOffset,
        Reason::RaRule,
        Reason::RaColumn,
        Reason::FpRule,
        Reason::FpOffset,
        Reason::SignalFrame,
        Reason::PltUnaligned,
        Reason::BadEntry,
        Reason::BadProgram,
        Reason::Overlap,
        Reason::AddressRange,
        Reason::WorkLimit,
        Reason::OutsideText,
        Reason::FpWithoutRa,
        Reason::PauthLr,
    ];

    /// A short stable name (for reports and JSON).
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::CfaExpression => "cfa-expression",
            Reason::CfaRegister => "cfa-register",
            Reason::CfaOffset => "cfa-offset",
            Reason::RaRule => "ra-rule",
            Reason::RaColumn => "ra-column",
            Reason::FpRule => "fp-rule",
            Reason::FpOffset => "fp-offset",
            Reason::SignalFrame => "signal-frame",
            Reason::PltUnaligned => "plt-unaligned",
            Reason::BadEntry => "bad-entry",
            Reason::BadProgram => "bad-program",
            Reason::Overlap => "overlap",
            Reason::AddressRange => "address-range",
            Reason::WorkLimit => "work-limit",
            Reason::OutsideText => "outside-text",
            Reason::FpWithoutRa => "fp-without-ra",
            Reason::PauthLr => "pauth-lr",
        }
    }

    fn index(self) -> usize {
        match self {
            Reason::CfaExpression => 0,
            Reason::CfaRegister => 1,
            Reason::CfaOffset => 2,
            Reason::RaRule => 3,
            Reason::RaColumn => 4,
            Reason::FpRule => 5,
            Reason::FpOffset => 6,
            Reason::SignalFrame => 7,
            Reason::PltUnaligned => 8,
            Reason::BadEntry => 9,
            Reason::BadProgram => 10,
            Reason::Overlap => 11,
            Reason::AddressRange => 12,
            Reason::WorkLimit => 13,
            Reason::OutsideText => 14,
            Reason::FpWithoutRa => 15,
            Reason::PauthLr => 16,
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What was refused for one reason.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Refused {
    /// CFI FDEs dropped entirely (unparsable, overlapping, out of range).
    pub fdes: u64,
    /// CFI rows left out (of FDEs that were evaluated).
    pub rows: u64,
    /// Bytes of text those rows and FDEs covered (saturating).
    pub bytes: u64,
}

/// Counts of one generation run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// CFI FDEs found (table entries or FDEs in `.eh_frame`), duplicates
    /// removed.
    pub cfi_fdes: u64,
    /// CFI FDEs covering no byte (skipped, not refused).
    pub empty_fdes: u64,
    /// CFI FDEs with at least one row in the output.
    pub fdes_used: u64,
    /// CFI rows evaluated (after clamping to the FDE's range; zero-length
    /// rows are not counted).
    pub rows: u64,
    /// CFI rows that became SFrame rows.
    pub rows_emitted: u64,
    /// SFrame FDEs written (a CFI FDE splits around refused rows and into a
    /// PCMASK FDE for a PLT stub range).
    pub sframe_fdes: u64,
    /// SFrame FREs written.
    pub sframe_fres: u64,
    /// Text bytes the output covers.
    pub bytes_covered: u64,
    /// Work units spent (CFI bytes read plus rows), for the budget.
    pub work: u64,
    refused: [Refused; Reason::ALL.len()],
    ranges: Vec<(u64, u64, Reason)>,
}

/// At most this many refused ranges are remembered (the counts go on).
pub const MAX_REFUSED_RANGES: usize = 4096;

impl Stats {
    /// What was refused for `reason`.
    pub fn refused(&self, reason: Reason) -> Refused {
        self.refused
            .get(reason.index())
            .copied()
            .unwrap_or_default()
    }

    /// Every reason with something refused, in report order.
    pub fn refusals(&self) -> impl Iterator<Item = (Reason, Refused)> + '_ {
        Reason::ALL
            .iter()
            .map(move |&r| (r, self.refused(r)))
            .filter(|(_, c)| *c != Refused::default())
    }

    /// Rows refused for any reason.
    pub fn rows_refused(&self) -> u64 {
        self.refused
            .iter()
            .fold(0u64, |a, c| a.saturating_add(c.rows))
    }

    /// Text bytes refused for any reason.
    pub fn bytes_refused(&self) -> u64 {
        self.refused
            .iter()
            .fold(0u64, |a, c| a.saturating_add(c.bytes))
    }

    /// The address ranges refused, `[start, end)` and why, in the order
    /// they were refused (the first [`MAX_REFUSED_RANGES`]; ranges of
    /// FDEs that could not be located are not known).
    pub fn refused_ranges(&self) -> &[(u64, u64, Reason)] {
        &self.ranges
    }

    /// Why `pc` has no row, if it was refused (linear: for reports and
    /// tests).
    pub fn refusal_at(&self, pc: u64) -> Option<Reason> {
        self.ranges
            .iter()
            .find(|(start, end, _)| (*start..*end).contains(&pc))
            .map(|r| r.2)
    }

    pub(crate) fn refuse_row(&mut self, reason: Reason, start: u64, end: u64) {
        if let Some(c) = self.refused.get_mut(reason.index()) {
            c.rows = c.rows.saturating_add(1);
            c.bytes = c.bytes.saturating_add(end.saturating_sub(start));
        }
        self.log(reason, start, end);
    }

    pub(crate) fn refuse_fde(&mut self, reason: Reason, start: u64, end: u64) {
        if let Some(c) = self.refused.get_mut(reason.index()) {
            c.fdes = c.fdes.saturating_add(1);
            c.bytes = c.bytes.saturating_add(end.saturating_sub(start));
        }
        self.log(reason, start, end);
    }

    fn log(&mut self, reason: Reason, start: u64, end: u64) {
        if start < end && self.ranges.len() < MAX_REFUSED_RANGES {
            self.ranges.push((start, end, reason));
        }
    }
}
