// SPDX-License-Identifier: GPL-2.0

//! Writing the SFrame section: header, FDEs, FREs (little endian; ABI
//! AMD64 or AArch64).
//!
//! V3: PC-relative function starts (`SFRAME_F_FDE_FUNC_START_PCREL`), a
//! 16-byte index entry per function and its 5-byte attribute in front of
//! its FREs; DEFAULT FDEs, FLEX where a row needs it. V2: starts relative
//! to the section (no PCREL flag), which every V2 reader understands
//! (binutils 2.41 on, this project's decoder), DEFAULT FDEs only.
//! Every FRE uses the smallest data word size its values fit, every FDE the
//! smallest FRE start offset size its FREs fit.

use crate::piece::PcKind;
use crate::piece::Piece;
use crate::row::FpRule;
use crate::row::RaRule;
use crate::row::Row;
use crate::Arch;
use sframe::Version;

const HEADER_LEN: u64 = 28;
const V2_FDE_LEN: u64 = 20;
const V3_FDE_LEN: u64 = 16;
/// FRE info bit 7: the return address is signed (AArch64).
const FRE_MANGLED_RA: u8 = 0x80;

/// Why the section could not be written (only for absurd sizes, or a
/// generator bug; the caller reports either as an internal error).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EncodeError {
    /// More FDEs, FREs or FRE bytes than the 32-bit header fields hold.
    TooLarge,
    /// A function start does not fit its field (V2: 32 bits).
    StartRange,
    /// A FLEX row in a V2 section.
    FlexInV2,
}

/// Writes `pieces` (sorted, not overlapping) of `arch` as a section placed
/// at `base`.
pub(crate) fn encode(
    pieces: &[Piece],
    version: Version,
    base: u64,
    arch: Arch,
) -> Result<Vec<u8>, EncodeError> {
    let v3 = version == Version::V3;
    let fde_len = if v3 { V3_FDE_LEN } else { V2_FDE_LEN };
    // Room for the usual sizes (a V3 attribute per piece, FREs of a 1- or
    // 2-byte start, the info byte and one or two words), so that the
    // buffers rarely grow.
    let rows: usize = pieces.iter().map(|p| p.fres.len()).sum();
    let mut fres = Vec::with_capacity(
        pieces
            .len()
            .saturating_mul(5)
            .saturating_add(rows.saturating_mul(5)),
    );
    let mut fdes = Vec::with_capacity(
        pieces
            .len()
            .saturating_mul(usize::try_from(fde_len).unwrap_or(20)),
    );
    let mut num_fres = 0u32;
    for (index, piece) in pieces.iter().enumerate() {
        let flex = piece.needs_flex(arch);
        if flex && !v3 {
            return Err(EncodeError::FlexInV2);
        }
        let count = u32::try_from(piece.fres.len()).map_err(|_| EncodeError::TooLarge)?;
        num_fres = num_fres.checked_add(count).ok_or(EncodeError::TooLarge)?;
        let max_off = piece.fres.last().map_or(0, |(off, _)| *off);
        let (fre_type, addr_len) = match max_off {
            0..=0xff => (0u8, 1usize),
            0x100..=0xffff => (1, 2),
            _ => (2, 4),
        };
        let (pc_bit, rep_size) = match piece.kind {
            PcKind::Inc => (0u8, 0u8),
            PcKind::Mask(rep) => (0x10, rep),
        };
        let info = fre_type | pc_bit;
        let fre_off = u32::try_from(fres.len()).map_err(|_| EncodeError::TooLarge)?;
        if v3 {
            let count16 = u16::try_from(count).map_err(|_| EncodeError::TooLarge)?;
            fres.extend_from_slice(&count16.to_le_bytes());
            fres.push(info);
            fres.push(u8::from(flex));
            fres.push(rep_size);
        }
        for (off, row) in &piece.fres {
            put_le(&mut fres, i64::from(*off), addr_len);
            write_fre(&mut fres, row, flex, arch);
        }
        if v3 {
            // PC-relative: from the address of this FDE's start field.
            let field = (index as u64)
                .checked_mul(V3_FDE_LEN)
                .and_then(|o| o.checked_add(HEADER_LEN))
                .map(|o| base.wrapping_add(o))
                .ok_or(EncodeError::TooLarge)?;
            let start = piece.start.wrapping_sub(field) as i64;
            fdes.extend_from_slice(&start.to_le_bytes());
            fdes.extend_from_slice(&piece.size.to_le_bytes());
            fdes.extend_from_slice(&fre_off.to_le_bytes());
        } else {
            let start = piece
                .start
                .checked_sub(base)
                .and_then(|s| i32::try_from(s).ok())
                .ok_or(EncodeError::StartRange)?;
            fdes.extend_from_slice(&start.to_le_bytes());
            fdes.extend_from_slice(&piece.size.to_le_bytes());
            fdes.extend_from_slice(&fre_off.to_le_bytes());
            fdes.extend_from_slice(&count.to_le_bytes());
            fdes.push(info);
            fdes.push(rep_size);
            fdes.extend_from_slice(&[0, 0]);
        }
    }
    let num_fdes = u32::try_from(pieces.len()).map_err(|_| EncodeError::TooLarge)?;
    let fre_len = u32::try_from(fres.len()).map_err(|_| EncodeError::TooLarge)?;
    let freoff = u64::from(num_fdes)
        .checked_mul(fde_len)
        .and_then(|n| u32::try_from(n).ok())
        .ok_or(EncodeError::TooLarge)?;
    let mut out = Vec::with_capacity(
        usize::try_from(HEADER_LEN)
            .unwrap_or(28)
            .saturating_add(fdes.len())
            .saturating_add(fres.len()),
    );
    out.extend_from_slice(&0xdee2u16.to_le_bytes());
    out.push(if v3 { 3 } else { 2 });
    let pcrel = if v3 {
        sframe::FLAG_FDE_FUNC_START_PCREL
    } else {
        0
    };
    out.push(sframe::FLAG_FDE_SORTED | pcrel);
    out.push(arch.sframe_abi());
    out.push(0); // No fixed FP offset: FREs say where the FP is.
    out.push(arch.fixed_ra_offset().to_le_bytes()[0]);
    out.push(0); // No auxiliary header.
    out.extend_from_slice(&num_fdes.to_le_bytes());
    out.extend_from_slice(&num_fres.to_le_bytes());
    out.extend_from_slice(&fre_len.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&freoff.to_le_bytes());
    out.extend_from_slice(&fdes);
    out.extend_from_slice(&fres);
    Ok(out)
}

