// SPDX-License-Identifier: GPL-2.0

//! KUnit suites for the unwinder: its counters, perf's callchain store and
//! the module's walk limits, the hooks' installation against a busy
//! target, and what the hooks ask of the current task.

use kernel::prelude::*;

#[kunit_tests(sframe_unwind_task)]
mod task_tests {
    use crate::unwind::current_task;

    /// KUnit runs its cases in a kernel thread, which the hooks leave to
    /// the original functions.
    #[test]
    fn a_kernel_thread_is_not_walked() {
        assert!(current_task::is_kthread());
        assert!(current_task::walkable_mm().is_none());
    }
}

#[kunit_tests(sframe_unwind_counters)]
mod counter_tests {
    use crate::sframe::unwind::{
        FrameSource,
        Stop, //
    };
    use crate::uapi::*;
    use crate::unwind::counters::*;

    #[test]
    fn every_end_has_a_slot() {
        let ends = [
            (Stop::Outermost, SFRAME_UNWIND_END_OUTERMOST),
            (Stop::MaxFrames, SFRAME_UNWIND_END_MAX_FRAMES),
            (Stop::Consumer, SFRAME_UNWIND_END_MAX_FRAMES),
            (Stop::ReadFault, SFRAME_UNWIND_END_FAULT),
            (Stop::NoCoverage, SFRAME_UNWIND_END_NO_COVERAGE),
            (Stop::CfaNotIncreasing, SFRAME_UNWIND_END_BAD_STEP),
            (Stop::Misaligned, SFRAME_UNWIND_END_BAD_STEP),
            (Stop::SpanExceeded, SFRAME_UNWIND_END_BAD_STEP),
            (Stop::BadReturnAddress, SFRAME_UNWIND_END_BAD_STEP),
            (Stop::Unsupported, SFRAME_UNWIND_END_BAD_STEP),
            (Stop::Budget, SFRAME_UNWIND_END_BUDGET),
            (Stop::SignalLimit, SFRAME_UNWIND_END_SIGNAL_LIMIT),
        ];
        for (stop, slot) in ends {
            assert_eq!(end_counter(stop), slot);
        }
        assert_eq!(source_counter(FrameSource::Sample), None);
        assert_eq!(
            source_counter(FrameSource::SignalFrame),
            Some(SFRAME_UNWIND_FRAMES_SIGNAL)
        );
    }

    #[test]
    fn a_link_register_caller_is_stored_where_perf_looks() {
        use crate::arch::sample_chain_entry;
        // perf's tool on arm64 looks for the sampled function's caller
        // one byte below the return address in the link register.
        let want = if cfg!(CONFIG_ARM64) {
            0x40_1007
        } else {
            0x40_1008
        };
        assert_eq!(
            sample_chain_entry(0x40_1008, FrameSource::LinkRegister, 1),
            want
        );
        // A caller in the link register after a signal frame, and every
        // frame found otherwise, as found.
        assert_eq!(
            sample_chain_entry(0x40_1008, FrameSource::LinkRegister, 4),
            0x40_1008
        );
        for source in [
            FrameSource::Sframe,
            FrameSource::FramePointer,
            FrameSource::EntryRule,
            FrameSource::SignalFrame,
        ] {
            assert_eq!(sample_chain_entry(0x40_1008, source, 1), 0x40_1008);
        }
    }

