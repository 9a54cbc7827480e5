// SPDX-License-Identifier: GPL-2.0

//! `synth-bench FILE...`: how long the generator takes per object, and the
//! sizes it produces, for `scripts/bench-synth`.
//!
//! For each ELF file: `.eh_frame` and `.eh_frame_hdr` sizes, the generated
//! section's size, the object's own `.sframe` size (if built with
//! `-Wa,--gsframe`), and the fastest of `--rounds` generations (the whole
//! of `sframe_synth::synth_elf`: CFI evaluation, encoding, validation).

use anyhow::Context;
use anyhow::Result;
use clap::Parser;
use object::Object;
use object::ObjectSection;
use std::path::PathBuf;
use std::time::Duration;
use std::time::Instant;

/// Time SFrame generation from .eh_frame.
#[derive(Parser)]
#[command(name = "synth-bench", about)]
struct Cli {
    /// ELF files (executables or shared objects).
    files: Vec<PathBuf>,
    /// Generations per file; the fastest counts.
    #[arg(long, default_value_t = 20)]
    rounds: u32,
}

fn section_size(file: &object::File<'_>, name: &str) -> u64 {
    file.section_by_name(name).map_or(0, |s| s.size())
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    println!(
        "{:<28} {:>10} {:>10} {:>10} {:>10} {:>9} {:>9} {:>8}",
        "object", "eh_frame", "eh_hdr", "generated", "as_sframe", "gen/eh", "ms", "ms/MB"
    );
    for path in &cli.files {
        let data = std::fs::read(path).with_context(|| path.display().to_string())?;
        let file = object::File::parse(&*data).with_context(|| path.display().to_string())?;
        let eh = section_size(&file, ".eh_frame");
        let hdr = section_size(&file, ".eh_frame_hdr");
        let own = section_size(&file, ".sframe");
        let opts = sframe_synth::Options::default();
        let mut best = Duration::MAX;
        let mut size = 0;
        for _ in 0..cli.rounds.max(1) {
            let start = Instant::now();
            let gen = sframe_synth::synth_elf(&data, &opts)
                .map_err(anyhow::Error::msg)
                .with_context(|| path.display().to_string())?;
            best = best.min(start.elapsed());
            size = gen.section.len();
        }
        let ms = best.as_secs_f64() * 1e3;
        let name = path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        println!(
            "{:<28} {:>10} {:>10} {:>10} {:>10} {:>9.2} {:>9.2} {:>8.1}",
            name,
            eh,
            hdr,
            size,
            own,
            size as f64 / (eh + hdr).max(1) as f64,
            ms,
            ms / (eh.max(1) as f64 / (1 << 20) as f64)
        );
    }
    Ok(())
}
