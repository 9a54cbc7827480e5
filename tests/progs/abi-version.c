// SPDX-License-Identifier: GPL-2.0
/*
 * Exercise SFRAME_IOC_VERSION through the C header shipped for loader
 * authors: the answer and the extensible-structure rules.
 *
 *   abi-version CASE     exit 0 when CASE behaves as documented
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "sframe-unwind.h"

static int dev;

static int fail(const char *what)
{
	fprintf(stderr, "abi-version: %s\n", what);
	return 1;
}

static int expect_errno(unsigned long cmd, void *arg, int want)
{
	if (ioctl(dev, cmd, arg) != -1)
		return fail("ioctl succeeded but should have failed");
	if (errno != want) {
		fprintf(stderr, "abi-version: errno %d (%s), want %d (%s)\n",
			errno, strerror(errno), want, strerror(want));
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct {
		struct sframe_version v;
		unsigned char tail[40];
	} big;
	struct sframe_version v;
	const char *what = argc > 1 ? argv[1] : "basic";

	dev = open("/dev/sframe", O_RDWR | O_CLOEXEC);
	if (dev < 0) {
		perror("abi-version: open /dev/sframe");
		return 1;
	}

	if (!strcmp(what, "basic")) {
		memset(&v, 0, sizeof(v));
		v.size = sizeof(v);
		if (ioctl(dev, SFRAME_IOC_VERSION, &v))
			return fail("SFRAME_IOC_VERSION failed");
		printf("abi %u module %u.%u.%u features %#llx size %u\n",
		       v.abi_version, v.module_version >> 16,
		       (v.module_version >> 8) & 0xff, v.module_version & 0xff,
		       (unsigned long long)v.features, v.size);
		if (v.abi_version != SFRAME_ABI_VERSION)
			return fail("unexpected ABI version");
		if (!(v.features & SFRAME_FEAT_V2) || !(v.features & SFRAME_FEAT_V3))
			return fail("V2 and V3 features not both reported");
		if (v.size < SFRAME_VERSION_SIZE_VER0)
			return fail("kernel structure smaller than version 0");
		return 0;
	}
	if (!strcmp(what, "too-small")) {
		memset(&v, 0, sizeof(v));
		v.size = SFRAME_VERSION_SIZE_VER0 - 4;
		return expect_errno(SFRAME_IOC_VERSION, &v, EINVAL);
	}
	if (!strcmp(what, "reserved")) {
		memset(&v, 0, sizeof(v));
		v.size = sizeof(v);
		v.reserved = 1;
		return expect_errno(SFRAME_IOC_VERSION, &v, EINVAL);
	}
	if (!strcmp(what, "zero-tail")) {
		memset(&big, 0, sizeof(big));
		big.v.size = sizeof(big);
		if (ioctl(dev, SFRAME_IOC_VERSION, &big))
			return fail("a larger structure with a zero tail was refused");
		if (big.v.abi_version != SFRAME_ABI_VERSION)
			return fail("no answer in a larger structure");
		for (size_t i = 0; i < sizeof(big.tail); i++)
			if (big.tail[i])
				return fail("kernel wrote past its own structure");
		return 0;
	}
	if (!strcmp(what, "nonzero-tail")) {
		memset(&big, 0, sizeof(big));
		big.v.size = sizeof(big);
		big.tail[17] = 1;
		return expect_errno(SFRAME_IOC_VERSION, &big, E2BIG);
	}
	if (!strcmp(what, "bad-pointer"))
		return expect_errno(SFRAME_IOC_VERSION, (void *)16, EFAULT);
	if (!strcmp(what, "unknown-command"))
		return expect_errno(_IOWR(SFRAME_IOC_MAGIC, 0x7f, struct sframe_version), &v, ENOTTY) ||
		       expect_errno(_IOWR('x', 0x00, struct sframe_version), &v, ENOTTY);
	fprintf(stderr, "abi-version: unknown case %s\n", what);
	return 2;
}
