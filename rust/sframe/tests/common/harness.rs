// SPDX-License-Identifier: GPL-2.0

//! The parse + validate + lookup exercise shared by the fuzz target
//! (`fuzz/fuzz_targets/parse_validate_lookup.rs` includes this file), the
//! corpus replay test and the property tests.
//!
//! Input format: 8 bytes section address (little endian), 8 bytes PC seed,
//! then the section bytes.

use sframe::{Budget, Error, FoundRow, Hints, PackedForm, PcType, RegRule, Section};

/// Splits a fuzz input into (section address, PC seed, section bytes).
pub fn split(input: &[u8]) -> Option<(u64, u64, &[u8])> {
    let addr = u64::from_le_bytes(input.get(0..8)?.try_into().ok()?);
    let seed = u64::from_le_bytes(input.get(8..16)?.try_into().ok()?);
    Some((addr, seed, input.get(16..)?))
}

/// Builds a fuzz input from its parts.
pub fn join(addr: u64, seed: u64, section: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(section.len() + 16);
    v.extend_from_slice(&addr.to_le_bytes());
    v.extend_from_slice(&seed.to_le_bytes());
    v.extend_from_slice(section);
    v
}

/// Runs every decoder entry point on `input`; panics only when an
/// invariant promised after validation does not hold.
pub fn exercise(input: &[u8]) {
    let Some((addr, seed, data)) = split(input) else {
        return;
    };
    exercise_section(data, addr, seed);
}

/// See [`exercise`].
pub fn exercise_section(data: &[u8], addr: u64, seed: u64) {
    let Ok(sec) = Section::parse(data, addr) else {
        return;
    };
    let mut rescheds = 0u32;
    let validated = sec.validate(&mut || rescheds += 1).is_ok();
    let range = sec.text_range();
    if validated {
        assert!(range.is_ok(), "text_range failed after validation");
    }
    // Every PC looked up, for the indexed lookups at the end.
    let mut asked = Vec::new();
    let mut lookup = |pc: u64| {
        asked.push(pc);
        sec.find_row(pc)
    };
    let _ = lookup(addr);
    let _ = lookup(seed);
    let mut pc = seed;
    for _ in 0..16 {
        pc = pc
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let r = lookup(pc);
        if validated {
            assert!(
                matches!(r, Ok(_) | Err(Error::TooManyFres | Error::UnsupportedRows)),
                "find_row failed after validation: {r:?}"
            );
        }
        if let Ok(Some((lo, hi))) = range {
            if hi > lo {
                let _ = lookup(lo + pc % (hi - lo));
            }
        }
    }

    for (i, fde) in sec.fdes().enumerate().take(512) {
        let Ok(fde) = fde else {
            assert!(!validated, "fde {i} failed after validation");
            break;
        };
        let _ = lookup(fde.start);
        let _ = lookup(fde.end());
        for (n, fre) in sec.fres(&fde).enumerate().take(2048) {
            let Ok(fre) = fre else {
                assert!(
                    !validated || fre == Err(Error::UnsupportedRows),
                    "fre failed after validation: {fre:?}"
                );
                break;
            };
            let looked_up = lookup(fre.start);
            if validated && fde.pc_type == PcType::Inc && fde.contains(fre.start) {
                // Rows past the scan cap may answer TooManyFres instead.
                if n + 1 < sframe::MAX_FRES_SCANNED as usize || looked_up != Err(Error::TooManyFres)
                {
                    assert_eq!(looked_up, Ok(Some(fre.row)), "row at FRE start differs");
                }
            }
        }
    }

    check_table(&sec, &asked, validated);

    // The lookup index: a validated section always gets one, and wherever
    // one can be built, lookups with it answer as lookups without, paying
    // no more from a budget.
    let built = sec.index_words().ok().and_then(|n| {
        let mut words = vec![0u32; n];
        sec.build_index(&mut words, &mut || {}).ok()?;
        Some(words)
    });
    assert!(
        !validated || built.is_some(),
        "no index for a valid section"
    );
    let Some(words) = built else {
        return;
    };
    let fast = sec
        .with_index(&words)
        .expect("an index fits its own section");
    for pc in asked {
        assert_eq!(
            fast.find_row(pc),
            sec.find_row(pc),
            "indexed find_row({pc:#x})"
        );
        let (mut a, mut b) = (Budget::unlimited(), Budget::unlimited());
        assert_eq!(
            fast.find_row_within(pc, &mut a),
            sec.find_row_within(pc, &mut b),
            "indexed find_row_within({pc:#x})"
        );
        // One unit more at most: the read of the index's words.
        assert!(a.spent() <= b.spent() + 1, "indexed lookup paid more");
        assert!(a.spent() >= 1, "indexed lookup paid nothing");
    }
}