    #[test]
    fn a_walk_adds_its_frames_end_and_time() {
        let mut t = Tally::default();
        t.frame(FrameSource::Sample);
        for _ in 0..3 {
            t.frame(FrameSource::Sframe);
        }
        t.frame(FrameSource::LinkRegister);
        t.frame(FrameSource::FramePointer);
        t.frame(FrameSource::EntryRule);
        t.frame(FrameSource::SignalFrame);
        t.frame(FrameSource::SignalFrame);
        let mut d = [0u64; SFRAME_UNWIND_COUNT];
        for (index, n) in t.adds(Path::Deferred, Stop::Outermost, 1234, 9) {
            d[index] += n;
        }
        let mut want = [0u64; SFRAME_UNWIND_COUNT];
        want[SFRAME_UNWIND_WALKS_DEFERRED] = 1;
        want[SFRAME_UNWIND_FRAMES_DEFERRED] = 9;
        want[SFRAME_UNWIND_FRAMES_SFRAME] = 4;
        want[SFRAME_UNWIND_FRAMES_FP] = 1;
        want[SFRAME_UNWIND_FRAMES_ENTRY] = 1;
        want[SFRAME_UNWIND_FRAMES_SIGNAL] = 2;
        want[SFRAME_UNWIND_END_OUTERMOST] = 1;
        want[SFRAME_UNWIND_NS_DEFERRED] = 1234;
        assert_eq!(d, want);

        // A walk that could store nothing, not even the sample's PC.
        let mut d = [0u64; SFRAME_UNWIND_COUNT];
        for (index, n) in Tally::default().adds(Path::Sample, Stop::Consumer, 5, 0) {
            d[index] += n;
        }
        let mut want = [0u64; SFRAME_UNWIND_COUNT];
        want[SFRAME_UNWIND_WALKS_SAMPLE] = 1;
        want[SFRAME_UNWIND_END_MAX_FRAMES] = 1;
        want[SFRAME_UNWIND_NS_SAMPLE] = 5;
        assert_eq!(d, want);
    }
}

#[kunit_tests(sframe_unwind_perf)]
mod perf_tests {
    use crate::abstractions::ffi;
    use crate::sframe::{
        unwind::{
            walk_amd64,
            walk_amd64_metered,
            FrameSource,
            Lookup,
            Memory,
            Regs,
            Stop,
            WalkLimits,
            DEFERRED_MAX_WORK,
            ENTRY_ROW,
            MAX_SIGNAL_FRAMES,
            RT_SIGRETURN_INSNS,
            SAMPLE_MAX_WORK, //
        },
        Budget,
        CfaRule,
        Row, //
    };
    use crate::uapi::{
        SFRAME_UNWIND_END_BUDGET,
        SFRAME_UNWIND_END_SIGNAL_LIMIT, //
    };
    use crate::unwind::counters::end_counter;
    use crate::unwind::deferred_trace::DeferredTrace;
    use crate::unwind::perf::CallchainEntry;
    use kernel::prelude::*;

    /// A `perf_callchain_entry` (`u64 nr; u64 ip[]`) with room for 8 entries.
    struct Chain {
        words: KBox<[u64; 9]>,
    }

    impl Chain {
        fn new() -> Result<Self> {
            Ok(Self {
                words: KBox::new([0u64; 9], GFP_KERNEL)?,
            })
        }

        fn ctx(&mut self, max_stack: u32) -> ffi::perf_callchain_entry_ctx {
            ffi::perf_callchain_entry_ctx {
                entry: self.words.as_mut_ptr().cast(),
                max_stack,
                nr: 0,
                contexts: 0,
                contexts_maxed: false,
            }
        }
    }

    #[test]
    fn store_honours_max_stack() -> Result {
        let mut chain = Chain::new()?;
        let mut ctx = chain.ctx(3);
        {
            // SAFETY: `ctx` and its entry live across this block, used by nothing else.
            let mut entry = unsafe { CallchainEntry::from_raw(&mut ctx) };
            assert_eq!(entry.room(), 3);
            assert!(entry.store(0x1000));
            assert!(entry.store(0x2000));
            assert!(entry.store(0x3000));
            assert_eq!(entry.room(), 0);
            assert!(!entry.store(0x4000));
            assert_eq!(entry.stored(), 3);
        }
        assert_eq!(ctx.nr, 3);
        assert_eq!(chain.words[..5], [3, 0x1000, 0x2000, 0x3000, 0]);
        Ok(())
    }

    /// The walk's entries go after those the sample has already (the
    /// kernel's, a context marker), and both counts say so once the entry
    /// is dropped, as `perf_callchain_store()` keeps them.
    #[test]
    fn store_appends_after_the_kernel_entries() -> Result {
        let mut chain = Chain::new()?;
        chain.words[0] = 2;
        chain.words[1] = 0xffff_ffff_ffff_fe00;
        chain.words[2] = 0xffff_ffff_8100_0000;
        let mut ctx = chain.ctx(3);
        ctx.nr = 1;
        ctx.contexts = 1;
        {
            // SAFETY: `ctx` and its entry live across this block, used by nothing else.
            let mut entry = unsafe { CallchainEntry::from_raw(&mut ctx) };
            assert_eq!(entry.room(), 2);
            assert!(entry.store(0x1000));
            assert!(entry.store(0x2000));
            assert!(!entry.store(0x3000));
        }
        assert_eq!(ctx.nr, 3);
        assert_eq!(
            chain.words[..6],
            [
                4,
                0xffff_ffff_ffff_fe00,
                0xffff_ffff_8100_0000,
                0x1000,
                0x2000,
                0
            ]
        );
        Ok(())
    }

