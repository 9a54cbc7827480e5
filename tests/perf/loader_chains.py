#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Complete callchains through libsfwork.so in the recordings of
tests/guest/50-loader.sh (dlwork under sframectl run, perf record -g), and
through the 50 libraries of manylibs (manylibs chain, -g and fp,defer).

  loader_chains.py check DIR [NAME...]
      TAP results for DIR/NAME.data (dlopen, reopen, pid, many-g and
      many-defer by default)

Counts the samples whose user leaf is in the library (sfwork_inner,
sfwork_middle, sfwork_outer) and, of those, the ones whose chain goes on
through the library's callers to dlwork's run_work and main, in order:
at least MIN_PERCENT of at least MIN_SAMPLES must be.  For manylibs: the
samples whose leaf is a link of the chain (many_link_NN, in libmanyNN.so),
whose chain goes on through every link before it, in order, to main: a walk
across 51 objects, more than the deferred walk keeps parsed at once.  Run on the host,
in the guest's root (perf script is slow under TCG; an arm64 guest's
recordings as chains.py says).
"""

import os
import sys

from own_chains import chains

LIB = ["sfwork_inner", "sfwork_middle", "sfwork_outer"]
CALLERS = ["run_work", "main"]
MIN_PERCENT = 90
MIN_SAMPLES = 20
RECORDINGS = {
    "dlopen": "complete chains through the dlopen()ed library",
    "reopen": "complete chains after the re-dlopen",
    "pid": "complete chains after register --pid",
}
MANY = {
    "many-g": "complete chains through 50 libraries, -g",
    "many-defer": "complete chains through 50 libraries, --call-graph fp,defer",
}
LINKS = [f"many_link_{i:02d}" for i in range(1, 51)]


def complete(chain):
    """Leaf in the library, then its callers in order, then run_work, main."""
    if chain[0] not in LIB:
        return None
    expect = LIB[LIB.index(chain[0]):] + CALLERS
    return chain[:len(expect)] == expect


def complete_many(chain):
    """Leaf in a link of manylibs' chain, then every link before it, then
    main."""
    if chain[0] not in LINKS:
        return None
    expect = LINKS[:LINKS.index(chain[0]) + 1][::-1] + ["main"]
    return chain[:len(expect)] == expect


def check(directory, names):
    failed = 0
    for n, name in enumerate(names, 1):
        many = name in MANY
        path = os.path.join(directory, name + ".data")
        good = total = 0
        if os.path.exists(path):
            verdicts = [v for v in map(complete_many if many else complete, chains(path))
                        if v is not None]
            good, total = sum(verdicts), len(verdicts)
        ok = total >= MIN_SAMPLES and 100 * good >= MIN_PERCENT * total
        failed += not ok
        where = "in the chain's links" if many else "in libsfwork.so"
        print(f"{'ok' if ok else 'not ok'} {n} - loader: {MANY.get(name) or RECORDINGS.get(name, name)}: "
              f">= {MIN_PERCENT}% of at least {MIN_SAMPLES} samples {where} "
              f"({good}/{total})")
    return 1 if failed else 0


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "check":
        return check(sys.argv[2], sys.argv[3:] or list(RECORDINGS) + list(MANY))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
