// SPDX-License-Identifier: GPL-2.0

//! User stack walking with SFrame rows, on x86-64 ([`walk_amd64`]) and
//! AArch64 ([`walk_aarch64`]).
//!
//! Generic over where memory and rows come from ([`Memory`], [`Lookup`]),
//! so the kernel plugs in `copy_from_user_nmi()` or a faulting reader and
//! its section registry, and tests plug in byte arrays.
//!
//! The rules: the sample's PC is looked up as is, every caller at its
//! return address minus one (a call at a function's end returns into the
//! next function), the PC interrupted by a signal as is. Each step must
//! move the CFA strictly up, keep it 8-byte aligned and within
//! [`WalkLimits::max_span`] bytes of the first SP (the base is reset at a
//! signal frame, whose stack may be a `sigaltstack`). A PC without a row
//! gets one frame-pointer step, trusted only while plausible. Signal frames
//! are recognised by the `rt_sigreturn` trampoline's bytes. Every walk ends
//! after at most [`WalkLimits::max_frames`] frames, at most
//! [`WalkLimits::max_signal_frames`] signal frames, and once its work
//! budget ([`WalkLimits::max_work`], see [`Budget`]) is spent.
//!
//! What differs between the architectures (where the return address and
//! the frame pointer live, the frame record, the signal trampoline and
//! frame, the first instructions of a function) is in `amd64.rs` and
//! `aarch64.rs`, behind the [`Arch`] trait; the walk is shared.

mod aarch64;
mod amd64;
mod rules;

pub use self::aarch64::{
    step_aarch64, walk_aarch64, walk_aarch64_metered, AARCH64_ENTRY_ROW, AARCH64_RT_SIGRETURN_INSNS,
};
pub use self::amd64::{step_amd64, walk_amd64, walk_amd64_metered, ENTRY_ROW, RT_SIGRETURN_INSNS};

pub(crate) use self::rules::in_one_read;
pub use self::rules::PAIR_SPAN;

use self::rules::{step_frame_record, step_saved};
use super::{Budget, FoundRow, PackedForm, Row, MAX_FRES_SCANNED};

/// Reads user memory for the unwinder.
pub trait Memory {
    /// The little-endian 8-byte value at `addr`, or `None` if unreadable.
    fn read_u64(&mut self, addr: u64) -> Option<u64>;
    /// Fills `buf` from `addr`; `false` if any byte is unreadable.
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> bool;

    /// The little-endian words at `a` and `b`, which lie within
    /// [`PAIR_SPAN`] bytes (`|a - b| + 8 <= PAIR_SPAN`), or `None` if
    /// either is unreadable: a return address and a frame pointer saved
    /// together, as one read (the walk's budget charges one unit).
    ///
    /// The default reads the bytes from the lower word to the end of the
    /// higher one with [`Memory::read`]; a reader whose reads cost more
    /// per call than per byte keeps it, one that reads words cheaply (the
    /// kernel's sample path) reads the two words.
    fn read_pair(&mut self, a: u64, b: u64) -> Option<(u64, u64)> {
        let lo = a.min(b);
        let span = usize::try_from(a.max(b).wrapping_sub(lo))
            .ok()?
            .checked_add(8)?;
        let mut buf = [0u8; PAIR_SPAN];
        let bytes = buf.get_mut(..span)?;
        if !self.read(lo, bytes) {
            return None;
        }
        let word = |addr: u64| {
            let at = usize::try_from(addr.wrapping_sub(lo)).ok()?;
            let w = bytes.get(at..at.checked_add(8)?)?;
            Some(u64::from_le_bytes(<[u8; 8]>::try_from(w).ok()?))
        };
        Some((word(a)?, word(b)?))
    }
}

/// Finds unwind rows for PCs.
pub trait Lookup {
    /// The row for `pc`, or `None` when no SFrame section covers it.
    fn row(&mut self, pc: u64) -> Option<Row>;

