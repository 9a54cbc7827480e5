#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Complete callchains of one program's own code, per process name.

  own_chains.py share PERF.DATA COMM PREFIX ROOT
      "complete total": of the samples of processes named COMM whose user
      leaf is a function named PREFIX* (the program's own code), those
      whose chain goes on through PREFIX* functions only and ends at ROOT.
  own_chains.py lifecycle DIR [NAME...]
      TAP results for the recordings tests/guest/35-lifecycle.sh left in DIR
      (or for DIR/NAME.data only: the arm64 guest has no module-defer).

Run on the host, in the x86-64 guest root (perf script is slow under
TCG), for the arm64 guest's recordings too (see chains.py).
"""

import os
import sys

from chains import FRAME, perf_script


def symbol(text):
    """The function name: no +offset, no .constprop/.isra clone suffix."""
    return text.split("+")[0].split(".")[0]


def chains(data, comm=None):
    """Each sample's user frames (function names, leaf first) of COMM, or
    of every process."""
    out = perf_script(data, "-F", "comm,ip,sym,dso", "--no-inline")
    chain, ours = [], False
    for line in out.splitlines() + [""]:
        m = FRAME.match(line)
        if m:
            if ours and "[kernel" not in m.group(3):
                chain.append(symbol(m.group(2)))
            continue
        if chain:
            yield chain
        chain = []
        fields = line.split()
        ours = bool(fields) and comm in (None, fields[0])


def complete(chain, prefix, root):
    """None if the leaf is not the program's; else whether it reaches root."""
    if not chain or not chain[0].startswith(prefix):
        return None
    for name in chain:
        if name == root:
            return True
        if not name.startswith(prefix):
            return False
    return False


def share(data, comm, prefix, root):
    verdicts = [v for v in (complete(c, prefix, root) for c in chains(data, comm))
                if v is not None]
    return sum(verdicts), len(verdicts)


# tests/progs/lifecycle: its processes' names (comm: 15 characters at
# most), its functions, and what each recording of 35-lifecycle must show.
STATIC, DYNAMIC, WORKER = "lifecycle-stati", "lifecycle", "lc-worker"
COMPLETE, BROKEN = 99, 50
MIN_SAMPLES = 50
EXPECT = [
    ("base", "without the module", [(STATIC, False), (WORKER, False)]),
    ("module-g", "-g", [(STATIC, True), (DYNAMIC, True), (WORKER, True)]),
    ("module-defer", "fp,defer", [(STATIC, True), (DYNAMIC, True), (WORKER, True)]),
    ("exec-off", "exec registration off", [(STATIC, False)]),
    ("fork-off", "fork inheritance off", [(WORKER, False)]),
]
WHAT = {STATIC: "static program", DYNAMIC: "dynamic program (own frames)",
        WORKER: "pre-forked workers"}


def lifecycle(directory, names=()):
    n = failed = 0
    for name, label, checks in EXPECT:
        if names and name not in names:
            continue
        path = os.path.join(directory, name + ".data")
        for comm, want in checks:
            n += 1
            good, total = share(path, comm, "spin_", "main") if os.path.exists(path) else (0, 0)
            if want:
                ok = total >= MIN_SAMPLES and 100 * good >= COMPLETE * total
                claim = f">= {COMPLETE}% complete"
            else:
                ok = total >= MIN_SAMPLES and 100 * good < BROKEN * total
                claim = "chains broken"
            failed += not ok
            print(f"{'ok' if ok else 'not ok'} {n} - lifecycle: {label}: {WHAT[comm]}: "
                  f"{claim} ({good}/{total})")
    return 1 if failed else 0


def main():
    if len(sys.argv) == 6 and sys.argv[1] == "share":
        print(*share(*sys.argv[2:6]))
        return 0
    if len(sys.argv) >= 3 and sys.argv[1] == "lifecycle":
        return lifecycle(sys.argv[2], tuple(sys.argv[3:]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
