// SPDX-License-Identifier: GPL-2.0

//! Decoder tests on hand-built V2, V2 + PCREL and V3 sections.

mod common;

use common::{ctl, sample_fdes, FdeB, FreB, SectionB};
use sframe::{
    Abi, Budget, CfaRule, Error, FdeType, PcType, Reg, RegRule, Row, Section, Version,
    MAX_FRES_SCANNED,
};

const ADDR: u64 = 0x400238;

fn all_variants() -> Vec<SectionB> {
    vec![
        SectionB::v2(ADDR, sample_fdes()),
        SectionB::v2_pcrel(ADDR, sample_fdes()),
        SectionB::v3(ADDR, sample_fdes()),
    ]
}

fn row(base: Reg, cfa: i32, fp: RegRule) -> Row {
    Row {
        cfa: CfaRule {
            base,
            offset: cfa,
            deref: false,
        },
        ra: RegRule::AtCfa(-8),
        fp,
        outermost: false,
        signal_frame: false,
        mangled_ra: false,
    }
}

fn sp(cfa: i32) -> Row {
    row(Reg::Sp, cfa, RegRule::Unchanged)
}

fn parse(b: &SectionB) -> (Vec<u8>, u64) {
    (b.build(), b.addr)
}

fn validate(sec: &Section<'_>) -> Result<(), Error> {
    sec.validate(&mut || {})
}

#[test]
fn header_fields() {
    for b in all_variants() {
        let (data, addr) = parse(&b);
        let sec = Section::parse(&data, addr).unwrap();
        assert_eq!(
            sec.version(),
            if b.version == 3 {
                Version::V3
            } else {
                Version::V2
            }
        );
        assert_eq!(sec.abi(), Abi::Amd64Le);
        assert_eq!(sec.num_fdes(), 4);
        assert_eq!(sec.num_fres(), 14);
        assert_eq!(sec.cfa_fixed_ra_offset(), -8);
        assert_eq!(sec.cfa_fixed_fp_offset(), 0);
        assert_eq!(sec.flags() & 0x1, 0x1);
        assert_eq!(sec.flags() & 0x4 != 0, b.pcrel);
        validate(&sec).unwrap();
        assert_eq!(sec.text_range().unwrap(), Some((0x401000, 0x404000)));
    }
}

#[test]
fn fdes_decode_the_same_in_every_encoding() {
    let mut seen = Vec::new();
    for b in all_variants() {
        let (data, addr) = parse(&b);
        let sec = Section::parse(&data, addr).unwrap();
        let fdes: Vec<_> = sec.fdes().map(Result::unwrap).collect();
        assert_eq!(fdes.len(), 4);
        assert_eq!(fdes[0].start, 0x401000);
        assert_eq!(fdes[0].size, 0x40);
        assert_eq!(fdes[0].num_fres, 5);
        assert_eq!(fdes[2].pc_type, PcType::Mask);
        assert_eq!(fdes[2].rep_size, 16);
        assert_eq!(fdes[3].fre_type(), sframe::FreType::Addr2);
        assert!(fdes.iter().all(|f| f.fde_type == FdeType::Default));
        let rows: Vec<Vec<_>> = fdes
            .iter()
            .map(|f| sec.fres(f).map(Result::unwrap).collect())
            .collect();
        assert_eq!(rows[0][2].start, 0x401005);
        assert_eq!(rows[0][2].row, sp(48));
        assert_eq!(
            rows[1][2].row,
            row(Reg::Fp, 16, RegRule::AtCfa(-16)),
            "FP based CFA with saved FP"
        );
        assert_eq!(rows[2][1].start, 0x401080 + 11);
        assert_eq!(rows[3][1].row, sp(0x1008));
        seen.push(rows);
    }
    assert_eq!(seen[0], seen[1]);
    assert_eq!(seen[0], seen[2]);
}

/// The expected row at every byte of every function, from the builder's
/// own description rather than from the decoder.
fn expected(fdes: &[FdeB], pc: u64) -> Option<Row> {
    let fde = fdes
        .iter()
        .find(|f| pc >= f.start && pc < f.start + u64::from(f.size))?;
    let mut off = pc - fde.start;
    if fde.pc_mask {
        off %= u64::from(fde.rep_size);
    }
    let fre = fde
        .fres
        .iter()
        .rev()
        .find(|fre| u64::from(fre.start) <= off)?;
    let base = if fre.base_sp { Reg::Sp } else { Reg::Fp };
    let fp = match fre.words.get(1) {
        Some(&off) => RegRule::AtCfa(off as i32),
        None => RegRule::Unchanged,
    };
    Some(row(base, fre.words[0] as i32, fp))
}

