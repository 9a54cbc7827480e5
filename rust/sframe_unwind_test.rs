// SPDX-License-Identifier: GPL-2.0

//! KUnit tests for sframe-unwind.
//!
//! A module of its own, so the shipped module neither runs tests at every
//! `insmod` nor depends on `CONFIG_KUNIT`.  Loading it runs the suites
//! (`CONFIG_KUNIT_DEFAULT_ENABLED`); results are in
//! `/sys/kernel/debug/kunit/<suite>/results`.  The code under test is
//! compiled here from the same sources as the module, with the kernel's
//! compiler flags (overflow checks included).

use kernel::prelude::*;

#[path = "uapi/src/abi.rs"]
#[expect(dead_code, reason = "the ABI also defines what only user space uses")]
#[allow(unreachable_pub, reason = "the ABI's items are public for user space")]
mod uapi;

// The unwinder's kernel-independent parts, and the perf callchain store.
mod call_site;
// What the kernel crate lacks before 7.3, for the hooks.
#[allow(
    dead_code,
    unused_imports,
    reason = "only the hooks' part is used here"
)]
mod compat;
// Where an exec'd program keeps its SFrame section.
#[expect(dead_code, reason = "the log's wording is not under test")]
mod exec_image;
mod ffi;
mod perf;
// The hooks' installation and switches, against a busy target.
#[allow(dead_code, reason = "the redirecting side is not under test")]
mod ftrace;
#[allow(
    dead_code,
    reason = "the deferred guard and the capability check are not under test"
)]
mod hooks;
#[path = "sframe/src/decoder/mod.rs"]
pub mod sframe;
#[expect(dead_code, reason = "the module-wide counters are not under test")]
mod unwind_counters;
// The registry's RCU maple tree, and its suites.
#[allow(dead_code, reason = "only some of the abstraction is under test")]
mod rcu_maple;
mod registry_tests;

module! {
    type: SframeUnwindTest,
    name: "sframe_unwind_test",
    authors: ["The sframe-unwind developers"],
    description: "KUnit tests for sframe-unwind",
    license: "GPL",
}

struct SframeUnwindTest;

impl kernel::Module for SframeUnwindTest {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        Ok(SframeUnwindTest)
    }
}

#[kunit_tests(sframe_unwind_abi)]
mod abi_tests {
    use super::uapi::*;
    use kernel::ioctl::_IOWR;

    /// The ABI crate encodes commands by hand (user space has no `_IOWR`);
    /// it must agree with the kernel's own encoding.
    #[test]
    fn ioctl_encoding_matches_kernel() {
        assert_eq!(
            SFRAME_IOC_VERSION,
            _IOWR::<SframeVersion>(SFRAME_IOC_MAGIC, SFRAME_NR_VERSION)
        );
        assert_eq!(sframe_ioc_nr(SFRAME_IOC_VERSION), SFRAME_NR_VERSION);
        assert_eq!(sframe_ioc_type(SFRAME_IOC_VERSION), SFRAME_IOC_MAGIC);
    }

    #[test]
    fn version_struct_size_is_version_0() {
        assert_eq!(
            core::mem::size_of::<SframeVersion>(),
            SFRAME_VERSION_SIZE_VER0 as usize
        );
    }
}

#[kunit_tests(sframe_unwind_call_site)]
mod call_site_tests {
    use super::call_site::*;

    /// `insn` as the last bytes before a return address, after `nop`s.
    fn window(insn: &[u8]) -> [u8; CALL_WINDOW] {
        let mut w = [0x90u8; CALL_WINDOW];
        let start = CALL_WINDOW - insn.len();
        if let Some(tail) = w.get_mut(start..) {
            tail.copy_from_slice(insn);
        }
        w
    }

    #[test]
    fn direct_call() {
        assert!(follows_call(&window(&[0xe8, 0x98, 0xff, 0xff, 0xff])));
    }

