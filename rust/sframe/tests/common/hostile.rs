// SPDX-License-Identifier: GPL-2.0

//! Hostile stacks: a process controls both the section it registers and
//! its own stack, so it can make every frame of a walk as costly as the
//! walk's limits allow. Shared by the walk tests, the property tests and
//! the benchmark (`samples/sframe-bench/examples/hostile_walk.rs` includes
//! this file), so the stacks measured are the stacks tested.

use super::{FdeB, FreB, SectionB};
use sframe::unwind::{Lookup, Memory, Regs, RT_SIGRETURN_INSNS};
use sframe::{Budget, Row, Section};

/// Where the section says it is (V2: function starts are section-relative).
pub const SECTION_ADDR: u64 = 0;
/// The function whose rows every frame of a chain uses.
pub const BODY: u64 = 0x10_0000;
/// The function whose FREs a lookup at the trampoline's `RA - 1` scans.
pub const TRAMP_FN: u64 = 0x20_0000;
/// The fake stack.
pub const STACK: u64 = 0x7000_0000;
/// Bytes of fake stack: room for 8,192 frames of the deep chain.
const STACK_LEN: usize = 64 << 10;
/// Bytes per fake signal frame block: the return address, then the
/// `ucontext` up to `uc_mcontext.rip` (40 + 17 * 8 bytes).
const BLOCK: u64 = 256;
/// Fake signal frames in the ring; the last points back at the first.
const RING: u64 = 4;

/// Flat little-endian memory: a few regions, reads outside them fail.
#[derive(Clone, Default)]
pub struct Image {
    regions: Vec<(u64, Vec<u8>)>,
    /// Reads made (each `read_u64` or `read` call).
    pub reads: u64,
}

impl Image {
    /// Adds `len` zero bytes at `base`.
    pub fn map(&mut self, base: u64, len: usize) {
        self.regions.push((base, vec![0; len]));
    }

    fn slice_mut(&mut self, addr: u64, len: usize) -> &mut [u8] {
        for (base, bytes) in &mut self.regions {
            if let Some(off) = addr.checked_sub(*base) {
                let off = off as usize;
                if off + len <= bytes.len() {
                    return &mut bytes[off..off + len];
                }
            }
        }
        panic!("{addr:#x} not mapped");
    }

    pub fn put(&mut self, addr: u64, data: &[u8]) {
        self.slice_mut(addr, data.len()).copy_from_slice(data);
    }

    pub fn put64(&mut self, addr: u64, v: u64) {
        self.put(addr, &v.to_le_bytes());
    }
}

impl Memory for Image {
    fn read_u64(&mut self, addr: u64) -> Option<u64> {
        let mut b = [0u8; 8];
        self.read(addr, &mut b).then(|| u64::from_le_bytes(b))
    }

    fn read(&mut self, addr: u64, buf: &mut [u8]) -> bool {
        self.reads += 1;
        for (base, bytes) in &self.regions {
            let Some(off) = addr.checked_sub(*base) else {
                continue;
            };
            let Ok(off) = usize::try_from(off) else {
                continue;
            };
            if let Some(src) = off
                .checked_add(buf.len())
                .and_then(|end| bytes.get(off..end))
            {
                buf.copy_from_slice(src);
                return true;
            }
        }
        false
    }
}

/// Rows from one section, the FDE search and the FREs paid from the walk's
/// budget as the kernel's lookup pays them.
pub struct SectionRows<'a>(pub Section<'a>);

impl Lookup for SectionRows<'_> {
    fn row(&mut self, pc: u64) -> Option<Row> {
        self.0.find_row(pc).ok().flatten()
    }

    fn row_within(&mut self, pc: u64, budget: &mut Budget) -> Option<Row> {
        self.0.find_row_within(pc, budget).ok().flatten()
    }
}

/// A hostile process: its section, its memory, the sampled registers.
#[derive(Clone)]
pub struct Hostile {
    pub section: Vec<u8>,
    pub mem: Image,
    pub start: Regs,
}