    #[test]
    fn store_stops_when_contexts_are_maxed() -> Result {
        let mut chain = Chain::new()?;
        let mut ctx = chain.ctx(8);
        ctx.contexts_maxed = true;
        {
            // SAFETY: `ctx` and its entry outlive `entry`, used by nothing else.
            let mut entry = unsafe { CallchainEntry::from_raw(&mut ctx) };
            assert_eq!(entry.room(), 0);
            assert!(!entry.store(0x1000));
        }
        assert_eq!(ctx.nr, 0);
        assert_eq!(chain.words[..2], [0, 0]);
        Ok(())
    }

    /// `unwind_user()`'s output: `nr` restarts at zero and counts what
    /// was pushed, at most `max_entries`, once the trace is dropped.
    #[test]
    fn deferred_trace_counts_its_entries_once_dropped() -> Result {
        let mut words = KBox::new([0usize; 4], GFP_KERNEL)?;
        let mut raw = ffi::unwind_stacktrace {
            nr: 7,
            entries: words.as_mut_ptr().cast(),
        };
        {
            // SAFETY: `raw` and its 4 words outlive `trace`, used by nothing else.
            let mut trace = unsafe { DeferredTrace::from_raw(&mut raw, 3) };
            assert_eq!(trace.max_entries(), 3);
            assert!(trace.push(0x1000));
            assert!(trace.push(0x2000));
            assert!(trace.push(0x3000));
            assert!(!trace.push(0x4000));
            assert_eq!(trace.stored(), 3);
        }
        assert_eq!(raw.nr, 3);
        assert_eq!(*words, [0x1000, 0x2000, 0x3000, 0]);
        {
            // SAFETY: As above.
            let trace = unsafe { DeferredTrace::from_raw(&mut raw, 3) };
            assert_eq!(trace.stored(), 0);
        }
        assert_eq!(raw.nr, 0);
        // No entries array: no room, nothing written through it.
        let mut empty = ffi::unwind_stacktrace {
            nr: 5,
            entries: core::ptr::null_mut(),
        };
        {
            // SAFETY: `empty` outlives `trace`; its null `entries` is no room.
            let mut trace = unsafe { DeferredTrace::from_raw(&mut empty, 3) };
            assert_eq!(trace.max_entries(), 0);
            assert!(!trace.push(0x1000));
        }
        assert_eq!(empty.nr, 0);
        Ok(())
    }

