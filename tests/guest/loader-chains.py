#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Share of complete callchains through libsfwork.so in a perf recording.

  loader-chains.py PERF.DATA MIN_PERCENT [MIN_SAMPLES]

Counts the samples whose user leaf is in the library (sfwork_inner,
sfwork_middle, sfwork_outer) and, of those, the ones whose chain goes on
through the library's callers to dlwork's run_work and main, in order.
Prints "complete/total" and exits 0 if at least MIN_PERCENT are complete
(and there are at least MIN_SAMPLES samples).
"""

import re
import subprocess
import sys

LIB = ["sfwork_inner", "sfwork_middle", "sfwork_outer"]
CALLERS = ["run_work", "main"]
FRAME = re.compile(r"^\s+([0-9a-f]+)\s+(.*?)\s+\((.*)\)\s*$")


def symbol(text):
    """The function name: no +offset, no .constprop/.isra clone suffix."""
    return text.split("+")[0].split(".")[0]


def samples(data):
    out = subprocess.run(["perf", "script", "-i", data, "-F", "comm,ip,sym,dso", "--no-inline"],
                         capture_output=True, text=True, check=True).stdout
    chain = []
    for line in out.splitlines() + [""]:
        m = FRAME.match(line)
        if m:
            if "[kernel" not in m.group(3):
                chain.append(symbol(m.group(2)))
        elif chain:
            yield chain
            chain = []


def complete(chain):
    """Leaf in the library, then its callers in order, then run_work, main."""
    if chain[0] not in LIB:
        return None
    expect = LIB[LIB.index(chain[0]):] + CALLERS
    return chain[:len(expect)] == expect


def main():
    data, min_pct = sys.argv[1], float(sys.argv[2])
    min_samples = int(sys.argv[3]) if len(sys.argv) > 3 else 20
    verdicts = [v for v in map(complete, samples(data)) if v is not None]
    good, total = sum(verdicts), len(verdicts)
    print(f"{good}/{total} samples in libsfwork.so have complete chains")
    if total < min_samples:
        print(f"too few samples (< {min_samples})")
        return 1
    return 0 if 100 * good >= min_pct * total else 1


if __name__ == "__main__":
    sys.exit(main())