#[test]
fn lookup_at_every_byte_and_boundary() {
    for b in all_variants() {
        let (data, addr) = parse(&b);
        let sec = Section::parse(&data, addr).unwrap();
        validate(&sec).unwrap();
        for pc in 0x400f00..0x404100u64 {
            assert_eq!(
                sec.find_row(pc).unwrap(),
                expected(&b.fdes, pc),
                "pc {pc:#x} version {}",
                b.version
            );
        }
        assert_eq!(sec.find_row(0).unwrap(), None);
        assert_eq!(sec.find_row(u64::MAX).unwrap(), None);
    }
}

#[test]
fn pcmask_matches_modulo_block() {
    let (data, addr) = parse(&SectionB::v3(ADDR, sample_fdes()));
    let sec = Section::parse(&data, addr).unwrap();
    for entry in 0..4u64 {
        let base = 0x401080 + entry * 16;
        assert_eq!(sec.find_row(base).unwrap(), Some(sp(8)));
        assert_eq!(sec.find_row(base + 10).unwrap(), Some(sp(8)));
        assert_eq!(sec.find_row(base + 11).unwrap(), Some(sp(16)));
        assert_eq!(sec.find_row(base + 15).unwrap(), Some(sp(16)));
    }
}

#[test]
fn gaps_between_functions_have_no_row() {
    let (data, addr) = parse(&SectionB::v2(ADDR, sample_fdes()));
    let sec = Section::parse(&data, addr).unwrap();
    assert_eq!(sec.find_row(0x4010c0).unwrap(), None);
    assert_eq!(sec.find_row(0x401fff).unwrap(), None);
    assert_eq!(sec.find_row(0x404000).unwrap(), None);
    assert_eq!(sec.find_row(0x400fff).unwrap(), None);
}

#[test]
fn pc_before_first_fre_has_no_row() {
    let fde = FdeB::new(0x1000, 0x20, vec![FreB::sp(4, 8)]);
    let data = SectionB::v2(0, vec![fde]).build();
    let sec = Section::parse(&data, 0).unwrap();
    validate(&sec).unwrap();
    assert_eq!(sec.find_row(0x1003).unwrap(), None);
    assert_eq!(sec.find_row(0x1004).unwrap(), Some(sp(8)));
}

#[test]
fn outermost_and_empty_fdes() {
    let fdes = vec![
        FdeB::new(0x1000, 0x10, vec![FreB::new(0, true, &[])]),
        FdeB::new(0x1010, 0x10, vec![]),
    ];
    for b in [SectionB::v2(0x10, fdes.clone()), SectionB::v3(0x10, fdes)] {
        let data = b.build();
        let sec = Section::parse(&data, 0x10).unwrap();
        validate(&sec).unwrap();
        let r = sec.find_row(0x1005).unwrap().unwrap();
        assert!(r.outermost);
        assert_eq!(r.ra, RegRule::Undefined);
        assert_eq!(sec.find_row(0x1015).unwrap(), None);
    }
}

#[test]
fn empty_section() {
    for b in [SectionB::v2(0, vec![]), SectionB::v3(0, vec![])] {
        let data = b.build();
        let sec = Section::parse(&data, 0).unwrap();
        validate(&sec).unwrap();
        assert_eq!(sec.text_range().unwrap(), None);
        assert_eq!(sec.find_row(0x1234).unwrap(), None);
        assert_eq!(sec.fdes().count(), 0);
    }
}

#[test]
fn four_byte_starts_and_offsets() {
    let mut fde = FdeB::new(
        0x10_0000,
        0x2_0000,
        vec![FreB::sp(0, 8), FreB::sp(0x1_8000, 0x12_3456)],
    );
    fde.fre_type = 2;
    for b in [
        SectionB::v2(0, vec![fde.clone()]),
        SectionB::v3(0, vec![fde]),
    ] {
        let data = b.build();
        let sec = Section::parse(&data, 0).unwrap();
        validate(&sec).unwrap();
        assert_eq!(sec.find_row(0x11_8000).unwrap(), Some(sp(0x12_3456)));
        assert_eq!(sec.find_row(0x11_7fff).unwrap(), Some(sp(8)));
    }
}

