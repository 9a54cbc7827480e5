// SPDX-License-Identifier: GPL-2.0
/*
 * dlwork: loads libsfwork.so with dlopen() and runs a script of steps, for
 * the loader tests (tests/guest/50-loader.sh).  Built like the library
 * (SFrame, no frame pointer), so complete chains need SFrame all the way
 * from sfwork_inner to main.
 *
 *   dlwork LIB STEP...
 *     open          dlopen(LIB)
 *     mopen         dlmopen(LM_ID_NEWLM, LIB): another copy, in a new namespace
 *     close         dlclose() it
 *     base          print "base ADDRESS" (the library's load address)
 *     block         map anonymous memory over the last base, so that the
 *                   next open puts the library elsewhere
 *     work:SECONDS  call into the library for SECONDS (a fraction is fine)
 *     cycle:N       N times: open, call once, close
 *     vfork-exit    vfork() a child that leaves with exit(), not _exit():
 *                   it runs the loader's la_objclose() for every object,
 *                   in the memory it shares with us
 *     pause         print "paused" and wait for a signal
 *     print         print a checksum of the work done (same in every run)
 *     exit:N        exit with status N
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef unsigned long (*work_fn)(unsigned long);

static const char *lib_path;
static void *lib;
static work_fn work;
static void *last_base;
static unsigned long checksum;

static void die(const char *what)
{
	fprintf(stderr, "dlwork: %s: %s\n", what, dlerror());
	exit(2);
}

static void lib_open(void)
{
	Dl_info info;

	lib = dlopen(lib_path, RTLD_NOW);
	if (!lib)
		die("dlopen");
	work = (work_fn)dlsym(lib, "sfwork_outer");
	if (!work)
		die("dlsym");
	if (!dladdr((void *)work, &info))
		die("dladdr");
	last_base = info.dli_fbase;
}

static void lib_close(void)
{
	if (!lib) {
		fprintf(stderr, "dlwork: close: nothing open\n");
		exit(2);
	}
	if (dlclose(lib))
		die("dlclose");
	lib = NULL;
	work = NULL;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The caller frames the chain must reach: run_work and main. */
__attribute__((noinline)) static unsigned long run_work(double seconds)
{
	double end = now() + seconds;
	unsigned long r = 0, i = 0;

	do {
		r += work(i++);
		__asm__ volatile("" ::: "memory");
	} while (now() < end);
	return r;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: dlwork LIB STEP...\n");
		return 2;
	}
	lib_path = argv[1];
	for (int i = 2; i < argc; i++) {
		const char *step = argv[i];

		if (!strcmp(step, "open")) {
			lib_open();
		} else if (!strcmp(step, "mopen")) {
			if (!dlmopen(LM_ID_NEWLM, lib_path, RTLD_NOW))
				die("dlmopen");
		} else if (!strcmp(step, "close")) {
			lib_close();
		} else if (!strcmp(step, "base")) {
			printf("base %p\n", last_base);
		} else if (!strcmp(step, "block")) {
			/* One page at the old place is enough to move the next load. */
			if (mmap(last_base, 4096, PROT_NONE,
				 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0) == MAP_FAILED) {
				perror("dlwork: mmap");
				return 2;
			}
		} else if (!strncmp(step, "work:", 5)) {
			checksum += run_work(atof(step + 5)) != 0;
		} else if (!strncmp(step, "cycle:", 6)) {
			for (long n = atol(step + 6); n > 0; n--) {
				lib_open();
				checksum += work(n) & 1;
				lib_close();
			}
		} else if (!strcmp(step, "vfork-exit")) {
			pid_t pid = vfork();

			if (pid == 0)
				exit(0);
			if (pid < 0 || waitpid(pid, NULL, 0) != pid) {
				perror("dlwork: vfork");
				return 2;
			}
		} else if (!strcmp(step, "pause")) {
			printf("paused\n");
			fflush(stdout);
			pause();
		} else if (!strcmp(step, "print")) {
			printf("checksum %lu\n", checksum);
		} else if (!strncmp(step, "exit:", 5)) {
			fflush(stdout);
			return atoi(step + 5);
		} else {
			fprintf(stderr, "dlwork: unknown step %s\n", step);
			return 2;
		}
		fflush(stdout);
	}
	return 0;
}