    /// [`Lookup::row`], paid for from the walk's `budget`; `None` when
    /// the budget cannot pay (the walker then sees it exhausted).
    ///
    /// This default charges one unit and asks [`Lookup::row`]. A lookup that
    /// searches a [`Section`](super::Section) overrides it with
    /// [`Section::find_row_within`](super::Section::find_row_within), so
    /// that the FDE search and every FRE decoded are charged and the FRE
    /// scan is capped at [`Budget::max_fres`].
    fn row_within(&mut self, pc: u64, budget: &mut Budget) -> Option<Row> {
        if !budget.charge(1) {
            return None;
        }
        self.row(pc)
    }

    /// [`Lookup::row_within`], the row as the lookup found it: what the
    /// walk asks.  This default gives [`Lookup::row_within`]'s row; a
    /// lookup that searches a [`Section`](super::Section) with a row table
    /// overrides it with [`Section::find_within`](super::Section::find_within),
    /// whose rows from the table the walk unpacks where it uses them.
    #[inline(always)]
    fn found_within(&mut self, pc: u64, budget: &mut Budget) -> Option<FoundRow> {
        self.row_within(pc, budget).map(FoundRow::Decoded)
    }

    /// Whether `pc` is known to be the first instruction of a function
    /// without a row (for example from a symbol table). The walker then
    /// applies [`ENTRY_ROW`] to the sample's frame. Besides this, the walker
    /// itself recognises `push %rbp` (optionally after `endbr64`) at the PC.
    fn is_function_start(&mut self, _pc: u64) -> bool {
        false
    }

    /// Whether `pc` may be a return address (in executable user text).
    /// Asked only for return addresses found by frame-pointer steps.
    /// The walker charges one unit for each question (the kernel answers
    /// with one user-memory read), as for [`Lookup::is_function_start`].
    fn is_text(&mut self, _pc: u64) -> bool {
        true
    }

    /// `ra` without a pointer-authentication code (AArch64): the walker
    /// passes every return address it finds through this before using it.
    /// The kernel strips as the hardware does (`xpaclri`); the default
    /// leaves the address as it is (x86-64, and AArch64 without pointer
    /// authentication).
    fn strip_return_address(&mut self, ra: u64) -> u64 {
        ra
    }

    /// One past the highest user address: a return address at or above it
    /// ends the walk. The kernel gives its own (`TASK_SIZE_MAX`, 2^47 or
    /// 2^56 less a page by the paging mode); the default is the larger.
    /// Asked once a walk: the same for all of its frames.
    fn user_addr_end(&mut self) -> u64 {
        USER_ADDR_END
    }
}

/// The registers an unwind step needs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Regs {
    /// Instruction pointer (`rip`, `pc`).
    pub pc: u64,
    /// Stack pointer (`rsp`, `sp`).
    pub sp: u64,
    /// Frame pointer (`rbp`, `x29`).
    pub fp: u64,
    /// AArch64's link register (`x30`): the return address of a topmost
    /// frame that has not saved it yet. Known only for the sample's frame
    /// and a frame a signal interrupted (0 elsewhere, and on x86-64).
    pub lr: u64,
}

/// How a frame's PC was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameSource {
    /// The sampled PC itself.
    Sample,
    /// An SFrame row unwound the frame below.
    Sframe,
    /// A frame-pointer step (the PC below had no SFrame coverage).
    FramePointer,
    /// The entry rule (return address at SP) at a function's first instruction.
    EntryRule,
    /// Taken from the `ucontext` of a signal frame.
    SignalFrame,
    /// AArch64: the return address was still in the link register, in a
    /// topmost frame (the sample's, or one a signal interrupted) whose row
    /// (or the entry rule) says it is not saved yet.
    LinkRegister,
}

