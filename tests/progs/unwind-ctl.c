// SPDX-License-Identifier: GPL-2.0
/*
 * The unwinder's side of /dev/sframe: its STATS counters and the CONTROL
 * switches.
 *
 *   unwind-ctl stats              print unwind[] counters as NAME VALUE lines
 *   unwind-ctl get                print the control bits
 *   unwind-ctl set MASK VALUE     change the bits in MASK; print the result
 *   unwind-ctl expect ERRNO MASK VALUE   exit 0 if set fails with ERRNO
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "sframe-unwind.h"

static const char *const names[] = {
	"walks_sample", "walks_deferred", "frames_sframe", "frames_fp",
	"frames_entry", "frames_signal", "end_outermost", "end_max_frames",
	"end_bad_step", "end_fault", "end_no_coverage", "ns_sample",
	"ns_deferred", "frames_sample", "frames_deferred", "end_budget",
	"end_signal_limit",
};

static int control(int dev, unsigned int mask, unsigned int value, unsigned int *out)
{
	struct sframe_control c;

	memset(&c, 0, sizeof(c));
	c.size = sizeof(c);
	c.mask = mask;
	c.value = value;
	if (ioctl(dev, SFRAME_IOC_CONTROL, &c))
		return -1;
	*out = c.value;
	return 0;
}

int main(int argc, char **argv)
{
	const char *what = argc > 1 ? argv[1] : "stats";
	unsigned int v;
	int dev = open("/dev/sframe", O_RDWR | O_CLOEXEC);

	if (dev < 0) {
		perror("unwind-ctl: open /dev/sframe");
		return 1;
	}
	if (!strcmp(what, "stats")) {
		struct sframe_stats s;

		memset(&s, 0, sizeof(s));
		s.size = sizeof(s);
		if (ioctl(dev, SFRAME_IOC_STATS, &s)) {
			perror("unwind-ctl: SFRAME_IOC_STATS");
			return 1;
		}
		for (unsigned int i = 0; i < sizeof(names) / sizeof(names[0]); i++)
			printf("%s %llu\n", names[i], (unsigned long long)s.unwind[i]);
		return 0;
	}
	if (!strcmp(what, "get") || (!strcmp(what, "set") && argc == 4)) {
		unsigned int mask = argc == 4 ? strtoul(argv[2], NULL, 0) : 0;
		unsigned int value = argc == 4 ? strtoul(argv[3], NULL, 0) : 0;

		if (control(dev, mask, value, &v)) {
			perror("unwind-ctl: SFRAME_IOC_CONTROL");
			return 1;
		}
		printf("%u\n", v);
		return 0;
	}
	if (!strcmp(what, "expect") && argc == 5) {
		int want = atoi(argv[2]);

		if (!control(dev, strtoul(argv[3], NULL, 0), strtoul(argv[4], NULL, 0), &v)) {
			fprintf(stderr, "unwind-ctl: CONTROL succeeded, want errno %d\n", want);
			return 1;
		}
		if (errno != want) {
			fprintf(stderr, "unwind-ctl: errno %d (%s), want %d\n", errno, strerror(errno), want);
			return 1;
		}
		return 0;
	}
	fprintf(stderr, "usage: unwind-ctl stats | get | set MASK VALUE | expect ERRNO MASK VALUE\n");
	return 2;
}
