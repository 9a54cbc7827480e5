// SPDX-License-Identifier: GPL-2.0

//! What the SFrame generator makes of an ELF file's `.eh_frame`: the
//! coverage report of `sframectl check` and `sframectl synth`.

use anyhow::Result;
use object::Object;
use object::ObjectSection;
use object::SectionKind;
use sframe_synth::Synthesized;
use std::io::Write;

/// Bytes of the executable sections, and of `.text` alone, that the
/// generated section describes.
struct Share {
    text: (u64, u64),
    exec: (u64, u64),
}

fn overlap(a: (u64, u64), b: (u64, u64)) -> u64 {
    a.1.min(b.1).saturating_sub(a.0.max(b.0))
}

fn share(elf: &[u8], out: &Synthesized) -> Option<Share> {
    let file = object::File::parse(elf).ok()?;
    let section = sframe::Section::parse(&out.section, out.base).ok()?;
    let ranges: Vec<(u64, u64)> = section
        .fdes()
        .filter_map(|f| f.ok())
        .map(|f| (f.start, f.end()))
        .collect();
    let covered = |r: (u64, u64)| ranges.iter().map(|&f| overlap(f, r)).sum::<u64>();
    let mut share = Share {
        text: (0, 0),
        exec: (0, 0),
    };
    for s in file.sections() {
        if s.kind() != SectionKind::Text {
            continue;
        }
        let r = (s.address(), s.address().saturating_add(s.size()));
        share.exec.0 += covered(r);
        share.exec.1 += s.size();
        if s.name() == Ok(".text") {
            share.text = (covered(r), s.size());
        }
    }
    Some(share)
}

fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

/// Prints the generator's figures for `elf`.
pub(crate) fn print(out: &mut impl Write, elf: &[u8], gen: &Synthesized) -> Result<()> {
    let s = &gen.stats;
    writeln!(
        out,
        "generated from .eh_frame: SFrame V{}, {} CFI FDEs -> {} SFrame FDEs, {} FREs, {} bytes, base {:#x}",
        crate::names::version_number(gen.version),
        s.cfi_fdes,
        s.sframe_fdes,
        s.sframe_fres,
        gen.section.len(),
        gen.base
    )?;
    writeln!(
        out,
        "  rows: {} of {} emitted ({:.1}%), {} refused",
        s.rows_emitted,
        s.rows,
        percent(s.rows_emitted, s.rows),
        s.rows_refused()
    )?;
    if let Some(share) = share(elf, gen) {
        writeln!(
            out,
            "  coverage: .text {} of {} bytes ({:.1}%), all executable sections {} of {} bytes ({:.1}%)",
            share.text.0,
            share.text.1,
            percent(share.text.0, share.text.1),
            share.exec.0,
            share.exec.1,
            percent(share.exec.0, share.exec.1)
        )?;
    }
    print_refusals(out, s)
}

/// One line per reason the generator refused rows for.
fn print_refusals(out: &mut impl Write, s: &sframe_synth::Stats) -> Result<()> {
    for (reason, r) in s.refusals() {
        writeln!(
            out,
            "  refused {}: {} FDEs, {} rows, {} bytes",
            reason.as_str(),
            r.fdes,
            r.rows,
            r.bytes
        )?;
    }
    Ok(())
}

/// Prints why the generator produced nothing.
pub(crate) fn print_failure(out: &mut impl Write, err: &sframe_synth::Error) -> Result<()> {
    writeln!(out, "generated from .eh_frame: nothing: {err}")?;
    if let sframe_synth::Error::NothingUsable(s) = err {
        print_refusals(out, s)?;
    }
    Ok(())
}