/// Why a walk or a step stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// An outermost row or a zero return address: the stack ends here.
    Outermost,
    /// No row and no frame pointer to follow.
    NoCoverage,
    /// The CFA (the caller's SP) did not move strictly up.
    CfaNotIncreasing,
    /// The CFA, frame pointer or `ucontext` is not aligned as the ABI
    /// requires.
    Misaligned,
    /// The CFA left the allowed span above the first SP.
    SpanExceeded,
    /// Reading the stack failed.
    ReadFault,
    /// The return address cannot be a user text address.
    BadReturnAddress,
    /// The row uses a register or rule this walker cannot evaluate.
    Unsupported,
    /// The frame limit was reached.
    MaxFrames,
    /// The consumer's callback asked to stop.
    Consumer,
    /// The walk's work budget ([`WalkLimits::max_work`]) was spent.
    Budget,
    /// One signal frame more than [`WalkLimits::max_signal_frames`]: each
    /// resets the CFA checks, so a forged chain of them would otherwise run
    /// to the frame limit.
    SignalLimit,
}

/// Bounds of one walk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WalkLimits {
    /// The most frames emitted, the sample's included.
    pub max_frames: u32,
    /// How far above the first SP (or the SP a signal frame restored) a CFA may be.
    pub max_span: u64,
    /// Work units for the whole walk (see [`Budget`]); the walk ends with
    /// [`Stop::Budget`] when they are spent.
    pub max_work: u32,
    /// The most FREs one lookup of the walk may decode (see
    /// [`Budget::max_fres`]); a PC beyond them is treated as uncovered.
    pub max_fres: u32,
    /// The most signal frames crossed; one more ends the walk with
    /// [`Stop::SignalLimit`].
    pub max_signal_frames: u32,
}

/// Work units of a walk in the sample's context (NMI or IRQ).
///
/// An honest frame costs the FDE search (12 probes in a libc-sized
/// section, 17 in a 100,000-FDE one), the FREs up to its PC (22 on
/// average for a PC in the 6,402 functions measured, see
/// `Documentation/design.rst`) and one to three reads: about 40 units,
/// so perf's default 127 frames need about 5,100. A hostile section could
/// make every frame cost about 1,030 units, 130,000 per walk, before
/// budgets.
pub const SAMPLE_MAX_WORK: u32 = 8192;

/// FREs one lookup of a sample-context walk may decode. Of the 6,402
/// functions measured (gcc 14 `-O2 -Wa,--gsframe`), the largest has 481
/// FREs and seven more than 256, all test bodies whose every failed
/// assertion returns through its own epilogue. A PC beyond the cap is
/// treated as uncovered (one frame-pointer step), as beyond
/// [`MAX_FRES_SCANNED`] at registration and in the deferred walk; the
/// cap keeps one lookup from spending a sixteenth of the budget.
pub const SAMPLE_MAX_FRES: u32 = 512;

/// Work units of a walk in task context (perf's deferred unwind): it may
/// be preempted and fault, so only a bound is needed, eight times the
/// sample path's, with the registration-time FRE cap per lookup.
pub const DEFERRED_MAX_WORK: u32 = 65536;

/// Signal frames one walk crosses. Each restarts the CFA checks (its stack
/// may be a `sigaltstack`), so only this count bounds a forged chain of
/// them; handlers interrupted by signals eight deep do not happen in
/// practice.
pub const MAX_SIGNAL_FRAMES: u32 = 8;

impl WalkLimits {
    /// The limits of a walk in the sample's context (NMI or IRQ, where
    /// time is taken with interrupts off): [`SAMPLE_MAX_WORK`],
    /// [`SAMPLE_MAX_FRES`], [`MAX_SIGNAL_FRAMES`].
    pub const fn sample(max_frames: u32, max_span: u64) -> Self {
        WalkLimits {
            max_frames,
            max_span,
            max_work: SAMPLE_MAX_WORK,
            max_fres: SAMPLE_MAX_FRES,
            max_signal_frames: MAX_SIGNAL_FRAMES,
        }
    }

    /// The limits of a walk in task context (perf's deferred unwind):
    /// [`DEFERRED_MAX_WORK`], [`MAX_FRES_SCANNED`], [`MAX_SIGNAL_FRAMES`].
    pub const fn deferred(max_frames: u32, max_span: u64) -> Self {
        WalkLimits {
            max_frames,
            max_span,
            max_work: DEFERRED_MAX_WORK,
            max_fres: MAX_FRES_SCANNED,
            max_signal_frames: MAX_SIGNAL_FRAMES,
        }
    }