#[test]
fn negative_pcrel_and_high_addresses() {
    // Text below the section, PC-relative starts are negative.
    let fde = FdeB::new(0x7fff_0000_1000, 0x10, vec![FreB::sp(0, 8)]);
    for b in [
        SectionB::v2_pcrel(0x7fff_0010_0000, vec![fde.clone()]),
        SectionB::v3(0x7fff_0010_0000, vec![fde]),
    ] {
        let data = b.build();
        let sec = Section::parse(&data, b.addr).unwrap();
        validate(&sec).unwrap();
        assert_eq!(sec.fde(0).unwrap().start, 0x7fff_0000_1000);
        assert_eq!(sec.find_row(0x7fff_0000_100f).unwrap(), Some(sp(8)));
    }
}

#[test]
fn flex_rows_decode_per_spec() {
    // The shapes GNU as 2.46 emits for a DRAP (stack realigning) function:
    // CFA = sp + 8; CFA = r10; CFA = r10 with RA padding and FP at *(rbp);
    // CFA = *(rbp - 8) with RA padding and FP at *(rbp).
    let fres = vec![
        FreB::new(0, false, &[ctl(7, false, true), 8]),
        FreB::new(9, false, &[ctl(10, false, true), 0]),
        FreB::new(
            0x18,
            false,
            &[ctl(10, false, true), 0, 0, ctl(6, true, true), 0],
        ),
        FreB::new(
            0x1a,
            false,
            &[ctl(6, true, true), -8, 0, ctl(6, true, true), 0],
        ),
        FreB::new(
            0x40,
            false,
            &[
                ctl(6, false, true),
                16,
                ctl(0, true, false),
                -8,
                ctl(0, true, false),
                -16,
            ],
        ),
        FreB::new(
            0x50,
            false,
            &[ctl(7, false, true), 8, ctl(3, false, true), 0],
        ),
        FreB::new(
            0x58,
            false,
            &[
                ctl(7, false, true),
                8,
                ctl(3, false, true),
                24,
                ctl(12, true, true),
                4,
            ],
        ),
    ];
    let mut fde = FdeB::new(0x401000, 0x5f, fres);
    fde.fde_type = 1;
    let data = SectionB::v3(0x402048, vec![fde]).build();
    let sec = Section::parse(&data, 0x402048).unwrap();
    validate(&sec).unwrap();
    let f = sec.fde(0).unwrap();
    assert_eq!(f.fde_type, FdeType::Flex);
    let rows: Vec<Row> = sec.fres(&f).map(|r| r.unwrap().row).collect();
    let cfa = |base, offset, deref| CfaRule {
        base,
        offset,
        deref,
    };
    assert_eq!(rows[0].cfa, cfa(Reg::Sp, 8, false));
    assert_eq!(rows[0].ra, RegRule::AtCfa(-8), "fixed RA when untracked");
    assert_eq!(rows[0].fp, RegRule::Unchanged);
    assert_eq!(rows[1].cfa, cfa(Reg::Dwarf(10), 0, false));
    assert_eq!(
        rows[2].ra,
        RegRule::AtCfa(-8),
        "RA padding keeps the default"
    );
    assert_eq!(
        rows[2].fp,
        RegRule::AtReg {
            reg: Reg::Fp,
            offset: 0
        }
    );
    assert_eq!(rows[3].cfa, cfa(Reg::Fp, -8, true));
    assert_eq!(rows[4].cfa, cfa(Reg::Fp, 16, false));
    assert_eq!(rows[4].ra, RegRule::AtCfa(-8));
    assert_eq!(rows[4].fp, RegRule::AtCfa(-16));
    assert_eq!(rows[5].ra, RegRule::InReg(Reg::Dwarf(3)));
    assert_eq!(rows[5].fp, RegRule::Unchanged);
    assert_eq!(
        rows[6].ra,
        RegRule::ValReg {
            reg: Reg::Dwarf(3),
            offset: 24
        }
    );
    assert_eq!(
        rows[6].fp,
        RegRule::AtReg {
            reg: Reg::Dwarf(12),
            offset: 4
        }
    );
    assert_eq!(sec.find_row(0x40101b).unwrap(), Some(rows[3]));
}

