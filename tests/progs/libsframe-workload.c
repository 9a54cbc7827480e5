// SPDX-License-Identifier: GPL-2.0
/*
 * The shared library half of sframe-workload: the main program calls
 * workload_lib_entry() through its PLT; the leaf spins two calls deeper.
 */
#include "sframe-workload.h"

#define NOIPA __attribute__((noipa))

static volatile unsigned long lib_sink;

NOIPA unsigned long workload_lib_leaf_spin(unsigned long n)
{
	for (unsigned long i = 0; i < n; i++)
		lib_sink += i ^ (lib_sink >> 3);
	return lib_sink;
}

NOIPA unsigned long workload_lib_middle(unsigned long n)
{
	return workload_lib_leaf_spin(n) + 1;
}

NOIPA unsigned long workload_lib_entry(unsigned long n)
{
	return workload_lib_middle(n) + 1;
}
