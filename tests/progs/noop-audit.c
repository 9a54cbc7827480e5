// SPDX-License-Identifier: GPL-2.0
/*
 * libnoop-audit.so: an LD_AUDIT library that does nothing, the baseline
 * for what sframe-audit.so adds to start-up (tests/guest/50-loader.sh):
 * loading any auditor costs a loader namespace and a second libc.
 */
#include <link.h>

unsigned int la_version(unsigned int version)
{
	return version;
}
