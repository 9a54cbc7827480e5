// SPDX-License-Identifier: GPL-2.0

//! Reading `.eh_frame` with gimli: which FDEs there are, and their rows.
//!
//! Everything here is bounded for hostile input: FDEs are found either in
//! the `.eh_frame_hdr` search table (each entry at least 2 bytes of it) or
//! by walking `.eh_frame` (each entry at least 4 bytes of it), duplicates
//! are removed before any is evaluated, and evaluation is charged against a
//! work budget (CIE and FDE bytes plus rows) that ends the run when spent.

use crate::aarch64;
use crate::arch::AARCH64_LR;
use crate::piece::Pieces;
use crate::row::map_row;
use crate::row::CfiCfa;
use crate::row::CfiRow;
use crate::row::CfiRule;
use crate::Arch;
use crate::Reason;
use crate::Stats;
use gimli::BaseAddresses;
use gimli::CallFrameInstruction;
use gimli::CieOrFde;
use gimli::CommonInformationEntry;
use gimli::EhFrame;
use gimli::EhFrameHdr;
use gimli::EhFrameOffset;
use gimli::EndianSlice;
use gimli::FrameDescriptionEntry;
use gimli::LittleEndian;
use gimli::Register;
use gimli::RegisterRule;
use gimli::UnwindContext;
use gimli::UnwindSection;
use gimli::UnwindTable;

type Reader<'a> = EndianSlice<'a, LittleEndian>;

/// The CFI sections of one object, at the addresses they are loaded at
/// (link-time or run-time addresses, as long as they agree).
#[derive(Clone, Copy, Debug)]
pub struct CfiSections<'a> {
    /// `.eh_frame`, possibly followed by unrelated bytes up to the end of
    /// its segment (reading stops at the zero terminator).
    pub eh_frame: &'a [u8],
    /// Address of the first byte of `eh_frame`.
    pub eh_frame_addr: u64,
    /// `.eh_frame_hdr` and its address, if the object has one: its search
    /// table lists the FDEs, sorted.
    pub eh_frame_hdr: Option<(&'a [u8], u64)>,
    /// Start of `.text`, for the rare `DW_EH_PE_textrel` pointers.
    pub text_addr: Option<u64>,
    /// The object's executable range `[start, end)`, if known: FDEs not
    /// inside it are refused ([`Reason::OutsideText`]).
    pub exec_range: Option<(u64, u64)>,
}

/// One CFI FDE found, located but not yet evaluated.
#[derive(Clone, Copy, Debug)]
struct FdeRef {
    start: u64,
    len: u64,
    offset: usize,
}