    #[test]
    fn indirect_calls() {
        let calls: [&[u8]; 9] = [
            &[0xff, 0xd0],                               // call *%rax
            &[0x41, 0xff, 0xd3],                         // call *%r11
            &[0xff, 0x10],                               // call *(%rax)
            &[0xff, 0x15, 0x12, 0x34, 0x00, 0x00],       // call *x(%rip)
            &[0xff, 0x55, 0x08],                         // call *0x8(%rbp)
            &[0xff, 0x14, 0x24],                         // call *(%rsp)
            &[0xff, 0x54, 0x24, 0x08],                   // call *0x8(%rsp)
            &[0xff, 0x94, 0x24, 0x00, 0x01, 0x00, 0x00], // call *0x100(%rsp)
            &[0xff, 0x14, 0x25, 0x00, 0x10, 0x40, 0x00], // call *0x401000
        ];
        for insn in calls {
            assert!(follows_call(&window(insn)));
        }
    }

    #[test]
    fn not_calls() {
        let others: [&[u8]; 5] = [
            &[0xff, 0xe0],                         // jmp *%rax
            &[0xff, 0x25, 0x00, 0x00, 0x00, 0x00], // jmp *x(%rip)
            &[0x55],                               // push %rbp
            &[0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00],
            &[0xfc, 0x7f, 0x00, 0x00, 0x10, 0x20, 0x30], // stack address bytes
        ];
        for insn in others {
            assert!(!follows_call(&window(insn)));
        }
    }
}

#[kunit_tests(sframe_unwind_counters)]
mod counter_tests {
    use super::sframe::unwind::{
        FrameSource,
        Stop, //
    };
    use super::uapi::*;
    use super::unwind_counters::*;

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
    fn a_walk_adds_its_frames_end_and_time() {
        let mut t = Tally::default();
        t.frame(FrameSource::Sample);
        for _ in 0..3 {
            t.frame(FrameSource::Sframe);
        }
        t.frame(FrameSource::FramePointer);
        t.frame(FrameSource::EntryRule);
        let d = t.deltas(Path::Deferred, Stop::Outermost, 1234);
        let mut want = [0u64; SFRAME_UNWIND_COUNT];
        want[SFRAME_UNWIND_WALKS_DEFERRED] = 1;
        want[SFRAME_UNWIND_FRAMES_DEFERRED] = 6;
        want[SFRAME_UNWIND_FRAMES_SFRAME] = 3;
        want[SFRAME_UNWIND_FRAMES_FP] = 1;
        want[SFRAME_UNWIND_FRAMES_ENTRY] = 1;
        want[SFRAME_UNWIND_END_OUTERMOST] = 1;
        want[SFRAME_UNWIND_NS_DEFERRED] = 1234;
        assert_eq!(d, want);
    }
}

#[kunit_tests(sframe_unwind_perf)]
mod perf_tests {
    use super::ffi;
    use super::perf::CallchainEntry;
    use super::sframe::{
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
    use super::uapi::{
        SFRAME_UNWIND_END_BUDGET,
        SFRAME_UNWIND_END_SIGNAL_LIMIT, //
    };
    use super::unwind_counters::end_counter;
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
        }
        assert_eq!(ctx.nr, 3);
        assert_eq!(chain.words[..5], [3, 0x1000, 0x2000, 0x3000, 0]);
        Ok(())
    }

    #[test]
    fn store_stops_when_contexts_are_maxed() -> Result {
        let mut chain = Chain::new()?;
        let mut ctx = chain.ctx(8);
        ctx.contexts_maxed = true;
        // SAFETY: `ctx` and its entry outlive `entry`, used by nothing else.
        let mut entry = unsafe { CallchainEntry::from_raw(&mut ctx) };
        assert!(!entry.store(0x1000));
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
    use super::ftrace::{
        Args,
        FtraceHook,
        Redirect, //
    };
    use super::hooks::{
        self,
        Hooks, //
    };
    use super::uapi::*;
    use kernel::prelude::*;

    /// Hooks that never redirect: the original function always runs.
    struct OnSample;
    struct OnDeferred;
    /// Another `IPMODIFY` user of `unwind_user()`, as a livepatch of it is.
    struct OtherUser;

    // SAFETY: `redirect` never returns an address.
    unsafe impl Redirect for OnSample {
        const TARGET: &'static CStr = c"perf_callchain_user";
        fn redirect(_args: &Args<'_>) -> Option<usize> {
            None
        }
    }

    // SAFETY: `redirect` never returns an address.
    unsafe impl Redirect for OnDeferred {
        const TARGET: &'static CStr = c"unwind_user";
        fn redirect(_args: &Args<'_>) -> Option<usize> {
            None
        }
    }

    // SAFETY: `redirect` never returns an address.
    unsafe impl Redirect for OtherUser {
        const TARGET: &'static CStr = c"unwind_user";
        fn redirect(_args: &Args<'_>) -> Option<usize> {
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
            assert_eq!(hooks::current(), SFRAME_CTL_HOOK_SAMPLE);
            let both = SFRAME_CTL_HOOK_SAMPLE | SFRAME_CTL_HOOK_DEFERRED;
            assert_eq!(hooks::set(both, both), Err(crate::compat::eopnotsupp()));
            assert_eq!(hooks::set(SFRAME_CTL_HOOK_SAMPLE, 0), Ok(0));
            assert_eq!(
                hooks::set(SFRAME_CTL_HOOK_SAMPLE, SFRAME_CTL_HOOK_SAMPLE),
                Ok(SFRAME_CTL_HOOK_SAMPLE)
            );
        }
        assert_eq!(hooks::current(), 0);
        // Once the other user is gone the target is free again.
        other.as_mut().uninstall();
        let _hooks = KBox::pin_init(Hooks::<OnSample, OnDeferred>::new(), GFP_KERNEL)?;
        assert_eq!(
            hooks::current(),
            SFRAME_CTL_HOOK_SAMPLE | SFRAME_CTL_HOOK_DEFERRED
        );
        Ok(())
    }
}

