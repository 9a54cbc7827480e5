#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Where the module's instructions go per exec: scripts/bench-idle's
BENCH_PROFILE=1 records an exec loop with `perf record -g -e cpu-clock`
under -icount (1 ns is one instruction) and saves `perf script -F
comm,ip,sym`.  This reads that output and prints, per exec, the
instructions of the samples under each of the module's entry points (the
outermost frame of the module in a sample's stack: its task work, its
unmap watch, its probes) and, under the heaviest entries, the functions
the samples were in, Rust names demangled as frame_cost.py does.

    exec_profile.py SCRIPT[.gz] EXECS PERIOD_NS
"""

import collections
import gzip
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from frame_cost import demangle, short_name  # noqa: E402


def stacks(lines):
    """The samples of `perf script -F comm,ip,sym` output: each a list of
    symbols, innermost first."""
    cur = None
    for line in lines:
        if not line.strip():
            if cur:
                yield cur
            cur = None
        elif not line[0].isspace():
            cur = []
        elif cur is not None:
            parts = line.split(None, 1)
            cur.append(parts[1].strip() if len(parts) > 1 else "?")
    if cur:
        yield cur


def ours(sym):
    """A symbol of the module: its Rust functions (mangled with the crate's
    name) and its C side (sframe_*)."""
    return "13sframe_unwind" in sym or sym.startswith("sframe_")


def label(sym, names):
    """SYM as frame_cost.py names a function (its path's last components),
    with its generic argument for a generic one: the ftrace callback is
    told apart by the hook it runs."""
    full = names.get(sym, sym)
    name = short_name(full)
    generic = re.search(r"<([^<>]*)>$", full)
    return f"{name}<{short_name(generic.group(1))}>" if generic else name


def summarize(samples, execs, period):
    """(instructions per exec in all, [(entry, per exec, [(leaf, per
    exec)])]) for the module's entry points, heaviest first."""
    per = period / execs
    entries = collections.Counter()
    leaves = collections.defaultdict(collections.Counter)
    total = 0
    for s in samples:
        total += 1
        mine = [f for f in s if ours(f)]
        if mine:
            entries[mine[-1]] += 1
            leaves[mine[-1]][s[0]] += 1
    names = demangle(set(entries) | {leaf for c in leaves.values() for leaf in c})
    rows = [(label(e, names), n * per,
             [(label(l, names), m * per) for l, m in leaves[e].most_common(8)])
            for e, n in entries.most_common()]
    return total * per, rows


def main(argv):
    if len(argv) != 4:
        sys.exit(__doc__)
    path, execs, period = argv[1], int(argv[2]), int(argv[3])
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", errors="replace") as f:
        total, rows = summarize(stacks(f), execs, period)
    module = sum(n for _, n, _ in rows)
    print(f"  per exec: {total:,.0f} instructions in all, {module:,.0f} under the module")
    for entry, n, under in rows:
        print(f"  {n:9,.0f}  {entry}")
        if n >= module / 10:
            for leaf, m in under:
                print(f"  {'':9} {m:9,.0f}  {leaf}")


if __name__ == "__main__":
    main(sys.argv)
