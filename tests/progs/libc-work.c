// SPDX-License-Identifier: GPL-2.0
/*
 * A workload whose hot leaves are inside libc: qsort() calling back into
 * our comparison function, large memmove()s, malloc()/free() churn.  Built
 * twice (tests/guest/45-synth.sh): with -Wa,--gsframe and without, both
 * without frame pointers.  libc itself (Debian's) has no .sframe, so a
 * complete chain to main needs the section generated from its .eh_frame.
 *
 *   libc-work [SECONDS]    rotate through the phases for SECONDS (1.5)
 *   libc-work -n ROUNDS    exactly ROUNDS rounds of the three phases
 *
 * A fixed number of rounds is the same work in every recording, whatever
 * the unwinder costs: the first round (qsort's buffer is mmap()ed, then
 * glibc raises its mmap threshold) differs from the later ones, so runs
 * of a fixed time that manage 1 or 13 rounds sample different paths.
 *
 * Every phase function is noinline and uses the result of its last call,
 * so that no call is a tail call and each phase is one frame below main:
 *
 *   cmp_records <- (libc: qsort's merge sort) <- phase_qsort <- main
 *   (libc: __memmove_*) <- phase_memmove <- main
 *   (libc: malloc/free internals) <- phase_malloc <- main
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NOINLINE __attribute__((noinline))

struct record {
	uint64_t key;
	uint32_t payload[6];
};

static volatile uint64_t sink;

static uint64_t next_random(uint64_t *state)
{
	*state ^= *state << 13;
	*state ^= *state >> 7;
	*state ^= *state << 17;
	return *state;
}

/* The leaf of the qsort phase: called by libc, from libc. */
NOINLINE int cmp_records(const void *a, const void *b)
{
	const struct record *x = a, *y = b;

	return (x->key > y->key) - (x->key < y->key);
}

NOINLINE uint64_t phase_qsort(uint64_t *state)
{
	enum { N = 20000 };
	static struct record recs[N];

	for (int i = 0; i < N; i++)
		recs[i].key = next_random(state);
	qsort(recs, N, sizeof(recs[0]), cmp_records);
	return recs[0].key ^ recs[N - 1].key;
}

NOINLINE uint64_t phase_memmove(uint64_t *state)
{
	enum { SIZE = 4 << 20 };
	static unsigned char buf[SIZE + 4096];
	uint64_t sum = 0;

	for (int i = 0; i < 8; i++) {
		size_t shift = 1 + next_random(state) % 4000;

		if (i & 1)
			memmove(buf + shift, buf, SIZE);
		else
			memmove(buf, buf + shift, SIZE);
		sum += buf[shift];
	}
	return sum;
}

NOINLINE uint64_t phase_malloc(uint64_t *state)
{
	enum { SLOTS = 512, OPS = 40000 };
	static void *slot[SLOTS];
	uint64_t sum = 0;

	for (int i = 0; i < OPS; i++) {
		uint64_t r = next_random(state);
		unsigned int k = r % SLOTS;

		free(slot[k]);
		slot[k] = malloc(16 + (r >> 20) % 2048);
		if (slot[k])
			sum += (uintptr_t)slot[k] & 0xff;
	}
	return sum;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	int fixed = argc > 2 && strcmp(argv[1], "-n") == 0;
	double seconds = argc > 1 && !fixed ? atof(argv[1]) : 1.5;
	unsigned long limit = fixed ? strtoul(argv[2], NULL, 10) : 0;
	double end = now() + seconds;
	uint64_t state = 0x9e3779b97f4a7c15ull;
	unsigned long rounds = 0;

	while (fixed ? rounds < limit : now() < end) {
		sink += phase_qsort(&state);
		sink += phase_memmove(&state);
		sink += phase_malloc(&state);
		rounds++;
	}
	printf("libc-work: %lu rounds\n", rounds);
	return 0;
}