/// Walks every FDE of `cfi` (CFI of `arch`) in address order, converts its
/// rows, and collects the pieces. `flex`: V3 FLEX FDEs are available.
pub(crate) fn collect(
    cfi: &CfiSections<'_>,
    arch: Arch,
    flex: bool,
    max_work: u64,
    stats: &mut Stats,
) -> Pieces {
    let mut bases = BaseAddresses::default().set_eh_frame(cfi.eh_frame_addr);
    if let Some((_, hdr_addr)) = cfi.eh_frame_hdr {
        bases = bases.set_eh_frame_hdr(hdr_addr);
    }
    if let Some(text) = cfi.text_addr {
        bases = bases.set_text(text);
    }
    let mut eh_frame = EhFrame::new(cfi.eh_frame, LittleEndian);
    eh_frame.set_vendor(arch.vendor());
    let mut offsets = fde_offsets(cfi, &eh_frame, &bases, stats);
    dedup(&mut offsets, cfi.eh_frame.len());
    stats.cfi_fdes = offsets.len() as u64;

    // Locate every FDE, then visit them by address: the search table lists
    // them sorted already, so the sort is only for odd inputs.
    let mut cies = CieCache::default();
    let mut fdes = Vec::with_capacity(offsets.len());
    for offset in offsets {
        match eh_frame.fde_from_offset(&bases, offset.into(), |s, b, o| cies.get(s, b, o)) {
            Ok(fde) => fdes.push(FdeRef {
                start: fde.initial_address(),
                len: fde.len(),
                offset,
            }),
            Err(_) => stats.refuse_fde(Reason::BadEntry, 0, 0),
        }
    }
    if !fdes
        .windows(2)
        .all(|w| (w[0].start, w[0].len) <= (w[1].start, w[1].len))
    {
        fdes.sort_unstable_by_key(|f| (f.start, f.len));
    }

    let mut walker = Walker {
        eh_frame: &eh_frame,
        bases: &bases,
        ctx: Box::new(UnwindContext::new()),
        cies,
        arch,
        flex,
        max_work,
    };
    let mut pieces = Pieces::default();
    let mut covered_to = 0u64;
    let mut any = false;
    for fde_ref in fdes {
        if fde_ref.len == 0 {
            stats.empty_fdes = stats.empty_fdes.saturating_add(1);
            continue;
        }
        let Some(end) = fde_ref.start.checked_add(fde_ref.len) else {
            stats.refuse_fde(Reason::AddressRange, fde_ref.start, u64::MAX);
            continue;
        };
        if fde_ref.len > u64::from(u32::MAX) {
            stats.refuse_fde(Reason::AddressRange, fde_ref.start, end);
            continue;
        }
        if let Some((lo, hi)) = cfi.exec_range {
            if fde_ref.start < lo || end > hi {
                stats.refuse_fde(Reason::OutsideText, fde_ref.start, end);
                continue;
            }
        }
        if any && fde_ref.start < covered_to {
            stats.refuse_fde(Reason::Overlap, fde_ref.start, end);
            continue;
        }
        any = true;
        covered_to = end;
        if stats.work >= max_work {
            stats.refuse_fde(Reason::WorkLimit, fde_ref.start, end);
            continue;
        }
        let before = pieces.done.len();
        if let Err(reason) = walker.rows_of(fde_ref, end, &mut pieces, stats) {
            stats.refuse_fde(reason, fde_ref.start, end);
        }
        pieces.close();
        if pieces.done.len() > before {
            stats.fdes_used = stats.fdes_used.saturating_add(1);
        }
    }
    pieces
}

/// Removes repeated offsets from `offsets` (of a `.eh_frame` of `len`
/// bytes), keeping the first of each, in order: O(n) with a bitmap, where
/// sorting by offset would lose the search table's address order.
fn dedup(offsets: &mut Vec<usize>, len: usize) {
    let mut seen = vec![0u64; len.div_ceil(64)];
    offsets.retain(|&off| {
        let Some(word) = seen.get_mut(off / 64) else {
            return false;
        };
        let bit = 1u64 << (off % 64);
        let first = *word & bit == 0;
        *word |= bit;
        first
    });
}

/// The CIEs parsed so far, by offset: an object has a handful, shared by
/// thousands of FDEs, and gimli parses an FDE's CIE again for every FDE.
#[derive(Default)]
struct CieCache<'a> {
    cies: Vec<(EhFrameOffset<usize>, CommonInformationEntry<Reader<'a>>)>,
}

/// CIEs kept: real objects have one to a few; a hostile one with more
/// gets the rest parsed each time, as before.
const MAX_CACHED_CIES: usize = 16;

impl<'a> CieCache<'a> {
    /// The CIE at `offset`, as `EhFrame::cie_from_offset` reads it.
    fn get(
        &mut self,
        section: &EhFrame<Reader<'a>>,
        bases: &BaseAddresses,
        offset: EhFrameOffset<usize>,
    ) -> gimli::Result<CommonInformationEntry<Reader<'a>>> {
        if let Some((_, cie)) = self.cies.iter().find(|(o, _)| *o == offset) {
            return Ok(cie.clone());
        }
        let cie = section.cie_from_offset(bases, offset)?;
        if self.cies.len() < MAX_CACHED_CIES {
            self.cies.push((offset, cie.clone()));
        }
        Ok(cie)
    }
}

