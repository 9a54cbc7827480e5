// SPDX-License-Identifier: GPL-2.0
/*
 * libcount-sigaltstack.so, preloaded: appends a line to the file named by
 * $SIGALTSTACK_LOG at each sigaltstack() call of the process, then makes
 * the call.  Rust's standard library makes two in its start-up (for its
 * stack overflow message), before main; 50-loader uses the count to check
 * that `sframectl run` starts the program before that start-up.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

int sigaltstack(const stack_t *ss, stack_t *old)
{
	const char *log = getenv("SIGALTSTACK_LOG");

	if (log) {
		int fd = open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);

		if (fd >= 0) {
			if (write(fd, "sigaltstack\n", 12) != 12) {
				/* The count comes out short, and the check fails. */
			}
			close(fd);
		}
	}
	return syscall(SYS_sigaltstack, ss, old);
}