    /// A stack in kernel memory: `words[i]` is at `base + 8 * i`.
    struct Stack<'a> {
        base: u64,
        words: &'a [u64],
    }

    impl Memory for Stack<'_> {
        fn read_u64(&mut self, addr: u64) -> Option<u64> {
            let off = addr.checked_sub(self.base)?;
            if off % 8 != 0 {
                return None;
            }
            self.words.get(usize::try_from(off / 8).ok()?).copied()
        }

        fn read(&mut self, _addr: u64, _buf: &mut [u8]) -> bool {
            false
        }
    }

    /// Every function has a 16-byte frame: CFA = SP + 16, RA at CFA - 8.
    struct Frames16;

    impl Lookup for Frames16 {
        fn row(&mut self, _pc: u64) -> Option<Row> {
            // The entry rule, one push later.
            Some(Row {
                cfa: CfaRule {
                    offset: 16,
                    ..ENTRY_ROW.cfa
                },
                ..ENTRY_ROW
            })
        }
    }

    #[test]
    fn a_walk_into_a_full_chain_stops_at_max_stack() -> Result {
        let base = 0x7ff0_0000_0000u64;
        let words = [0, 0x40_1001, 0, 0x40_1002, 0, 0x40_1003, 0, 0x40_1004, 0, 0];
        let mut chain = Chain::new()?;
        let mut ctx = chain.ctx(3);
        {
            // SAFETY: `ctx` and its entry outlive `entry`, used by nothing else.
            let mut entry = unsafe { CallchainEntry::from_raw(&mut ctx) };
            let limits = WalkLimits::unbudgeted(64, 1 << 20);
            let regs = Regs {
                pc: 0x40_0000,
                sp: base,
                fp: 0,
                lr: 0,
            };
            let mut mem = Stack {
                base,
                words: &words,
            };
            let stop = walk_amd64(regs, &limits, &mut Frames16, &mut mem, &mut |pc, _| {
                entry.store(pc)
            });
            assert_eq!(stop, Stop::Consumer);
        }
        assert_eq!(chain.words[..5], [3, 0x40_0000, 0x40_1001, 0x40_1002, 0]);
        Ok(())
    }

    /// A stack of words, and the `rt_sigreturn` trampoline's bytes at one
    /// address: the text a forged signal frame chain needs.
    struct Forged<'a> {
        stack: Stack<'a>,
        trampoline: u64,
    }

    impl Memory for Forged<'_> {
        fn read_u64(&mut self, addr: u64) -> Option<u64> {
            self.stack.read_u64(addr)
        }

        fn read(&mut self, addr: u64, buf: &mut [u8]) -> bool {
            if addr != self.trampoline || buf.len() != RT_SIGRETURN_INSNS.len() {
                return false;
            }
            buf.copy_from_slice(&RT_SIGRETURN_INSNS);
            true
        }
    }

    /// No SFrame coverage anywhere.
    struct NoRows;

    impl Lookup for NoRows {
        fn row(&mut self, _pc: u64) -> Option<Row> {
            None
        }
    }

    #[test]
    fn forged_signal_frames_end_at_the_module_limit() {
        // The sample is at the trampoline; the `ucontext` at SP sends the
        // walk back to the trampoline with the same SP, forever: only the
        // limit on signal frames ends it. `uc_mcontext` is 40 bytes in,
        // and rbp, rsp, rip are its 11th, 16th and 17th words.
        let base = 0x7ff0_0000_0000u64;
        let tramp = 0x40_2000u64;
        let mut words = [0u64; 22];
        words[20] = base;
        words[21] = tramp;
        let mut mem = Forged {
            stack: Stack {
                base,
                words: &words,
            },
            trampoline: tramp,
        };
        let regs = Regs {
            pc: tramp,
            sp: base,
            fp: 0,
            lr: 0,
        };
        let limits = WalkLimits::sample(127, 64 << 20);
        let mut signals = 0u32;
        let walked = walk_amd64_metered(regs, &limits, &mut NoRows, &mut mem, &mut |_, src| {
            if src == FrameSource::SignalFrame {
                signals += 1;
            }
            true
        });
        assert_eq!(walked.stop, Stop::SignalLimit);
        assert_eq!(signals, MAX_SIGNAL_FRAMES);
        assert_eq!(walked.frames, 1 + MAX_SIGNAL_FRAMES);
        assert_eq!(end_counter(walked.stop), SFRAME_UNWIND_END_SIGNAL_LIMIT);
    }

    /// Every lookup costs what a scan of 1,000 FREs does.
    struct Costly;

    impl Lookup for Costly {
        fn row(&mut self, pc: u64) -> Option<Row> {
            Frames16.row(pc)
        }

        fn row_within(&mut self, pc: u64, budget: &mut Budget) -> Option<Row> {
            if !budget.charge(1000) {
                return None;
            }
            self.row(pc)
        }
    }

    #[test]
    fn costly_lookups_end_at_the_module_budget() {
        // 127 frames of 16 bytes, each returning into the next.
        let base = 0x7ff0_0000_0000u64;
        let mut words = [0u64; 256];
        for (i, w) in words.iter_mut().enumerate() {
            *w = if i % 2 == 1 { 0x40_1000 + i as u64 } else { 0 };
        }
        let mut mem = Stack {
            base,
            words: &words,
        };
        let regs = Regs {
            pc: 0x40_0000,
            sp: base,
            fp: 0,
            lr: 0,
        };
        let limits = WalkLimits::sample(127, 64 << 20);
        let walked = walk_amd64_metered(regs, &limits, &mut Costly, &mut mem, &mut |_, _| true);
        assert_eq!(walked.stop, Stop::Budget);
        assert!(walked.work <= SAMPLE_MAX_WORK);
        // Each frame: one lookup (1,000 units) and one read of its RA.
        assert_eq!(walked.frames, 1 + SAMPLE_MAX_WORK / 1001);
        assert_eq!(end_counter(walked.stop), SFRAME_UNWIND_END_BUDGET);
        // The deferred path's budget goes further on the same stack.
        let limits = WalkLimits::deferred(127, 64 << 20);
        let walked = walk_amd64_metered(regs, &limits, &mut Costly, &mut mem, &mut |_, _| true);
        assert_eq!(walked.stop, Stop::Budget);
        assert_eq!(walked.frames, 1 + DEFERRED_MAX_WORK / 1001);
    }
}

