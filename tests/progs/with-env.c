// SPDX-License-Identifier: GPL-2.0
/*
 * with-env: run a program with variables added to its environment, as
 * env(1) does, but statically linked, so that its own start is a few
 * thousand instructions and not a dynamic program's loading.
 * scripts/bench-startup gives gzip an LD_AUDIT library with it: through
 * env(1), every audited run also counted env's own start-up, about as
 * long as gzip's whole run.
 *
 *   with-env [NAME=VALUE]... PROGRAM [ARG]...
 *
 * PROGRAM is a path (no PATH search).  Exit status 125 for a usage
 * error, 127 when PROGRAM cannot be run, as env(1).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int i;

	for (i = 1; i < argc && strchr(argv[i], '='); i++) {
		if (putenv(argv[i])) {
			perror("with-env: putenv");
			return 125;
		}
	}
	if (i == argc) {
		fputs("usage: with-env [NAME=VALUE]... PROGRAM [ARG]...\n", stderr);
		return 125;
	}
	execv(argv[i], argv + i);
	perror(argv[i]);
	return 127;
}
