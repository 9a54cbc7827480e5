// SPDX-License-Identifier: GPL-2.0

//! `sframe-bench`: PC-to-row lookups per second on one ELF file, for this
//! project's decoder, binutils' libsframe (`sframe_find_fre`, loaded with
//! dlopen) and gimli's `.eh_frame` lookup through the `.eh_frame_hdr`
//! search table, side by side on the same random PCs. Run it where a
//! libsframe that reads the file's SFrame version is installed
//! (`scripts/bench-decoder` runs it in the Debian trixie root).

mod eh_frame;
mod elf;
mod libsframe;
mod pcs;

use anyhow::anyhow;
use anyhow::Context;
use anyhow::Result;
use clap::Parser;
use std::hint::black_box;
use std::path::PathBuf;
use std::time::Duration;
use std::time::Instant;

/// Benchmark SFrame and .eh_frame lookups on one ELF file.
#[derive(Parser)]
#[command(name = "sframe-bench", about)]
struct Cli {
    /// ELF file with .sframe, .eh_frame and .eh_frame_hdr sections.
    file: PathBuf,
    /// Random PCs per round.
    #[arg(long, default_value_t = 1_000_000)]
    lookups: usize,
    /// Rounds per implementation; the fastest counts.
    #[arg(long, default_value_t = 5)]
    rounds: u32,
    /// libsframe shared object to dlopen (default: libsframe.so.1, .so.2, .so.3).
    #[arg(long)]
    libsframe: Option<String>,
}

/// The CFA rule of a row, to check the implementations agree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Cfa {
    /// DWARF register number (x86-64: 7 %rsp, 6 %rbp).
    pub(crate) reg: u16,
    pub(crate) offset: i64,
}

/// One implementation under test: a lookup from PC to CFA rule.
struct Contender<'a> {
    name: String,
    lookup: Box<dyn FnMut(u64) -> Option<Cfa> + 'a>,
    /// Whether its CFA rules can be compared with the others'.
    gives_rows: bool,
}

/// The fastest of `rounds` passes over `pcs`, and the number of PCs found.
fn measure(contender: &mut Contender<'_>, pcs: &[u64], rounds: u32) -> (Duration, usize) {
    let mut best = Duration::MAX;
    let mut found = 0;
    for _ in 0..rounds {
        let start = Instant::now();
        found = 0;
        for &pc in pcs {
            if black_box((contender.lookup)(black_box(pc))).is_some() {
                found += 1;
            }
        }
        best = best.min(start.elapsed());
    }
    (best, found)
}

/// How often `other` gives the same CFA rule as `reference` where both
/// have a row.
fn agreement(reference: &[Option<Cfa>], other: &[Option<Cfa>]) -> (usize, usize) {
    let both = reference
        .iter()
        .zip(other)
        .filter_map(|(a, b)| Some((a.as_ref()?, b.as_ref()?)));
    both.fold((0, 0), |(same, total), (a, b)| {
        (same + usize::from(a == b), total + 1)
    })
}

