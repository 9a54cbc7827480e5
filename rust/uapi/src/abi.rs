// SPDX-License-Identifier: GPL-2.0

//! `/dev/sframe` ioctl ABI: command numbers and argument structures.
//!
//! Every argument structure starts with its own `size`, written by the
//! caller.  The kernel follows the `copy_struct_from_user()` rules: a caller
//! built against an older, smaller structure gets defaults for the fields it
//! does not know, a caller built against a newer, larger one is accepted as
//! long as the bytes the kernel does not know are zero.  Fields are fixed
//! width, so one ABI serves 32-bit and 64-bit callers.
//!
//! C rendering: `include/uapi/sframe-unwind.h`.  Documentation:
//! `Documentation/ioctl.rst`.

/// The ioctl "type" byte (free in `Documentation/userspace-api/ioctl/ioctl-number.rst`;
/// it is the low byte of the SFrame magic `0xdee2`).
pub const SFRAME_IOC_MAGIC: u32 = 0xe2;

/// Incremented on incompatible ABI changes (never expected).
pub const SFRAME_ABI_VERSION: u32 = 1;

/// Command numbers (`_IOC_NR`).  The kernel dispatches on the number alone:
/// the size encoded in the command is that of the first version of the
/// structure, and the structure's own `size` field is what counts.
pub const SFRAME_NR_VERSION: u32 = 0x00;
/// Command number of [`SFRAME_IOC_REGISTER`].
pub const SFRAME_NR_REGISTER: u32 = 0x01;
/// Command number of [`SFRAME_IOC_UNREGISTER`].
pub const SFRAME_NR_UNREGISTER: u32 = 0x02;
/// Command number of [`SFRAME_IOC_LIST`].
pub const SFRAME_NR_LIST: u32 = 0x03;
/// Command number of [`SFRAME_IOC_STATS`].
pub const SFRAME_NR_STATS: u32 = 0x04;
/// Command number of [`SFRAME_IOC_CONTROL`].
pub const SFRAME_NR_CONTROL: u32 = 0x05;

const IOC_NRBITS: u32 = 8;
const IOC_TYPEBITS: u32 = 8;
const IOC_SIZEBITS: u32 = 14;
const IOC_NRSHIFT: u32 = 0;
const IOC_TYPESHIFT: u32 = IOC_NRSHIFT + IOC_NRBITS;
const IOC_SIZESHIFT: u32 = IOC_TYPESHIFT + IOC_TYPEBITS;
const IOC_DIRSHIFT: u32 = IOC_SIZESHIFT + IOC_SIZEBITS;
const IOC_WRITE: u32 = 1;
const IOC_READ: u32 = 2;

/// `_IOWR(SFRAME_IOC_MAGIC, nr, size)` as the generic (x86, arm64) encoding defines it.
pub const fn sframe_iowr(nr: u32, size: usize) -> u32 {
    ((IOC_READ | IOC_WRITE) << IOC_DIRSHIFT)
        | (SFRAME_IOC_MAGIC << IOC_TYPESHIFT)
        | (nr << IOC_NRSHIFT)
        | ((size as u32) << IOC_SIZESHIFT)
}

/// The command number of an ioctl (`_IOC_NR`).
pub const fn sframe_ioc_nr(cmd: u32) -> u32 {
    (cmd >> IOC_NRSHIFT) & ((1 << IOC_NRBITS) - 1)
}

/// The type byte of an ioctl (`_IOC_TYPE`).
pub const fn sframe_ioc_type(cmd: u32) -> u32 {
    (cmd >> IOC_TYPESHIFT) & ((1 << IOC_TYPEBITS) - 1)
}

/// Argument of [`SFRAME_IOC_VERSION`]: which ABI and features the module offers.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SframeVersion {
    /// In: `size_of::<SframeVersion>()` as the caller knows it.
    pub size: u32,
    /// Out: [`SFRAME_ABI_VERSION`].
    pub abi_version: u32,
    /// Out: the module's version, `major << 16 | minor << 8 | patch`.
    pub module_version: u32,
    /// Reserved, must be zero.
    pub reserved: u32,
    /// Out: `SFRAME_FEAT_*` bits the module supports.
    pub features: u64,
}