impl Hostile {
    pub fn parse(&self) -> Section<'_> {
        Section::parse(&self.section, SECTION_ADDR).expect("hostile section parses")
    }
}

/// `n` FREs two bytes apart, all "CFA = SP + 8, RA at CFA - 8".
fn fres(n: u32) -> Vec<FreB> {
    (0..n).map(|i| FreB::sp(i * 2, 8)).collect()
}

/// A function at `start` with `n` FREs and room after them.
fn function(start: u64, n: u32) -> FdeB {
    let mut f = FdeB::new(start, n * 2 + 16, fres(n));
    // Two-byte FRE starts, whatever the size.
    f.fre_type = 1;
    f
}

/// The PC inside `BODY` whose exact lookup decodes all `body_fres` FREs
/// and finds the last.
pub fn body_pc(body_fres: u32) -> u64 {
    BODY + u64::from(body_fres.max(1) - 1) * 2
}

/// The trampoline: after the FREs of `TRAMP_FN`, so a lookup at its
/// `RA - 1` scans them all; with more FREs than the lookup's cap, the
/// lookup fails and the walker checks the trampoline's bytes.
pub fn trampoline(tramp_fres: u32) -> u64 {
    TRAMP_FN + u64::from(tramp_fres) * 2 + 2
}

fn section(body_fres: u32, tramp_fres: u32) -> Vec<u8> {
    let mut fdes = vec![function(BODY, body_fres.max(1))];
    if tramp_fres > 0 {
        fdes.push(function(TRAMP_FN, tramp_fres));
    }
    SectionB::v2(SECTION_ADDR, fdes).build()
}

/// A ring of fake `rt_sigreturn` frames: every frame of `BODY` (its
/// exact lookup decodes `body_fres` FREs) returns to the trampoline, whose
/// `ucontext` sends the walk back into `BODY` on the next fake frame. Each
/// signal frame resets the CFA checks, so without a limit on signal frames
/// the walk runs to its frame limit.
pub fn sigreturn_chain(body_fres: u32, tramp_fres: u32) -> Hostile {
    let p = body_pc(body_fres);
    let t = trampoline(tramp_fres);
    let mut mem = Image::default();
    mem.map(BODY, 0x1_0000);
    mem.map(TRAMP_FN, 0x1_0000);
    mem.map(STACK, STACK_LEN);
    mem.put(t, &RT_SIGRETURN_INSNS);
    for k in 0..RING {
        let s = STACK + k * BLOCK;
        // BODY's row: CFA = SP + 8, the return address at SP.
        mem.put64(s, t);
        // At the trampoline SP (the CFA) points at the `ucontext`.
        let mc = s + 8 + 40;
        mem.put64(mc + 10 * 8, 0); // rbp
        mem.put64(mc + 15 * 8, STACK + (k + 1) % RING * BLOCK); // rsp
        mem.put64(mc + 16 * 8, p); // rip
    }
    Hostile {
        section: section(body_fres, tramp_fres),
        mem,
        start: Regs {
            pc: p,
            sp: STACK,
            fp: 0,
            lr: 0,
        },
    }
}

/// An ordinary-looking stack, strictly upwards, whose every caller frame
/// is looked up deep in `BODY`: each lookup decodes `body_fres` FREs.
pub fn deep_chain(body_fres: u32) -> Hostile {
    let p = body_pc(body_fres);
    let mut mem = Image::default();
    mem.map(BODY, 0x1_0000);
    mem.map(STACK, STACK_LEN);
    for k in 0..(STACK_LEN as u64 / 8) {
        // Return addresses just after `p`: the caller is looked up at `p`.
        mem.put64(STACK + k * 8, p + 1);
    }
    Hostile {
        section: section(body_fres, 0),
        mem,
        start: Regs {
            pc: p,
            sp: STACK,
            fp: 0,
            lr: 0,
        },
    }
}
