// SPDX-License-Identifier: GPL-2.0
/* A shared object with a .sframe of its own, distinct from registry's. */
int registry_extra_work(int n);

int registry_extra_work(int n)
{
	volatile int acc = 0;
	int i;

	for (i = 0; i < n; i++)
		acc += i * n;
	return acc;
}