/// Size of the first published [`SframeVersion`].
pub const SFRAME_VERSION_SIZE_VER0: u32 = 24;

/// Returns the module's ABI version and features.
pub const SFRAME_IOC_VERSION: u32 =
    sframe_iowr(SFRAME_NR_VERSION, SFRAME_VERSION_SIZE_VER0 as usize);

/// The module unwinds with SFrame version 2 sections.
pub const SFRAME_FEAT_V2: u64 = 1 << 0;
/// The module unwinds with SFrame version 3 sections.
pub const SFRAME_FEAT_V3: u64 = 1 << 1;
/// `SFRAME_IOC_STATS` says whose figures it gives
/// ([`SframeStats::scope`]), and gives an unprivileged caller its own only.
pub const SFRAME_FEAT_STATS_SCOPE: u64 = 1 << 2;
/// [`SFRAME_IOC_REGISTER`] takes [`SFRAME_F_TAGGED`] and
/// [`SFRAME_F_BY_TAG`] ([`SframeRegister::tag`]).
pub const SFRAME_FEAT_TAG: u64 = 1 << 3;

/// `flags` bit: a pidfd in the `pidfd` field names the target process.  Not
/// supported: refused with `EOPNOTSUPP` (use [`SFRAME_F_PROCFD`]).
pub const SFRAME_F_PIDFD: u32 = 1 << 0;
/// [`SframeUnregister`] `flags` bit: remove the section whose text contains
/// `addr` instead of the one named by `handle`.
pub const SFRAME_F_BY_ADDR: u32 = 1 << 1;
/// `flags` bit: the `pidfd` field holds an open `/proc/PID/mem` (or, for
/// [`SFRAME_IOC_LIST`], also `/proc/PID/auxv`) naming the target process
/// (default: the caller).
pub const SFRAME_F_PROCFD: u32 = 1 << 2;
/// [`SframeRegister`] `flags` bit: the bytes are given as usual, and the
/// caller's account files their copy under [`SframeRegister::tag`], for
/// later registrations of the same bytes [`SFRAME_F_BY_TAG`].
pub const SFRAME_F_TAGGED: u32 = 1 << 3;
/// [`SframeRegister`] `flags` bit: no bytes (`sframe_data` zero): the
/// section is the copy of `sframe_len` bytes that the caller's account
/// filed under [`SframeRegister::tag`] ([`SFRAME_F_TAGGED`]) and still
/// holds or keeps; `ENOENT` if there is none, and the caller then gives
/// the bytes.
pub const SFRAME_F_BY_TAG: u32 = 1 << 4;

/// Argument of [`SFRAME_IOC_REGISTER`]: one SFrame section for one text range.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SframeRegister {
    /// In: `size_of::<SframeRegister>()` as the caller knows it.
    pub size: u32,
    /// In: `SFRAME_F_PROCFD`, at most one of `SFRAME_F_TAGGED` and
    /// `SFRAME_F_BY_TAG`, or zero.
    pub flags: u32,
    /// In, with `SFRAME_F_PROCFD`: the target's `/proc/PID/mem` descriptor.
    pub pidfd: i32,
    /// Reserved, must be zero.
    pub reserved: u32,
    /// In: address of the SFrame bytes in the caller's memory (zero with
    /// `SFRAME_F_BY_TAG`).
    pub sframe_data: u64,
    /// In: their length.
    pub sframe_len: u64,
    /// In: the address at which the target maps these bytes (PC-relative
    /// function starts are resolved against it).  Usually `sframe_data`.
    pub sframe_addr: u64,
    /// In: start of the text range the section covers, in the target.
    pub text_start: u64,
    /// In: end (exclusive) of the text range.
    pub text_end: u64,
    /// Out: the handle that names this registration.
    pub handle: u64,
    /// Since [`SFRAME_REGISTER_SIZE_VER1`], in, with `SFRAME_F_TAGGED` or
    /// `SFRAME_F_BY_TAG`: the caller's name for the bytes (a digest of
    /// them, say).  Tags are the caller's account's own: nobody else's
    /// registration finds its copies by them.
    pub tag: u64,
}

