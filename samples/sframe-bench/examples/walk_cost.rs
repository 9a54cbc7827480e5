// SPDX-License-Identifier: GPL-2.0

//! `walk_cost`: instructions per frame of the module's SFrame walk on the
//! host, against a frame-pointer walk of perf's shape, on one ELF file's
//! `.sframe`. The host counterpart of `scripts/bench-frame-cost` (which
//! counts the module's walk in the kernel, user reads and all): the same
//! walker (`walk_amd64_metered`, `WalkLimits::sample`) and row lookup
//! (the section with its index and row table attached, as the module
//! attaches them at registration), with reads from a flat buffer, so that
//! a change to the decoder or the walk can be measured in seconds:
//!
//! ```text
//! CARGO_PROFILE_RELEASE_OVERFLOW_CHECKS=true \
//!     cargo build --release -p sframe-bench --example walk_cost
//! valgrind --tool=callgrind --toggle-collect='*walk_cost::walks*' \
//!     target/release/examples/walk_cost FILE [--depth N] [--walks N] [--fp | --one]
//! ```
//!
//! Ir divided by walks times frames is the cost of a frame (the walks'
//! set-up included, spread over DEPTH frames). The stack is made for the
//! file: DEPTH frames, each in the next of the section's functions (PLT
//! stubs aside) that has a row with the CFA at SP and the return address
//! at CFA - 8 (a function built without frame pointers, after its
//! prologue), round
//! robin, so that consecutive frames are in different functions, as most
//! of a real chain's are. `--one` puts every frame in the first such
//! function (a recursion); `--fp` walks a chain of frame records of the
//! same depth the way perf's own walk does (one read of `{FP, RA}` per
//! frame, then the store), the floor the SFrame walk is measured against;
//! `--fp-step` walks that chain with the module's walker and no rows (its
//! frame-pointer step, as with the module's `unwind_fp_only=1`).
//! The table's hints are attached as the module attaches them, so that
//! from the second walk on its lookups find their entries without the
//! search (the same return addresses, walk after walk, as a workload's
//! samples give them); `--no-hints` walks without them.
//! Overflow checks are on, as in the module's build.

// The examples use its `sframe()` alone.
#[allow(dead_code)]
#[path = "../src/elf.rs"]
mod elf;

use anyhow::{anyhow, bail, Context, Result};
use sframe::unwind::{walk_amd64_metered, Lookup, Memory, Regs, WalkLimits};
use sframe::{Budget, FoundRow, PcType, Reg, RegRule, Row, Section};
use std::hint::black_box;
use std::sync::atomic::AtomicU64;

/// The module's `MAX_SPAN` (`rust/unwind/walk.rs`).
const MAX_SPAN: u64 = 64 << 20;
/// Where the made-up stack starts.
const STACK_BASE: u64 = 0x7ffd_0000_0000;

/// A stack as one flat buffer: word reads are a bounds check and a load,
/// as `__get_user()` of a mapped page is little more.
struct Flat {
    base: u64,
    bytes: Vec<u8>,
}

impl Flat {
    fn put(&mut self, addr: u64, value: u64) -> Result<()> {
        let at = usize::try_from(addr - self.base)?;
        let end = at + 8;
        if self.bytes.len() < end {
            self.bytes.resize(end, 0);
        }
        self.bytes[at..end].copy_from_slice(&value.to_le_bytes());
        Ok(())
    }
}

impl Memory for Flat {
    #[inline(always)]
    fn read_u64(&mut self, addr: u64) -> Option<u64> {
        let at = usize::try_from(addr.checked_sub(self.base)?).ok()?;
        let word = self.bytes.get(at..at.checked_add(8)?)?;
        Some(u64::from_le_bytes(word.try_into().ok()?))
    }

    fn read(&mut self, addr: u64, buf: &mut [u8]) -> bool {
        let Some(at) = addr
            .checked_sub(self.base)
            .and_then(|a| usize::try_from(a).ok())
        else {
            return false;
        };
        match self.bytes.get(at..at.saturating_add(buf.len())) {
            Some(src) => {
                buf.copy_from_slice(src);
                true
            }
            None => false,
        }
    }

    #[inline(always)]
    fn read_pair(&mut self, a: u64, b: u64) -> Option<(u64, u64)> {
        Some((self.read_u64(a)?, self.read_u64(b)?))
    }
}