/// The `.eh_frame` offsets of the FDEs: from the search table if there is
/// one, else from a walk over `.eh_frame`.
fn fde_offsets(
    cfi: &CfiSections<'_>,
    eh_frame: &EhFrame<Reader<'_>>,
    bases: &BaseAddresses,
    stats: &mut Stats,
) -> Vec<usize> {
    let mut offsets = Vec::new();
    if let Some((hdr, _)) = cfi.eh_frame_hdr {
        if let Ok(parsed) = EhFrameHdr::new(hdr, LittleEndian).parse(bases, 8) {
            if let Some(table) = parsed.table() {
                let mut iter = table.iter(bases);
                loop {
                    match iter.next() {
                        // Not gimli's pointer_to_offset: it subtracts
                        // without a check (a panic with overflow checks on).
                        Ok(Some((_, ptr))) => match table_offset(ptr, cfi) {
                            Some(off) => offsets.push(off),
                            None => stats.refuse_fde(Reason::BadEntry, 0, 0),
                        },
                        Ok(None) => break,
                        Err(_) => {
                            stats.refuse_fde(Reason::BadEntry, 0, 0);
                            break;
                        }
                    }
                }
                if !offsets.is_empty() {
                    return offsets;
                }
            }
        }
    }
    let mut entries = eh_frame.entries(bases);
    loop {
        match entries.next() {
            Ok(Some(CieOrFde::Fde(partial))) => offsets.push(partial.offset()),
            Ok(Some(CieOrFde::Cie(_))) => {}
            Ok(None) => break,
            Err(_) => {
                // A bad length or CIE pointer: later entries cannot be found.
                stats.refuse_fde(Reason::BadEntry, 0, 0);
                break;
            }
        }
    }
    offsets
}

/// What evaluating FDEs needs besides the FDE.
struct Walker<'a, 'b> {
    eh_frame: &'b EhFrame<Reader<'a>>,
    bases: &'b BaseAddresses,
    /// gimli's scratch space, reused for every FDE.
    ctx: Box<UnwindContext<usize>>,
    cies: CieCache<'a>,
    arch: Arch,
    flex: bool,
    max_work: u64,
}

impl Walker<'_, '_> {
    /// Evaluates one FDE's rows into `pieces`. An error refuses the rest
    /// of the FDE (rows already converted stay: they were right for their
    /// PCs).
    fn rows_of(
        &mut self,
        fde_ref: FdeRef,
        end: u64,
        pieces: &mut Pieces,
        stats: &mut Stats,
    ) -> Result<(), Reason> {
        let eh_frame = self.eh_frame;
        let cies = &mut self.cies;
        let fde = eh_frame
            .fde_from_offset(self.bases, fde_ref.offset.into(), |s, b, o| {
                cies.get(s, b, o)
            })
            .map_err(|_| Reason::BadEntry)?;
        let cie = fde.cie();
        // The CIE's initial instructions run again for every FDE: charge
        // them.
        let cost = (cie.entry_len() as u64).saturating_add(fde.entry_len() as u64);
        stats.work = stats.work.saturating_add(cost);
        if stats.work > self.max_work {
            return Err(Reason::WorkLimit);
        }
        let arch = self.arch;
        if cie.return_address_register() != Register(arch.ra_column()) {
            return Err(Reason::RaColumn);
        }
        let lr_undefined = match arch {
            Arch::X86_64 => LrUndefined::Never,
            Arch::Aarch64 => lr_undefined(eh_frame, self.bases, &fde)?,
        };
        let signal_frame = fde.is_signal_trampoline();
        let mut table = UnwindTable::new(eh_frame, self.bases, &mut self.ctx, &fde)
            .map_err(|_| Reason::BadProgram)?;
        let mut pos = fde_ref.start;
        loop {
            let row = match table.next_row() {
                Ok(Some(row)) => row,
                Ok(None) => return Ok(()),
                Err(_) => {
                    stats.refuse_row(Reason::BadProgram, pos, end);
                    return Ok(());
                }
            };
            stats.work = stats.work.saturating_add(1);
            if stats.work > self.max_work {
                stats.refuse_row(Reason::WorkLimit, pos, end);
                return Ok(());
            }
            // Rows may run past the FDE (advance_loc is not checked against
            // its end): clamp, and drop empty rows.
            let start = row.start_address().max(pos);
            let stop = row.end_address().min(end);
            if start >= stop {
                if start >= end {
                    return Ok(());
                }
                continue;
            }
            pos = stop;
            stats.rows = stats.rows.saturating_add(1);
            let mut cfi_row = CfiRow {
                cfa: match row.cfa() {
                    gimli::CfaRule::RegisterAndOffset { register, offset } => CfiCfa::RegOffset {
                        reg: register.0,
                        offset: *offset,
                    },
                    gimli::CfaRule::Expression(e) => CfiCfa::Expression(expression(eh_frame, e)),
                },
                ra: rule(eh_frame, row.register(Register(arch.ra_column()))),
                fp: rule(eh_frame, row.register(Register(arch.fp()))),
                signal_frame,
                ra_signed: false,
            };
            let mapped = match arch {
                Arch::X86_64 => map_row(&cfi_row, self.flex),
                Arch::Aarch64 => {
                    if cfi_row.ra == CfiRule::Undefined {
                        // gimli's "undefined" is "no rule" unless the
                        // program said DW_CFA_undefined x30.
                        cfi_row.ra = lr_undefined.rule_at(start);
                    }
                    match row.register(gimli::AArch64::RA_SIGN_STATE) {
                        RegisterRule::Undefined | RegisterRule::Constant(0) => {}
                        RegisterRule::Constant(1) => cfi_row.ra_signed = true,
                        // Any other rule for the pseudo-register: its
                        // meaning is unknown, so is the RA's.
                        _ => cfi_row.ra = CfiRule::Other,
                    }
                    aarch64::map_row(&cfi_row, self.flex)
                }
            };
            pieces.push(start, stop, mapped, stats);
        }
    }
}