    /// Frame and span limits only, as walks were bounded before budgets:
    /// unlimited work, [`MAX_FRES_SCANNED`] FREs per lookup, any number of
    /// signal frames. For tests and for measuring what a budget saves.
    pub const fn unbudgeted(max_frames: u32, max_span: u64) -> Self {
        WalkLimits {
            max_frames,
            max_span,
            max_work: u32::MAX,
            max_fres: MAX_FRES_SCANNED,
            max_signal_frames: u32::MAX,
        }
    }
}

/// How a walk ended and what it cost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Walked {
    /// Why the walk ended.
    pub stop: Stop,
    /// Work units spent (see [`Budget`]).
    pub work: u32,
    /// Frames emitted, the sample's included.
    pub frames: u32,
}

/// One past the highest user address on x86-64 (`TASK_SIZE_MAX` with 5-level
/// paging; AArch64 has at most 52 bits): the default of [`Lookup::user_addr_end`].
pub const USER_ADDR_END: u64 = (1 << 56) - 4096;

/// The walk's memory, each read paid for from its budget: a read the
/// budget cannot pay is not made and fails.
struct Metered<'m, M> {
    mem: &'m mut M,
    budget: Budget,
}

impl<M: Memory> Memory for Metered<'_, M> {
    #[inline(always)]
    fn read_u64(&mut self, addr: u64) -> Option<u64> {
        if !self.budget.charge(1) {
            return None;
        }
        self.mem.read_u64(addr)
    }

    #[inline(always)]
    fn read(&mut self, addr: u64, buf: &mut [u8]) -> bool {
        self.budget.charge(1) && self.mem.read(addr, buf)
    }

    #[inline(always)]
    fn read_pair(&mut self, a: u64, b: u64) -> Option<(u64, u64)> {
        if !self.budget.charge(1) {
            return None;
        }
        self.mem.read_pair(a, b)
    }
}

/// What an architecture supplies to the shared walk.
pub(super) trait Arch {
    /// The rule at a function's first instruction.
    const ENTRY_ROW: Row;

    /// The alignment the architecture's step asks of a CFA where the
    /// return address is saved (a power of two): the step on a row of
    /// the FP-saved form ([`PackedForm::FpSaved`], made without the row
    /// by `rules::step_saved`) checks it.
    const CFA_ALIGN: u64;

    /// One SFrame step with `row`; `topmost` for the sample's frame and a
    /// frame a signal interrupted, whose registers are all known.
    fn step(row: &Row, regs: &Regs, topmost: bool, mem: &mut impl Memory) -> Result<Regs, Stop>;
    /// One frame-pointer step: both ABIs keep `{saved FP, return address}`
    /// at FP ([`step_frame_record`]).
    fn step_frame_pointer(regs: &Regs, mem: &mut impl Memory) -> Result<Regs, Stop> {
        step_frame_record(regs, mem)
    }
    /// Whether `pc` is the `rt_sigreturn` trampoline.
    fn at_rt_sigreturn(mem: &mut impl Memory, pc: u64) -> bool;
    /// The registers a signal interrupted, from the frame at `sp` (the SP
    /// at the trampoline).
    fn step_signal_frame(sp: u64, mem: &mut impl Memory) -> Result<Regs, Stop>;
    /// Whether the instructions at `pc` set up a frame that is not set up
    /// yet, so [`Arch::ENTRY_ROW`] applies.
    fn at_frame_setup(mem: &mut impl Memory, pc: u64) -> bool;
    /// Whether `row` leaves the return address in the link register
    /// (never, without one). Such a step, in a topmost frame, is a
    /// [`FrameSource::LinkRegister`] one, and may leave the SP where it is.
    fn ra_in_lr(_row: &Row) -> bool {
        false
    }
}

