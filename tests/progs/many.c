// SPDX-License-Identifier: GPL-2.0
/* libmanyNN.so, NN = IDX: one of the 50 libraries manylibs links. */
#define CAT(a, b) a##b
#define NAME(i) CAT(many_, i)
#define LINK(i) CAT(many_link_, i)

__attribute__((noinline)) int NAME(IDX)(int x)
{
	return x + 1;
}

typedef int many_link(const void *links, int i, long spins);

/*
 * One link of a chain through every library (manylibs chain): calls the
 * next link, in the next library; the last spins.  The addition after the
 * call keeps it a call, and this frame on the stack.
 */
__attribute__((noinline)) int LINK(IDX)(const void *links, int i, long spins)
{
	many_link *const *link = links;
	volatile long n;

	if (link[i + 1])
		return link[i + 1](links, i + 1, spins) + 1;
	for (n = 0; n < spins; n++)
		;
	return 1;
}
