// SPDX-License-Identifier: GPL-2.0
/*
 * Exercise the section registry (SFRAME_IOC_REGISTER, _UNREGISTER, _LIST,
 * _STATS) as a dynamic loader would: this program registers its own
 * .sframe, found through dl_iterate_phdr() and PT_GNU_SFRAME.
 *
 *   registry CASE [ARGS]   exit 0 when CASE behaves as documented
 *
 * Build with -Wa,--gsframe so the program has a .sframe of its own.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sframe-unwind.h"

/* Command numbers, for building unusual commands. */
#define NR_REGISTER	0x01
#define NR_STATS	0x04
#define NR_CONTROL	0x05

#ifndef PT_GNU_SFRAME
#define PT_GNU_SFRAME 0x6474e554
#endif

static int dev;
static const char *self_path;

/* One object's .sframe and executable text, as a loader finds them. */
struct object {
	uint64_t sframe, sframe_len;	/* PT_GNU_SFRAME, in memory */
	uint64_t text, text_end;	/* the PF_X PT_LOAD */
};

#define U(x) ((unsigned long long)(x))
#define die(...) do { fprintf(stderr, "registry: " __VA_ARGS__); \
	fputc('\n', stderr); exit(1); } while (0)
#define check(cond, ...) do { if (!(cond)) die(__VA_ARGS__); } while (0)

struct find_ctx {
	const char *name;	/* substring of dlpi_name; "" for the executable */
	struct object *obj;
	int found;
};

static int find_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	struct find_ctx *ctx = data;
	struct object o = { 0 };
	int i;

	(void)size;
	if (ctx->found)
		return 0;
	if (*ctx->name ? !strstr(info->dlpi_name, ctx->name) : *info->dlpi_name)
		return 0;
	for (i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *p = &info->dlpi_phdr[i];

		if (p->p_type == PT_GNU_SFRAME) {
			o.sframe = info->dlpi_addr + p->p_vaddr;
			o.sframe_len = p->p_memsz;
		} else if (p->p_type == PT_LOAD && (p->p_flags & PF_X)) {
			o.text = info->dlpi_addr + p->p_vaddr;
			o.text_end = o.text + p->p_memsz;
		}
	}
	if (!o.sframe || !o.text)
		return 0;
	*ctx->obj = o;
	ctx->found = 1;
	return 1;
}

static int find_object(const char *name, struct object *o)
{
	struct find_ctx ctx = { name, o, 0 };

	dl_iterate_phdr(find_cb, &ctx);
	return ctx.found;
}

static struct object self(void)
{
	struct object o;

	check(find_object("", &o), "no PT_GNU_SFRAME in the executable (built without -Wa,--gsframe?)");
	return o;
}

/* A library next to this program, with its own .sframe. */
static struct object sibling(const char *name)
{
	char path[4096];
	struct object o;
	char *slash;

	snprintf(path, sizeof(path), "%s", self_path);
	slash = strrchr(path, '/');
	snprintf(slash ? slash + 1 : path, sizeof(path) - (slash ? slash + 1 - path : 0), "%s", name);
	check(dlopen(path, RTLD_LAZY), "dlopen %s: %s", path, dlerror());
	check(find_object(name, &o), "no PT_GNU_SFRAME in %s", name);
	return o;
}

/* libregistry-extra.so: .sframe bytes different from the program's. */
static struct object extra(void)
{
	return sibling("libregistry-extra.so");
}

static int open_dev(void)
{
	int fd = open("/dev/sframe", O_RDWR | O_CLOEXEC);

	check(fd >= 0, "open /dev/sframe: %s", strerror(errno));
	return fd;
}

/*
 * Registers LEN bytes at DATA, describing SFRAME_ADDR, for [TEXT, END), in
 * the process whose /proc/PID/mem TARGET is (or in ours if TARGET is -1).
 */
static int reg_raw(int target, const void *data, uint64_t len, uint64_t sframe_addr,
		   uint64_t text, uint64_t end, uint64_t *handle)
{
	struct sframe_register r = {
		.size = sizeof(r),
		.flags = target >= 0 ? SFRAME_F_PROCFD : 0,
		.pidfd = target >= 0 ? target : 0,
		.sframe_data = (uintptr_t)data,
		.sframe_len = len,
		.sframe_addr = sframe_addr,
		.text_start = text,
		.text_end = end,
	};

	if (ioctl(dev, SFRAME_IOC_REGISTER, &r))
		return -errno;
	if (handle)
		*handle = r.handle;
	return 0;
}

static int reg(const struct object *o, uint64_t *handle)
{
	return reg_raw(-1, (void *)(uintptr_t)o->sframe, o->sframe_len, o->sframe,
		       o->text, o->text_end, handle);
}

static int unreg_handle(int target, uint64_t handle)
{
	struct sframe_unregister u = {
		.size = sizeof(u),
		.flags = target >= 0 ? SFRAME_F_PROCFD : 0,
		.pidfd = target >= 0 ? target : 0,
		.handle = handle,
	};

	return ioctl(dev, SFRAME_IOC_UNREGISTER, &u) ? -errno : 0;
}

static int unreg_addr(uint64_t addr)
{
	struct sframe_unregister u = {
		.size = sizeof(u),
		.flags = SFRAME_F_BY_ADDR,
		.addr = addr,
	};

	return ioctl(dev, SFRAME_IOC_UNREGISTER, &u) ? -errno : 0;
}

#define MAX_LIST 64

/*
 * Lists into INFO (up to MAX_LIST) the sections of the process whose
 * /proc/PID/mem or auxv TARGET is (ours if -1); returns the count or -errno.
 */
static int list_pid(int target, struct sframe_section_info *info)
{
	struct sframe_list l = {
		.size = sizeof(l),
		.flags = target >= 0 ? SFRAME_F_PROCFD : 0,
		.pidfd = target >= 0 ? target : 0,
		.entry_size = sizeof(*info),
		.entries = (uintptr_t)info,
		.capacity = info ? MAX_LIST : 0,
	};

	if (ioctl(dev, SFRAME_IOC_LIST, &l))
		return -errno;
	return l.count;
}

static int count_sections(void)
{
	return list_pid(-1, NULL);
}

static struct sframe_stats stats(void)
{
	struct sframe_stats s = { .size = sizeof(s) };

	check(!ioctl(dev, SFRAME_IOC_STATS, &s), "STATS: %s", strerror(errno));
	return s;
}