#[kunit_tests(sframe_unwind_exec_image)]
mod exec_image_tests {
    use super::exec_image::*;
    use super::sframe::unwind::Memory;
    use kernel::prelude::*;

    /// An address space of one mapping: `bytes` at `base`.
    struct Image {
        base: u64,
        bytes: KVec<u8>,
    }

    impl Memory for Image {
        fn read_u64(&mut self, addr: u64) -> Option<u64> {
            let mut w = [0u8; 8];
            self.read(addr, &mut w).then(|| u64::from_le_bytes(w))
        }

        fn read(&mut self, addr: u64, buf: &mut [u8]) -> bool {
            let Some(off) = addr.checked_sub(self.base) else {
                return false;
            };
            let Ok(off) = usize::try_from(off) else {
                return false;
            };
            match self.bytes.get(off..off.saturating_add(buf.len())) {
                Some(src) if src.len() == buf.len() => {
                    buf.copy_from_slice(src);
                    true
                }
                _ => false,
            }
        }
    }

    const PT_LOAD: u32 = 1;
    const PT_PHDR: u32 = 6;
    const PT_GNU_SFRAME: u32 = 0x6474_e554;

    /// (type, flags, offset, vaddr, filesz, memsz)
    type Ph = (u32, u32, u64, u64, u64, u64);

    /// An ELF header and `phdrs` right after it, mapped at `base`, as a
    /// linker lays out the start of a file.
    fn image(base: u64, phdrs: &[Ph]) -> Result<Image> {
        let mut b = KVec::new();
        b.extend_from_slice(&[0u8; 64], GFP_KERNEL)?;
        b[..4].copy_from_slice(b"\x7fELF");
        b[4] = 2; // ELFCLASS64
        b[5] = 1; // ELFDATA2LSB
        b[18..20].copy_from_slice(&62u16.to_le_bytes()); // EM_X86_64
        b[32..40].copy_from_slice(&64u64.to_le_bytes()); // e_phoff
        b[54..56].copy_from_slice(&56u16.to_le_bytes()); // e_phentsize
        b[56..58].copy_from_slice(&(phdrs.len() as u16).to_le_bytes());
        for &(t, f, off, vaddr, filesz, memsz) in phdrs {
            let mut ph = [0u8; 56];
            ph[0..4].copy_from_slice(&t.to_le_bytes());
            ph[4..8].copy_from_slice(&f.to_le_bytes());
            ph[8..16].copy_from_slice(&off.to_le_bytes());
            ph[16..24].copy_from_slice(&vaddr.to_le_bytes());
            ph[32..40].copy_from_slice(&filesz.to_le_bytes());
            ph[40..48].copy_from_slice(&memsz.to_le_bytes());
            b.extend_from_slice(&ph, GFP_KERNEL)?;
        }
        Ok(Image { base, bytes: b })
    }

