// SPDX-License-Identifier: GPL-2.0
/*
 * libsfwork.so: a library built the way distributions build code today
 * (no frame pointer) but with SFrame (-Wa,--gsframe).  Three nested calls
 * that spend their time in the innermost one, so that a sampled call chain
 * through the library is complete only if the unwinder used its SFrame
 * section: sfwork_inner <- sfwork_middle <- sfwork_outer <- the caller.
 */

/* A barrier after each call keeps it a call, not a tail jump. */
#define KEEP_FRAME() __asm__ volatile("" ::: "memory")

__attribute__((noinline)) unsigned long sfwork_inner(unsigned long n)
{
	unsigned long x = n;

	for (unsigned long i = 0; i < 20000; i++) {
		x = x * 6364136223846793005UL + 1442695040888963407UL;
		__asm__ volatile("" : "+r"(x));
	}
	return x;
}

__attribute__((noinline)) unsigned long sfwork_middle(unsigned long n)
{
	/* A frame of its own (locals on the stack) to unwind through. */
	volatile unsigned long buf[8];
	unsigned long r;

	for (int i = 0; i < 8; i++)
		buf[i] = n + i;
	r = sfwork_inner(buf[n & 7]);
	KEEP_FRAME();
	return r ^ buf[3];
}

__attribute__((noinline)) unsigned long sfwork_outer(unsigned long n)
{
	unsigned long r = sfwork_middle(n) + 1;

	KEEP_FRAME();
	return r;
}