/// Rows as the module's `RegistryLookup` gives them: the section's
/// lookup, paid from the walk's budget; none at all with `fp_only` (the
/// module's `unwind_fp_only=1`: every frame a frame-pointer step).
struct Rows<'a> {
    section: Section<'a>,
    fp_only: bool,
}

impl Lookup for Rows<'_> {
    fn row(&mut self, pc: u64) -> Option<Row> {
        self.section.find_row(pc).ok().flatten()
    }

    #[inline(always)]
    fn row_within(&mut self, pc: u64, budget: &mut Budget) -> Option<Row> {
        self.found_within(pc, budget).map(FoundRow::row)
    }

    #[inline(always)]
    fn found_within(&mut self, pc: u64, budget: &mut Budget) -> Option<FoundRow> {
        if self.fp_only {
            return None;
        }
        self.section.find_within(pc, budget).ok().flatten()
    }
}

/// A PC of `section`'s function `index` whose row has the CFA at SP plus
/// a multiple of 8 and the return address at CFA - 8, and that row; the
/// PC is the last byte of the row's range, as a return address minus one
/// is, so that the lookup searches as far as it can.
fn frame_pc(section: &Section<'_>, index: u32) -> Option<(u64, Row)> {
    let fde = section.fde(index).ok()?;
    // PLT stubs (their rows repeat) are jumped through, never returned to.
    if fde.pc_type == PcType::Mask {
        return None;
    }
    let mut best = None;
    for pc in fde.start..fde.end() {
        let Ok(Some(row)) = section.find_row(pc) else {
            continue;
        };
        let plain = row.cfa.base == Reg::Sp
            && !row.cfa.deref
            && row.cfa.offset >= 16
            && row.cfa.offset % 8 == 0
            && row.ra == RegRule::AtCfa(-8)
            && !row.outermost
            && !row.signal_frame
            && matches!(row.fp, RegRule::Unchanged | RegRule::AtCfa(_));
        if plain {
            best = Some((pc, row));
        }
    }
    best
}

/// The walk's registers and the stack for DEPTH frames through `frames`,
/// round robin; the outermost frame returns to 0.
fn sframe_stack(frames: &[(u64, Row)], depth: usize) -> Result<(Regs, Flat)> {
    let mut mem = Flat {
        base: STACK_BASE,
        bytes: Vec::new(),
    };
    let mut sp = STACK_BASE + 64;
    for i in 0..depth {
        let (_, row) = frames[i % frames.len()];
        let cfa = sp + u64::try_from(row.cfa.offset)?;
        // The caller's PC is a return address: the lookup is at it minus one.
        let ra = if i + 1 < depth {
            frames[(i + 1) % frames.len()].0 + 1
        } else {
            0
        };
        mem.put(cfa - 8, ra)?;
        if let RegRule::AtCfa(off) = row.fp {
            mem.put(cfa.wrapping_add_signed(off.into()), 0x1234_5678)?;
        }
        sp = cfa;
    }
    let regs = Regs {
        pc: frames[0].0,
        sp: STACK_BASE + 64,
        fp: 0x1234_5678,
        lr: 0,
    };
    Ok((regs, mem))
}

/// A chain of DEPTH frame records, `{saved FP, RA}`, 32 bytes apart.
fn fp_stack(pc: u64, depth: usize) -> Result<(Regs, Flat)> {
    let mut mem = Flat {
        base: STACK_BASE,
        bytes: Vec::new(),
    };
    let first = STACK_BASE + 64;
    for i in 0..depth as u64 {
        let fp = first + 32 * i;
        let last = i + 1 == depth as u64;
        mem.put(fp, if last { 0 } else { fp + 32 })?;
        mem.put(fp + 8, if last { 0 } else { pc + 1 })?;
    }
    let regs = Regs {
        pc,
        sp: first - 16,
        fp: first,
        lr: 0,
    };
    Ok((regs, mem))
}

/// perf's frame-pointer walk (`perf_callchain_user()`, x86): the PC, then
/// per frame one read of the record at FP, FP checked to move up, and the
/// return address stored.
#[inline(never)]
fn fp_walk(regs: Regs, mem: &mut Flat, out: &mut Vec<u64>, max: usize) {
    out.clear();
    out.push(regs.pc);
    let mut fp = regs.fp;
    let mut sp = regs.sp;
    while out.len() < max {
        if fp < sp {
            break;
        }
        let Some((next, ra)) = mem.read_pair(fp, fp.wrapping_add(8)) else {
            break;
        };
        if ra == 0 {
            break;
        }
        out.push(ra);
        sp = fp;
        fp = next;
    }
}