/// Where an AArch64 FDE's program says `DW_CFA_undefined x30` (the
/// outermost frame), which gimli's rows do not tell from "no rule" (the
/// return address still in `x30`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LrUndefined {
    /// Never: "no rule" is "still in `x30`".
    Never,
    /// From this address to the end of the FDE, "no rule" is "undefined".
    From(u64),
    /// From this address on, "no rule" may be either (`x30` gets other
    /// rules or the state is restored after the `DW_CFA_undefined`).
    Ambiguous(u64),
}

impl LrUndefined {
    /// The return address rule at `pc` where gimli has no rule for `x30`.
    fn rule_at(self, pc: u64) -> CfiRule<'static> {
        match self {
            LrUndefined::From(at) if pc >= at => CfiRule::Undefined,
            LrUndefined::Ambiguous(at) if pc >= at => CfiRule::Other,
            _ => CfiRule::SameValue,
        }
    }
}

/// Scans the CIE's and the FDE's instructions (AArch64) for
/// `DW_CFA_undefined x30` and for `DW_CFA_AARCH64_negate_ra_state_with_pc`,
/// which gimli cannot parse: the FDE is refused ([`Reason::PauthLr`]),
/// whatever its other rows, as GNU as does. Linear in the instruction
/// bytes, which the caller has charged to the budget.
fn lr_undefined(
    eh_frame: &EhFrame<Reader<'_>>,
    bases: &BaseAddresses,
    fde: &FrameDescriptionEntry<Reader<'_>>,
) -> Result<LrUndefined, Reason> {
    const NEGATE_RA_STATE_WITH_PC: gimli::DwCfa = gimli::DwCfa(0x2c);
    let cie = fde.cie();
    let start = fde.initial_address();
    let code_align = cie.code_alignment_factor();
    let mut loc = start;
    let mut found = LrUndefined::Never;
    let lr = Register(AARCH64_LR);
    let mut cie_iter = cie.instructions(eh_frame, bases);
    let mut fde_iter = fde.instructions(eh_frame, bases);
    let mut in_cie = true;
    loop {
        let next = if in_cie {
            cie_iter.next()
        } else {
            fde_iter.next()
        };
        let insn = match next {
            Ok(Some(insn)) => insn,
            Ok(None) if in_cie => {
                in_cie = false;
                continue;
            }
            Ok(None) => return Ok(found),
            Err(gimli::Error::UnknownCallFrameInstruction(NEGATE_RA_STATE_WITH_PC)) => {
                return Err(Reason::PauthLr)
            }
            // gimli fails at the same place; the rows before stay.
            Err(_) => {
                return Ok(match found {
                    LrUndefined::From(at) => LrUndefined::Ambiguous(at),
                    other => other,
                })
            }
        };
        let target = match insn {
            CallFrameInstruction::AdvanceLoc { delta } => {
                loc = loc.saturating_add(u64::from(delta).saturating_mul(code_align));
                None
            }
            CallFrameInstruction::SetLoc { address } => {
                loc = address;
                None
            }
            CallFrameInstruction::Undefined { register } if register == lr => {
                if found == LrUndefined::Never {
                    // Rows before the FDE's start clamp to it.
                    found = LrUndefined::From(loc.max(start));
                    continue;
                }
                Some(register)
            }
            CallFrameInstruction::Undefined { register }
            | CallFrameInstruction::SameValue { register }
            | CallFrameInstruction::Offset { register, .. }
            | CallFrameInstruction::OffsetExtendedSf { register, .. }
            | CallFrameInstruction::ValOffset { register, .. }
            | CallFrameInstruction::ValOffsetSf { register, .. }
            | CallFrameInstruction::Expression { register, .. }
            | CallFrameInstruction::ValExpression { register, .. }
            | CallFrameInstruction::Restore { register } => Some(register),
            CallFrameInstruction::Register { dest_register, .. } => Some(dest_register),
            // Restoring may bring back a state from before the undefined.
            CallFrameInstruction::RestoreState => Some(lr),
            _ => None,
        };
        if let (Some(reg), LrUndefined::From(at)) = (target, found) {
            if reg == lr {
                found = LrUndefined::Ambiguous(at);
            }
        }
    }
}

