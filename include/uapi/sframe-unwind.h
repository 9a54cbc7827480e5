/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * sframe-unwind: the /dev/sframe ioctl ABI.
 *
 * Every argument structure begins with its own size, set by the caller to
 * sizeof() the structure as it was compiled.  The module accepts older
 * (smaller) and newer (larger, with the unknown tail zeroed) structures, as
 * copy_struct_from_user() does.  See Documentation/ioctl.rst.
 */
#ifndef _UAPI_SFRAME_UNWIND_H
#define _UAPI_SFRAME_UNWIND_H

#include <linux/ioctl.h>
#include <linux/types.h>

#define SFRAME_IOC_MAGIC	0xe2
#define SFRAME_ABI_VERSION	1

/* Feature bits reported by SFRAME_IOC_VERSION. */
#define SFRAME_FEAT_V2		(1ULL << 0)
#define SFRAME_FEAT_V3		(1ULL << 1)
#define SFRAME_FEAT_STATS_SCOPE	(1ULL << 2)	/* sframe_stats.scope */
#define SFRAME_FEAT_TAG		(1ULL << 3)	/* SFRAME_F_TAGGED, SFRAME_F_BY_TAG */

struct sframe_version {
	__u32 size;		/* in: sizeof(struct sframe_version) */
	__u32 abi_version;	/* out: SFRAME_ABI_VERSION */
	__u32 module_version;	/* out: major << 16 | minor << 8 | patch */
	__u32 reserved;		/* must be zero */
	__u64 features;		/* out: SFRAME_FEAT_* */
};
#define SFRAME_VERSION_SIZE_VER0	24

#define SFRAME_IOC_VERSION	_IOWR(SFRAME_IOC_MAGIC, 0x00, struct sframe_version)

/* Command numbers; the size in each command is that of version 0. */
#define SFRAME_IOC_REGISTER	_IOC(_IOC_READ | _IOC_WRITE, SFRAME_IOC_MAGIC, 0x01, SFRAME_REGISTER_SIZE_VER0)
#define SFRAME_IOC_UNREGISTER	_IOWR(SFRAME_IOC_MAGIC, 0x02, struct sframe_unregister)
#define SFRAME_IOC_LIST		_IOWR(SFRAME_IOC_MAGIC, 0x03, struct sframe_list)
#define SFRAME_IOC_STATS	_IOC(_IOC_READ | _IOC_WRITE, SFRAME_IOC_MAGIC, 0x04, SFRAME_STATS_SIZE_VER0)
#define SFRAME_IOC_CONTROL	_IOWR(SFRAME_IOC_MAGIC, 0x05, struct sframe_control)

/* flags: a pidfd names the target; not supported (EOPNOTSUPP). */
#define SFRAME_F_PIDFD		(1U << 0)
/* sframe_unregister.flags: remove the section whose text contains addr. */
#define SFRAME_F_BY_ADDR	(1U << 1)
/*
 * flags: the pidfd field holds an open /proc/PID/mem (or, for LIST, also
 * /proc/PID/auxv) naming the target (default: the caller).
 */
#define SFRAME_F_PROCFD		(1U << 2)
/*
 * sframe_register.flags: the bytes are given, and the caller's account
 * files their copy under tag, for later registrations SFRAME_F_BY_TAG.
 */
#define SFRAME_F_TAGGED		(1U << 3)
/*
 * sframe_register.flags: no bytes (sframe_data zero): the copy of
 * sframe_len bytes the caller's account filed under tag and still holds or
 * keeps; ENOENT if there is none (then give the bytes, SFRAME_F_TAGGED).
 */
#define SFRAME_F_BY_TAG		(1U << 4)

struct sframe_register {
	__u32 size;		/* in: sizeof(struct sframe_register) */
	__u32 flags;		/* in: SFRAME_F_PROCFD, SFRAME_F_TAGGED or _BY_TAG, or 0 */
	__s32 pidfd;		/* in, with SFRAME_F_PROCFD: the target */
	__u32 reserved;		/* must be zero */
	__u64 sframe_data;	/* in: address of the SFrame bytes (caller's memory) */
	__u64 sframe_len;	/* in: their length */
	__u64 sframe_addr;	/* in: where the target maps them (PC-relative base) */
	__u64 text_start;	/* in: covered text, in the target: [start, */
	__u64 text_end;		/*     end) */
	__u64 handle;		/* out: names this registration */
	/* Since SFRAME_REGISTER_SIZE_VER1, in, with SFRAME_F_TAGGED or
	 * SFRAME_F_BY_TAG: the caller's name for the bytes (a digest of them,
	 * say), its account's own. */
	__u64 tag;
};
#define SFRAME_REGISTER_SIZE_VER0	64
#define SFRAME_REGISTER_SIZE_VER1	72

struct sframe_unregister {
	__u32 size;		/* in: sizeof(struct sframe_unregister) */
	__u32 flags;		/* in: SFRAME_F_PROCFD, SFRAME_F_BY_ADDR */
	__s32 pidfd;		/* in, with SFRAME_F_PROCFD: the target */
	__u32 reserved;		/* must be zero */
	__u64 handle;		/* in: from SFRAME_IOC_REGISTER */
	__u64 addr;		/* in, with SFRAME_F_BY_ADDR: inside the text */
};
#define SFRAME_UNREGISTER_SIZE_VER0	32

