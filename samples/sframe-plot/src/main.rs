// SPDX-License-Identifier: GPL-2.0

//! `sframe-plot`: the small CSV tables the benchmarks write (scripts/
//! bench-*), as bar charts in SVG beside them.
//!
//!   sframe-plot TABLE.csv...      writes TABLE.svg next to each

mod chart;
mod table;

use anyhow::Context;
use anyhow::Result;
use clap::Parser;
use std::fs;
use std::path::PathBuf;

#[derive(Parser)]
#[command(about = "Bar charts (SVG) of benchmark tables (CSV)")]
struct Args {
    /// Tables to draw; each chart is written beside its table, .svg for .csv.
    #[arg(required = true)]
    tables: Vec<PathBuf>,
}

fn main() -> Result<()> {
    let args = Args::parse();
    for path in &args.tables {
        let text =
            fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let table = table::Table::parse(&text).with_context(|| format!("in {}", path.display()))?;
        let svg = chart::svg(&table).with_context(|| format!("drawing {}", path.display()))?;
        let out = path.with_extension("svg");
        fs::write(&out, svg).with_context(|| format!("writing {}", out.display()))?;
        println!("{}", out.display());
    }
    Ok(())
}