#[test]
fn v3_signal_frame_bit() {
    let mut fde = FdeB::new(0x1000, 0x10, vec![FreB::sp(0, 8)]);
    fde.signal = true;
    let data = SectionB::v3(0, vec![fde]).build();
    let sec = Section::parse(&data, 0).unwrap();
    validate(&sec).unwrap();
    assert!(sec.fde(0).unwrap().signal_frame);
    assert!(sec.find_row(0x1000).unwrap().unwrap().signal_frame);
}

#[test]
fn aarch64_rows_as_data() {
    let fres = vec![
        FreB::sp(0, 0),
        FreB::new(4, true, &[16, -8, -16]),
        FreB::new(8, false, &[16, -8, -16]),
    ];
    let mut b = SectionB::v2(0, vec![FdeB::new(0x1000, 0x20, fres)]);
    b.abi = 2;
    b.fixed_ra = 0;
    let mut fres = b.fdes[0].fres.clone();
    fres[1].mangled_ra = true;
    b.fdes[0].fres = fres;
    b.fdes[0].pauth = 1;
    let data = b.build();
    let sec = Section::parse(&data, 0).unwrap();
    assert_eq!(sec.abi(), Abi::Aarch64Le);
    validate(&sec).unwrap();
    let r0 = sec.find_row(0x1000).unwrap().unwrap();
    assert_eq!(r0.ra, RegRule::Unchanged, "RA still in the link register");
    let r1 = sec.find_row(0x1004).unwrap().unwrap();
    assert_eq!(r1.ra, RegRule::AtCfa(-8));
    assert_eq!(r1.fp, RegRule::AtCfa(-16));
    assert!(r1.mangled_ra);
    assert_eq!(sec.fde(0).unwrap().pauth_key, 1);
    let r2 = sec.find_row(0x1008).unwrap().unwrap();
    assert_eq!(r2.cfa.base, Reg::Fp);
}

#[test]
fn big_endian_aarch64() {
    let mut b = SectionB::v3(
        0x1000,
        vec![FdeB::new(
            0x2000,
            0x300,
            vec![FreB::sp(0, 0), FreB::new(0x104, true, &[0x120, -8, -16])],
        )],
    );
    b.abi = 1;
    b.fixed_ra = 0;
    b.big_endian = true;
    let data = b.build();
    let sec = Section::parse(&data, 0x1000).unwrap();
    assert_eq!(sec.abi(), Abi::Aarch64Be);
    validate(&sec).unwrap();
    let r = sec.find_row(0x2200).unwrap().unwrap();
    assert_eq!(r.cfa.offset, 0x120);
    assert_eq!(r.fp, RegRule::AtCfa(-16));
}

#[test]
fn s390x_validates_but_rows_are_unsupported() {
    let mut b = SectionB::v2(0, vec![FdeB::new(0x1000, 0x20, vec![FreB::sp(0, 0)])]);
    b.abi = 4;
    b.fixed_ra = 0;
    b.big_endian = true;
    let data = b.build();
    let sec = Section::parse(&data, 0).unwrap();
    validate(&sec).unwrap();
    assert_eq!(sec.find_row(0x1000), Err(Error::UnsupportedRows));
}

#[test]
fn aux_header_is_skipped() {
    let mut b = SectionB::v3(ADDR, sample_fdes());
    b.aux = vec![0xaa; 7];
    let data = b.build();
    let sec = Section::parse(&data, ADDR).unwrap();
    validate(&sec).unwrap();
    assert_eq!(sec.find_row(0x401005).unwrap(), Some(sp(48)));
}

#[test]
fn validate_calls_resched() {
    let fdes: Vec<_> = (0..3000u64)
        .map(|i| FdeB::new(0x10000 + i * 16, 16, vec![FreB::sp(0, 8)]))
        .collect();
    let data = SectionB::v3(0, fdes).build();
    let sec = Section::parse(&data, 0).unwrap();
    let mut n = 0;
    sec.validate(&mut || n += 1).unwrap();
    assert_eq!(n, 2);
    assert_eq!(sec.find_row(0x10000 + 2999 * 16 + 3).unwrap(), Some(sp(8)));
}