/// The bytes of an expression (empty if it cannot be read, which no
/// pattern matches).
fn expression<'a>(eh_frame: &EhFrame<Reader<'a>>, e: &gimli::UnwindExpression<usize>) -> &'a [u8] {
    e.get(eh_frame).map(|x| x.0.slice()).unwrap_or_default()
}

fn rule<'a>(eh_frame: &EhFrame<Reader<'a>>, rule: RegisterRule<usize>) -> CfiRule<'a> {
    match rule {
        RegisterRule::Undefined => CfiRule::Undefined,
        RegisterRule::SameValue => CfiRule::SameValue,
        RegisterRule::Offset(n) => CfiRule::Offset(n),
        RegisterRule::ValOffset(n) => CfiRule::ValOffset(n),
        RegisterRule::Register(r) => CfiRule::Register(r.0),
        RegisterRule::Expression(e) => CfiRule::Expression(expression(eh_frame, &e)),
        RegisterRule::ValExpression(e) => CfiRule::ValExpression(expression(eh_frame, &e)),
        _ => CfiRule::Other,
    }
}

/// The `.eh_frame` offset of a search table entry's FDE pointer.
fn table_offset(ptr: gimli::Pointer, cfi: &CfiSections<'_>) -> Option<usize> {
    let gimli::Pointer::Direct(addr) = ptr else {
        return None;
    };
    let off = usize::try_from(addr.checked_sub(cfi.eh_frame_addr)?).ok()?;
    (off < cfi.eh_frame.len()).then_some(off)
}

/// The `.eh_frame` address an `.eh_frame_hdr` at `hdr_addr` points to.
pub(crate) fn eh_frame_ptr(hdr: &[u8], hdr_addr: u64) -> Option<u64> {
    let bases = BaseAddresses::default().set_eh_frame_hdr(hdr_addr);
    let parsed = EhFrameHdr::new(hdr, LittleEndian).parse(&bases, 8).ok()?;
    match parsed.eh_frame_ptr() {
        gimli::Pointer::Direct(addr) => Some(addr),
        gimli::Pointer::Indirect(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dedup_keeps_the_first_of_each_in_order() {
        let mut offsets = vec![8, 4, 8, 130, 12, 4, 130, 200];
        dedup(&mut offsets, 131);
        // 200 lies beyond the section: dropped, not a panic.
        assert_eq!(offsets, [8, 4, 130, 12]);
        let mut none = vec![0, 0];
        dedup(&mut none, 0);
        assert!(none.is_empty());
    }
}
