// SPDX-License-Identifier: GPL-2.0

//! Grouping converted rows into SFrame FDEs ("pieces").
//!
//! One CFI FDE becomes one or more SFrame FDEs: consecutive rows that
//! convert form one PCINC FDE; a refused row ends it (its PCs get no SFrame
//! row and the kernel falls back to frame pointers there); a PLT stub row
//! becomes a PCMASK FDE of its own. Identical consecutive rows merge.
//! A piece never spans two CFI FDEs, so the pieces of sorted,
//! non-overlapping FDEs are sorted and non-overlapping too.

use crate::row::Mapped;
use crate::row::Row;
use crate::Arch;
use crate::Reason;
use crate::Stats;

/// At most this many FREs per SFrame FDE: the decoder's lookup scans at
/// most `sframe::MAX_FRES_SCANNED` FREs of one function, so a longer
/// function is cut into several FDEs.
pub(crate) const MAX_FRES_PER_PIECE: usize = sframe::MAX_FRES_SCANNED as usize;

/// FREs a new piece has room for before its vector grows.
const FRES_RESERVED: usize = 8;

/// How an SFrame FDE matches PCs to FREs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PcKind {
    /// FRE start offsets from the function start (PCINC).
    Inc,
    /// FRE start offsets within each `rep_size`-byte block (PCMASK).
    Mask(u8),
}

/// One SFrame FDE to write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Piece {
    pub(crate) start: u64,
    pub(crate) size: u32,
    pub(crate) kind: PcKind,
    /// `(start offset, row)`, offsets strictly increasing, the first 0.
    pub(crate) fres: Vec<(u32, Row)>,
}

impl Piece {
    pub(crate) fn end(&self) -> u64 {
        self.start.saturating_add(u64::from(self.size))
    }

    pub(crate) fn needs_flex(&self, arch: Arch) -> bool {
        self.fres.iter().any(|(_, row)| row.needs_flex(arch))
    }
}

/// Collects the pieces of all FDEs, in address order.
#[derive(Default)]
pub(crate) struct Pieces {
    pub(crate) done: Vec<Piece>,
    open: Option<Piece>,
    /// The last row of the open PCINC piece, for merging.
    last: Option<Row>,
}

impl Pieces {
    /// Adds the rows for `[start, end)`, which follows the previous range
    /// of the same CFI FDE, or starts a new FDE after `finish_fde`.
    pub(crate) fn push(
        &mut self,
        start: u64,
        end: u64,
        mapped: Result<Mapped, Reason>,
        stats: &mut Stats,
    ) {
        let len = end.saturating_sub(start);
        let Ok(size) = u32::try_from(len) else {
            self.close();
            stats.refuse_row(Reason::AddressRange, start, end);
            return;
        };
        match mapped {
            Err(reason) => {
                self.close();
                stats.refuse_row(reason, start, end);
            }
            Ok(Mapped::Row(row)) => {
                self.push_row(start, size, row);
                stats.rows_emitted = stats.rows_emitted.saturating_add(1);
            }
            Ok(Mapped::Mask {
                rep_size,
                low,
                high_from,
                high,
            }) => {
                self.close();
                if start % u64::from(rep_size) != 0 {
                    stats.refuse_row(Reason::PltUnaligned, start, end);
                    return;
                }
                let mut fres = vec![(0, low)];
                if high != low {
                    fres.push((u32::from(high_from), high));
                }
                self.done.push(Piece {
                    start,
                    size,
                    kind: PcKind::Mask(rep_size),
                    fres,
                });
                stats.rows_emitted = stats.rows_emitted.saturating_add(1);
            }
        }
    }

    fn push_row(&mut self, start: u64, size: u32, row: Row) {
        if let Some(piece) = self.open.as_mut() {
            let offset = start
                .checked_sub(piece.start)
                .and_then(|o| u32::try_from(o).ok());
            let grown = offset.and_then(|o| o.checked_add(size));
            if let (Some(offset), Some(grown), true) = (offset, grown, piece.end() == start) {
                if self.last == Some(row) {
                    piece.size = grown;
                    return;
                }
                if piece.fres.len() < MAX_FRES_PER_PIECE {
                    piece.fres.push((offset, row));
                    piece.size = grown;
                    self.last = Some(row);
                    return;
                }
            }
        }
        self.close();
        // Most functions have a few rows: room for them at once.
        let mut fres = Vec::with_capacity(FRES_RESERVED);
        fres.push((0, row));
        self.open = Some(Piece {
            start,
            size,
            kind: PcKind::Inc,
            fres,
        });
        self.last = Some(row);
    }

    /// Ends the open piece (a refused row, a PCMASK piece, or the end of
    /// a CFI FDE).
    pub(crate) fn close(&mut self) {
        if let Some(piece) = self.open.take() {
            self.done.push(piece);
        }
        self.last = None;
    }

    /// All pieces, the open one included.
    pub(crate) fn finish(mut self) -> Vec<Piece> {
        self.close();
        self.done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_split_and_mask() {
        let mut stats = Stats::default();
        let mut p = Pieces::default();
        p.push(0x1000, 0x1001, Ok(Mapped::Row(Row::sp(8))), &mut stats);
        p.push(0x1001, 0x1004, Ok(Mapped::Row(Row::sp(16))), &mut stats);
        p.push(0x1004, 0x1008, Ok(Mapped::Row(Row::sp(16))), &mut stats);
        p.push(0x1008, 0x1010, Err(Reason::CfaExpression), &mut stats);
        p.push(0x1010, 0x1020, Ok(Mapped::Row(Row::sp(8))), &mut stats);
        p.close();
        let mask = Mapped::Mask {
            rep_size: 16,
            low: Row::sp(8),
            high_from: 11,
            high: Row::sp(16),
        };
        p.push(0x1030, 0x1070, Ok(mask), &mut stats);
        p.push(0x1078, 0x1080, Ok(mask), &mut stats);
        let pieces = p.finish();
        assert_eq!(pieces.len(), 3);
        assert_eq!(pieces[0].size, 8);
        assert_eq!(pieces[0].fres, vec![(0, Row::sp(8)), (1, Row::sp(16))]);
        assert_eq!((pieces[1].start, pieces[1].size), (0x1010, 0x10));
        assert_eq!(pieces[2].kind, PcKind::Mask(16));
        assert_eq!(pieces[2].fres.len(), 2);
        assert_eq!(stats.refused(Reason::CfaExpression).rows, 1);
        assert_eq!(stats.refused(Reason::PltUnaligned).rows, 1);
        assert_eq!(stats.rows_emitted, 5);
    }

    #[test]
    fn long_functions_are_cut() {
        let mut stats = Stats::default();
        let mut p = Pieces::default();
        for i in 0..(MAX_FRES_PER_PIECE as u64 + 10) {
            let row = Row::sp(8 + 8 * (i % 2) as i32);
            p.push(i, i + 1, Ok(Mapped::Row(row)), &mut stats);
        }
        let pieces = p.finish();
        assert_eq!(pieces.len(), 2);
        assert_eq!(pieces[0].fres.len(), MAX_FRES_PER_PIECE);
        assert_eq!(pieces[1].start, MAX_FRES_PER_PIECE as u64);
    }
}
