// SPDX-License-Identifier: GPL-2.0
/*
 * Registrations that follow the process (tests/guest/35-lifecycle.sh):
 * built with -Wa,--gsframe and no frame pointer, dynamic and -static, and
 * registering nothing itself (but in one child of "independence"): the
 * module registers it at exec and hands its registrations to fork
 * children.
 *
 *   lifecycle spin SECONDS             spin_leaf <- spin_b <- spin_a <- spin_main <- main
 *   lifecycle prefork SECONDS WORKERS  the same in WORKERS forked children,
 *                                      named lc-worker
 *   lifecycle count                    "sections N exec E inherited I" of this process
 *   lifecycle independence             a child's and its parent's registrations
 *                                      are their own after the fork (the child
 *                                      registers one again, and its own child
 *                                      inherits both kinds)
 *   lifecycle forkloop N [DIR [bench]] N fork/exit cycles, 8 children at a
 *                                      time (after dlopen()ing DIR/libmany01.so
 *                                      .. libmany50.so); checks children and
 *                                      counters (not with bench, which leaves
 *                                      /dev/sframe alone), prints the time
 *   lifecycle forkloop N DIR bench-unregistered
 *                                      the same with bench, after removing
 *                                      every registration of the process: a
 *                                      baseline of the same size without any
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sframe-unwind.h"

#define NOIPA __attribute__((noipa))
#define MAX_SECTIONS 256
#define IN_FLIGHT 8

static void die(const char *what)
{
	fprintf(stderr, "lifecycle: %s: %s\n", what, strerror(errno));
	exit(2);
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

volatile unsigned long sink;

NOIPA void spin_leaf(void)
{
	for (unsigned long i = 0; i < 100000; i++)
		sink += i ^ (sink >> 3);
}

NOIPA void spin_b(void) { spin_leaf(); sink++; }
NOIPA void spin_a(void) { spin_b(); sink++; }

NOIPA void spin_main(double seconds)
{
	double end = now() + seconds;

	while (now() < end)
		spin_a();
}

static int dev = -1;

static int open_dev(void)
{
	if (dev < 0)
		dev = open("/dev/sframe", O_RDWR | O_CLOEXEC);
	if (dev < 0)
		die("open /dev/sframe");
	return dev;
}

/* This process's registrations; their number. */
static int list(struct sframe_section_info *out)
{
	struct sframe_list l;

	memset(&l, 0, sizeof(l));
	l.size = sizeof(l);
	l.entry_size = sizeof(*out);
	l.entries = (uintptr_t)out;
	l.capacity = MAX_SECTIONS;
	if (ioctl(open_dev(), SFRAME_IOC_LIST, &l))
		die("SFRAME_IOC_LIST");
	return l.count < MAX_SECTIONS ? (int)l.count : MAX_SECTIONS;
}

/* The registration covering main's text, or NULL. */
static const struct sframe_section_info *own(const struct sframe_section_info *s, int n)
{
	uintptr_t pc = (uintptr_t)spin_main;

	for (int i = 0; i < n; i++)
		if (s[i].text_start <= pc && pc < s[i].text_end)
			return &s[i];
	return NULL;
}

static int count(void)
{
	struct sframe_section_info s[MAX_SECTIONS];
	int n = list(s), exec = 0, inherited = 0;

	for (int i = 0; i < n; i++) {
		exec += !!(s[i].flags & SFRAME_SECTION_EXEC);
		inherited += !!(s[i].flags & SFRAME_SECTION_INHERITED);
	}
	printf("sections %d exec %d inherited %d\n", n, exec, inherited);
	return 0;
}

static int unregister_own(void)
{
	struct sframe_unregister u;

	memset(&u, 0, sizeof(u));
	u.size = sizeof(u);
	u.flags = SFRAME_F_BY_ADDR;
	u.addr = (uintptr_t)spin_main;
	return ioctl(open_dev(), SFRAME_IOC_UNREGISTER, &u) ? -errno : 0;
}

#define CHECK(cond, msg) do { if (!(cond)) { fprintf(stderr, "lifecycle: %s\n", msg); return 1; } } while (0)