#[test]
fn fre_scan_is_capped() {
    let n = MAX_FRES_SCANNED + 100;
    let fres: Vec<_> = (0..n)
        .map(|i| FreB::sp(i * 2, 8 + 8 * i64::from(i % 4)))
        .collect();
    let mut fde = FdeB::new(0x100000, n * 2, fres);
    fde.fre_type = 1;
    let data = SectionB::v2(0, vec![fde]).build();
    let sec = Section::parse(&data, 0).unwrap();
    validate(&sec).unwrap();
    assert!(sec.find_row(0x100000).unwrap().is_some());
    assert!(sec.find_row(0x100000 + 2 * 1000).unwrap().is_some());
    assert_eq!(
        sec.find_row(0x100000 + u64::from(n) * 2 - 1),
        Err(Error::TooManyFres)
    );
}

#[test]
fn lookups_pay_from_a_budget() {
    // One function of 600 FREs, two bytes apart; CFA = SP + 8 throughout.
    let n = 600u32;
    let fres: Vec<_> = (0..n).map(|i| FreB::sp(i * 2, 8)).collect();
    let mut fde = FdeB::new(0x100000, n * 2, fres);
    fde.fre_type = 1;
    let data = SectionB::v2(0, vec![fde]).build();
    let sec = Section::parse(&data, 0).unwrap();
    validate(&sec).unwrap();
    // The 501st FRE: the search (one FDE, one probe) and 502 FREs read
    // (the one after it shows where the row ends).
    let pc = 0x100000 + 2 * 500;
    let mut budget = Budget::new(10_000, MAX_FRES_SCANNED);
    assert_eq!(sec.find_row_within(pc, &mut budget), Ok(Some(sp(8))));
    assert_eq!((budget.spent(), budget.exhausted()), (1 + 502, false));
    // A smaller cap per lookup: the PC is beyond it, as beyond 1024 FREs
    // for `find_row`; the budget is not exhausted, the FREs are paid.
    let mut budget = Budget::new(10_000, 256);
    assert_eq!(
        sec.find_row_within(pc, &mut budget),
        Err(Error::TooManyFres)
    );
    assert_eq!((budget.spent(), budget.exhausted()), (1 + 256, false));
    // Fewer units left than the scan needs: it stops when they run out.
    let mut budget = Budget::new(300, MAX_FRES_SCANNED);
    assert_eq!(
        sec.find_row_within(pc, &mut budget),
        Err(Error::BudgetExhausted)
    );
    assert_eq!((budget.spent(), budget.exhausted()), (300, true));
    // Exhausted: nothing more is done or paid.
    assert_eq!(
        sec.find_row_within(0x100000, &mut budget),
        Err(Error::BudgetExhausted)
    );
    assert_eq!(budget.spent(), 300);
    // Not even the search can be paid for.
    let mut budget = Budget::new(0, MAX_FRES_SCANNED);
    assert_eq!(
        sec.find_row_within(0x100000, &mut budget),
        Err(Error::BudgetExhausted)
    );
    // `find_row` is an unlimited budget: same answers as before budgets.
    assert_eq!(sec.find_row(pc), Ok(Some(sp(8))));
}

#[test]
fn the_search_is_charged_its_worst_case() {
    // 3,000 FDEs: a binary search probes at most 12 (2^11 <= 3000 < 2^12).
    let data = SectionB::v2(
        0,
        (0..3000u64)
            .map(|i| FdeB::new(0x10000 + i * 16, 16, vec![FreB::sp(0, 8)]))
            .collect(),
    )
    .build();
    let sec = Section::parse(&data, 0).unwrap();
    for pc in [0x10000, 0x10000 + 1234 * 16 + 3, 0x10000 + 2999 * 16] {
        let mut budget = Budget::new(100, MAX_FRES_SCANNED);
        assert_eq!(sec.find_row_within(pc, &mut budget), Ok(Some(sp(8))));
        assert_eq!(budget.spent(), 12 + 1);
    }
    let mut budget = Budget::new(11, MAX_FRES_SCANNED);
    assert_eq!(
        sec.find_row_within(0x10000, &mut budget),
        Err(Error::BudgetExhausted)
    );
    assert_eq!(budget.spent(), 0);
}

// ---- Corruption: each error variant, provoked.

fn parse_err(data: &[u8]) -> Error {
    Section::parse(data, ADDR).unwrap_err()
}

fn validate_err(b: &SectionB) -> Error {
    let data = b.build();
    let sec = Section::parse(&data, b.addr).unwrap();
    sec.validate(&mut || {}).unwrap_err()
}