/// `sec`'s row from its FREs one by one, without the lookup's FRE cap:
/// what a row table answers.  For PCMASK functions, the decoder's own
/// answer (the table sends those to it).
pub fn reference_row(sec: &Section<'_>, pc: u64) -> Result<Option<sframe::Row>, Error> {
    let mut found = None;
    for fde in sec.fdes() {
        let fde = fde?;
        if fde.start <= pc {
            found = Some(fde);
        }
    }
    let Some(fde) = found.filter(|f| f.contains(pc)) else {
        return Ok(None);
    };
    if fde.pc_type == PcType::Mask {
        return sec.find_row(pc);
    }
    let mut row = None;
    for fre in sec.fres(&fde) {
        let fre = fre?;
        if fre.start > pc {
            break;
        }
        row = Some(fre.row);
    }
    Ok(row)
}

/// The row table: a validated section always gets one unless its
/// functions span 4 GiB or more or its rows are not decoded (s390x), and wherever one is built, lookups with
/// it answer as the decoder does, except that they also find the rows
/// beyond the decoder's FRE cap; a lookup through it pays at least one
/// unit, and at most its probes of one bucket beyond what the decoder
/// would.
pub fn check_table(sec: &Section<'_>, pcs: &[u64], validated: bool) {
    let built = sec.table_words(&mut || {}).and_then(|n| {
        let mut words = vec![0u32; n];
        let written = sec.build_table(&mut words, &mut || {})?;
        assert_eq!(written, n, "build_table wrote what table_words said");
        Ok(words)
    });
    let words = match built {
        Ok(words) => words,
        Err(e) => {
            assert!(
                !validated || matches!(e, Error::TableSpan | Error::UnsupportedRows),
                "no row table for a valid section: {e:?}"
            );
            return;
        }
    };
    let fast = sec
        .with_table(&words)
        .expect("a row table fits its own section");
    assert!(fast.has_table() && !sec.has_table());
    for &pc in pcs {
        let plain = sec.find_row(pc);
        let expected = match plain {
            Err(Error::TooManyFres) => reference_row(sec, pc),
            other => other,
        };
        assert_eq!(fast.find_row(pc), expected, "table find_row({pc:#x})");
        let mut budget = Budget::unlimited();
        assert_eq!(
            fast.find_row_within(pc, &mut budget),
            expected,
            "table find_row_within({pc:#x})"
        );
        assert!(budget.spent() >= 1, "a table lookup paid nothing");
        // What the walk asks: the row as found, and for the table's rows,
        // the row by its form, which the walk's steps are specialised on.
        let found = fast.find_within(pc, &mut Budget::unlimited());
        assert_eq!(
            found.map(|f| f.map(FoundRow::row)),
            expected,
            "table find_within({pc:#x})"
        );
        if let Ok(Some(FoundRow::Packed(packed))) = found {
            let form = packed.form();
            assert_eq!(form.row(), packed.row(), "form of {packed:?}: {form:?}");
            let row = packed.row();
            let common = !row.outermost && !row.signal_frame && matches!(row.ra, RegRule::AtCfa(_));
            // Saved next to the RA: one read gets both.
            let pair =
                |ra: i32, fp: i32| ra != fp && (i64::from(ra) - i64::from(fp)).abs() + 8 <= 32;
            let expected_form = match (row.ra, row.fp) {
                (_, RegRule::Unchanged) if common => "kept",
                (RegRule::AtCfa(ra), RegRule::AtCfa(fp)) if common && pair(ra, fp) => "saved",
                _ => "other",
            };
            let got = match form {
                PackedForm::FpKept(_) => "kept",
                PackedForm::FpSaved(..) => "saved",
                PackedForm::Other(_) => "other",
            };
            assert_eq!(got, expected_form, "form of {row:?}");
        }
        // The bucket's probes, plus the decoder's own work where the table
        // sends a lookup on to it (PCMASK functions, rows that do not pack).
        let mut plain_budget = Budget::unlimited();
        let _ = sec.find_row_within(pc, &mut plain_budget);
        assert!(
            budget.spent() <= 34 + plain_budget.spent(),
            "a table lookup paid {budget:?}"
        );
    }
    check_hints(sec, &words, pcs);
}

