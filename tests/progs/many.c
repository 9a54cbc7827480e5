// SPDX-License-Identifier: GPL-2.0
/* libmanyNN.so, NN = IDX: one of the 50 libraries manylibs links. */
#define CAT(a, b) a##b
#define NAME(i) CAT(many_, i)

__attribute__((noinline)) int NAME(IDX)(int x)
{
	return x + 1;
}