#[kunit_tests(sframe_unwind_hooks)]
mod hook_tests {
    use crate::abstractions::ftrace::{
        Args,
        FtraceHook,
        Redirect,
        Redirection, //
    };
    use crate::switches;
    use crate::uapi::*;
    use crate::unwind::hooks::Hooks;
    use kernel::prelude::*;

    /// Hooks that never redirect: the original function always runs.
    struct OnSample;
    struct OnDeferred;
    /// Another `IPMODIFY` user of a target, as a livepatch of it is: of
    /// `unwind_user()` where the kernel has it, else (arm64 7.3, no
    /// `CONFIG_UNWIND_USER`) of `perf_callchain_user()`.
    struct OtherUser;

    /// The hook [`OtherUser`] makes busy.
    #[cfg(CONFIG_UNWIND_USER)]
    const BUSY: u32 = SFRAME_CTL_HOOK_DEFERRED;
    #[cfg(not(CONFIG_UNWIND_USER))]
    const BUSY: u32 = SFRAME_CTL_HOOK_SAMPLE;
    /// The hooks this kernel has targets for.
    #[cfg(CONFIG_UNWIND_USER)]
    const ALL: u32 = SFRAME_CTL_HOOK_SAMPLE | SFRAME_CTL_HOOK_DEFERRED;
    #[cfg(not(CONFIG_UNWIND_USER))]
    const ALL: u32 = SFRAME_CTL_HOOK_SAMPLE;

    // SAFETY: `redirect` never returns a redirection.
    unsafe impl Redirect for OnSample {
        const TARGET: &'static CStr = c"perf_callchain_user";
        const ARGS: u32 = 2;
        fn redirect(_args: &Args<'_>) -> Option<Redirection> {
            None
        }
    }

    // SAFETY: `redirect` never returns a redirection.
    unsafe impl Redirect for OnDeferred {
        const TARGET: &'static CStr = c"unwind_user";
        const ARGS: u32 = 2;
        fn redirect(_args: &Args<'_>) -> Option<Redirection> {
            None
        }
    }

    // SAFETY: `redirect` never returns a redirection.
    unsafe impl Redirect for OtherUser {
        #[cfg(CONFIG_UNWIND_USER)]
        const TARGET: &'static CStr = c"unwind_user";
        #[cfg(not(CONFIG_UNWIND_USER))]
        const TARGET: &'static CStr = c"perf_callchain_user";
        const ARGS: u32 = 2;
        fn redirect(_args: &Args<'_>) -> Option<Redirection> {
            None
        }
    }

    /// Needs `sframe_unwind` unloaded: its own hooks would be the other
    /// user of both targets.
    #[test]
    fn a_busy_target_leaves_its_hook_off() -> Result {
        let mut other = KBox::pin_init(FtraceHook::<OtherUser>::new(), GFP_KERNEL)?;
        other.as_mut().install()?;
        {
            // Installing succeeds with the busy hook left off (EBUSY from
            // ftrace, said in the log), so loading the module would too.
            let _hooks = KBox::pin_init(Hooks::<OnSample, OnDeferred>::new(), GFP_KERNEL)?;
            let free = ALL & !BUSY;
            assert_eq!(switches::current(), free);
            assert_eq!(
                switches::set(ALL, ALL),
                Err(crate::abstractions::compat::eopnotsupp())
            );
            assert_eq!(switches::set(free, 0), Ok(0));
            assert_eq!(switches::set(free, free), Ok(free));
        }
        assert_eq!(switches::current(), 0);
        // Once the other user is gone the target is free again.
        other.as_mut().uninstall();
        let _hooks = KBox::pin_init(Hooks::<OnSample, OnDeferred>::new(), GFP_KERNEL)?;
        assert_eq!(switches::current(), ALL);
        Ok(())
    }
}