/// Size of the first published [`SframeRegister`].
pub const SFRAME_REGISTER_SIZE_VER0: u32 = 64;
/// Size of [`SframeRegister`] with [`SframeRegister::tag`].
pub const SFRAME_REGISTER_SIZE_VER1: u32 = SFRAME_REGISTER_SIZE_VER0 + 8;

/// Argument of [`SFRAME_IOC_UNREGISTER`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SframeUnregister {
    /// In: `size_of::<SframeUnregister>()` as the caller knows it.
    pub size: u32,
    /// In: `SFRAME_F_PROCFD`, `SFRAME_F_BY_ADDR`, or zero.
    pub flags: u32,
    /// In, with `SFRAME_F_PROCFD`: the target's `/proc/PID/mem` descriptor.
    pub pidfd: i32,
    /// Reserved, must be zero.
    pub reserved: u32,
    /// In: the handle [`SFRAME_IOC_REGISTER`] returned.
    pub handle: u64,
    /// In, with `SFRAME_F_BY_ADDR`: an address inside the registered text.
    pub addr: u64,
}

/// Size of the first published [`SframeUnregister`].
pub const SFRAME_UNREGISTER_SIZE_VER0: u32 = 32;

/// One registered section, as [`SFRAME_IOC_LIST`] reports it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SframeSectionInfo {
    /// The registration's handle.
    pub handle: u64,
    /// Start of the covered text.
    pub text_start: u64,
    /// End (exclusive) of the covered text.
    pub text_end: u64,
    /// Address the SFrame bytes describe.
    pub sframe_addr: u64,
    /// Length of the SFrame bytes.
    pub sframe_len: u64,
    /// Kernel memory held for the section (shared copies count in full).
    pub kernel_bytes: u64,
    /// SFrame format version (2 or 3).
    pub version: u32,
    /// Number of FDEs (functions).
    pub num_fdes: u32,
    /// Number of other registrations sharing the same bytes.
    pub shared: u32,
    /// `SFRAME_SECTION_*`: where the registration came from.
    pub flags: u32,
}

/// [`SframeSectionInfo::flags`]: registered by the module at `execve()`
/// (the program's or its interpreter's `PT_GNU_SFRAME`).
pub const SFRAME_SECTION_EXEC: u32 = 1 << 0;
/// [`SframeSectionInfo::flags`]: inherited from the parent at `fork()`.
pub const SFRAME_SECTION_INHERITED: u32 = 1 << 1;

/// Size of the first published [`SframeSectionInfo`].
pub const SFRAME_SECTION_INFO_SIZE_VER0: u32 = 64;

/// Argument of [`SFRAME_IOC_LIST`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SframeList {
    /// In: `size_of::<SframeList>()` as the caller knows it.
    pub size: u32,
    /// In: `SFRAME_F_PROCFD` or zero.
    pub flags: u32,
    /// In, with `SFRAME_F_PROCFD`: the target's `/proc/PID/mem` or
    /// `/proc/PID/auxv` descriptor.
    pub pidfd: i32,
    /// In: size of one [`SframeSectionInfo`] as the caller knows it
    /// (at least [`SFRAME_SECTION_INFO_SIZE_VER0`]); entries are written
    /// that far apart, truncated or zero-padded to it.
    pub entry_size: u32,
    /// In: address of an array of `capacity` entries.
    pub entries: u64,
    /// In: how many entries the array holds.
    pub capacity: u32,
    /// Out: how many sections there are (may exceed `capacity`: only
    /// `capacity` are written).
    pub count: u32,
}

/// Size of the first published [`SframeList`].
pub const SFRAME_LIST_SIZE_VER0: u32 = 32;