/// How the counted loop walks.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// The module's walk with the section's rows.
    Sframe,
    /// The module's walk without rows: frame-pointer steps.
    FpStep,
    /// perf's frame-pointer walk.
    PerfFp,
}

/// The counted loop: `walks` walks from `regs`, the frames each emitted.
#[inline(never)]
fn walks(
    section: Section<'_>,
    regs: Regs,
    mem: &mut Flat,
    walks: u32,
    mode: Mode,
    out: &mut Vec<u64>,
) -> usize {
    let limits = WalkLimits::sample(512, MAX_SPAN);
    let mut frames = 0;
    for _ in 0..walks {
        if mode == Mode::PerfFp {
            fp_walk(black_box(regs), mem, out, limits.max_frames as usize);
        } else {
            out.clear();
            let mut lookup = Rows {
                section: black_box(section),
                fp_only: mode == Mode::FpStep,
            };
            walk_amd64_metered(black_box(regs), &limits, &mut lookup, mem, &mut |pc, _| {
                out.push(pc);
                true
            });
        }
        frames = black_box(out.len());
    }
    frames
}

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let (mut file, mut depth, mut count) = (None, 100usize, 1000u32);
    let (mut mode, mut one, mut hinted) = (Mode::Sframe, false, true);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--depth" => depth = args.next().context("--depth N")?.parse()?,
            "--walks" => count = args.next().context("--walks N")?.parse()?,
            "--fp" => mode = Mode::PerfFp,
            "--fp-step" => mode = Mode::FpStep,
            "--one" => one = true,
            "--no-hints" => hinted = false,
            _ => file = Some(arg),
        }
    }
    let file = file.context(
        "usage: walk_cost FILE [--depth N] [--walks N] [--fp | --fp-step | --one] [--no-hints]",
    )?;
    if !(1..=500).contains(&depth) {
        bail!("--depth: 1 to 500");
    }
    let data = std::fs::read(&file).with_context(|| file.clone())?;
    let (bytes, addr) = elf::sframe(&data)?;
    let section = Section::parse(bytes, addr).map_err(|e| anyhow!("sframe: {e}"))?;
    section
        .validate(&mut || {})
        .map_err(|e| anyhow!("sframe: {e}"))?;
    // Index and row table, as the module attaches them (registry/copy_index.rs).
    let mut index = vec![0; section.index_words().map_err(|e| anyhow!("{e}"))?];
    section
        .build_index(&mut index, &mut || {})
        .map_err(|e| anyhow!("index: {e}"))?;
    let mut table = vec![
        0;
        section
            .table_words(&mut || {})
            .map_err(|e| anyhow!("{e}"))?
    ];
    section
        .build_table(&mut table, &mut || {})
        .map_err(|e| anyhow!("table: {e}"))?;
    let hints: Vec<AtomicU64> = (0..section
        .table_shape(&mut || {})
        .map_err(|e| anyhow!("{e}"))?
        .hint_slots())
        .map(|_| AtomicU64::new(0))
        .collect();
    let section = section
        .with_index(&index)
        .and_then(|s| s.with_table(&table))
        .map_err(|e| anyhow!("{e}"))?;
    let section = if hinted {
        section.with_hints(&hints)
    } else {
        section
    };

    let mut frames: Vec<(u64, Row)> = (0..section.num_fdes())
        .filter_map(|i| frame_pc(&section, i))
        .collect();
    if frames.is_empty() {
        bail!("no function has a row with the CFA at SP and the RA at CFA - 8");
    }
    if one {
        frames.truncate(1);
    }
    let (regs, mut mem) = if mode == Mode::Sframe {
        sframe_stack(&frames, depth)?
    } else {
        fp_stack(frames[0].0, depth)?
    };
    let mut out = Vec::with_capacity(512);
    let emitted = walks(section, regs, &mut mem, count, mode, &mut out);
    if emitted != depth {
        bail!("a walk emitted {emitted} frames, not {depth}");
    }
    println!(
        "walks {count} depth {depth} functions {} mode {}",
        frames.len(),
        match (mode, one) {
            (Mode::PerfFp, _) => "perf-fp",
            (Mode::FpStep, _) => "fp-step",
            (Mode::Sframe, true) => "sframe-one",
            (Mode::Sframe, false) => "sframe",
        }
    );
    Ok(())
}
