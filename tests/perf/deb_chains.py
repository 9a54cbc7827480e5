#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Count complete callchains in the recording of tests/deb/guest.sh:
`perf record -a -g` over Debian's gzip, on Debian's 7.3 kernel, with the
module from the sframe-unwind-dkms package and the daemon of the
sframectl package started as its systemd unit starts it.

Completeness is judged as tests/perf/daemon_chains.py judges it (the
same code): a sample is complete when its user chain reaches the
program's start (for stripped gzip, the C library's __libc_start_main or
__libc_start_call_main), and the samples taken while the process was
being executed or loaded (no user frame, execve(), ld.so, memory perf
cannot name) are set apart.  What is asserted is issue 26's goal: at
least GOAL of gzip's samples after loading are complete, out of at least
MIN_SAMPLES.

  deb_chains.py check DIR     TAP results for DIR/daemon-g.data
"""

import os
import sys

import daemon_chains

GOAL = 0.98
MIN_SAMPLES = 200
COMM = "gzip"


def check(directory):
    path = os.path.join(directory, "daemon-g.data")
    if not os.path.exists(path):
        print(f"not ok 1 - deb: {path} exists")
        return False
    by_comm, count = daemon_chains.by_program(path)
    # The unit runs the daemon without -v: no registration times, so no
    # sample is set apart as the daemon's delay.
    complete, total, load, _, ends = daemon_chains.tally(by_comm[COMM], {})
    rest = total - load
    print(f"# {count} samples in all; {COMM}: {complete}/{total} reach the start "
          f"({100 * complete / max(total, 1):.1f}%), {load} while loading; after "
          f"loading {complete}/{rest} ({100 * complete / max(rest, 1):.1f}%)")
    ok = total >= MIN_SAMPLES and complete >= GOAL * rest
    print(f"{'ok' if ok else 'not ok'} 1 - deb: perf record -a -g, {COMM}: >= "
          f"{100 * GOAL:.0f}% of at least {MIN_SAMPLES} samples after loading are "
          f"complete ({complete}/{rest})")
    for end, n in ends.most_common(3 if ok else 8):
        print(f"#   incomplete, ends {end}: {n}")
    return ok


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "check":
        sys.exit(0 if check(sys.argv[2]) else 1)
    sys.exit(__doc__)


if __name__ == "__main__":
    main()
