#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Where the module's instructions go per exec: scripts/bench-idle's
BENCH_PROFILE=1 records an exec loop with `perf record -g -e cpu-clock`
under -icount (1 ns is one instruction) and saves `perf script -F
comm,ip,sym`.  This reads that output and prints, per exec, the
instructions of the samples under each of the module's entry points (the
outermost frame of the module in a sample's stack: its task work, its
unmap watch, its probes) and, under the heaviest entries, the functions
the samples were in.

    exec_profile.py SCRIPT[.gz] EXECS PERIOD_NS
"""

import collections
import gzip
import re
import sys


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


def short(sym):
    """A v0-mangled Rust name (perf may show it cut at its start) as the
    last identifiers of its path, else the name."""
    if "13sframe_unwind" not in sym and not sym.startswith("_R"):
        return sym
    names = []
    i = 0
    while i < len(sym):
        # A back-reference (B<base-62>_), a disambiguator (s<base-62>_) or
        # a crate's (Cs<base-62>_): no identifier.
        skip = re.match(r"(?:B|s|Cs)[0-9A-Za-z]*_", sym[i:])
        if skip and (sym[i] != "s" or sym[i + 1:i + 2] in list("0123456789_")):
            i += len(skip.group())
            continue
        m = re.match(r"\d+", sym[i:])
        if not m or (i > 0 and sym[i - 1].isdigit()):
            i += 1
            continue
        n, start = int(m.group()), i + len(m.group())
        ident = sym[start:start + n]
        if n > 0 and len(ident) == n and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", ident):
            names.append(ident)
            i = start + n
        else:
            i = start
    return "::".join(names[-3:]) or sym


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
    rows = [(short(e), n * per, [(short(l), m * per) for l, m in leaves[e].most_common(8)])
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