/* Whether child @pid (or any child, for -1) exited with status 0. */
static int wait_ok(pid_t pid)
{
	int status;
	pid_t got = waitpid(pid, &status, 0);

	return got > 0 && (pid < 0 || got == pid) && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* An int shared with fork children, zero. */
static volatile int *shared_flag(void)
{
	void *p = mmap(NULL, sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/*
 * Keep running after fork() until this process sleeps: one CPU and
 * SCHED_FIFO, which the child inherits.  Best effort (needs privilege).
 */
static void parent_runs_first(void)
{
	struct sched_param sp = { .sched_priority = 1 };
	cpu_set_t cpus;

	CPU_ZERO(&cpus);
	CPU_SET(sched_getcpu(), &cpus);
	if (sched_setaffinity(0, sizeof(cpus), &cpus) || sched_setscheduler(0, SCHED_FIFO, &sp))
		fprintf(stderr, "lifecycle: cannot make the parent run first: %s\n", strerror(errno));
}

/* Registered at exec; after a fork, each side removes its own alone. */
/* Registers the section @info describes again, from this process's memory. */
static int register_again(const struct sframe_section_info *info)
{
	struct sframe_register r;

	memset(&r, 0, sizeof(r));
	r.size = sizeof(r);
	r.sframe_data = info->sframe_addr;
	r.sframe_len = info->sframe_len;
	r.sframe_addr = info->sframe_addr;
	r.text_start = info->text_start;
	r.text_end = info->text_end;
	return ioctl(open_dev(), SFRAME_IOC_REGISTER, &r) ? -errno : 0;
}

/* Whether @s[0..@n) is sorted by text and without overlap. */
static int sorted(const struct sframe_section_info *s, int n)
{
	for (int i = 1; i < n; i++)
		if (s[i - 1].text_end > s[i].text_start)
			return 0;
	return 1;
}

static int independence(void)
{
	struct sframe_section_info s[MAX_SECTIONS];
	const struct sframe_section_info *mine;
	int n = list(s);
	volatile int *first;
	pid_t pid;

	mine = own(s, n);
	CHECK(mine, "the program was not registered at exec");
	CHECK(mine->flags == SFRAME_SECTION_EXEC, "exec registration not flagged as such");
	/* The child unregisters: the parent keeps its own. */
	pid = fork();
	if (pid == 0) {
		struct sframe_section_info t[MAX_SECTIONS];
		int m = list(t);
		const struct sframe_section_info *inh = own(t, m);

		struct sframe_section_info again;
		pid_t grandchild;

		if (m != n || !inh || inh->flags != (SFRAME_SECTION_EXEC | SFRAME_SECTION_INHERITED) ||
		    inh->handle != mine->handle)
			_exit(3);
		again = *inh;
		/* Over a live inherited registration. */
		if (register_again(&again) != -EEXIST)
			_exit(5);
		if (unregister_own() || list(t) != n - 1 || own(t, n - 1))
			_exit(4);
		/*
		 * Registered anew, the child's own beside what it inherited: its
		 * own child inherits both, in order.
		 */
		if (register_again(&again) || list(t) != n || !own(t, n))
			_exit(7);
		grandchild = fork();
		if (grandchild == 0) {
			struct sframe_section_info u[MAX_SECTIONS];
			int k = list(u);

			_exit(k == n && own(u, k) && sorted(u, k) ? 0 : 8);
		}
		_exit(grandchild > 0 && wait_ok(grandchild) ? 0 : 9);
	}
	CHECK(pid > 0 && wait_ok(pid),
	      "child: inherited registration wrong, re-registration or unregister failed, or its child's list wrong");
	CHECK(list(s) == n && own(s, n), "the child's unregister removed the parent's");
	/*
	 * The parent unregisters at once after the fork, before the child has
	 * run if it can (both on this CPU, SCHED_FIFO: the child waits until
	 * the parent sleeps): the child still keeps its own.  The parent held
	 * the last use of the section's copy, so the child takes it again.
	 */
	first = shared_flag();
	CHECK(first, "mmap");
	parent_runs_first();
	pid = fork();
	if (pid == 0) {
		struct sframe_section_info t[MAX_SECTIONS];
		int m = list(t);

		*first = *first == 1 ? 2 : 3;
		_exit(m == n && own(t, n) ? 0 : 6);
	}
	CHECK(pid > 0, "fork");
	CHECK(unregister_own() == 0, "the parent cannot unregister");
	if (*first == 0)
		*first = 1;
	CHECK(list(s) == n - 1, "the parent's unregister did nothing");
	CHECK(wait_ok(pid), "the parent's unregister removed the child's");
	printf("independence: parent unregistered %s the child ran\n",
	       *first == 2 ? "before" : "after");
	printf("independence: %d sections, both directions\n", n);
	return 0;
}

static int prefork(double seconds, int workers)
{
	int failed = 0;

	for (int i = 0; i < workers; i++) {
		pid_t pid = fork();

		if (pid == 0) {
			/* A name of their own, for telling their samples apart. */
			prctl(PR_SET_NAME, "lc-worker");
			spin_main(seconds);
			_exit(0);
		}
		if (pid < 0)
			die("fork");
	}
	for (int i = 0; i < workers; i++)
		failed |= !wait_ok(-1);
	return failed;
}

static struct sframe_stats stats(void)
{
	struct sframe_stats st;

	memset(&st, 0, sizeof(st));
	st.size = sizeof(st);
	if (ioctl(open_dev(), SFRAME_IOC_STATS, &st))
		die("SFRAME_IOC_STATS");
	return st;
}

/*
 * What a fork copies and an exit frees, besides registrations: the
 * process's anonymous memory (kB) and its mappings.
 */
static void footprint(long *rss_anon_kb, long *vmas)
{
	char line[512];
	FILE *f = fopen("/proc/self/status", "r");

	*rss_anon_kb = *vmas = -1;
	while (f && fgets(line, sizeof(line), f))
		sscanf(line, "RssAnon: %ld", rss_anon_kb);
	if (f)
		fclose(f);
	f = fopen("/proc/self/maps", "r");
	if (!f)
		return;
	*vmas = 0;
	while (fgets(line, sizeof(line), f))
		*vmas += strchr(line, '\n') != NULL;
	fclose(f);
}

static int forkloop(long cycles, const char *dir, int bench)
{
	struct sframe_section_info s[MAX_SECTIONS];
	struct sframe_stats before = { 0 }, after;
	char path[4096];
	double t0, t, t_fork = 0;
	int n, live = 0;

	for (int i = 1; dir && i <= 50; i++) {
		snprintf(path, sizeof(path), "%s/libmany%02d.so", dir, i);
		if (!dlopen(path, RTLD_NOW))
			fprintf(stderr, "lifecycle: dlopen %s: %s\n", path, dlerror()), exit(2);
	}
	if (bench == 2) {
		n = list(s);
		for (int i = 0; i < n; i++) {
			struct sframe_unregister u;

			memset(&u, 0, sizeof(u));
			u.size = sizeof(u);
			u.handle = s[i].handle;
			if (ioctl(open_dev(), SFRAME_IOC_UNREGISTER, &u))
				die("SFRAME_IOC_UNREGISTER");
		}
		CHECK(list(s) == 0, "registrations left");
	}
	n = bench ? -1 : list(s);
	if (!bench)
		before = stats();
	t0 = now();
	/*
	 * Up to IN_FLIGHT children at once, so that the parent's fork() and
	 * its children's exits overlap, as in a pre-forking server.
	 */
	for (long i = 0; i < cycles; i++) {
		double f0;
		pid_t pid;

		if (live == IN_FLIGHT) {
			CHECK(wait_ok(-1), "a child did not see its parent's registrations");
			live--;
		}
		f0 = now();
		pid = fork();
		if (pid > 0)
			t_fork += now() - f0;
		if (pid == 0) {
			/* Every 100th child checks what it inherited. */
			if (!bench && i % 100 == 0) {
				struct sframe_section_info t[MAX_SECTIONS];

				_exit(list(t) == n ? 0 : 1);
			}
			_exit(0);
		}
		CHECK(pid > 0, "fork failed");
		live++;
	}
	for (; live > 0; live--)
		CHECK(wait_ok(-1), "a child did not see its parent's registrations");
	t = now() - t0;
	if (bench) {
		long rss, vmas;

		footprint(&rss, &vmas);
		printf("%ld fork/exit cycles: fork %.1f us cycle %.1f us, parent: anonymous %ld kB, %ld mappings\n",
		       cycles, t_fork / cycles * 1e6, t / cycles * 1e6, rss, vmas);
		return 0;
	}
	after = stats();
	printf("%ld fork/exit cycles with %d registrations: fork() %.1f us, whole cycle %.1f us\n",
	       cycles, n, t_fork / cycles * 1e6, t / cycles * 1e6);
	CHECK(after.sections == before.sections && after.copies == before.copies &&
	      after.bytes == before.bytes && after.mms == before.mms,
	      "counters not back after the children exited");
	return 0;
}

int main(int argc, char **argv)
{
	const char *what = argc > 1 ? argv[1] : "count";

	if (!strcmp(what, "spin"))
		return spin_main(argc > 2 ? atof(argv[2]) : 2.0), 0;
	if (!strcmp(what, "prefork"))
		return prefork(argc > 2 ? atof(argv[2]) : 2.0, argc > 3 ? atoi(argv[3]) : 3);
	if (!strcmp(what, "count"))
		return count();
	if (!strcmp(what, "independence"))
		return independence();
	if (!strcmp(what, "forkloop"))
		return forkloop(argc > 2 ? atol(argv[2]) : 1000, argc > 3 ? argv[3] : NULL,
				argc <= 4 ? 0 :
				!strcmp(argv[4], "bench") ? 1 :
				!strcmp(argv[4], "bench-unregistered") ? 2 : 0);
	fprintf(stderr, "lifecycle: unknown command %s\n", what);
	return 2;
}