fn sframe_cfa(row: &sframe::Row) -> Cfa {
    let reg = match row.cfa.base {
        sframe::Reg::Sp => 7,
        sframe::Reg::Fp => 6,
        sframe::Reg::Dwarf(n) => n,
    };
    Cfa {
        reg,
        offset: row.cfa.offset.into(),
    }
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    let data = std::fs::read(&cli.file).with_context(|| cli.file.display().to_string())?;
    let sections = elf::Sections::find(&data)?;

    let section = sframe::Section::parse(sections.sframe, sections.sframe_addr)
        .map_err(|e| anyhow!("sframe: {e}"))?;
    section
        .validate(&mut || {})
        .map_err(|e| anyhow!("sframe: {e}"))?;
    let (start, end) = section
        .text_range()
        .map_err(|e| anyhow!("sframe: {e}"))?
        .ok_or_else(|| anyhow!("no FDEs"))?;
    // The lookup index and the row table, built once, as the module builds
    // them at registration.
    let mut words = vec![0u32; section.index_words().map_err(|e| anyhow!("index: {e}"))?];
    section
        .build_index(&mut words, &mut || {})
        .map_err(|e| anyhow!("index: {e}"))?;
    let indexed = section
        .with_index(&words)
        .map_err(|e| anyhow!("index: {e}"))?;
    let mut table = vec![
        0u32;
        section
            .table_words(&mut || {})
            .map_err(|e| anyhow!("table: {e}"))?
    ];
    section
        .build_table(&mut table, &mut || {})
        .map_err(|e| anyhow!("table: {e}"))?;
    let tabled = indexed
        .with_table(&table)
        .map_err(|e| anyhow!("table: {e}"))?;
    let version = match section.version() {
        sframe::Version::V2 => 2,
        sframe::Version::V3 => 3,
    };
    println!(
        "file: {} (SFrame V{version}, {} FDEs, {} FREs, {} bytes; text {start:#x}..{end:#x})",
        cli.file.display(),
        section.num_fdes(),
        section.num_fres(),
        sections.sframe.len(),
    );
    let pcs = pcs::random_pcs(cli.lookups, start, end);

    let libsframe = libsframe::Library::open(cli.libsframe.as_deref());
    let decoder = match &libsframe {
        Ok(lib) => lib.decode(sections.sframe),
        Err(err) => Err(anyhow!("{err:#}")),
    };
    let eh_frame = eh_frame::Table::new(&sections);

    let mut contenders = vec![
        Contender {
            name: "sframe, row table (the module's)".to_string(),
            lookup: Box::new(|pc| {
                tabled
                    .find_row(pc)
                    .ok()
                    .flatten()
                    .map(|row| sframe_cfa(&row))
            }),
            gives_rows: true,
        },
        Contender {
            name: "sframe (this project)".to_string(),
            lookup: Box::new(|pc| {
                indexed
                    .find_row(pc)
                    .ok()
                    .flatten()
                    .map(|row| sframe_cfa(&row))
            }),
            gives_rows: true,
        },
        Contender {
            name: "sframe, without its index".to_string(),
            lookup: Box::new(|pc| {
                section
                    .find_row(pc)
                    .ok()
                    .flatten()
                    .map(|row| sframe_cfa(&row))
            }),
            gives_rows: true,
        },
    ];
    match &decoder {
        Ok(decoder) => contenders.push(Contender {
            name: format!("libsframe ({})", decoder.library_name()),
            lookup: Box::new(|pc| {
                // Text usually lies below the section: a negative offset.
                decoder.find_cfa(pc.wrapping_sub(sections.sframe_addr) as i64)
            }),
            gives_rows: decoder.gives_rows(),
        }),
        Err(err) => println!("libsframe: skipped: {err:#}"),
    }
    match &eh_frame {
        Ok(table) => {
            let mut context = table.context();
            contenders.push(Contender {
                name: "gimli .eh_frame_hdr + .eh_frame".to_string(),
                lookup: Box::new(move |pc| table.find_cfa(&mut context, pc)),
                gives_rows: true,
            });
        }
        Err(err) => println!("gimli: skipped: {err:#}"),
    }

    // Correctness first: the same PCs must give the same CFA rules.
    let sample = &pcs[..pcs.len().min(100_000)];
    let results: Vec<Vec<Option<Cfa>>> = contenders
        .iter_mut()
        .map(|c| sample.iter().map(|&pc| (c.lookup)(pc)).collect())
        .collect();

    println!(
        "lookups: {} random PCs in the text range, fastest of {} rounds",
        pcs.len(),
        cli.rounds
    );
    println!(
        "{:<34} {:>10} {:>12} {:>9} {:>14} {:>16}",
        "implementation", "ns/lookup", "lookups/s", "found", "relative", "same CFA rule"
    );
    let mut reference_ns = None;
    for (index, contender) in contenders.iter_mut().enumerate() {
        let (time, found) = measure(contender, &pcs, cli.rounds);
        let ns = time.as_secs_f64() * 1e9 / pcs.len() as f64;
        let relative = match reference_ns {
            None => {
                reference_ns = Some(ns);
                "1.00x".to_string()
            }
            Some(ours) => format!("{:.2}x slower", ns / ours),
        };
        let same = if contender.gives_rows {
            let (same, total) = agreement(&results[0], &results[index]);
            format!("{same}/{total}")
        } else {
            "n/a".to_string()
        };
        println!(
            "{:<34} {:>10.1} {:>12.0} {:>8.1}% {:>14} {:>16}",
            contender.name,
            ns,
            1e9 / ns,
            100.0 * found as f64 / pcs.len() as f64,
            relative,
            same,
        );
    }

    // What the kernel keeps per registered section once it indexes them:
    // the validated copy, searched in place, its lookup index, plus the
    // section descriptor.
    let descriptor = std::mem::size_of::<sframe::Section<'_>>();
    let index = words.len() * 4;
    let rows = table.len() * 4;
    let held = sections.sframe.len() + index + rows + descriptor;
    println!(
        "kernel memory per section: {} bytes copied + {index} bytes index ({:.2} per FDE) + \
         {rows} bytes row table + {descriptor} bytes descriptor = {held} bytes, {:.3}x the section; \
         .eh_frame + .eh_frame_hdr: {} bytes",
        sections.sframe.len(),
        index as f64 / f64::from(section.num_fdes().max(1)),
        held as f64 / sections.sframe.len() as f64,
        sections.eh_frame.len() + sections.eh_frame_hdr.len(),
    );
    Ok(())
}
