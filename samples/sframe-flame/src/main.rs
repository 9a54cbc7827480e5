// SPDX-License-Identifier: GPL-2.0

//! `sframe-flame`: perf recordings as flame graphs, side by side in one
//! HTML page (`make demo` shows a recording without the module beside one
//! with it).
//!
//!   sframe-flame --out DIR [--title T] [--note TEXT]... LABEL=SCRIPT...
//!
//! Each SCRIPT is the text `perf script` printed for a recording (perf
//! runs where the recording's objects are, in the guest root).  Writes
//! DIR/index.html and one SVG per recording beside it, and prints the
//! page's path.

mod folded;
mod graph;
mod page;

use anyhow::bail;
use anyhow::Context;
use anyhow::Result;
use clap::Parser;
use folded::Folded;
use std::fs;
use std::path::PathBuf;

/// Width of each graph in pixels; the page scales them to its columns.
const WIDTH: usize = 900;

#[derive(Parser)]
#[command(about = "Flame graphs of perf recordings, side by side in one HTML page")]
struct Args {
    /// Directory for index.html and the SVG files (created).
    #[arg(long)]
    out: PathBuf,
    /// The page's title.
    #[arg(long, default_value = "Flame graphs")]
    title: String,
    /// A line of text above the graphs (repeatable).
    #[arg(long)]
    note: Vec<String>,
    /// LABEL=FILE: a graph headed LABEL of the `perf script` output in FILE.
    #[arg(required = true)]
    graphs: Vec<String>,
}

fn main() -> Result<()> {
    let args = Args::parse();
    fs::create_dir_all(&args.out).with_context(|| format!("creating {}", args.out.display()))?;
    let mut panes = Vec::new();
    for (i, spec) in args.graphs.iter().enumerate() {
        let Some((label, file)) = spec.split_once('=') else {
            bail!("{spec}: expected LABEL=FILE");
        };
        let script = fs::read(file).with_context(|| format!("reading {file}"))?;
        let folded = Folded::from_perf_script(&script).with_context(|| format!("in {file}"))?;
        if folded.samples() == 0 {
            bail!("{file}: no samples with a callchain");
        }
        let subtitle = format!(
            "{} samples; the median one {} frames deep",
            folded.samples(),
            folded.median_depth()
        );
        let graph = graph::draw(&folded, label, &subtitle, WIDTH)?;
        let name = format!("{}.svg", i + 1);
        let path = args.out.join(&name);
        fs::write(&path, &graph.svg).with_context(|| format!("writing {}", path.display()))?;
        panes.push(page::Pane {
            label: label.to_owned(),
            file: name,
            width: graph.width,
            height: graph.height,
            caption: subtitle,
        });
    }
    let index = args.out.join("index.html");
    fs::write(&index, page::html(&args.title, &args.note, &panes))
        .with_context(|| format!("writing {}", index.display()))?;
    println!("{}", index.display());
    Ok(())
}