#[test]
fn truncation_at_every_length_errors() {
    for b in all_variants() {
        let data = b.build();
        for len in 0..data.len() {
            let cut = &data[..len];
            let res = Section::parse(cut, ADDR).and_then(|s| s.validate(&mut || {}));
            assert!(res.is_err(), "len {len} of {}", data.len());
            if len < 28 {
                assert_eq!(res, Err(Error::Truncated));
            }
            common::harness::exercise_section(cut, ADDR, len as u64);
        }
    }
}

#[test]
fn header_flips_never_panic() {
    for b in all_variants() {
        let data = b.build();
        for i in 0..28 {
            for v in [
                0u8,
                1,
                2,
                3,
                4,
                5,
                0x7f,
                0x80,
                0xff,
                data[i] ^ 1,
                data[i] ^ 0x10,
            ] {
                let mut d = data.clone();
                d[i] = v;
                common::harness::exercise_section(&d, ADDR, 0x401000);
            }
        }
    }
}

#[test]
fn header_errors() {
    let good = SectionB::v2(ADDR, sample_fdes()).build();
    let mut d = good.clone();
    d[0] = 0;
    assert_eq!(parse_err(&d), Error::BadMagic);
    for v in [0u8, 1, 4, 0xff] {
        let mut d = good.clone();
        d[2] = v;
        assert_eq!(parse_err(&d), Error::UnsupportedVersion(v));
    }
    for v in [0u8, 5, 0xff] {
        let mut d = good.clone();
        d[4] = v;
        assert_eq!(parse_err(&d), Error::UnsupportedAbi(v));
    }
    let mut d = good.clone();
    d[4] = 1; // AArch64 big endian with a little-endian magic
    assert_eq!(parse_err(&d), Error::EndianMismatch);
    let mut d = good.clone();
    d[3] |= 0x8;
    assert_eq!(parse_err(&d), Error::BadFlags);
    let mut v3 = SectionB::v3(ADDR, sample_fdes()).build();
    v3[3] |= 0x2; // FRAME_POINTER is not defined in V3
    assert_eq!(parse_err(&v3), Error::BadFlags);
    let mut d = good.clone();
    d[7] = 0xff;
    assert_eq!(parse_err(&d), Error::AuxHeaderOutOfBounds);
    let mut d = good.clone();
    d[8..12].copy_from_slice(&0x1000_0000u32.to_le_bytes());
    assert_eq!(parse_err(&d), Error::FdeAreaOutOfBounds);
    let mut d = good.clone();
    d[20..24].copy_from_slice(&u32::MAX.to_le_bytes());
    assert_eq!(parse_err(&d), Error::FdeAreaOutOfBounds);
    let mut d = good.clone();
    d[16..20].copy_from_slice(&0x1000_0000u32.to_le_bytes());
    assert_eq!(parse_err(&d), Error::FreAreaOutOfBounds);
    let mut d = good.clone();
    d[24..28].copy_from_slice(&0u32.to_le_bytes());
    assert_eq!(parse_err(&d), Error::AreasOverlap);
    let mut d = good.clone();
    d[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
    assert_eq!(parse_err(&d), Error::TooManyFres);
    // V3: the attributes alone must fit.
    let mut d = SectionB::v3(ADDR, sample_fdes()).build();
    d[16..20].copy_from_slice(&10u32.to_le_bytes());
    assert_eq!(parse_err(&d), Error::FreAreaOutOfBounds);
}

#[test]
fn fde_errors() {
    let data = SectionB::v2(ADDR, sample_fdes()).build();
    let sec = Section::parse(&data, ADDR).unwrap();
    assert_eq!(sec.fde(4), Err(Error::FdeIndexOutOfRange));

    // Start overflows: section near the top of the address space.
    let b = SectionB::v2_pcrel(
        u64::MAX - 100,
        vec![FdeB::new(u64::MAX - 5, 0x10, vec![FreB::sp(0, 8)])],
    );
    let data = b.build();
    let sec = Section::parse(&data, b.addr).unwrap();
    assert_eq!(sec.fde(0), Err(Error::FunctionStartOverflow));
    assert_eq!(sec.validate(&mut || {}), Err(Error::FunctionStartOverflow));
    assert_eq!(
        sec.find_row(u64::MAX - 1),
        Err(Error::FunctionStartOverflow)
    );

    let mut fdes = sample_fdes();
    fdes.swap(0, 1);
    assert_eq!(
        validate_err(&SectionB::v2(ADDR, fdes)),
        Error::FdesNotSorted
    );

    let mut fdes = sample_fdes();
    fdes[0].size = 0x41;
    assert_eq!(validate_err(&SectionB::v3(ADDR, fdes)), Error::FdesOverlap);

    let mut fdes = sample_fdes();
    fdes[1].fre_type = 3;
    assert_eq!(validate_err(&SectionB::v2(ADDR, fdes)), Error::BadFreType);

    let mut fdes = sample_fdes();
    fdes[1].fde_type = 2;
    assert_eq!(validate_err(&SectionB::v3(ADDR, fdes)), Error::BadFdeType);

    let mut fdes = sample_fdes();
    fdes[2].rep_size = 0;
    assert_eq!(validate_err(&SectionB::v2(ADDR, fdes)), Error::BadRepSize);
}

#[test]
fn fre_errors() {
    for make in [SectionB::v2, SectionB::v3] {
        let mut fdes = sample_fdes();
        fdes[1].fre_off_override = Some(0xfff0);
        assert_eq!(validate_err(&make(ADDR, fdes)), Error::FreOutOfBounds);

        let mut fdes = sample_fdes();
        fdes[0].fres[2].start = 1;
        assert_eq!(
            validate_err(&make(ADDR, fdes)),
            Error::FreStartsNotIncreasing
        );

        let mut fdes = sample_fdes();
        fdes[0].fres[4].start = 0x41;
        assert_eq!(
            validate_err(&make(ADDR, fdes)),
            Error::FreStartBeyondFunction
        );

        let mut fdes = sample_fdes();
        fdes[2].fres[1].start = 16; // PCMASK: beyond the 16-byte block
        assert_eq!(
            validate_err(&make(ADDR, fdes)),
            Error::FreStartBeyondFunction
        );

        let mut fdes = sample_fdes();
        fdes[0].fres[1].info_override = Some(0x60 | 2 | 1);
        assert_eq!(validate_err(&make(ADDR, fdes)), Error::BadDataWordSize);

        let mut fdes = sample_fdes();
        fdes[0].fres[1] = FreB::new(1, true, &[16, -16, -24]);
        assert_eq!(validate_err(&make(ADDR, fdes)), Error::BadDataWordCount);

        // Count bigger than the FREs present: reads run into the next function.
        let mut fdes = sample_fdes();
        fdes[3].num_fres_override = Some(4);
        let e = validate_err(&make(ADDR, fdes));
        assert!(
            matches!(e, Error::FreOutOfBounds | Error::CountMismatch),
            "{e:?}"
        );
    }
}

#[test]
fn flex_errors() {
    let flex = |words: &[i64]| {
        let mut fde = FdeB::new(0x1000, 0x10, vec![FreB::new(0, false, words)]);
        fde.fde_type = 1;
        SectionB::v3(0, vec![fde])
    };
    assert_eq!(
        validate_err(&flex(&[ctl(7, false, false), 8])),
        Error::BadControlWord
    );
    assert_eq!(
        validate_err(&flex(&[ctl(7, false, true) | 4, 8])),
        Error::BadControlWord
    );
    assert_eq!(
        validate_err(&flex(&[ctl(70000, false, true), 8])),
        Error::BadRegister
    );
    assert_eq!(
        validate_err(&flex(&[ctl(7, false, true)])),
        Error::BadDataWordCount
    );
    assert_eq!(
        validate_err(&flex(&[ctl(7, false, true), 8, ctl(3, false, true)])),
        Error::BadDataWordCount
    );
    assert_eq!(
        validate_err(&flex(&[ctl(7, false, true), 8, 0, 0, 0])),
        Error::BadDataWordCount
    );
}

#[test]
fn count_and_length_mismatches() {
    // Header num_fres larger than the sum over functions.
    let b = SectionB::v2(ADDR, sample_fdes());
    let mut d = b.build();
    let n = u32::from_le_bytes(d[12..16].try_into().unwrap());
    d[12..16].copy_from_slice(&(n + 1).to_le_bytes());
    let sec = Section::parse(&d, ADDR).unwrap();
    assert_eq!(sec.validate(&mut || {}), Err(Error::CountMismatch));
    // Smaller: detected as soon as the running total exceeds it.
    d[12..16].copy_from_slice(&(n - 1).to_le_bytes());
    let sec = Section::parse(&d, ADDR).unwrap();
    assert_eq!(sec.validate(&mut || {}), Err(Error::CountMismatch));

    // fre_len larger than the FREs use.
    for b in [
        SectionB::v2(ADDR, sample_fdes()),
        SectionB::v3(ADDR, sample_fdes()),
    ] {
        let mut d = b.build();
        let len = u32::from_le_bytes(d[16..20].try_into().unwrap());
        d[16..20].copy_from_slice(&(len + 3).to_le_bytes());
        d.extend_from_slice(&[0, 0, 0]);
        let sec = Section::parse(&d, ADDR).unwrap();
        assert_eq!(sec.validate(&mut || {}), Err(Error::FreLenMismatch));
    }
}

#[test]
fn huge_counts_are_bounded() {
    // A V2 FDE claiming 2^32-1 FREs: validation stops at the header count.
    let mut fdes = sample_fdes();
    fdes[0].num_fres_override = Some(u32::MAX);
    let data = SectionB::v2(ADDR, fdes).build();
    let sec = Section::parse(&data, ADDR).unwrap();
    assert_eq!(sec.validate(&mut || {}), Err(Error::CountMismatch));
    // The iterator and lookups stay bounded by the FRE area.
    let fde = sec.fde(0).unwrap();
    assert!(sec.fres(&fde).count() < 100);
    let _ = sec.find_row(0x40103f);
}

#[test]
fn v1_is_rejected() {
    let mut d = SectionB::v2(ADDR, sample_fdes()).build();
    d[2] = 1;
    assert_eq!(parse_err(&d), Error::UnsupportedVersion(1));
}

#[test]
fn error_texts() {
    let all = [
        Error::Truncated,
        Error::BadMagic,
        Error::UnsupportedVersion(1),
        Error::UnsupportedAbi(9),
        Error::EndianMismatch,
        Error::BadFlags,
        Error::AuxHeaderOutOfBounds,
        Error::FdeAreaOutOfBounds,
        Error::FreAreaOutOfBounds,
        Error::AreasOverlap,
        Error::FdeIndexOutOfRange,
        Error::FunctionStartOverflow,
        Error::FdesNotSorted,
        Error::FdesOverlap,
        Error::BadFreType,
        Error::BadFdeType,
        Error::BadRepSize,
        Error::FreOutOfBounds,
        Error::FreStartsNotIncreasing,
        Error::FreStartBeyondFunction,
        Error::BadDataWordSize,
        Error::BadDataWordCount,
        Error::BadControlWord,
        Error::BadRegister,
        Error::CountMismatch,
        Error::FreLenMismatch,
        Error::TooManyFres,
        Error::BudgetExhausted,
        Error::UnsupportedRows,
    ];
    let mut texts: Vec<&str> = all.iter().map(|e| e.as_str()).collect();
    texts.sort();
    texts.dedup();
    assert_eq!(texts.len(), all.len(), "every variant has its own text");
    assert_eq!(
        Error::UnsupportedVersion(1).to_string(),
        "unsupported SFrame version (only 2 and 3) (1)"
    );
}

#[test]
fn a_section_made_from_its_layout_is_the_parsed_one() {
    for variant in all_variants() {
        let bytes = variant.build();
        let parsed = Section::parse(&bytes, ADDR).unwrap();
        for addr in [ADDR, ADDR + 0x1000] {
            let again = Section::with_layout(&bytes, &parsed.layout(), addr).unwrap();
            assert_eq!(again.layout(), parsed.layout());
            assert_eq!(
                format!("{again:?}"),
                format!("{:?}", Section::parse(&bytes, addr).unwrap())
            );
        }
        // Bytes too short for the layout's areas are refused, whatever
        // they hold; they never make a lookup read out of bounds.
        let short = &bytes[..bytes.len() - 1];
        assert_eq!(
            Section::with_layout(short, &parsed.layout(), ADDR).err(),
            Some(Error::Truncated)
        );
        let zeros = vec![0u8; bytes.len()];
        let other = Section::with_layout(&zeros, &parsed.layout(), ADDR).unwrap();
        for pc in ADDR..ADDR + 0x400 {
            let _ = other.find_row(pc);
        }
    }
}
