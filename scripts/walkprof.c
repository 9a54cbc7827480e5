// SPDX-License-Identifier: GPL-2.0
/*
 * walkprof: a QEMU TCG plugin that counts the guest instructions executed
 * inside perf's collection of user callchains, per translation block, for
 * scripts/bench-frame-cost.  Exact where sampling cannot be: the walk runs
 * with interrupts off, so no in-guest profiler (TCG has no PMU, hence no
 * NMI) lands inside it.
 *
 * A window opens when the guest executes the first block of START
 * (perf_callchain_user: the stock walk, or the ftrace hook and the module's
 * walk it redirects to) and closes at the first block inside
 * [END_LO, END_HI) (get_perf_callchain, its caller: the return).  Every
 * kernel block executed inside a window is counted.  Each time the guest
 * executes the first block of MARKER (the sync system call), the counts of
 * the phase that ends are appended to OUT, if it had any window, and
 * cleared: the guest brackets what it wants profiled with `sync`.
 *
 *   -plugin walkprof.so,start=ADDR,end_lo=ADDR,end_hi=ADDR,marker=ADDR,out=FILE
 *
 * OUT, per phase: "phase N windows W instructions I", then one
 * "PC INSTRUCTIONS-PER-BLOCK EXECUTIONS" line per block, then
 * "walks I1 I2 ...", the instructions of each window in order (a window
 * still open at the marker counts to there), then "end".
 * Single-threaded TCG (scripts/guest-run's default): no locking.
 *
 * Built against the running QEMU's plugin API header (qemu-plugin.h from
 * Debian's qemu source package, version 1 in QEMU 7.2).
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <qemu-plugin.h>

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

/* Kernel addresses on x86-64 and arm64 alike. */
#define KERNEL_MIN 0xffff000000000000ULL

struct block {
	uint64_t pc;
	uint64_t insns;
	uint64_t count;
	struct block *next;
};

static uint64_t start, end_lo, end_hi, marker;
static FILE *out;
static struct block *blocks;
static bool inside;
static uint64_t windows, instructions, phase;
/* The instructions of each window of the phase, and of the open one. */
static uint64_t *walks, nwalks, walks_cap, current;

static void close_window(void)
{
	uint64_t *more;

	if (!inside)
		return;
	inside = false;
	if (nwalks == walks_cap) {
		more = realloc(walks, (walks_cap ? 2 * walks_cap : 1024) * sizeof(*walks));
		if (!more)
			return;
		walks = more;
		walks_cap = walks_cap ? 2 * walks_cap : 1024;
	}
	walks[nwalks++] = current;
}

static void dump_phase(void)
{
	struct block *b;
	uint64_t i;

	phase++;
	if (windows) {
		fprintf(out, "phase %" PRIu64 " windows %" PRIu64 " instructions %" PRIu64 "\n",
			phase, windows, instructions);
		for (b = blocks; b; b = b->next)
			if (b->count)
				fprintf(out, "%" PRIx64 " %" PRIu64 " %" PRIu64 "\n", b->pc, b->insns,
					b->count);
		fprintf(out, "walks");
		for (i = 0; i < nwalks; i++)
			fprintf(out, " %" PRIu64, walks[i]);
		fprintf(out, "\nend\n");
		fflush(out);
	}
	for (b = blocks; b; b = b->next)
		b->count = 0;
	windows = instructions = nwalks = 0;
}

static void exec_block(unsigned int vcpu, void *udata)
{
	struct block *b = udata;

	(void)vcpu;
	if (b->pc == start) {
		if (!inside) {
			windows++;
			current = 0;
		}
		inside = true;
	} else if (b->pc >= end_lo && b->pc < end_hi) {
		close_window();
	} else if (b->pc == marker) {
		close_window();
		dump_phase();
	}
	if (inside) {
		b->count++;
		instructions += b->insns;
		current += b->insns;
	}
}

static void translate_block(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	uint64_t pc = qemu_plugin_tb_vaddr(tb);
	struct block *b;

	(void)id;
	if (pc < KERNEL_MIN)
		return;
	/* One record per translation: a block translated again counts again
	 * under the same PC, which the reader adds up. */
	b = calloc(1, sizeof(*b));
	if (!b)
		return;
	b->pc = pc;
	b->insns = qemu_plugin_tb_n_insns(tb);
	b->next = blocks;
	blocks = b;
	qemu_plugin_register_vcpu_tb_exec_cb(tb, exec_block, QEMU_PLUGIN_CB_NO_REGS, b);
}

static void at_exit(qemu_plugin_id_t id, void *p)
{
	(void)id;
	(void)p;
	if (out)
		fclose(out);
	out = NULL;
}

static bool address_arg(const char *arg, const char *name, uint64_t *value)
{
	size_t n = strlen(name);

	if (strncmp(arg, name, n) || arg[n] != '=')
		return false;
	*value = strtoull(arg + n + 1, NULL, 0);
	return true;
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc,
					   char **argv)
{
	const char *path = NULL;

	(void)info;
	for (int i = 0; i < argc; i++) {
		if (address_arg(argv[i], "start", &start) || address_arg(argv[i], "end_lo", &end_lo) ||
		    address_arg(argv[i], "end_hi", &end_hi) || address_arg(argv[i], "marker", &marker))
			continue;
		if (!strncmp(argv[i], "out=", 4)) {
			path = argv[i] + 4;
			continue;
		}
		fprintf(stderr, "walkprof: unknown argument %s\n", argv[i]);
		return -1;
	}
	if (!start || !end_lo || end_hi <= end_lo || !marker || !path) {
		fprintf(stderr, "walkprof: needs start, end_lo, end_hi, marker and out\n");
		return -1;
	}
	out = fopen(path, "w");
	if (!out) {
		perror("walkprof: out");
		return -1;
	}
	qemu_plugin_register_vcpu_tb_trans_cb(id, translate_block);
	qemu_plugin_register_atexit_cb(id, at_exit, NULL);
	return 0;
}
