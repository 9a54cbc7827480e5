// SPDX-License-Identifier: GPL-2.0

//! Runs the generator over many ELF files and sums up: how many produced
//! a section, rows emitted and refused by reason, bytes, time.
//!
//!     cargo run -p sframe-synth --release --example survey -- FILE...

use sframe_synth::synth_elf;
use sframe_synth::Error;
use sframe_synth::Options;
use sframe_synth::Reason;
use sframe_synth::Version;
use std::collections::BTreeMap;
use std::time::Duration;
use std::time::Instant;

fn main() {
    let version = if std::env::var_os("SURVEY_V2").is_some() {
        Version::V2
    } else {
        Version::V3
    };
    let opts = Options {
        version,
        ..Options::default()
    };
    let (mut files, mut ok, mut eh_bytes, mut out_bytes) = (0u64, 0u64, 0u64, 0u64);
    let (mut rows, mut emitted, mut fdes, mut covered) = (0u64, 0u64, 0u64, 0u64);
    let mut refused: BTreeMap<Reason, (u64, u64, u64)> = BTreeMap::new();
    let mut errors: BTreeMap<String, u64> = BTreeMap::new();
    let mut time = Duration::ZERO;
    let mut slowest = (Duration::ZERO, String::new());
    for path in std::env::args().skip(1) {
        let Ok(data) = std::fs::read(&path) else {
            continue;
        };
        if data.get(..4) != Some(b"\x7fELF") {
            continue;
        }
        files += 1;
        let start = Instant::now();
        let result = synth_elf(&data, &opts);
        let took = start.elapsed();
        time += took;
        if took > slowest.0 {
            slowest = (took, path.clone());
        }
        let stats = match &result {
            Ok(out) => {
                ok += 1;
                out_bytes += out.section.len() as u64;
                eh_bytes += eh_frame_len(&data);
                Some(out.stats.clone())
            }
            Err(Error::NothingUsable(s)) => Some((**s).clone()),
            Err(e) => {
                let key = match e {
                    Error::Elf(_) => "not ELF".to_string(),
                    other => other.to_string(),
                };
                *errors.entry(key).or_default() += 1;
                if let Error::Invalid(_) = e {
                    eprintln!("{path}: {e}");
                }
                None
            }
        };
        if let Some(s) = stats {
            rows += s.rows;
            emitted += s.rows_emitted;
            fdes += s.cfi_fdes;
            covered += s.bytes_covered;
            for (reason, r) in s.refusals() {
                let e = refused.entry(reason).or_default();
                e.0 += r.fdes;
                e.1 += r.rows;
                e.2 += r.bytes;
            }
        }
    }
    println!("{files} ELF files, {ok} with a generated section ({version:?})");
    println!(
        "CFI FDEs {fdes}, rows {rows}, emitted {emitted} ({:.3}%), text bytes covered {covered}",
        100.0 * emitted as f64 / rows.max(1) as f64
    );
    println!(
        "output {out_bytes} bytes for {eh_bytes} bytes of .eh_frame + .eh_frame_hdr ({:.2}x)",
        out_bytes as f64 / eh_bytes.max(1) as f64
    );
    println!(
        "time {:.1} ms total, slowest {:.1} ms ({})",
        time.as_secs_f64() * 1e3,
        slowest.0.as_secs_f64() * 1e3,
        slowest.1
    );
    for (reason, (f, r, b)) in &refused {
        println!("  refused {reason}: {f} FDEs, {r} rows, {b} bytes");
    }
    for (e, n) in &errors {
        println!("  no section: {e}: {n}");
    }
}

fn eh_frame_len(data: &[u8]) -> u64 {
    use object::Object;
    use object::ObjectSection;
    let Ok(file) = object::File::parse(data) else {
        return 0;
    };
    [".eh_frame", ".eh_frame_hdr"]
        .iter()
        .filter_map(|n| file.section_by_name(n))
        .map(|s| s.size())
        .sum()
}
