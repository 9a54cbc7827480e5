// SPDX-License-Identifier: GPL-2.0
/*
 * libnoop-audit.so: an LD_AUDIT library that does nothing, the baseline
 * for what sframe-audit.so adds to start-up (scripts/bench-loader,
 * scripts/bench-startup).  Built as it is, it needs no other object: the
 * loader adds only a namespace for it.  Linked with -Wl,--no-as-needed
 * -lc, the loader also loads and initialises a second libc in that
 * namespace, as it does for every auditor that calls libc.
 */
#include <link.h>

unsigned int la_version(unsigned int version)
{
	return version;
}