/// How the next frame is found; `exact` when `regs.pc` is not a return
/// address (the sample's PC, or one a signal interrupted).
#[inline(always)]
fn unwind_frame<A: Arch, M: Memory>(
    regs: &Regs,
    exact: bool,
    lookup: &mut impl Lookup,
    mem: &mut Metered<'_, M>,
) -> Result<(Regs, FrameSource), Stop> {
    let lookup_pc = if exact {
        regs.pc
    } else {
        regs.pc.checked_sub(1).ok_or(Stop::BadReturnAddress)?
    };
    // One copy of the step per arm: the row table's row is unpacked into
    // the step's registers, not into a `Row` where both kinds would join,
    // and the forms nearly every row has get steps of their own.
    match lookup.found_within(lookup_pc, &mut mem.budget) {
        Some(FoundRow::Packed(packed)) => match packed.form() {
            form @ PackedForm::FpKept(_) => {
                unwind_with_row::<A, M>(&form.row(), regs, exact, lookup, mem)
            }
            // Neither outermost nor a signal frame, the return address
            // saved: the step on the form's row, without making the row.
            PackedForm::FpSaved(common, fp_offset) => {
                let next = step_saved(&common, fp_offset, regs, A::CFA_ALIGN, mem)?;
                Ok((strip_return_address(next, lookup), FrameSource::Sframe))
            }
            form @ PackedForm::Other(_) => {
                unwind_with_row::<A, M>(&form.row(), regs, exact, lookup, mem)
            }
        },
        Some(FoundRow::Decoded(row)) => unwind_with_row::<A, M>(&row, regs, exact, lookup, mem),
        None => unwind_without_row::<A, M>(regs, exact, lookup, mem),
    }
}

/// [`unwind_frame`] for a PC with a row.
#[inline(always)]
fn unwind_with_row<A: Arch, M: Memory>(
    row: &Row,
    regs: &Regs,
    exact: bool,
    lookup: &mut impl Lookup,
    mem: &mut Metered<'_, M>,
) -> Result<(Regs, FrameSource), Stop> {
    if row.signal_frame {
        if A::at_rt_sigreturn(mem, regs.pc) {
            return Ok((
                A::step_signal_frame(regs.sp, mem)?,
                FrameSource::SignalFrame,
            ));
        }
        return Err(Stop::Unsupported);
    }
    if row.outermost {
        return Err(Stop::Outermost);
    }
    let next = A::step(row, regs, exact, mem)?;
    // A topmost frame whose return address is still in the link register.
    let source = if exact && A::ra_in_lr(row) {
        FrameSource::LinkRegister
    } else {
        FrameSource::Sframe
    };
    Ok((strip_return_address(next, lookup), source))
}

/// [`unwind_frame`] for a PC without a row: a signal frame, the entry
/// rule (a topmost frame only) or a frame-pointer step.
fn unwind_without_row<A: Arch, M: Memory>(
    regs: &Regs,
    exact: bool,
    lookup: &mut impl Lookup,
    mem: &mut Metered<'_, M>,
) -> Result<(Regs, FrameSource), Stop> {
    if A::at_rt_sigreturn(mem, regs.pc) {
        return Ok((
            A::step_signal_frame(regs.sp, mem)?,
            FrameSource::SignalFrame,
        ));
    }
    if exact
        && ((mem.budget.charge(1) && lookup.is_function_start(regs.pc))
            || A::at_frame_setup(mem, regs.pc))
    {
        let next = A::step(&A::ENTRY_ROW, regs, true, mem)?;
        // The entry rule applies only to a topmost frame.
        let source = if A::ra_in_lr(&A::ENTRY_ROW) {
            FrameSource::LinkRegister
        } else {
            FrameSource::EntryRule
        };
        return Ok((strip_return_address(next, lookup), source));
    }
    let next = strip_return_address(A::step_frame_pointer(regs, mem)?, lookup);
    if next.pc != 0 && !(mem.budget.charge(1) && lookup.is_text(next.pc)) {
        return Err(Stop::BadReturnAddress);
    }
    Ok((next, FrameSource::FramePointer))
}