/// The hints of `hinted` taken out of it for a range of PCs answer, for
/// one unit, as the section does where a slot holds the PC (always, right
/// after the PC's own lookup, for a row the table packs in the range),
/// and leave every other lookup to it, for nothing; `table`, without
/// hints, gives none.
fn check_hints_within(table: &Section<'_>, hinted: &Section<'_>, pcs: &[u64]) {
    let (first, last) = (pcs[0], pcs[pcs.len() - 1]);
    let middle = first.wrapping_add(last.wrapping_sub(first) / 2);
    for (lo, hi) in [
        (0, u64::MAX),
        (first, middle),
        (middle, last),
        (middle, middle),
    ] {
        let none = table.hints_within(lo, hi);
        let fast = hinted.hints_within(lo, hi);
        for &pc in pcs {
            let expected = table.find_within(pc, &mut Budget::unlimited());
            let _ = hinted.find_within(pc, &mut Budget::unlimited());
            let mut budget = Budget::unlimited();
            assert!(none.find(pc, &mut budget).is_none());
            match fast.find(pc, &mut budget) {
                Some(got) => {
                    assert!(
                        (lo..hi).contains(&pc),
                        "{pc:#x} hinted outside {lo:#x}..{hi:#x}"
                    );
                    assert_eq!(
                        got.map(|row| row.map(FoundRow::Packed)),
                        expected,
                        "{pc:#x}"
                    );
                    assert_eq!(budget.spent(), 1, "a hit through the hints");
                }
                None => {
                    assert_eq!(budget.spent(), 0, "a miss through the hints paid");
                    assert!(
                        !((lo..hi).contains(&pc)
                            && matches!(expected, Ok(Some(FoundRow::Packed(_))))),
                        "{pc:#x}: its own hint missed"
                    );
                }
            }
        }
    }
    let mut budget = Budget::unlimited();
    assert!(Hints::NONE.find(first, &mut budget).is_none());
}

/// Lookups through `words` (`sec`'s row table) with hints answer as
/// without, cold and warm, in either order, with as many slots as the
/// table's shape asks for and with so few that keys keep evicting each
/// other; a lookup that a hint answers costs one unit.
fn check_hints(sec: &Section<'_>, words: &[u32], pcs: &[u64]) {
    use core::sync::atomic::AtomicU64;
    let table = sec
        .with_table(words)
        .expect("a row table fits its own section");
    let shaped = sec.table_shape(&mut || {}).expect("a shape").hint_slots();
    assert!(shaped.is_power_of_two() && (4..=8192).contains(&shaped));
    for slots in [2usize, 16, shaped] {
        let hints: Vec<AtomicU64> = (0..slots).map(|_| AtomicU64::new(0)).collect();
        let hinted = table.with_hints(&hints);
        assert!(hinted.has_hints() && !table.has_hints());
        for round in 0..3 {
            let mut order: Vec<u64> = pcs.to_vec();
            if round == 1 {
                order.reverse();
            }
            for &pc in &order {
                let expected = table.find_within(pc, &mut Budget::unlimited());
                let mut budget = Budget::unlimited();
                let got = hinted.find_within(pc, &mut budget);
                assert_eq!(got, expected, "hinted find_within({pc:#x}), {slots} slots");
                assert!(budget.spent() >= 1, "a hinted lookup paid nothing");
                // Right after its own lookup, a PC the table answers finds
                // its hint (a miss below the first entry writes none).
                let mut again = Budget::unlimited();
                assert_eq!(hinted.find_within(pc, &mut again), expected);
                let mut cold = Budget::unlimited();
                let _ = table.find_within(pc, &mut cold);
                assert!(
                    again.spent() <= cold.spent(),
                    "a hit paid more than a search"
                );
            }
        }
        check_hints_within(&table, &hinted, pcs);
        // A row the table packs was found by its search, which wrote it.
        let packed = pcs.iter().any(|&pc| {
            matches!(
                table.find_within(pc, &mut Budget::unlimited()),
                Ok(Some(FoundRow::Packed(_)))
            )
        });
        let written = hints
            .iter()
            .any(|h| h.load(core::sync::atomic::Ordering::Relaxed) != 0);
        assert!(!packed || written, "no hint written");
    }
    // Slots that are not a power of two, or too few, are not used.
    for n in [0usize, 1, 3, 100] {
        let hints: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(0)).collect();
        let hinted = table.with_hints(&hints);
        assert!(!hinted.has_hints());
        for &pc in pcs.iter().take(64) {
            let _ = hinted.find_within(pc, &mut Budget::unlimited());
        }
        assert!(hints
            .iter()
            .all(|h| h.load(core::sync::atomic::Ordering::Relaxed) == 0));
    }
}
