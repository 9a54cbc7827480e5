// SPDX-License-Identifier: GPL-2.0

//! `hostile_walk`: the most a process can make one walk cost, with the
//! limits walks had before work budgets and with the module's limits of
//! today, on the host.
//!
//! ```text
//! cargo run --release -p sframe-bench --example hostile_walk [-- --frames N --walks N]
//! ```
//!
//! A process registers its own section and owns its stack, so it can make
//! every frame as costly as the limits allow. The stacks are those of the
//! walk tests (`rust/sframe/tests/common/hostile.rs`): a ring of forged
//! `rt_sigreturn` frames (each resets the CFA checks) through functions of
//! many FREs, and an ordinary-looking upward chain through such functions.
//! The walker is the module's own (`walk_amd64`), with the limits
//! `rust/unwind/walk.rs` passes (`WalkLimits::sample`, `WalkLimits::deferred`)
//! and perf's default `max_stack` of 127 frames. Memory reads are plain
//! copies here, where the kernel pays `copy_from_user_nmi()`; they are a few
//! per frame against hundreds of FREs decoded, so the decoder's work, the
//! same code as the module's, dominates both.

#[path = "../../../rust/sframe/tests/common/mod.rs"]
mod common;

use anyhow::Context;
use anyhow::Result;
use common::hostile::{deep_chain, sigreturn_chain, Hostile, SectionRows};
use sframe::unwind::{walk_amd64_metered, WalkLimits, Walked, SAMPLE_MAX_FRES};
use sframe::MAX_FRES_SCANNED;
use std::hint::black_box;
use std::time::Instant;

/// perf's default `kernel.perf_event_max_stack`.
const PERF_MAX_STACK: u32 = 127;
/// The module's `MAX_SPAN` (`rust/unwind/walk.rs`).
const MAX_SPAN: u64 = 64 << 20;

/// Runs `walks` walks of `h` under `limits`, `rounds` times; the fastest
/// round's ns per walk, and one walk's result.
fn time(h: &Hostile, limits: &WalkLimits, walks: u32, rounds: u32) -> (f64, Walked) {
    let section = h.parse();
    let mut best = f64::MAX;
    let mut last = None;
    for _ in 0..rounds {
        let mut mem = h.mem.clone();
        let t = Instant::now();
        for _ in 0..walks {
            let mut lookup = SectionRows(section);
            let walked = walk_amd64_metered(
                black_box(h.start),
                limits,
                &mut lookup,
                &mut mem,
                &mut |pc, _| {
                    black_box(pc);
                    true
                },
            );
            last = Some(walked);
        }
        best = best.min(t.elapsed().as_secs_f64() * 1e9 / f64::from(walks.max(1)));
    }
    (best, last.expect("at least one walk"))
}

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let mut frames = PERF_MAX_STACK;
    let mut walks = 200;
    let mut rounds = 5;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--frames" => frames = args.next().context("--frames N")?.parse()?,
            "--walks" => walks = args.next().context("--walks N")?.parse()?,
            "--rounds" => rounds = args.next().context("--rounds N")?.parse()?,
            _ => anyhow::bail!("usage: hostile_walk [--frames N] [--walks N] [--rounds N]"),
        }
    }
    let limit_sets = [
        ("before budgets", WalkLimits::unbudgeted(frames, MAX_SPAN)),
        ("sample path", WalkLimits::sample(frames, MAX_SPAN)),
        ("deferred path", WalkLimits::deferred(frames, MAX_SPAN)),
    ];
    // The costliest functions each set of limits lets a lookup finish.
    let (small, large) = (SAMPLE_MAX_FRES, MAX_FRES_SCANNED);
    let stacks = [
        ("honest: 5 FREs per function".to_string(), deep_chain(5)),
        (format!("upward chain, {small} FREs"), deep_chain(small)),
        (format!("upward chain, {large} FREs"), deep_chain(large)),
        (
            format!("forged signal frames, {small} FREs"),
            sigreturn_chain(small, large + 1),
        ),
        (
            format!("forged signal frames, {large} FREs"),
            sigreturn_chain(large, large + 1),
        ),
    ];
    println!("Hostile walks, max_frames {frames}, {walks} walks x {rounds} rounds (fastest)");
    println!();
    println!(
        "{:<34} {:<15} {:>10} {:>10} {:>7}  stop",
        "stack", "limits", "ns/walk", "work/walk", "frames"
    );
    let mut worst = [(0f64, 0u32); 3];
    for (name, h) in &stacks {
        for (i, (lname, limits)) in limit_sets.iter().enumerate() {
            let (ns, w) = time(h, limits, walks, rounds);
            println!(
                "{name:<34} {lname:<15} {ns:>10.0} {:>10} {:>7}  {:?}",
                w.work, w.frames, w.stop
            );
            if let Some(slot) = worst.get_mut(i) {
                if ns > slot.0 {
                    *slot = (ns, w.work);
                }
            }
        }
    }
    println!();
    println!("Worst case per walk:");
    for ((lname, _), (ns, work)) in limit_sets.iter().zip(worst) {
        println!("  {lname:<15} {ns:>10.0} ns  {work:>7} work units");
    }
    if worst[1].0 > 0.0 {
        println!(
            "  sample path: {:.1}x less time, {:.1}x less work than before budgets",
            worst[0].0 / worst[1].0,
            f64::from(worst[0].1) / f64::from(worst[1].1.max(1))
        );
    }
    Ok(())
}
