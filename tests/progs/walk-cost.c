// SPDX-License-Identifier: GPL-2.0
/*
 * What one user-stack walk costs, per frame: the program descends DEPTH
 * frames, then takes ITERATIONS page faults at the bottom of that stack
 * (a store to a page it has just given back with MADV_DONTNEED), and
 * prints the time per fault.  scripts/bench-frame-cost records it with
 * `perf record -e page-faults -c 1 -g`: every fault is a sample whose
 * user callchain is walked in the faulting task's own context, where
 * interrupts are on, so that a second perf can profile the walk itself.
 * Two depths give the cost per frame (the difference over the frames);
 * under QEMU's -icount a guest nanosecond is one instruction.
 *
 *   walk-cost DEPTH ITERATIONS
 *
 * Output: "depth D iterations N ns_per_fault X".  Built without frame
 * pointers (walk-cost) and with them (walk-cost-fp), both with .sframe.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define NOIPA __attribute__((noipa))

static char *page;
static long page_size;

static long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

/* The bottom of the stack: one page fault per iteration. */
NOIPA static long fault_loop(long iterations)
{
	long t0 = now_ns();

	for (long i = 0; i < iterations; i++) {
		if (madvise(page, page_size, MADV_DONTNEED))
			return -1;
		*(volatile char *)page = (char)i;
	}
	return now_ns() - t0;
}

/* Keeps a frame's buffer alive across the recursive call. */
NOIPA static void touch(char *buf)
{
	buf[0]++;
}

/* One frame per level: the buffer and the call after it keep GCC from
 * turning the recursion into a loop or a tail call. */
NOIPA static long descend(int depth, long iterations)
{
	char buf[24];
	long ns;

	buf[0] = (char)depth;
	touch(buf);
	ns = depth > 1 ? descend(depth - 1, iterations) : fault_loop(iterations);
	touch(buf);
	return ns;
}

int main(int argc, char **argv)
{
	int depth;
	long iterations, ns;

	if (argc != 3) {
		fprintf(stderr, "usage: walk-cost DEPTH ITERATIONS\n");
		return 2;
	}
	depth = atoi(argv[1]);
	iterations = atol(argv[2]);
	if (depth < 1 || depth > 10000 || iterations < 1) {
		fprintf(stderr, "walk-cost: DEPTH from 1 to 10000, ITERATIONS at least 1\n");
		return 2;
	}
	page_size = sysconf(_SC_PAGESIZE);
	page = mmap(NULL, page_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (page == MAP_FAILED) {
		perror("walk-cost: mmap");
		return 1;
	}
	ns = descend(depth, iterations);
	if (ns < 0) {
		perror("walk-cost: madvise");
		return 1;
	}
	printf("depth %d iterations %ld ns_per_fault %.1f\n", depth, iterations,
	       (double)ns / (double)iterations);
	return 0;
}