/// Argument of [`SFRAME_IOC_STATS`]: the registry's and the unwinder's
/// counters, module-wide or the caller's own ([`SframeStats::scope`]).  New
/// counters are appended; a caller sees those its structure has room for.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SframeStats {
    /// In: `size_of::<SframeStats>()` as the caller knows it.
    pub size: u32,
    /// In: zero.  Out: whose figures these are: [`SFRAME_STATS_SCOPE_MODULE`]
    /// (every user's, for a caller with `CAP_PERFMON` or `CAP_SYS_ADMIN`)
    /// or [`SFRAME_STATS_SCOPE_OWN`] (what the caller's own account holds;
    /// `mms`, `failures` and `unwind` are then zero).
    pub scope: u32,
    /// Registrations held now (one per text range per process): live, or
    /// retired and not yet freed.
    pub sections: u64,
    /// Distinct SFrame copies held (registrations share identical bytes).
    pub copies: u64,
    /// Kernel bytes held for the copies.
    pub bytes: u64,
    /// Processes (address spaces) with at least one registration.
    pub mms: u64,
    /// Successful registrations since load.
    pub registered: u64,
    /// Registrations removed since load (by request, unmap or exit).
    pub unregistered: u64,
    /// Failed requests since load, by reason: `[SFRAME_FAIL_*]`.
    pub failures: [u64; SFRAME_FAIL_COUNT],
    /// Unwinder counters since load: `[SFRAME_UNWIND_*]`.
    pub unwind: [u64; SFRAME_UNWIND_COUNT],
    /// Since [`SFRAME_STATS_SIZE_VER1`]: copies no registration uses, kept
    /// for the next registration of the same bytes (not in `copies`).
    pub kept_copies: u64,
    /// Kernel bytes held for the kept copies (not in `bytes`).
    pub kept_bytes: u64,
    /// Registrations that took a kept copy back, since load (not
    /// validated again).
    pub kept_reused: u64,
    /// Since [`SFRAME_STATS_SIZE_VER2`]: registrations made by tag
    /// ([`SFRAME_F_BY_TAG`]), since load.
    pub by_tag: u64,
}

/// [`SframeStats::scope`]: every user's figures.
pub const SFRAME_STATS_SCOPE_MODULE: u32 = 1;
/// [`SframeStats::scope`]: the caller's own account's figures.
pub const SFRAME_STATS_SCOPE_OWN: u32 = 2;

/// Size of the first published [`SframeStats`].
pub const SFRAME_STATS_SIZE_VER0: u32 = 56 + 8 * 16 + 8 * 24;
/// Size of [`SframeStats`] with the kept copies' figures.
pub const SFRAME_STATS_SIZE_VER1: u32 = SFRAME_STATS_SIZE_VER0 + 24;
/// Size of [`SframeStats`] with [`SframeStats::by_tag`].
pub const SFRAME_STATS_SIZE_VER2: u32 = SFRAME_STATS_SIZE_VER1 + 8;

/// `failures[]` index: the SFrame bytes did not validate (`EINVAL`).
pub const SFRAME_FAIL_FORMAT: usize = 0;
/// `failures[]` index: a bad argument other than the bytes (`EINVAL`).
pub const SFRAME_FAIL_ARGUMENT: usize = 1;
/// `failures[]` index: an unreadable user pointer (`EFAULT`).
pub const SFRAME_FAIL_FAULT: usize = 2;
/// `failures[]` index: the text overlaps a registered range (`EEXIST`).
pub const SFRAME_FAIL_OVERLAP: usize = 3;
/// `failures[]` index: the text is not mapped executable (`EINVAL`).
pub const SFRAME_FAIL_NOT_TEXT: usize = 4;
/// `failures[]` index: a section over the size limit (`E2BIG`).
pub const SFRAME_FAIL_TOO_BIG: usize = 5;
/// `failures[]` index: a per-process or module-wide limit reached (`ENOSPC`).
pub const SFRAME_FAIL_LIMIT: usize = 6;
/// `failures[]` index: no permission over the target (`EPERM`/`EACCES`).
pub const SFRAME_FAIL_PERMISSION: usize = 7;
/// `failures[]` index: no registration matches (`ENOENT`).
pub const SFRAME_FAIL_NOT_FOUND: usize = 8;
/// `failures[]` index: out of memory (`ENOMEM`).
pub const SFRAME_FAIL_NOMEM: usize = 9;
/// Number of `failures[]` slots (room to grow).
pub const SFRAME_FAIL_COUNT: usize = 16;

