// SPDX-License-Identifier: GPL-2.0

//! `find_row`: this project's decoder alone, on one ELF file, without
//! chroot or libsframe. Meant for instruction counts, which stay repeatable
//! on a loaded machine where wall-clock time does not:
//!
//! ```text
//! cargo build --release -p sframe-bench --example find_row
//! valgrind --tool=callgrind --toggle-collect='*find_row::lookups*' \
//!     target/release/examples/find_row FILE --lookups 100000
//! ```
//!
//! Ir divided by the number of lookups is the cost of one lookup. The PCs
//! are the same random ones `sframe-bench` uses. `--index` builds the
//! section's lookup index first and looks up through it (as the module
//! will); `--parse-each` parses the header (and attaches the index) before
//! every lookup, as the kernel does; `--digest` prints a hash of every
//! result (rows and errors), to check that a change of the decoder keeps
//! its answers (with and without the index); `--rounds N` times N passes
//! and reports the fastest.

// The examples use its `sframe()` alone.
#[allow(dead_code)]
#[path = "../src/elf.rs"]
mod elf;
#[path = "../src/pcs.rs"]
mod pcs;

use anyhow::anyhow;
use anyhow::Context;
use anyhow::Result;
use std::hint::black_box;
use std::time::Instant;

/// The timed (and, under callgrind, counted) loop.
#[inline(never)]
fn lookups(
    data: &[u8],
    addr: u64,
    index: Option<&[u32]>,
    section: &sframe::Section<'_>,
    pcs: &[u64],
    parse_each: bool,
) -> usize {
    let mut found = 0;
    for &pc in pcs {
        let row = if parse_each {
            let parsed = sframe::Section::parse(black_box(data), addr);
            match (parsed, index) {
                (Ok(s), Some(words)) => s.with_index(black_box(words)).and_then(|s| s.find_row(pc)),
                (Ok(s), None) => s.find_row(black_box(pc)),
                (Err(e), _) => Err(e),
            }
        } else {
            black_box(section).find_row(black_box(pc))
        };
        if matches!(black_box(row), Ok(Some(_))) {
            found += 1;
        }
    }
    found
}

/// FNV-1a over the debug form of every answer.
fn digest(section: &sframe::Section<'_>, pcs: &[u64]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &pc in pcs {
        for byte in format!("{:?}", section.find_row(pc)).bytes() {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    hash
}

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let mut file = None;
    let mut count = 1_000_000;
    let mut parse_each = false;
    let mut want_digest = false;
    let mut rounds = 1;
    let mut use_index = false;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--lookups" => count = args.next().context("--lookups N")?.parse()?,
            "--rounds" => rounds = args.next().context("--rounds N")?.parse()?,
            "--parse-each" => parse_each = true,
            "--digest" => want_digest = true,
            "--index" => use_index = true,
            _ => file = Some(arg),
        }
    }
    let file = file.context(
        "usage: find_row FILE [--lookups N] [--rounds N] [--index] [--parse-each] [--digest]",
    )?;
    let data = std::fs::read(&file).with_context(|| file.clone())?;
    let (bytes, addr) = elf::sframe(&data)?;
    let section = sframe::Section::parse(bytes, addr).map_err(|e| anyhow!("sframe: {e}"))?;
    section
        .validate(&mut || {})
        .map_err(|e| anyhow!("sframe: {e}"))?;
    let (start, end) = section
        .text_range()
        .map_err(|e| anyhow!("sframe: {e}"))?
        .ok_or_else(|| anyhow!("no FDEs"))?;
    let mut words = Vec::new();
    if use_index {
        words.resize(section.index_words().map_err(|e| anyhow!("{e}"))?, 0);
        section
            .build_index(&mut words, &mut || {})
            .map_err(|e| anyhow!("index: {e}"))?;
    }
    let index = use_index.then_some(&words[..]);
    let section = match index {
        Some(words) => section.with_index(words).map_err(|e| anyhow!("{e}"))?,
        None => section,
    };
    // A little outside the text too, so misses are part of the mix.
    let pcs = pcs::random_pcs(count, start.saturating_sub(64), end.saturating_add(64));

    // The fastest of `rounds` passes: the least disturbed by other work.
    let mut ns = f64::MAX;
    let mut found = 0;
    for _ in 0..rounds {
        let t = Instant::now();
        found = lookups(bytes, addr, index, &section, &pcs, parse_each);
        ns = ns.min(t.elapsed().as_secs_f64() * 1e9 / pcs.len().max(1) as f64);
    }
    println!(
        "{file}: {} FDEs, {} lookups, {found} found, {ns:.1} ns/lookup{}{}",
        section.num_fdes(),
        pcs.len(),
        if use_index {
            format!(" (index: {} bytes)", words.len() * 4)
        } else {
            String::new()
        },
        if parse_each { " (parse each)" } else { "" }
    );
    if want_digest {
        println!("digest {:016x}", digest(&section, &pcs));
    }
    Ok(())
}