/// A FLEX control word: `regnum << 3 | deref << 1 | reg_p`.
fn control(reg: u16, deref: bool, reg_p: bool) -> i64 {
    (i64::from(reg) << 3) | (i64::from(deref) << 1) | i64::from(reg_p)
}

/// Writes the info byte and data words of one FRE.
fn write_fre(out: &mut Vec<u8>, row: &Row, flex: bool, arch: Arch) {
    let sp_based = u8::from(row.cfa.reg == arch.sp());
    if row.outermost {
        // No data words: RA undefined.
        out.push(sp_based);
        return;
    }
    // Control words are unsigned, offsets signed; one size fits all words
    // of an FRE. At most 6: a FLEX FRE with CFA, RA and FP pairs (AArch64;
    // x86-64 has at most 5, RA being padding).
    let mut words: [(i64, bool); 6] = [(0, false); 6];
    let mut n = 0usize;
    let mut put = |v: i64, unsigned: bool| {
        if let Some(w) = words.get_mut(n) {
            *w = (v, unsigned);
            n = n.saturating_add(1);
        }
    };
    if flex {
        put(control(row.cfa.reg, row.cfa.deref, true), true);
        put(i64::from(row.cfa.offset), false);
        let fp = match row.fp {
            FpRule::Unchanged => None,
            FpRule::AtCfa(k) => Some((control(0, true, false), k)),
            FpRule::AtReg { reg, offset } => Some((control(reg, true, true), offset)),
        };
        match row.ra {
            RaRule::AtCfa(k) => {
                put(control(0, true, false), true);
                put(i64::from(k), false);
            }
            // Padding: the ABI's default (x86-64: the fixed CFA-8;
            // AArch64: still in x30), needed only in front of an FP rule.
            RaRule::Default if fp.is_some() => put(0, true),
            RaRule::Default => {}
        }
        if let Some((word, k)) = fp {
            put(word, true);
            put(i64::from(k), false);
        }
    } else {
        put(i64::from(row.cfa.offset), false);
        // DEFAULT FREs: the RA offset only without a fixed one (AArch64),
        // then the FP offset (needs_flex sends an FP offset without an RA
        // offset on AArch64 to FLEX).
        if let RaRule::AtCfa(k) = row.ra {
            put(i64::from(k), false);
        }
        if let FpRule::AtCfa(k) = row.fp {
            put(i64::from(k), false);
        }
    }
    let used = words.get(..n).unwrap_or_default();
    let fits = |bits: u32| {
        used.iter().all(|&(v, unsigned)| {
            if unsigned {
                v >= 0 && v < (1i64 << bits)
            } else {
                v >= -(1i64 << (bits - 1)) && v < (1i64 << (bits - 1))
            }
        })
    };
    let (code, size) = if fits(8) {
        (0u8, 1usize)
    } else if fits(16) {
        (1, 2)
    } else {
        (2, 4)
    };
    // n <= 6 fits the 4-bit count.
    let count = u8::try_from(n).unwrap_or(0) & 0xf;
    let mangled = if row.mangled_ra { FRE_MANGLED_RA } else { 0 };
    out.push(sp_based | (count << 1) | (code << 5) | mangled);
    for &(v, _) in used {
        put_le(out, v, size);
    }
}

/// Appends the low `size` bytes (1, 2 or 4) of `v`, little endian: one
/// store per size rather than a copy of a slice of variable length.
fn put_le(out: &mut Vec<u8>, v: i64, size: usize) {
    let b = v.to_le_bytes();
    match size {
        1 => out.push(b[0]),
        2 => out.extend_from_slice(&[b[0], b[1]]),
        _ => out.extend_from_slice(&[b[0], b[1], b[2], b[3]]),
    }
}