/// `unwind[]` index: walks started by perf's sampling path.
pub const SFRAME_UNWIND_WALKS_SAMPLE: usize = 0;
/// `unwind[]` index: walks started by the deferred (`fp,defer`) path.
pub const SFRAME_UNWIND_WALKS_DEFERRED: usize = 1;
/// `unwind[]` index: frames found with SFrame.
pub const SFRAME_UNWIND_FRAMES_SFRAME: usize = 2;
/// `unwind[]` index: frames found by the frame-pointer fallback.
pub const SFRAME_UNWIND_FRAMES_FP: usize = 3;
/// `unwind[]` index: frames found by the function-entry rule.
pub const SFRAME_UNWIND_FRAMES_ENTRY: usize = 4;
/// `unwind[]` index: signal frames crossed.
pub const SFRAME_UNWIND_FRAMES_SIGNAL: usize = 5;
/// `unwind[]` index: walks ended at an outermost frame.
pub const SFRAME_UNWIND_END_OUTERMOST: usize = 6;
/// `unwind[]` index: walks ended by perf's frame limit.
pub const SFRAME_UNWIND_END_MAX_FRAMES: usize = 7;
/// `unwind[]` index: walks ended because a step failed a check.
pub const SFRAME_UNWIND_END_BAD_STEP: usize = 8;
/// `unwind[]` index: walks ended on an unreadable stack.
pub const SFRAME_UNWIND_END_FAULT: usize = 9;
/// `unwind[]` index: walks ended at a PC nothing could unwind.
pub const SFRAME_UNWIND_END_NO_COVERAGE: usize = 10;
/// `unwind[]` index: nanoseconds spent in sampling-path walks.
pub const SFRAME_UNWIND_NS_SAMPLE: usize = 11;
/// `unwind[]` index: nanoseconds spent in deferred walks.
pub const SFRAME_UNWIND_NS_DEFERRED: usize = 12;
/// `unwind[]` index: frames emitted by sampling-path walks.
pub const SFRAME_UNWIND_FRAMES_SAMPLE: usize = 13;
/// `unwind[]` index: frames emitted by deferred walks.
pub const SFRAME_UNWIND_FRAMES_DEFERRED: usize = 14;
/// `unwind[]` index: walks ended because their work budget was spent.
pub const SFRAME_UNWIND_END_BUDGET: usize = 15;
/// `unwind[]` index: walks ended at one signal frame more than allowed.
pub const SFRAME_UNWIND_END_SIGNAL_LIMIT: usize = 16;
/// Number of `unwind[]` slots (room to grow).
pub const SFRAME_UNWIND_COUNT: usize = 24;

/// Argument of [`SFRAME_IOC_CONTROL`] (`CAP_SYS_ADMIN`): read and set
/// module-wide switches.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SframeControl {
    /// In: `size_of::<SframeControl>()` as the caller knows it.
    pub size: u32,
    /// In: which `SFRAME_CTL_*` bits of `value` to change (zero: only read).
    pub mask: u32,
    /// In: new values for the bits in `mask`; out: all current values.
    pub value: u32,
    /// Reserved, must be zero.
    pub reserved: u32,
}

/// Size of the first published [`SframeControl`].
pub const SFRAME_CONTROL_SIZE_VER0: u32 = 16;
/// Control bit: the `perf_callchain_user` hook is on.
pub const SFRAME_CTL_HOOK_SAMPLE: u32 = 1 << 0;
/// Control bit: the `unwind_user` (deferred) hook is on.
pub const SFRAME_CTL_HOOK_DEFERRED: u32 = 1 << 1;
/// Control bit: `execve()` registers the new program's and its
/// interpreter's `PT_GNU_SFRAME` sections.
pub const SFRAME_CTL_EXEC: u32 = 1 << 2;
/// Control bit: a `fork()` child (without `CLONE_VM`) starts with its
/// parent's registrations.
pub const SFRAME_CTL_FORK: u32 = 1 << 3;

/// Registers an SFrame section.
pub const SFRAME_IOC_REGISTER: u32 =
    sframe_iowr(SFRAME_NR_REGISTER, SFRAME_REGISTER_SIZE_VER0 as usize);
/// Removes a registration.
pub const SFRAME_IOC_UNREGISTER: u32 =
    sframe_iowr(SFRAME_NR_UNREGISTER, SFRAME_UNREGISTER_SIZE_VER0 as usize);