/// `next` with its return address stripped of a pointer-authentication
/// code (AArch64), as [`Lookup::strip_return_address`] strips it.
#[inline(always)]
fn strip_return_address(next: Regs, lookup: &mut impl Lookup) -> Regs {
    Regs {
        pc: lookup.strip_return_address(next.pc),
        ..next
    }
}

/// The walk of [`walk_amd64_metered`] and [`walk_aarch64_metered`], with
/// architecture `A`'s rules.
fn walk_metered<A: Arch, M: Memory>(
    regs: Regs,
    limits: &WalkLimits,
    lookup: &mut impl Lookup,
    mem: &mut M,
    emit: &mut impl FnMut(u64, FrameSource) -> bool,
) -> Walked {
    let mut mem = Metered {
        mem,
        budget: Budget::new(limits.max_work, limits.max_fres),
    };
    let (stop, frames) = walk_frames::<A, M>(regs, limits, lookup, &mut mem, emit);
    let stop = if mem.budget.exhausted() {
        Stop::Budget
    } else {
        stop
    };
    Walked {
        stop,
        work: mem.budget.spent(),
        frames,
    }
}

/// The walk of [`walk_metered`]: why it stopped, and how many frames it
/// gave `emit` (the one it refused included), counted by the loop's own
/// counter.
fn walk_frames<A: Arch, M: Memory>(
    regs: Regs,
    limits: &WalkLimits,
    lookup: &mut impl Lookup,
    mem: &mut Metered<'_, M>,
    emit: &mut impl FnMut(u64, FrameSource) -> bool,
) -> (Stop, u32) {
    if limits.max_frames == 0 {
        return (Stop::MaxFrames, 0);
    }
    let mut emitted: u32 = 1;
    if !emit(regs.pc, FrameSource::Sample) {
        return (Stop::Consumer, emitted);
    }
    let mut regs = regs;
    let mut exact = true;
    // Every SP of the walk is at or above `span_base`: it starts at the
    // first, moves to the SP a signal frame gives, and a step that would
    // lower the SP stops the walk.
    let mut span_base = regs.sp;
    let mut signal_frames: u32 = 0;
    // The last return address a frame may have; a PC of 0 (the outermost
    // frame) wraps above it, so that one comparison a frame checks both.
    let last_pc = lookup.user_addr_end().saturating_sub(1);
    let stop = loop {
        if emitted >= limits.max_frames {
            break Stop::MaxFrames;
        }
        let (next, source) = match unwind_frame::<A, M>(&regs, exact, lookup, mem) {
            Ok(step) => step,
            Err(stop) => break stop,
        };
        if mem.budget.exhausted() {
            // A value the budget could not pay for may have steered the
            // step (a lookup that gave up looks like no coverage).
            break Stop::Budget;
        }
        if next.pc.wrapping_sub(1) >= last_pc {
            break if next.pc == 0 {
                Stop::Outermost
            } else {
                Stop::BadReturnAddress
            };
        }
        if source == FrameSource::SignalFrame {
            if signal_frames >= limits.max_signal_frames {
                break Stop::SignalLimit;
            }
            signal_frames = signal_frames.wrapping_add(1);
            // The interrupted stack may be anywhere (sigaltstack).
            span_base = next.sp;
            exact = true;
        } else {
            // Only a topmost frame may leave the SP where it is (its
            // return address was in the link register): the next frame
            // is not topmost, so a walk cannot stand still twice.
            let may_stay = source == FrameSource::LinkRegister;
            if next.sp < regs.sp || (next.sp == regs.sp && !may_stay) {
                break Stop::CfaNotIncreasing;
            }
            // `next.sp >= regs.sp >= span_base`: no wrap.
            if next.sp.wrapping_sub(span_base) > limits.max_span {
                break Stop::SpanExceeded;
            }
            exact = false;
        }
        // Below `max_frames`: this cannot wrap.
        emitted = emitted.wrapping_add(1);
        if !emit(next.pc, source) {
            break Stop::Consumer;
        }
        regs = next;
    };
    (stop, emitted)
}