static void expect(int got, int want, const char *what)
{
	if (got != want)
		die("%s: got %d (%s), want %d (%s)", what, got,
		    got < 0 ? strerror(-got) : "success", want,
		    want < 0 ? strerror(-want) : "success");
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

/* Registration time and kernel memory for a libc-sized section. */
static int case_bench(int rounds)
{
	struct object o = sibling("libregistry-big.so");
	struct sframe_section_info info[MAX_LIST];
	struct sframe_stats s0 = stats(), s1;
	double t, first = 0, shared = 0;
	uint64_t h, h2;
	int i;

	for (i = 0; i < rounds; i++) {
		t = now();
		expect(reg(&o, &h), 0, "register the big section");
		first += now() - t;
		if (i == 0) {
			s1 = stats();
			expect(list_pid(-1, info), 1, "list");
		}
		/* A second registration of the same bytes in this process (a
		 * subrange): shared, not validated again. */
		t = now();
		expect(reg_raw(-1, (void *)(uintptr_t)o.sframe, o.sframe_len, o.sframe,
			       o.text + (o.text_end - o.text) / 2, o.text + (o.text_end - o.text) / 2 + 1,
			       &h2), -EEXIST, "overlap");
		shared += now() - t;
		expect(unreg_handle(-1, h), 0, "unregister");
	}
	printf("section %llu bytes, %u FDEs: register (copy + validate + insert) %.0f us, "
	       "rejected duplicate %.0f us; kernel bytes %llu (%.3f per section byte), "
	       "STATS bytes +%llu\n",
	       U(o.sframe_len), info[0].num_fdes, first / rounds * 1e6, shared / rounds * 1e6,
	       U(info[0].kernel_bytes), (double)info[0].kernel_bytes / o.sframe_len,
	       U(s1.bytes - s0.bytes));
	return 0;
}

/* register, list, remove by handle and by address */
static int case_self(void)
{
	struct object o = self();
	struct sframe_section_info info[MAX_LIST];
	struct sframe_stats before = stats(), after;
	uint64_t h, charged;
	int n;

	expect(count_sections(), 0, "sections before");
	expect(reg(&o, &h), 0, "register own .sframe");
	check(h != 0, "handle is 0");
	n = list_pid(-1, info);
	expect(n, 1, "list count");
	check(info[0].handle == h, "listed handle %llu != %llu", U(info[0].handle), U(h));
	check(info[0].text_start == o.text && info[0].text_end == o.text_end, "listed text range");
	check(info[0].sframe_addr == o.sframe && info[0].sframe_len == o.sframe_len, "listed sframe");
	check(info[0].version == 2 || info[0].version == 3, "version %u", info[0].version);
	check(info[0].num_fdes > 0, "no FDEs listed");
	check(info[0].kernel_bytes >= o.sframe_len, "kernel_bytes %llu", U(info[0].kernel_bytes));
	after = stats();
	check(after.sections == before.sections + 1, "STATS sections %llu -> %llu",
	      (unsigned long long)before.sections, (unsigned long long)after.sections);
	/*
	 * The copy is charged its bytes, its lookup index (8 header words and
	 * one word per bucket plus one, at most one bucket per 2 FDEs) and its
	 * row table (10 header words, 3 words per entry, at least one entry
	 * per FDE, at most one per FRE plus two per FDE, a bucket word per 4
	 * entries plus two; an FRE takes 2 bytes of the section at least).
	 */
	charged = after.bytes - before.bytes;
	{
		uint64_t fdes = info[0].num_fdes, entries = o.sframe_len / 2 + 2 * fdes;

		check(charged >= o.sframe_len + 40 + 4 * (12 + 3 * fdes) &&
		      charged <= o.sframe_len + 4 * (9 + (fdes + 1) / 2) +
				     4 * (12 + 3 * entries + entries / 4 + 1),
		      "STATS bytes +%llu for %llu bytes and %u FDEs: the index and the row table are not charged",
		      U(charged), U(o.sframe_len), info[0].num_fdes);
	}
	check(info[0].kernel_bytes >= charged, "kernel_bytes %llu below the charge %llu",
	      U(info[0].kernel_bytes), U(charged));
	check(after.registered == before.registered + 1, "STATS registered");
	expect(unreg_handle(-1, h), 0, "unregister by handle");
	expect(count_sections(), 0, "sections after unregister");
	check(stats().bytes == before.bytes, "STATS bytes not back after unregister (index kept?)");
	expect(unreg_handle(-1, h), -ENOENT, "unregister twice");
	expect(reg(&o, &h), 0, "register again");
	expect(unreg_addr(o.text + (o.text_end - o.text) / 2), 0, "unregister by address");
	expect(count_sections(), 0, "sections after unregister by address");
	after = stats();
	check(after.sections == before.sections, "STATS sections not back");
	/*
	 * A caller's own figures (SFRAME_STATS_SCOPE_OWN) are its account's,
	 * and an account that holds nothing is forgotten, with its counts.
	 */
	if (after.scope != SFRAME_STATS_SCOPE_OWN)
		check(after.unregistered == before.unregistered + 2, "STATS unregistered");
	printf("v%u, %u FDEs, %llu bytes (kernel %llu, charged %llu), text %#llx-%#llx\n",
	       info[0].version, info[0].num_fdes, U(o.sframe_len), U(info[0].kernel_bytes),
	       U(charged), U(o.text), U(o.text_end));
	return 0;
}

/*
 * What the module charges for one copy of the program's section (its bytes
 * and its lookup index), for byte limits that fit a number of copies.  No
 * other process may hold a copy of these bytes meanwhile.
 */
static int case_copy_charge(void)
{
	struct object o = self();
	struct sframe_stats before = stats(), after;
	uint64_t h;

	expect(reg(&o, &h), 0, "register own .sframe");
	after = stats();
	expect(unreg_handle(-1, h), 0, "unregister by handle");
	check(after.bytes > before.bytes + o.sframe_len, "STATS bytes +%llu for %llu bytes",
	      U(after.bytes - before.bytes), U(o.sframe_len));
	printf("%llu\n", U(after.bytes - before.bytes));
	return 0;
}

/* A corrupted copy of our own section must be refused with EINVAL. */
static void corrupt(const struct object *o, const char *what, size_t off, uint8_t val, int64_t len_delta)
{
	uint64_t len = o->sframe_len + len_delta;
	uint8_t *buf = malloc(o->sframe_len + 64);
	uint64_t fails = stats().failures[SFRAME_FAIL_FORMAT];
	char msg[128];

	memcpy(buf, (void *)(uintptr_t)o->sframe, o->sframe_len);
	if (off != (size_t)-1)
		buf[off] = val;
	snprintf(msg, sizeof(msg), "corrupt section (%s)", what);
	expect(reg_raw(-1, buf, len, o->sframe, o->text, o->text_end, NULL), -EINVAL, msg);
	check(stats().failures[SFRAME_FAIL_FORMAT] == fails + 1, "FAIL_FORMAT not counted for %s", what);
	free(buf);
}

static int case_errno(void)
{
	struct object o = self();
	struct sframe_register r;
	uint64_t h, h2;
	int stack_var;
	void *page;

	/* Bad format. */
	corrupt(&o, "magic", 0, 0x00, 0);
	corrupt(&o, "version 1", 2, 1, 0);
	corrupt(&o, "version 9", 2, 9, 0);
	corrupt(&o, "abi", 4, 0x77, 0);
	corrupt(&o, "num_fdes", 9, 0xff, 0);	/* u32 at 8: becomes huge */
	corrupt(&o, "fre_len", 19, 0x7f, 0);	/* u32 at 16 */
	corrupt(&o, "truncated to half", -1, 0, -(int64_t)o.sframe_len / 2);
	corrupt(&o, "header only", -1, 0, -(int64_t)o.sframe_len + 27);
	/* Bad pointers. */
	expect(reg_raw(-1, (void *)16, o.sframe_len, o.sframe, o.text, o.text_end, NULL), -EFAULT,
	       "unreadable section bytes");
	page = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	expect(reg_raw(-1, page, 4096, o.sframe, o.text, o.text_end, NULL), -EFAULT,
	       "PROT_NONE section bytes");
	check(ioctl(dev, SFRAME_IOC_REGISTER, (void *)8) == -1 && errno == EFAULT, "bad struct pointer");
	check(ioctl(dev, SFRAME_IOC_LIST, page) == -1 && errno == EFAULT, "bad list pointer");
	/* Bad arguments. */
	expect(reg_raw(-1, (void *)(uintptr_t)o.sframe, o.sframe_len, o.sframe, o.text_end, o.text, NULL),
	       -EINVAL, "reversed text range");
	expect(reg_raw(-1, (void *)(uintptr_t)o.sframe, 0, o.sframe, o.text, o.text_end, NULL), -EINVAL,
	       "empty section");
	expect(reg_raw(-1, (void *)(uintptr_t)o.sframe, o.sframe_len, o.sframe,
		       (uintptr_t)&stack_var & ~4095UL, ((uintptr_t)&stack_var & ~4095UL) + 4096, NULL),
	       -EINVAL, "text on the (non-executable) stack");
	expect(reg_raw(-1, (void *)(uintptr_t)o.sframe, o.sframe_len, o.sframe,
		       o.text_end + (64UL << 30), o.text_end + (65UL << 30), NULL),
	       -EINVAL, "text not mapped");
	{
		/* An executable range the section's functions do not cover. */
		void *x = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		expect(reg_raw(-1, (void *)(uintptr_t)o.sframe, o.sframe_len, o.sframe,
			       (uintptr_t)x, (uintptr_t)x + 4096, NULL), -EINVAL,
		       "functions outside the text");
	}
	memset(&r, 0, sizeof(r));
	r.size = sizeof(r);
	r.flags = 0x80;
	check(ioctl(dev, SFRAME_IOC_REGISTER, &r) == -1 && errno == EINVAL, "unknown flag");
	r.flags = 0;
	r.reserved = 1;
	check(ioctl(dev, SFRAME_IOC_REGISTER, &r) == -1 && errno == EINVAL, "reserved field");
	r.reserved = 0;
	r.size = SFRAME_REGISTER_SIZE_VER0 - 8;
	check(ioctl(dev, SFRAME_IOC_REGISTER, &r) == -1 && errno == EINVAL, "size below VER0");
	/* Too big: refused before the bytes are read. */
	expect(reg_raw(-1, (void *)(uintptr_t)o.sframe, 1ULL << 40, o.sframe, o.text, o.text_end, NULL),
	       -E2BIG, "section over max_section_bytes");
	/* Overlap. */
	expect(reg(&o, &h), 0, "register");
	expect(reg(&o, &h2), -EEXIST, "register the same text twice");
	/* One byte of a function the section describes, inside the text. */
	expect(reg_raw(-1, (void *)(uintptr_t)o.sframe, o.sframe_len, o.sframe,
		       (uintptr_t)case_errno, (uintptr_t)case_errno + 1, NULL), -EEXIST,
	       "register overlapping text");
	/* Not found. */
	expect(unreg_handle(-1, h + 1000000), -ENOENT, "unknown handle");
	expect(unreg_addr(o.text_end + 4096), -ENOENT, "address outside every text");
	expect(unreg_handle(-1, h), 0, "unregister");
	/* Unknown commands. */
	check(ioctl(dev, _IOWR(SFRAME_IOC_MAGIC, 0x7f, struct sframe_stats), &r) == -1 &&
	      errno == ENOTTY, "unknown command number");
	check(ioctl(dev, _IOWR('x', NR_REGISTER, struct sframe_register), &r) == -1 &&
	      errno == ENOTTY, "other ioctl type");
	/* A descriptor without the flag, a bad one with it, the pidfd flag. */
	memset(&r, 0, sizeof(r));
	r.size = sizeof(r);
	r.pidfd = 3;
	check(ioctl(dev, SFRAME_IOC_REGISTER, &r) == -1 && errno == EINVAL, "pidfd without flag");
	r.flags = SFRAME_F_PROCFD;
	r.pidfd = 1000;
	check(ioctl(dev, SFRAME_IOC_REGISTER, &r) == -1 && errno == EBADF,
	      "bad descriptor: %s", strerror(errno));
	r.flags = SFRAME_F_PIDFD;
	check(ioctl(dev, SFRAME_IOC_REGISTER, &r) == -1 && errno == EOPNOTSUPP,
	      "SFRAME_F_PIDFD: %s", strerror(errno));
	return 0;
}

static int case_exec(void);
static int case_fork(void);

/* The limits of a module loaded with max_sections_per_mm=4 and a small max_total_bytes. */
static int case_limits(void)
{
	/*
	 * Five disjoint one-byte text ranges, each inside a function the
	 * section describes (a range without any of its functions is EINVAL).
	 */
	int (*const fns[5])(void) = { case_limits, case_errno, case_self, case_exec, case_fork };
	struct object o = self(), libc;
	uint64_t h;
	int i;

	for (i = 0; i < 5; i++)
		expect(reg_raw(-1, (void *)(uintptr_t)o.sframe, o.sframe_len, o.sframe,
			       (uintptr_t)fns[i], (uintptr_t)fns[i] + 1, &h),
		       i < 4 ? 0 : -ENOSPC,
		       i < 4 ? "register within the limit" : "fifth section in one process");
	check(stats().failures[SFRAME_FAIL_LIMIT] >= 1, "FAIL_LIMIT not counted");
	libc = extra();
	expect(reg(&libc, &h), -ENOSPC, "distinct bytes over max_total_bytes");
	return 0;
}

/* munmap (and MAP_FIXED over) registered text drops the registration. */
static int case_munmap(void)
{
	struct object o = self();
	size_t size = ((o.text_end - o.text) + 3 * 4096) & ~4095UL;
	uint8_t *x;
	uint64_t delta, h;
	int round;

	for (round = 0; round < 3; round++) {
		x = mmap(NULL, size, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		check(x != MAP_FAILED, "mmap");
		/* The same bytes, described as if loaded at x. */
		delta = (uintptr_t)x + (o.text & 4095) - o.text;
		expect(reg_raw(-1, (void *)(uintptr_t)o.sframe, o.sframe_len, o.sframe + delta,
			       o.text + delta, o.text_end + delta, &h), 0, "register a mapped copy");
		expect(count_sections(), 1, "listed");
		if (round == 0) {
			check(!munmap(x, size), "munmap");
		} else if (round == 1) {
			/* One page in the middle. */
			check(!munmap(x + 4096, 4096), "partial munmap");
		} else {
			check(mmap(x, size, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
				   -1, 0) == x, "MAP_FIXED");
		}
		expect(count_sections(), 0, "listed after unmap");
		expect(unreg_handle(-1, h), -ENOENT, "unregister after unmap");
		if (round == 2) {
			/* Registering the new mapping works. */
			expect(reg_raw(-1, (void *)(uintptr_t)o.sframe, o.sframe_len, o.sframe + delta,
				       o.text + delta, o.text_end + delta, &h), 0, "register the new mapping");
			expect(unreg_handle(-1, h), 0, "unregister");
		}
		munmap(x, size);
	}
	return 0;
}

/*
 * File-backed text: a registration stays while the same file is mapped
 * there at the same offsets (mprotect() splits the mapping and merges it
 * back, which frees mappings), and goes when the text is unmapped, moved,
 * or replaced by another file's mapping.
 */
static int case_munmap_file(void)
{
	struct object o = self();
	size_t size = ((o.text_end - o.text) + 3 * 4096) & ~4095UL;
	int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	int other = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	uint8_t *x, *y;
	uint64_t delta, h;
	int round;

	check(fd >= 0 && other >= 0, "open /proc/self/exe");
	for (round = 0; round < 4; round++) {
		x = mmap(NULL, size, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
		check(x != MAP_FAILED, "mmap the program");
		delta = (uintptr_t)x + (o.text & 4095) - o.text;
		expect(reg_raw(-1, (void *)(uintptr_t)o.sframe, o.sframe_len, o.sframe + delta,
			       o.text + delta, o.text_end + delta, &h), 0, "register a mapped copy");
		/* Split in three, then merged back: mappings are freed. */
		check(!mprotect(x + 4096, 4096, PROT_READ), "mprotect read-only");
		check(!mprotect(x + 4096, 4096, PROT_READ | PROT_EXEC), "mprotect back");
		check(!mprotect(x, size, PROT_READ), "mprotect all read-only");
		check(!mprotect(x, size, PROT_READ | PROT_EXEC), "mprotect all back");
		expect(count_sections(), 1, "listed after mprotect() splits and merges");
		if (round == 0) {
			check(!munmap(x + 4096, 4096), "partial munmap");
		} else if (round == 1) {
			/* The same file through another open file, at the same offsets. */
			check(mmap(x, size, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_FIXED, other, 0) == x,
			      "MAP_FIXED of another file");
		} else if (round == 2) {
			/* The same file, shifted by a page. */
			check(mmap(x, size, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_FIXED, fd, 4096) == x,
			      "MAP_FIXED at another offset");
		} else {
			y = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			check(y != MAP_FAILED, "reserve");
			check(mremap(x, size, size, MREMAP_MAYMOVE | MREMAP_FIXED, y) == y, "mremap");
			x = y;
		}
		expect(count_sections(), 0, "listed after unmap");
		expect(unreg_handle(-1, h), -ENOENT, "unregister after unmap");
		munmap(x, size);
	}
	close(fd);
	close(other);
	return 0;
}

/* After exec the new image has no registrations. */
static int case_exec(void)
{
	struct object o = self();

	expect(reg(&o, NULL), 0, "register");
	expect(count_sections(), 1, "listed before exec");
	execl(self_path, self_path, "expect-none", (char *)NULL);
	die("exec: %s", strerror(errno));
}

static int case_expect_none(void)
{
	expect(count_sections(), 0, "sections in a fresh image");
	return 0;
}

/* A forked child starts empty; the parent keeps its registration. */
static int case_fork(void)
{
	struct object o = self();
	int status;
	pid_t pid;

	expect(reg(&o, NULL), 0, "register");
	pid = fork();
	if (pid == 0)
		_exit(count_sections() == 0 ? 0 : 1);
	check(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "the child lists sections");
	expect(count_sections(), 1, "the parent lost its section");
	return 0;
}

/* N processes register the same bytes: one copy is held. */
static int case_share(int n)
{
	struct object o = self();
	struct sframe_stats before = stats(), during, after;
	int ready[2], go[2], i, status;
	char c;

	check(!pipe(ready) && !pipe(go), "pipe");
	for (i = 0; i < n; i++) {
		if (fork() == 0) {
			close(go[1]);
			c = reg(&o, NULL) == 0 ? 'y' : 'n';
			if (write(ready[1], &c, 1) != 1)
				_exit(1);
			(void)!read(go[0], &c, 1);	/* until the parent closes */
			_exit(0);
		}
	}
	close(go[0]);
	for (i = 0; i < n; i++) {
		check(read(ready[0], &c, 1) == 1, "read");
		check(c == 'y', "a child failed to register");
	}
	during = stats();
	close(go[1]);
	while (wait(&status) > 0)
		;
	after = stats();
	printf("%d processes: sections +%llu, copies +%llu, bytes +%llu (section %llu)\n", n,
	       (unsigned long long)(during.sections - before.sections),
	       (unsigned long long)(during.copies - before.copies),
	       (unsigned long long)(during.bytes - before.bytes), U(o.sframe_len));
	check(during.sections == before.sections + n, "not one section per process");
	check(during.copies == before.copies + 1, "more than one copy held");
	/* One copy: its bytes, its index and its row table (about 3x the
	 * bytes), not one per process. */
	check(during.bytes - before.bytes < 8 * o.sframe_len + 4096, "bytes held grow with processes");
	check(after.sections == before.sections && after.copies == before.copies &&
	      after.bytes == before.bytes && after.mms == before.mms, "counters not back after exit");
	return 0;
}

/* N processes register and exit without unregistering. */
static int case_churn(int n)
{
	struct object o = self();
	struct sframe_stats before = stats(), after;
	struct timespec t0, t1;
	int i, status, bad = 0;
	pid_t pid;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (i = 0; i < n; i++) {
		pid = fork();
		if (pid == 0)
			_exit(reg(&o, NULL) == 0 ? 0 : 1);
		check(pid > 0, "fork");
		/* Up to 16 at a time. */
		if (i % 16 == 15)
			while (wait(&status) > 0)
				bad += !WIFEXITED(status) || WEXITSTATUS(status);
	}
	while (wait(&status) > 0)
		bad += !WIFEXITED(status) || WEXITSTATUS(status);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	after = stats();
	printf("%d processes registered and exited in %.2f s; registered +%llu\n", n,
	       (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9,
	       (unsigned long long)(after.registered - before.registered));
	check(!bad, "%d children failed to register", bad);
	check(after.registered - before.registered == (uint64_t)n, "registered count");
	check(after.sections == 0 && after.copies == 0 && after.bytes == 0 && after.mms == 0,
	      "counters not zero: sections %llu copies %llu bytes %llu mms %llu",
	      (unsigned long long)after.sections, (unsigned long long)after.copies,
	      (unsigned long long)after.bytes, (unsigned long long)after.mms);
	return 0;
}

/*
 * The executable's code, from .init to .fini (crti.o's _init and _fini),
 * within its PF_X segment.  On x86-64 they are nearly the same: GNU ld
 * gives code a segment of its own there.  On AArch64 it does not: the
 * PF_X segment also holds the ELF headers, the dynamic symbols, .rodata,
 * .eh_frame and .sframe, parts of it where no function lies.
 */
extern char _init[], _fini[];

static struct object code_of(struct object o)
{
	if ((uintptr_t)_init > o.text && (uintptr_t)_init < o.text_end)
		o.text = (uintptr_t)_init;
	if ((uintptr_t)_fini > o.text && (uintptr_t)_fini < o.text_end)
		o.text_end = (uintptr_t)_fini;
	return o;
}

struct thread_arg {
	struct object o;
	int id;
	time_t until;
	long ops, bad;
};

static void *thread_main(void *p)
{
	struct thread_arg *a = p;
	struct sframe_section_info info[MAX_LIST];
	/* Threads 0-3 own a slice of the code each; 4-7 collide on slice 0. */
	uint64_t slice = (a->o.text_end - a->o.text) / 8;
	uint64_t start = a->o.text + (a->id < 4 ? a->id : 0) * slice, h;
	int r;

	/* Slice 0 is shared by threads 0 and 4-7: one may remove another's
	 * registration there, so ENOENT and EEXIST are expected for them. */
	int shared = a->id == 0 || a->id >= 4;

	while (time(NULL) < a->until) {
		r = reg_raw(-1, (void *)(uintptr_t)a->o.sframe, a->o.sframe_len, a->o.sframe, start,
			    start + slice, &h);
		if (r == 0) {
			r = list_pid(-1, info);
			if (r < (shared ? 0 : 1))
				a->bad++;
			r = unreg_handle(-1, h);
			if (r && !(shared && r == -ENOENT))
				a->bad++;
		} else if (!(shared && r == -EEXIST)) {
			a->bad++;
		}
		r = unreg_addr(start);
		if (r != 0 && r != -ENOENT)
			a->bad++;
		a->ops++;
	}
	return NULL;
}

/* 8 threads register, list and remove concurrently for SECONDS. */
static int case_threads(int seconds)
{
	struct thread_arg args[8];
	pthread_t t[8];
	long ops = 0, bad = 0;
	int i;

	for (i = 0; i < 8; i++) {
		/* Every slice holds functions the section describes. */
		args[i] = (struct thread_arg){ code_of(self()), i, time(NULL) + seconds, 0, 0 };
		check(!pthread_create(&t[i], NULL, thread_main, &args[i]), "pthread_create");
	}
	for (i = 0; i < 8; i++) {
		pthread_join(t[i], NULL);
		ops += args[i].ops;
		bad += args[i].bad;
	}
	printf("8 threads, %d s: %ld rounds, %ld unexpected results\n", seconds, ops, bad);
	check(!bad, "unexpected results");
	expect(count_sections(), 0, "sections left");
	return 0;
}

static uint64_t rnd_state = 0x9e3779b97f4a7c15ULL;

static uint64_t rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return rnd_state;
}

/* Random and mutated ioctls: every answer is success or a documented errno. */
static int case_fuzz(long n, uint64_t seed)
{
	static const int allowed[] = { EINVAL, EFAULT, E2BIG, ENOSPC, EEXIST, ENOENT, ENOTTY,
				       EPERM, EACCES, EBADF, ESRCH, EOPNOTSUPP, ENOMEM };
	struct object o = self();
	uint8_t *buf = malloc(o.sframe_len + 256), arg[512];
	uint64_t *w = (uint64_t *)arg;
	long i, ok = 0, registered = 0;
	unsigned int nr, k;
	int e;

	rnd_state ^= seed;
	for (i = 0; i < n; i++) {
		memcpy(buf, (void *)(uintptr_t)o.sframe, o.sframe_len);
		memset(arg, 0, sizeof(arg));
		switch (rnd() % 4) {
		case 0: /* random bytes, a plausible size */
			for (k = 0; k < sizeof(arg) / 8; k++)
				w[k] = rnd();
			*(uint32_t *)arg = rnd() % 2 ? rnd() % 128 : rnd();
			break;
		default: { /* a real registration, mutated */
			struct sframe_register *r = (void *)arg;
			unsigned int flips = rnd() % 6;

			r->size = sizeof(*r);
			r->sframe_data = (uintptr_t)buf;
			r->sframe_len = o.sframe_len;
			r->sframe_addr = o.sframe;
			r->text_start = o.text;
			r->text_end = o.text_end;
			for (k = 0; k < flips; k++)
				buf[rnd() % o.sframe_len] ^= 1 << (rnd() % 8);
			if (rnd() % 4 == 0)
				r->sframe_len = rnd() % (o.sframe_len + 64);
			if (rnd() % 8 == 0)
				arg[rnd() % 80] ^= 1 << (rnd() % 8);
			break;
		}
		}
		nr = rnd() % 3 ? NR_REGISTER : rnd() % 8;
		if (nr == NR_CONTROL)	/* not ours to toggle */
			nr = NR_STATS;
		if (ioctl(dev, _IOC(_IOC_READ | _IOC_WRITE, SFRAME_IOC_MAGIC, nr, 64), arg) == 0) {
			ok++;
			if (nr == NR_REGISTER) {
				registered++;
				unreg_handle(-1, ((struct sframe_register *)arg)->handle);
			}
			continue;
		}
		e = errno;
		for (k = 0; k < sizeof(allowed) / sizeof(allowed[0]); k++)
			if (e == allowed[k])
				break;
		check(k < sizeof(allowed) / sizeof(allowed[0]), "ioctl %u: undocumented errno %d (%s)",
		      nr, e, strerror(e));
	}
	printf("%ld calls (seed %llu): %ld succeeded (%ld registrations)\n", n, (unsigned long long)seed, ok,
	       registered);
	expect(count_sections(), 0, "sections left");
	return 0;
}

/* Opens /proc/PID/NAME; returns the descriptor or -errno. */
static int open_proc(pid_t pid, const char *name)
{
	char path[64];
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	return fd >= 0 ? fd : -errno;
}

/*
 * A child that waits until *RELEASE is closed, then exits 3 if it sees a
 * section registered in its own address space, 0 if not.
 */
static pid_t spawn_waiter(int *release)
{
	int go[2];
	pid_t child;
	char c;

	check(!pipe(go), "pipe");
	child = fork();
	check(child >= 0, "fork");
	if (child == 0) {
		close(go[1]);
		(void)!read(go[0], &c, 1);
		_exit(count_sections() == 0 ? 0 : 3);
	}
	close(go[0]);
	*release = go[1];
	return child;
}

/* Releases a spawn_waiter() child; true if it saw a section. */
static int reap_waiter(pid_t child, int release)
{
	int status;

	close(release);
	check(waitpid(child, &status, 0) == child && WIFEXITED(status), "child");
	return WEXITSTATUS(status) == 3;
}

/* LIST with SFRAME_F_PIDFD, which the module refuses. */
static int list_pidfd_flag(int fd)
{
	struct sframe_list l = {
		.size = sizeof(l),
		.flags = SFRAME_F_PIDFD,
		.pidfd = fd,
		.entry_size = sizeof(struct sframe_section_info),
	};

	return ioctl(dev, SFRAME_IOC_LIST, &l) ? -errno : (int)l.count;
}

/*
 * A process of ours runs the set-user-ID copy SUID of this program: the
 * /proc/PID/mem opened before no longer reaches it, and it cannot be
 * opened again.  Returns 1 if SUID did not run as root (a nosuid mount).
 */
static int suid_exec(const struct object *o, const char *suid)
{
	int go[2], report[2], mem, status;
	char euid[16] = "";
	pid_t child;
	ssize_t n;

	check(!pipe(go) && !pipe(report), "pipe");
	child = fork();
	check(child >= 0, "fork");
	if (child == 0) {
		char c;

		close(go[1]);
		close(report[0]);
		(void)!read(go[0], &c, 1);
		check(dup2(go[0], 0) == 0 && dup2(report[1], 1) == 1, "dup2");
		execl(suid, suid, "report-euid", (char *)NULL);
		die("exec %s: %s", suid, strerror(errno));
	}
	close(go[0]);
	close(report[1]);
	mem = open_proc(child, "mem");
	check(mem >= 0, "open our child's /proc/PID/mem: %s", strerror(-mem));
	expect(reg_raw(mem, (void *)(uintptr_t)o->sframe, o->sframe_len, o->sframe, o->text,
		       o->text_end, NULL), 0, "register into our child before it executes");
	check(write(go[1], "x", 1) == 1, "write");
	n = read(report[0], euid, sizeof(euid) - 1);
	check(n > 0, "the set-user-ID program did not report");
	if (atoi(euid) == 0) {
		expect(list_pid(mem, NULL), -ESRCH, "list through the descriptor of the old image");
		expect(reg_raw(mem, (void *)(uintptr_t)o->sframe, o->sframe_len, o->sframe, o->text,
			       o->text_end, NULL), -ESRCH, "register through the descriptor of the old image");
		expect(open_proc(child, "mem"), -EACCES, "open /proc/PID/mem of a set-user-ID process");
		printf("set-user-ID exec: the old descriptor ESRCH, opening mem again EACCES\n");
	}
	close(go[1]);
	check(waitpid(child, &status, 0) == child && WIFEXITED(status) && !WEXITSTATUS(status),
	      "set-user-ID child");
	close(mem);
	return atoi(euid) != 0;
}

/* The unprivileged half of case_procfd(): user 65534 in a child of root. */
static int procfd_unprivileged(const struct object *o, pid_t roots, int roots_mem, const char *suid)
{
	struct sframe_section_info info[MAX_LIST];
	int mem, auxv, release;
	uint64_t h;
	pid_t child;

	check(!setresgid(65534, 65534, 65534) && !setresuid(65534, 65534, 65534), "setresuid");
	/*
	 * Changing the user made us undumpable, and so our /proc files root's;
	 * a process this user starts is dumpable.
	 */
	check(!prctl(PR_SET_DUMPABLE, 1, 0, 0, 0), "PR_SET_DUMPABLE");
	/* Our own address space, through our own /proc/PID/mem. */
	mem = open_proc(getpid(), "mem");
	check(mem >= 0, "open our own /proc/PID/mem: %s", strerror(-mem));
	expect(reg_raw(mem, (void *)(uintptr_t)o->sframe, o->sframe_len, o->sframe, o->text,
		       o->text_end, &h), 0, "unprivileged register through our own mem");
	expect(list_pid(-1, info), 1, "list ourselves");
	expect(unreg_handle(mem, h), 0, "unprivileged unregister through our own mem");
	close(mem);
	/* A child of the same user. */
	child = spawn_waiter(&release);
	mem = open_proc(child, "mem");
	check(mem >= 0, "open our child's /proc/PID/mem: %s", strerror(-mem));
	auxv = open_proc(child, "auxv");
	check(auxv >= 0, "open our child's /proc/PID/auxv: %s", strerror(-auxv));
	expect(reg_raw(mem, (void *)(uintptr_t)o->sframe, o->sframe_len, o->sframe, o->text,
		       o->text_end, &h), 0, "unprivileged register into our child");
	expect(list_pid(auxv, info), 1, "unprivileged list of our child through auxv");
	check(info[0].handle == h, "listed handle");
	check(reap_waiter(child, release), "our child does not see its section");
	close(mem);
	close(auxv);
	/* Root's process: the kernel refuses to open its files. */
	expect(open_proc(roots, "mem"), -EACCES, "unprivileged open of root's /proc/PID/mem");
	expect(open_proc(roots, "auxv"), -EACCES, "unprivileged open of root's /proc/PID/auxv");
	/*
	 * A descriptor root opened carries root's permission, as it does for
	 * reading and writing root's memory through it.
	 */
	expect(list_pid(roots_mem, info), 1, "list through a descriptor root opened");
	if (suid && suid_exec(o, suid))
		printf("%s did not run as root (nosuid?): set-user-ID case not run\n", suid);
	/* Our caller leaves with _exit(), which does not flush. */
	fflush(stdout);
	return 0;
}

/*
 * Other processes, named by their /proc/PID/mem (or auxv, to list): the
 * kernel checks ptrace permission when the file is opened.  SUID, if given,
 * is a set-user-ID-root copy of this program.
 */
static int case_procfd(const char *suid)
{
	struct object o = self();
	struct sframe_section_info info[MAX_LIST];
	int mem, auxv, maps, pidfd, p[2], release, status;
	uint64_t h;
	pid_t child, other;

	child = spawn_waiter(&release);
	mem = open_proc(child, "mem");
	check(mem >= 0, "open the child's /proc/PID/mem: %s", strerror(-mem));
	auxv = open_proc(child, "auxv");
	check(auxv >= 0, "open the child's /proc/PID/auxv: %s", strerror(-auxv));
	/* Root (the caller) may ptrace its child. */
	expect(reg_raw(mem, (void *)(uintptr_t)o.sframe, o.sframe_len, o.sframe, o.text,
		       o.text_end, &h), 0, "register into the child");
	expect(list_pid(mem, info), 1, "list the child through mem");
	check(info[0].handle == h, "listed handle");
	expect(list_pid(auxv, info), 1, "list the child through auxv");
	expect(count_sections(), 0, "the caller has no section");
	/* auxv is opened with read permission only. */
	expect(reg_raw(auxv, (void *)(uintptr_t)o.sframe, o.sframe_len, o.sframe, o.text + 1,
		       o.text + 2, NULL), -EPERM, "register through auxv");
	expect(unreg_handle(auxv, h), -EPERM, "unregister through auxv");
	/* Descriptors that are not the target's mem or auxv. */
	check(!pipe(p), "pipe");
	expect(list_pid(p[0], info), -EBADF, "a pipe");
	close(p[1]);
	expect(list_pid(p[1], info), -EBADF, "a closed descriptor");
	close(p[0]);
	maps = open_proc(child, "maps");
	check(maps >= 0, "open the child's /proc/PID/maps");
	expect(list_pid(maps, info), -EBADF, "/proc/PID/maps");
	close(maps);
	pidfd = syscall(SYS_pidfd_open, child, 0);
	check(pidfd >= 0, "pidfd_open: %s", strerror(errno));
	expect(list_pid(pidfd, info), -EBADF, "a pidfd with SFRAME_F_PROCFD");
	expect(list_pidfd_flag(pidfd), -EOPNOTSUPP, "SFRAME_F_PIDFD");
	close(pidfd);
	/* An unprivileged user: its own processes, not root's. */
	other = fork();
	check(other >= 0, "fork");
	if (other == 0)
		_exit(procfd_unprivileged(&o, child, mem, suid));
	check(waitpid(other, &status, 0) == other && WIFEXITED(status) && !WEXITSTATUS(status),
	      "unprivileged checks");
	expect(unreg_handle(mem, h), 0, "unregister in the child");
	expect(reg_raw(mem, (void *)(uintptr_t)o.sframe, o.sframe_len, o.sframe, o.text,
		       o.text_end, &h), 0, "register into the child again");
	/* The child exits with its section registered: freed with its mm. */
	check(reap_waiter(child, release), "the child does not see its section");
	expect(list_pid(mem, info), -ESRCH, "list an exited process");
	expect(reg_raw(mem, (void *)(uintptr_t)o.sframe, o.sframe_len, o.sframe, o.text,
		       o.text_end, NULL), -ESRCH, "register into an exited process");
	close(mem);
	close(auxv);
	return 0;
}

/*
 * A copy of O's .sframe made distinct by a 4-byte auxiliary header holding
 * N (decoders skip the auxiliary header); *LEN gets its length.
 */
static uint8_t *variant(const struct object *o, uint32_t n, uint64_t *len)
{
	const uint8_t *src = (const void *)(uintptr_t)o->sframe;
	size_t head = 28 + src[7], rest = o->sframe_len - head;
	uint8_t *v = malloc(o->sframe_len + 4);

	check(v && src[7] <= 251, "variant");
	memcpy(v, src, head);
	memcpy(v + head, &n, 4);
	memcpy(v + head + 4, src + head, rest);
	v[7] += 4;
	*len = o->sframe_len + 4;
	return v;
}

/*
 * Registers variant N of O for the one-byte text range I bytes after the
 * start of case_self(): inside the span of the section's functions (more
 * than a thousand bytes of code follow it); its handle in *HANDLE if not
 * NULL.
 */
static int reg_variant_handle(const struct object *o, uint32_t n, unsigned int i, uint64_t *handle)
{
	uint64_t len;
	uint8_t *v = variant(o, n, &len);
	uint64_t text = (uintptr_t)case_self + i;
	int ret = reg_raw(-1, v, len, o->sframe, text, text + 1, handle);

	free(v);
	return ret;
}

/* reg_variant_handle() without the handle. */
static int reg_variant(const struct object *o, uint32_t n, unsigned int i)
{
	return reg_variant_handle(o, n, i, NULL);
}

/* Registers variants FIRST to FIRST + N - 1 of O in a child that exits. */
static void variants_in_child(const struct object *o, uint32_t first, int n)
{
	int status;
	pid_t pid = fork();

	check(pid >= 0, "fork");
	if (pid == 0) {
		for (int i = 0; i < n; i++)
			if (reg_variant(o, first + i, i))
				_exit(1);
		_exit(0);
	}
	check(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && !WEXITSTATUS(status),
	      "a child failed to register");
}

/*
 * A copy whose last registration went is kept, out of the held figures;
 * the next process to register the same bytes takes it back (it is not
 * validated again), and its exit leaves it kept again.
 */
static int case_kept(void)
{
	struct object o = self();
	struct sframe_stats before = stats(), between, during, after;
	int ready[2], go[2], status;
	pid_t pid;
	char c;

	check(before.size >= SFRAME_STATS_SIZE_VER1, "STATS has no kept figures (size %u)",
	      before.size);
	variants_in_child(&o, 1000, 1);
	between = stats();
	check(between.copies == before.copies && between.bytes == before.bytes,
	      "held figures not back after the exit (a kept copy counts as held?)");
	check(between.kept_copies >= 1 && between.kept_bytes >= o.sframe_len,
	      "nothing kept after the last registration went");
	check(!pipe(ready) && !pipe(go), "pipe");
	pid = fork();
	check(pid >= 0, "fork");
	if (pid == 0) {
		close(go[1]);
		c = reg_variant(&o, 1000, 0) == 0 ? 'y' : 'n';
		if (write(ready[1], &c, 1) != 1)
			_exit(1);
		(void)!read(go[0], &c, 1);	/* until the parent closes */
		_exit(0);
	}
	close(go[0]);
	check(read(ready[0], &c, 1) == 1 && c == 'y', "the second child failed to register");
	during = stats();
	close(go[1]);
	check(waitpid(pid, &status, 0) == pid, "wait");
	after = stats();
	printf("after the first exit: %llu kept copies, %llu bytes; the second registration: "
	       "taken back +%llu, kept %llu, held copies +%llu; after its exit: kept %llu\n",
	       U(between.kept_copies), U(between.kept_bytes),
	       U(during.kept_reused - between.kept_reused), U(during.kept_copies),
	       U(during.copies - between.copies), U(after.kept_copies));
	check(during.kept_reused == between.kept_reused + 1,
	      "the second registration did not take the kept copy back");
	check(during.kept_copies == between.kept_copies - 1 && during.copies == between.copies + 1,
	      "the copy taken back is still counted as kept, or not as held");
	check(after.kept_copies == between.kept_copies && after.copies == before.copies &&
	      after.bytes == before.bytes, "the copy was not kept again after the second exit");
	return 0;
}

/*
 * Bytes that differ from a copy the account holds only in their middle
 * (the key hashes the length and the first and last 4 KiB) are compared
 * in full, not shared: the big section with one FDE in its middle broken
 * fails validation (EINVAL), where sharing the held copy would answer
 * EEXIST; the same once the copy is kept, and the intact bytes then take
 * the kept copy back.
 */
static int case_middle(void)
{
	struct object o = sibling("libregistry-big.so");
	const uint8_t *src = (const void *)(uintptr_t)o.sframe;
	uint32_t nfdes, fdeoff, bad = 0xffffffff;
	struct sframe_stats s0, s1;
	size_t head, at;
	uint8_t *m;
	uint64_t h;

	check(src[2] == 2, "libregistry-big.so's section is not SFrame V2");
	head = 28 + src[7];
	memcpy(&nfdes, src + 8, 4);
	memcpy(&fdeoff, src + 20, 4);
	/* The middle FDE's FRE count (V2 FDEs: 20 bytes, the count at 12). */
	at = head + fdeoff + (size_t)(nfdes / 2) * 20 + 12;
	check(at > 4096 && at + 4 + 4096 < o.sframe_len, "the big section is too small (%llu bytes)",
	      U(o.sframe_len));
	m = malloc(o.sframe_len);
	check(m != NULL, "malloc");
	memcpy(m, src, o.sframe_len);
	memcpy(m + at, &bad, 4);
	expect(reg(&o, &h), 0, "register the big section");
	expect(reg_raw(-1, m, o.sframe_len, o.sframe, o.text, o.text_end, NULL), -EINVAL,
	       "the same bytes but a broken FDE in the middle, the copy held");
	expect(unreg_handle(-1, h), 0, "unregister");
	s0 = stats();
	expect(reg_raw(-1, m, o.sframe_len, o.sframe, o.text, o.text_end, NULL), -EINVAL,
	       "the same bytes but a broken FDE in the middle, the copy kept");
	expect(reg(&o, &h), 0, "register the big section again");
	s1 = stats();
	check(s1.kept_reused == s0.kept_reused + 1, "the intact bytes did not take the kept copy back");
	expect(unreg_handle(-1, h), 0, "unregister");
	free(m);
	return 0;
}

/*
 * Registers O's text with LEN bytes at DATA (NULL: none) and FLAGS
 * (SFRAME_F_TAGGED, SFRAME_F_BY_TAG) naming them TAG; the structure SIZE
 * bytes long (0: the whole).  Returns 0 or -errno.
 */
static int reg_tag(const struct object *o, const void *data, uint64_t len, uint32_t flags,
		   uint64_t tag, uint32_t size, uint64_t *handle)
{
	struct sframe_register r = {
		.size = size ? size : sizeof(r),
		.flags = flags,
		.sframe_data = (uintptr_t)data,
		.sframe_len = len,
		.sframe_addr = o->sframe,
		.text_start = o->text,
		.text_end = o->text_end,
		.tag = size && size < SFRAME_REGISTER_SIZE_VER1 ? 0 : tag,
	};

	if (ioctl(dev, SFRAME_IOC_REGISTER, &r))
		return -errno;
	if (handle)
		*handle = r.handle;
	return 0;
}

/*
 * Registration by tag: bytes registered SFRAME_F_TAGGED are found again
 * by the tag alone (SFRAME_F_BY_TAG), without the bytes, while the account
 * holds or keeps their copy; an unknown tag, another length and another
 * user's tag are ENOENT; other bytes under the tag are compared, not
 * shared; bad combinations of flags and fields are EINVAL.
 */
static int case_tag(void)
{
	struct object o = self();
	const void *bytes = (const void *)(uintptr_t)o.sframe;
	uint64_t len = o.sframe_len, tag = 0x7a67000000000000ULL ^ (uint64_t)getpid(), h;
	struct sframe_version v = { .size = sizeof(v) };
	struct sframe_section_info info[MAX_LIST];
	struct sframe_stats s0, s1, s2;
	int status, n;
	uint32_t bad = 0xffffffff;
	uint8_t *m;
	pid_t pid;

	check(!ioctl(dev, SFRAME_IOC_VERSION, &v) && (v.features & SFRAME_FEAT_TAG),
	      "SFRAME_FEAT_TAG not reported");
	expect(reg_tag(&o, NULL, len, SFRAME_F_TAGGED | SFRAME_F_BY_TAG, tag, 0, NULL), -EINVAL,
	       "both tag flags");
	expect(reg_tag(&o, bytes, len, SFRAME_F_BY_TAG, tag, 0, NULL), -EINVAL,
	       "bytes given with SFRAME_F_BY_TAG");
	expect(reg_tag(&o, bytes, len, 0, tag, 0, NULL), -EINVAL, "a tag without a tag flag");
	expect(reg_tag(&o, bytes, len, SFRAME_F_TAGGED, tag, SFRAME_REGISTER_SIZE_VER0, NULL),
	       -EINVAL, "a tag flag in a structure without the tag");
	s0 = stats();
	expect(reg_tag(&o, NULL, len, SFRAME_F_BY_TAG, tag, 0, NULL), -ENOENT,
	       "by a tag nothing was filed under");
	expect(reg_tag(&o, bytes, len, SFRAME_F_TAGGED, tag, 0, &h), 0, "register tagged");
	/* Found while held: the text is registered already. */
	expect(reg_tag(&o, NULL, len, SFRAME_F_BY_TAG, tag, 0, NULL), -EEXIST,
	       "by tag, the copy held and its text registered");
	expect(unreg_handle(-1, h), 0, "unregister");
	expect(reg_tag(&o, NULL, len + 8, SFRAME_F_BY_TAG, tag, 0, NULL), -ENOENT,
	       "by the tag with another length");
	expect(reg_tag(&o, NULL, len, SFRAME_F_BY_TAG, tag + 1, 0, NULL), -ENOENT, "by another tag");
	/* Another user's registrations do not see the tag. */
	pid = fork();
	check(pid >= 0, "fork");
	if (pid == 0) {
		check(!setresgid(60009, 60009, 60009) && !setresuid(60009, 60009, 60009), "setresuid");
		_exit(reg_tag(&o, NULL, len, SFRAME_F_BY_TAG, tag, 0, NULL) == -ENOENT ? 0 : 1);
	}
	check(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && !WEXITSTATUS(status),
	      "another user found the copy by this user's tag");
	s1 = stats();
	expect(reg_tag(&o, NULL, len, SFRAME_F_BY_TAG, tag, 0, &h), 0, "by tag, the copy kept");
	n = list_pid(-1, info);
	check(n == 1 && info[0].text_start == o.text && info[0].sframe_len == len &&
	      info[0].sframe_addr == o.sframe, "LIST after the registration by tag: %d sections", n);
	s2 = stats();
	printf("by tag: +%llu registrations by tag, +%llu kept copies taken back; %llu not found\n",
	       U(s2.by_tag - s1.by_tag), U(s2.kept_reused - s1.kept_reused),
	       U(s1.failures[SFRAME_FAIL_NOT_FOUND] - s0.failures[SFRAME_FAIL_NOT_FOUND]));
	check(s2.by_tag == s1.by_tag + 1, "STATS by_tag not counted");
	check(s2.kept_reused == s1.kept_reused + 1, "the kept copy was not taken back");
	expect(unreg_handle(-1, h), 0, "unregister");
	/* Other bytes of the same length under the tag: compared, validated. */
	m = malloc(len);
	check(m != NULL, "malloc");
	memcpy(m, bytes, len);
	memcpy(m + 8, &bad, 4);	/* num_fdes */
	expect(reg_tag(&o, m, len, SFRAME_F_TAGGED, tag, 0, NULL), -EINVAL,
	       "other bytes under the tag are compared and validated, not shared");
	free(m);
	return 0;
}

/*
 * Loaded with a quarter of max_kept_bytes holding one copy, as a user
 * without CAP_PERFMON (STATS then gives the caller's own account): a
 * second copy kept pushes the first out, and the user's only kept copy
 * goes; the kept one taken back is charged to the account STATS shows.
 */
static int case_kept_one(void)
{
	struct object o = self();
	struct sframe_stats s;
	uint64_t h;

	variants_in_child(&o, 3000, 1);
	variants_in_child(&o, 3001, 1);
	s = stats();
	check(s.scope == SFRAME_STATS_SCOPE_OWN, "STATS not of the caller's own account");
	check(s.kept_copies == 1, "%llu kept copies, not 1", U(s.kept_copies));
	check(reg_variant_handle(&o, 3001, 0, &h) == 0, "register the kept copy's bytes");
	s = stats();
	printf("own account after taking the kept copy back: copies %llu, bytes %llu, kept %llu, "
	       "taken back %llu\n", U(s.copies), U(s.bytes), U(s.kept_copies), U(s.kept_reused));
	check(s.kept_reused >= 1 && s.kept_copies == 0, "the kept copy was not taken back");
	check(s.copies == 1 && s.bytes > 0, "the copy taken back is not charged to the account");
	expect(unreg_handle(-1, h), 0, "unregister");
	return 0;
}

/*
 * Loaded with max_kept_bytes=MAX: a child registers N distinct copies
 * (of one size) and exits; what is kept stays within a quarter of MAX
 * (the per-user share), the oldest let go.
 */
static int case_kept_bound(int n, unsigned long long max)
{
	struct object o = self();
	struct sframe_stats before = stats(), after;
	uint64_t charge;

	variants_in_child(&o, 2000, 1);
	after = stats();
	charge = after.kept_bytes - before.kept_bytes;
	check(max == 0 || after.kept_copies == before.kept_copies + 1, "one copy not kept");
	variants_in_child(&o, 2001, n);
	after = stats();
	printf("max_kept_bytes %llu: %d copies of %llu bytes registered, %llu kept, %llu bytes\n",
	       max, n + 1, U(charge), U(after.kept_copies), U(after.kept_bytes));
	check(after.kept_bytes <= max / 4, "kept bytes over a quarter of max_kept_bytes");
	check(max == 0 || after.kept_copies == max / 4 / charge,
	      "not as many copies kept as a quarter of max_kept_bytes holds");
	check(after.copies == before.copies && after.bytes == before.bytes,
	      "held figures not back after the exits");
	return 0;
}

static int limit_sections, limit_copies, pipe_ready[2], pipe_go[2], pipe_others[2];

/* Runs FN(ARG) in a child with UID; returns the child's pid. */
static pid_t as_user(uid_t uid, int (*fn)(long), long arg)
{
	pid_t pid = fork();

	check(pid >= 0, "fork");
	if (pid == 0) {
		/* Only the parent writes: readers see EOF when it closes. */
		close(pipe_go[1]);
		close(pipe_others[1]);
		check(!setresgid(uid, uid, uid) && !setresuid(uid, uid, uid), "setresuid");
		_exit(fn(arg));
	}
	return pid;
}

static void wait_ok(pid_t pid, const char *what)
{
	int status;

	check(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && !WEXITSTATUS(status),
	      "%s failed", what);
}


/*
 * The first user: fills its byte limit with LIMIT_COPIES distinct copies,
 * then its section limit with more registrations of copy 0, then waits.
 */
static int user_fill(long unused)
{
	struct object o = self();
	struct sframe_section_info info[MAX_LIST];
	int i, n, shared = 0;
	char c = 'y';

	(void)unused;
	for (i = 0; i < limit_copies; i++)
		expect(reg_variant(&o, i, i), 0, "a distinct copy within the user's byte limit");
	expect(reg_variant(&o, i, i), -ENOSPC, "one copy over max_bytes_per_user");
	for (; i < limit_sections; i++)
		expect(reg_variant(&o, 0, i), 0, "a shared copy within the user's section limit");
	expect(reg_variant(&o, 0, i), -ENOSPC, "one section over max_sections_per_user");
	n = list_pid(-1, info);
	check(n == limit_sections, "listed %d sections, want %d", n, limit_sections);
	for (i = 0; i < MAX_LIST && i < n; i++)
		shared = (int)info[i].shared > shared ? (int)info[i].shared : shared;
	check(shared == limit_sections - limit_copies, "copy 0 shared by %d, want %d", shared,
	      limit_sections - limit_copies);
	check(write(pipe_ready[1], &c, 1) == 1, "ready");
	(void)!read(pipe_go[0], &c, 1);	/* until the parent says */
	return 0;
}

/* The same user in another process: its limits are the user's, not the process's. */
static int user_same(long unused)
{
	struct object o = self();

	(void)unused;
	expect(reg_variant(&o, 0, 0), -ENOSPC, "same user, another process: section limit");
	return 0;
}

/*
 * Another user registers the bytes the first user holds: copies of its own,
 * held until the parent closes the pipe.
 */
static int user_other(long copies)
{
	struct object o = self();
	struct sframe_section_info info[MAX_LIST];
	struct sframe_stats before = stats(), after;
	char c = 'y';
	int i;

	for (i = 0; i < copies; i++)
		expect(reg_variant(&o, i, i), 0, "another user registers");
	after = stats();
	check(after.copies == before.copies + copies, "the other user's copies are its own");
	expect(list_pid(-1, info), copies, "the other user's list");
	check(info[0].shared == 0, "sharing seen across users");
	check(write(pipe_ready[1], &c, 1) == 1, "ready");
	(void)!read(pipe_others[0], &c, 1);
	return 0;
}

/*
 * Per-user limits (the module loaded with max_sections_per_user=SECTIONS and
 * max_bytes_per_user of COPIES variants): one user fills both, its other
 * processes are refused, other users still register, and nothing is shared
 * across users.  Then with USERS more users holding COPIES copies each, the
 * first user's process exits within a second.
 */
static int case_userlimits(int sections, int copies, int users)
{
	struct sframe_stats s;
	double t0, t;
	pid_t fill, others[users > 0 ? users : 1];
	char c;
	int u;

	limit_sections = sections;
	limit_copies = copies;
	check(!pipe(pipe_ready) && !pipe(pipe_go) && !pipe(pipe_others), "pipe");
	fill = as_user(60001, user_fill, 0);
	check(read(pipe_ready[0], &c, 1) == 1, "the first user failed to fill its limits");
	check(stats().failures[SFRAME_FAIL_LIMIT] >= 2, "FAIL_LIMIT not counted");
	wait_ok(as_user(60001, user_same, 0), "same user");
	for (u = 0; u < users; u++) {
		others[u] = as_user(60002 + u, user_other, copies);
		check(read(pipe_ready[0], &c, 1) == 1, "another user failed to register");
	}
	s = stats();
	check(s.copies == (uint64_t)copies * (users + 1), "copies held: %llu",
	      (unsigned long long)s.copies);
	t0 = now();
	check(write(pipe_go[1], &c, 1) == 1, "go");
	wait_ok(fill, "the first user");
	t = now() - t0;
	printf("a process with %d sections exited in %.3f s while %llu copies were held\n",
	       sections, t, (unsigned long long)s.copies);
	check(t < 1.0, "exit took %.3f s", t);
	close(pipe_others[1]);
	for (u = 0; u < users; u++)
		wait_ok(others[u], "another user");
	s = stats();
	check(s.sections == 0 && s.copies == 0 && s.bytes == 0, "counters not back to zero");
	return 0;
}

int main(int argc, char **argv)
{
	const char *what = argc > 1 ? argv[1] : "self";
	long n = argc > 2 ? atol(argv[2]) : 0;

	self_path = argv[0];
	if (!strcmp(what, "sframe-len")) {
		printf("%llu\n", U(self().sframe_len));
		return 0;
	}
	dev = open_dev();
	if (!strcmp(what, "self"))
		return case_self();
	if (!strcmp(what, "errno"))
		return case_errno();
	if (!strcmp(what, "limits"))
		return case_limits();
	if (!strcmp(what, "copy-charge"))
		return case_copy_charge();
	if (!strcmp(what, "munmap"))
		return case_munmap();
	if (!strcmp(what, "munmap-file"))
		return case_munmap_file();
	if (!strcmp(what, "exec"))
		return case_exec();
	if (!strcmp(what, "expect-none"))
		return case_expect_none();
	if (!strcmp(what, "fork"))
		return case_fork();
	if (!strcmp(what, "share"))
		return case_share(n ? n : 100);
	if (!strcmp(what, "kept"))
		return case_kept();
	if (!strcmp(what, "middle"))
		return case_middle();
	if (!strcmp(what, "tag"))
		return case_tag();
	if (!strcmp(what, "kept-one"))
		return case_kept_one();
	if (!strcmp(what, "kept-bound"))
		return case_kept_bound(n, argc > 3 ? strtoull(argv[3], NULL, 0) : 0);
	if (!strcmp(what, "churn"))
		return case_churn(n ? n : 1000);
	if (!strcmp(what, "threads"))
		return case_threads(n ? n : 10);
	if (!strcmp(what, "fuzz"))
		return case_fuzz(n ? n : 10000, argc > 3 ? strtoull(argv[3], NULL, 0) : 1);
	if (!strcmp(what, "procfd"))
		return case_procfd(argc > 2 ? argv[2] : NULL);
	if (!strcmp(what, "report-euid")) {
		/* Run set-user-ID by suid_exec(): say so, wait for EOF. */
		char c;

		printf("%d\n", (int)geteuid());
		fflush(stdout);
		while (read(0, &c, 1) > 0)
			;
		return 0;
	}
	if (!strcmp(what, "bench"))
		return case_bench(n ? n : 20);
	if (!strcmp(what, "userlimits"))
		return case_userlimits(n, argc > 3 ? atoi(argv[3]) : 0, argc > 4 ? atoi(argv[4]) : 0);
	if (!strcmp(what, "hold")) {
		/* Register, close the device, live until killed. */
		struct object o = self();

		expect(reg(&o, NULL), 0, "register");
		close(dev);
		printf("ready\n");
		fflush(stdout);
		pause();
		return 0;
	}
	die("unknown case %s", what);
}