/// Lists a process's registrations.
pub const SFRAME_IOC_LIST: u32 = sframe_iowr(SFRAME_NR_LIST, SFRAME_LIST_SIZE_VER0 as usize);
/// Reads the module-wide counters.
pub const SFRAME_IOC_STATS: u32 = sframe_iowr(SFRAME_NR_STATS, SFRAME_STATS_SIZE_VER0 as usize);
/// Reads or sets module-wide switches (`CAP_SYS_ADMIN` to set).
pub const SFRAME_IOC_CONTROL: u32 =
    sframe_iowr(SFRAME_NR_CONTROL, SFRAME_CONTROL_SIZE_VER0 as usize);

/// The size of the field `_field` returns, for the layout checks of
/// [`plain_structs`].
const fn field_size<S, F>(_field: fn(&S) -> &F) -> usize {
    core::mem::size_of::<F>()
}

/// Asks the kernel crate for a field type that is plain bytes both ways.
#[cfg(MODULE)]
const fn plain_field<S, F>(_field: fn(&S) -> &F)
where
    F: kernel::transmute::FromBytes + kernel::transmute::AsBytes,
{
}

/// Declares that each listed argument structure is plain bytes, and checks
/// it at compile time: its fields, named in declaration order, lie end to
/// end from offset 0 to its size (no padding byte, so none is left
/// uninitialised or leaks kernel memory to user space), and it is no
/// smaller than its first published version.
///
/// In the kernel module (`cfg(MODULE)`; user space has no `kernel` crate)
/// it also checks that every field type is `FromBytes` and `AsBytes`
/// (fixed-width integers and arrays of them) and implements both traits
/// for the structure, which the ioctl code needs to copy it.
macro_rules! plain_structs {
    ($($t:ident($ver0:expr) { $($f:ident),+ $(,)? })*) => {
        $(
            const _: () = {
                let mut end = 0;
                $(
                    assert!(core::mem::offset_of!($t, $f) == end, "padding in an ABI structure");
                    end += field_size(|s: &$t| &s.$f);
                )+
                assert!(core::mem::size_of::<$t>() == end, "padding in an ABI structure");
                assert!(core::mem::size_of::<$t>() >= $ver0 as usize);
            };
            #[cfg(MODULE)]
            const _: () = {
                $(plain_field(|s: &$t| &s.$f);)+
            };
        )*
        #[cfg(MODULE)]
        const _: () = {
            $(
                // SAFETY: The structure is `repr(C)`, and the assertions
                // above prove that its fields cover every byte of it and
                // that each field is `FromBytes`: any byte pattern is a
                // valid value of each field, so of the structure.
                unsafe impl kernel::transmute::FromBytes for $t {}
                // SAFETY: As above, each byte belongs to a field, and each
                // field is `AsBytes` (no uninitialised byte, no interior
                // mutability), so neither has the structure.
                unsafe impl kernel::transmute::AsBytes for $t {}
            )*
        };
    };
}

plain_structs! {
    SframeVersion(SFRAME_VERSION_SIZE_VER0) {
        size, abi_version, module_version, reserved, features,
    }
    SframeRegister(SFRAME_REGISTER_SIZE_VER0) {
        size, flags, pidfd, reserved, sframe_data, sframe_len, sframe_addr, text_start,
        text_end, handle, tag,
    }
    SframeUnregister(SFRAME_UNREGISTER_SIZE_VER0) {
        size, flags, pidfd, reserved, handle, addr,
    }
    SframeSectionInfo(SFRAME_SECTION_INFO_SIZE_VER0) {
        handle, text_start, text_end, sframe_addr, sframe_len, kernel_bytes, version, num_fdes,
        shared, flags,
    }
    SframeList(SFRAME_LIST_SIZE_VER0) {
        size, flags, pidfd, entry_size, entries, capacity, count,
    }
    SframeStats(SFRAME_STATS_SIZE_VER0) {
        size, scope, sections, copies, bytes, mms, registered, unregistered, failures, unwind,
        kept_copies, kept_bytes, kept_reused, by_tag,
    }
    SframeControl(SFRAME_CONTROL_SIZE_VER0) {
        size, mask, value, reserved,
    }
}