struct sframe_section_info {
	__u64 handle;
	__u64 text_start;
	__u64 text_end;
	__u64 sframe_addr;
	__u64 sframe_len;
	__u64 kernel_bytes;	/* kernel memory held for the copy */
	__u32 version;		/* SFrame version: 2 or 3 */
	__u32 num_fdes;
	__u32 shared;		/* other registrations sharing the bytes */
	__u32 flags;		/* SFRAME_SECTION_*: where it came from */
};
#define SFRAME_SECTION_EXEC		(1U << 0)	/* registered at execve() */
#define SFRAME_SECTION_INHERITED	(1U << 1)	/* inherited at fork() */
#define SFRAME_SECTION_INFO_SIZE_VER0	64

struct sframe_list {
	__u32 size;		/* in: sizeof(struct sframe_list) */
	__u32 flags;		/* in: SFRAME_F_PROCFD or 0 */
	__s32 pidfd;		/* in, with SFRAME_F_PROCFD: the target */
	__u32 entry_size;	/* in: sizeof(struct sframe_section_info) */
	__u64 entries;		/* in: address of an array of capacity entries */
	__u32 capacity;		/* in: entries the array holds */
	__u32 count;		/* out: sections there are (may exceed capacity) */
};
#define SFRAME_LIST_SIZE_VER0	32

/* Indexes into sframe_stats.failures[]. */
enum {
	SFRAME_FAIL_FORMAT,	/* the SFrame bytes did not validate */
	SFRAME_FAIL_ARGUMENT,	/* another bad argument */
	SFRAME_FAIL_FAULT,	/* unreadable user pointer */
	SFRAME_FAIL_OVERLAP,	/* text overlaps a registered range */
	SFRAME_FAIL_NOT_TEXT,	/* text not mapped executable */
	SFRAME_FAIL_TOO_BIG,	/* section over the size limit */
	SFRAME_FAIL_LIMIT,	/* per-process or module-wide limit */
	SFRAME_FAIL_PERMISSION,	/* no permission over the target */
	SFRAME_FAIL_NOT_FOUND,	/* no such registration */
	SFRAME_FAIL_NOMEM,	/* out of memory */
	SFRAME_FAIL_COUNT = 16
};

/* Indexes into sframe_stats.unwind[]. */
enum {
	SFRAME_UNWIND_WALKS_SAMPLE,
	SFRAME_UNWIND_WALKS_DEFERRED,
	SFRAME_UNWIND_FRAMES_SFRAME,
	SFRAME_UNWIND_FRAMES_FP,
	SFRAME_UNWIND_FRAMES_ENTRY,
	SFRAME_UNWIND_FRAMES_SIGNAL,
	SFRAME_UNWIND_END_OUTERMOST,
	SFRAME_UNWIND_END_MAX_FRAMES,
	SFRAME_UNWIND_END_BAD_STEP,
	SFRAME_UNWIND_END_FAULT,
	SFRAME_UNWIND_END_NO_COVERAGE,
	SFRAME_UNWIND_NS_SAMPLE,
	SFRAME_UNWIND_NS_DEFERRED,
	SFRAME_UNWIND_FRAMES_SAMPLE,
	SFRAME_UNWIND_FRAMES_DEFERRED,
	SFRAME_UNWIND_END_BUDGET,	/* walk's work budget spent */
	SFRAME_UNWIND_END_SIGNAL_LIMIT,	/* too many signal frames */
	SFRAME_UNWIND_COUNT = 24
};

struct sframe_stats {
	__u32 size;		/* in: sizeof(struct sframe_stats) */
	__u32 scope;		/* in: zero; out: SFRAME_STATS_SCOPE_* */
	__u64 sections;		/* registrations held (live or not yet freed) */
	__u64 copies;		/* distinct SFrame copies held */
	__u64 bytes;		/* kernel bytes held for them */
	__u64 mms;		/* processes with a registration */
	__u64 registered;	/* since load */
	__u64 unregistered;	/* since load: by request, unmap or exit */
	__u64 failures[SFRAME_FAIL_COUNT];
	__u64 unwind[SFRAME_UNWIND_COUNT];
	/* Since SFRAME_STATS_SIZE_VER1: copies no registration uses, kept
	 * for the next registration of the same bytes (not in copies, bytes). */
	__u64 kept_copies;
	__u64 kept_bytes;	/* kernel bytes held for them */
	__u64 kept_reused;	/* since load: registrations that took one back */
	/* Since SFRAME_STATS_SIZE_VER2: registrations by tag, since load. */
	__u64 by_tag;
};
#define SFRAME_STATS_SIZE_VER0	376
#define SFRAME_STATS_SIZE_VER1	400
#define SFRAME_STATS_SIZE_VER2	408
/*
 * scope: every user's figures (CAP_PERFMON or CAP_SYS_ADMIN), or the
 * caller's own account's (mms, failures and unwind are then zero).
 */
#define SFRAME_STATS_SCOPE_MODULE	1
#define SFRAME_STATS_SCOPE_OWN		2

/* Control bits (SFRAME_IOC_CONTROL; CAP_SYS_ADMIN to change). */
#define SFRAME_CTL_HOOK_SAMPLE		(1U << 0)	/* perf_callchain_user hook */
#define SFRAME_CTL_HOOK_DEFERRED	(1U << 1)	/* unwind_user hook */
#define SFRAME_CTL_EXEC			(1U << 2)	/* execve() registers PT_GNU_SFRAME */
#define SFRAME_CTL_FORK			(1U << 3)	/* fork() children inherit */

struct sframe_control {
	__u32 size;		/* in: sizeof(struct sframe_control) */
	__u32 mask;		/* in: SFRAME_CTL_* bits to change (0: read) */
	__u32 value;		/* in: new values for mask; out: current values */
	__u32 reserved;		/* must be zero */
};
#define SFRAME_CONTROL_SIZE_VER0	16

#endif /* _UAPI_SFRAME_UNWIND_H */
