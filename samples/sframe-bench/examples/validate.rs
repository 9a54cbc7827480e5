// SPDX-License-Identifier: GPL-2.0

//! `validate`: the cost of what the module does to a section at
//! registration (`Section::parse`, `validate`, `text_range`) and, with
//! `--index`, of building its lookup index, for one ELF file's `.sframe`
//! or, with `--synth`, for the section generated from its `.eh_frame` (a
//! libc without SFrame: what the audit library registers).
//!
//! ```text
//! cargo build --release -p sframe-bench --example validate
//! valgrind --tool=callgrind --toggle-collect='validate::register' \
//!     target/release/examples/validate --synth /lib/x86_64-linux-gnu/libc.so.6
//! ```
//!
//! Ir divided by the section's bytes is the cost per byte.  `--save PATH`
//! writes the section (to compare the generator's output across changes).

// The examples use its `sframe()` alone.
#[allow(dead_code)]
#[path = "../src/elf.rs"]
mod elf;

use anyhow::anyhow;
use anyhow::Context;
use anyhow::Result;
use std::hint::black_box;
use std::time::Instant;

/// What the module does at registration (the measured part).
#[inline(never)]
fn register(data: &[u8], addr: u64, index: Option<&mut Vec<u32>>) -> Result<(u64, u64)> {
    let section = sframe::Section::parse(black_box(data), addr).map_err(|e| anyhow!("{e}"))?;
    section.validate(&mut || {}).map_err(|e| anyhow!("{e}"))?;
    if let Some(words) = index {
        words.clear();
        words.resize(section.index_words().map_err(|e| anyhow!("{e}"))?, 0);
        section
            .build_index(words, &mut || {})
            .map_err(|e| anyhow!("{e}"))?;
    }
    section
        .text_range()
        .map_err(|e| anyhow!("{e}"))?
        .ok_or_else(|| anyhow!("no FDEs"))
}

fn main() -> Result<()> {
    let mut file = None;
    let mut synth = false;
    let mut index = false;
    let mut rounds = 1u32;
    let mut save = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--synth" => synth = true,
            "--index" => index = true,
            "--rounds" => rounds = args.next().context("--rounds N")?.parse()?,
            "--save" => save = Some(args.next().context("--save PATH")?),
            _ => file = Some(arg),
        }
    }
    let file =
        file.context("usage: validate [--synth] [--index] [--rounds N] [--save PATH] FILE")?;
    let elf = std::fs::read(&file).with_context(|| file.clone())?;
    let (bytes, addr) = if synth {
        let gen = sframe_synth::synth_elf(&elf, &sframe_synth::Options::default())
            .map_err(|e| anyhow!("{file}: {e}"))?;
        (gen.section, gen.base)
    } else {
        let (bytes, addr) = elf::sframe(&elf)?;
        (bytes.to_vec(), addr)
    };
    if let Some(path) = save {
        std::fs::write(&path, &bytes).with_context(|| path.clone())?;
    }
    let mut words = Vec::new();
    let mut best = f64::MAX;
    for _ in 0..rounds {
        let t = Instant::now();
        register(&bytes, addr, index.then_some(&mut words))?;
        best = best.min(t.elapsed().as_secs_f64() * 1e6);
    }
    println!(
        "{file}: {} bytes{}, registration checks {best:.0} us{}",
        bytes.len(),
        if synth { " (generated)" } else { "" },
        if index {
            format!(", index {} bytes", words.len() * 4)
        } else {
            String::new()
        }
    );
    Ok(())
}