    /// A PIE: PT_PHDR, text, .sframe in the read-only segment.
    const PIE: [Ph; 5] = [
        (PT_PHDR, 4, 64, 64, 280, 280),
        (PT_LOAD, 4, 0, 0, 0x800, 0x800),
        (PT_LOAD, 5, 0x1000, 0x1000, 0x900, 0x900),
        (PT_LOAD, 4, 0x2000, 0x2000, 0x400, 0x400),
        (PT_GNU_SFRAME, 4, 0x2100, 0x2100, 0x80, 0x80),
    ];

    #[test]
    fn program_with_pt_phdr() -> Result {
        let bias = 0x5555_0000_0000;
        let mut mem = image(bias, &PIE)?;
        let l = Layout::program(&mut mem, bias + 64, 5).map_err(|_| EINVAL)?;
        assert_eq!(l.sframe, Some((bias + 0x2100, 0x80)));
        assert_eq!(l.text(), &[(bias + 0x1000, bias + 0x1900)]);
        Ok(())
    }

    #[test]
    fn static_program_without_pt_phdr() -> Result {
        // Linked at 0x400000, no PT_PHDR: the ELF header sits before the
        // program headers.
        let phdrs: [Ph; 3] = [
            (PT_LOAD, 4, 0, 0x40_0000, 0x200, 0x200),
            (PT_LOAD, 5, 0x1000, 0x40_1000, 0x8000, 0x8000),
            (PT_GNU_SFRAME, 4, 0x9000, 0x40_9000, 0x300, 0x300),
        ];
        let mut mem = image(0x40_0000, &phdrs)?;
        let l = Layout::program(&mut mem, 0x40_0040, 3).map_err(|_| EINVAL)?;
        assert_eq!(l.sframe, Some((0x40_9000, 0x300)));
        assert_eq!(l.text(), &[(0x40_1000, 0x40_9000)]);
        // A count that is not the header's: refused, not guessed.
        assert_eq!(
            Layout::program(&mut mem, 0x40_0040, 2),
            Err(ImageError::BadPhdrs)
        );
        Ok(())
    }

    #[test]
    fn interpreter_at_its_header() -> Result {
        let base = 0x7f00_0000_0000;
        let mut mem = image(base, &PIE[1..])?;
        let l = Layout::at_header(&mut mem, base).map_err(|_| EINVAL)?;
        assert_eq!(l.sframe, Some((base + 0x2100, 0x80)));
        assert_eq!(l.text(), &[(base + 0x1000, base + 0x1900)]);
        Ok(())
    }

    #[test]
    fn malformed_objects() -> Result {
        let base = 0x1000_0000;
        let mut mem = image(base, &PIE)?;
        assert_eq!(
            Layout::program(&mut mem, base + 64, 0),
            Err(ImageError::BadPhdrs)
        );
        assert_eq!(
            Layout::program(&mut mem, base + 64, 65),
            Err(ImageError::BadPhdrs)
        );
        // Headers beyond the mapping.
        assert_eq!(
            Layout::program(&mut mem, base + 64, 6),
            Err(ImageError::Unreadable)
        );
        assert_eq!(
            Layout::at_header(&mut mem, base + 8),
            Err(ImageError::NotElf)
        );
        mem.bytes[18] = 3; // EM_386
        assert_eq!(Layout::at_header(&mut mem, base), Err(ImageError::NotElf));
        mem.bytes[18] = 62;
        // A first PT_LOAD too short to hold the headers it was read from.
        mem.bytes[64 + 56 + 32..64 + 56 + 40].copy_from_slice(&0x10u64.to_le_bytes());
        assert_eq!(Layout::at_header(&mut mem, base), Err(ImageError::BadPhdrs));
        // A segment whose end wraps the address space.
        let mut wrap = image(base, &[(PT_LOAD, 5, 0, u64::MAX - 8, 0x100, 0x100)])?;
        assert!(Layout::at_header(&mut wrap, base).is_err());
        Ok(())
    }
}
