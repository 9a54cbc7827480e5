#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Count complete callchains in the system-wide recordings of
tests/guest/55-daemon.sh: `perf record -a` with `sframectl daemon` running
and no wrapper, over programs started after the daemon.

  sframe-workload   the project's SFrame test program (threads, a
                    shared library, a signal handler)
  dlwork            the dlopen() program: a library opened and closed 50
                    times, then opened late and worked in
  gzip              Debian's own, stripped
  od, sort          a shell pipeline of Debian's programs

A sample is complete when its user chain reaches the program's start:
main, the thread start routine, or for stripped programs the C library's
__libc_start_main / start_thread (their outermost named frames).  Every
sample of the program counts, whatever its leaf; the share is also given
without the incomplete samples taken while the process was being executed
or loaded (no user frame, execve(), a frame in ld.so or in memory perf
cannot name): the dynamic loader's own work never reaches main, and under
TCG it is hundreds of milliseconds of each program.

A new process's objects are registered by the daemon once it has read
their mmap records: until then, a chain through them breaks, as without
the daemon.  The daemon runs with -v, whose log (DIR/daemon.log) gives
the CLOCK_MONOTONIC time of each registration, and the recordings are
made with that clock (perf record -k CLOCK_MONOTONIC): an incomplete
sample taken before the daemon registered, for its process, one of the
objects its chain passes through is counted apart, as the daemon's
delay.  Any other incomplete sample is the unwinder's.

Issue 15's goal is >= 98% of all samples of each program that runs for
2 s or more.  What is asserted, for programs with at least MIN_SAMPLES
samples: GOAL_REGISTERED of the samples outside loading and the daemon's
delay, and the delay's samples under MAX_DELAYED of those outside
loading (a daemon that lags always fails).  The all-samples share is
printed against the goal.  Without the daemon (module loaded), the
chains of the programs that have no .sframe of their own stay broken
(under BASE_MAX).

make stress adds long-g.data and long-defer.data: the same programs
doing 20 times the work (about 40 s each under TCG), where start-up is a
smaller part of a program's life.  Their shares of all samples are
printed against the issue's GOAL, as figures (the samples outside
loading are checked as for the others).

  daemon_chains.py check DIR [CONFIG...]
                                 TAP results for DIR/CONFIG.data (every
                                 configuration, or those named: the arm64
                                 guest has no daemon-defer)
  daemon_chains.py figures DIR   a table of the complete shares and bytes
                                 per sample of DIR/{base-g,daemon-g,
                                 daemon-defer,dwarf}.data (scripts/bench-daemon)
"""

import collections
import os
import re
import sys

import chains

# comm: (what, broken without the daemon?)
PROGRAMS = {
    "sframe-workload": ("the SFrame test program", False),
    "dlwork": ("the dlopen() program", True),
    "gzip": ("Debian's gzip -9", True),
    "od": ("pipeline: od", True),
    "sort": ("pipeline: sort", True),
}
ROOTS = {"main", "thread_start", "__libc_start_main", "__libc_start_call_main",
         "start_thread"}
# arm64 (recordings whose header says aarch64): Debian's libc and programs
# keep their frame records (AArch64 GCC's default), and code built with
# -fomit-frame-pointer leaves x29 alone, so a frame-pointer walk from a
# leaf of ours jumps straight to libc's start frames (the first arm64
# run, without the daemon: "sfwork_inner <- sfwork_middle <-
# __libc_start_main <- _start" in 1916 of dlwork's 2262 samples).  There
# a chain of a program with symbols must reach its own main or thread
# start; and Debian's programs' chains are whole without the daemon
# (gzip, od, sort: 98.4%, 99.6%, 97.1% outside loading), so "broken
# without it" is no check for them.
# (arm64: recordings whose header says aarch64.)
OWN_ROOTS = {"main", "thread_start"}
SYMBOLS = ("sframe-workload", "dlwork")
DEBIANS = ("gzip", "od", "sort")


def roots(comm, arm64):
    """The frames that end a complete chain of COMM's (recorded on arm64)."""
    return OWN_ROOTS if arm64 and comm in SYMBOLS else ROOTS
CONFIGS = ("daemon-g", "daemon-defer", "base-g")
# make stress only: long runs, with the daemon.
LONG = ("long-g", "long-defer")
GOAL = 0.98
# Measured 94.2-100% over three runs on 2026-12-04 (sframe-workload under
# fp,defer the lowest: single frames in libc perf cannot name, _start,
# _init); the unwinder's own share, with the daemon's delay apart.
GOAL_REGISTERED = 0.90
# Measured up to 27% (od, fp,defer) in a run whose daemon lagged 0.4 s at
# the median, 5.7 s at p99.
MAX_DELAYED = 0.5
BASE_MAX = 0.5
MIN_SAMPLES = 200


def loading(frames):
    """Whether an incomplete chain is the process being executed or loaded:
    no user frame, the old program's execve() (comm already changed), a
    frame in ld.so, or an outermost frame in memory perf cannot name."""
    return (not frames or frames[-1][0] == "execve" or frames[-1][1] == "[unknown]" or
            any(dso.startswith("ld-linux") for _, dso in frames))


REGISTERED = re.compile(r"^sframectl daemon: process (\d+): registered (.+): "
                        r"text 0x[0-9a-f]+-0x[0-9a-f]+ at (\d+)\.(\d{9})$")


def registrations(log):
    """{(pid, object file name): CLOCK_MONOTONIC ns of the first
    registration} from the daemon's -v log LOG."""
    first = {}
    if not os.path.exists(log):
        return first
    with open(log, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = REGISTERED.match(line.rstrip("\n"))
            if m:
                key = (int(m.group(1)), os.path.basename(m.group(2)))
                ns = int(m.group(3)) * 10**9 + int(m.group(4))
                first[key] = min(first.get(key, ns), ns)
    return first


def unregistered(pid, time, frames, registered):
    """Whether one of the objects of an incomplete chain was registered by
    the daemon for its process only after the sample: the chain broke
    where the daemon had not caught up yet."""
    return any(registered.get((pid, dso), 0) > time for _, dso in frames)


def tally(samples, registered, ends_at=ROOTS):
    """Of SAMPLES (pid, time, frames): the complete ones (reaching a frame
    of ENDS_AT), all, the incomplete ones while loading, the other
    incomplete ones taken before the daemon registered an object of their
    chain (from REGISTERED, see registrations()), and what the incomplete
    chains end with."""
    complete = total = load = early = 0
    ends = collections.Counter()
    for pid, time, frames in samples:
        total += 1
        if any(sym.split(".")[0] in ends_at for sym, _ in frames):
            complete += 1
            continue
        if loading(frames):
            load += 1
        elif unregistered(pid, time, frames, registered):
            early += 1
        ends[" <- ".join(f"{s} ({d})" for s, d in frames[-2:]) or "(no user frame)"] += 1
    return complete, total, load, early, ends


def by_program(path):
    """The samples of PROGRAMS in the recording PATH, by command, as (pid,
    time, user frames as (sym, object file name)); and how many samples it
    holds in all."""
    by_comm = collections.defaultdict(list)
    count = 0
    for comm, pid, time, frames in chains.script_samples(path, timed=True):
        count += 1
        if comm in PROGRAMS:
            by_comm[comm].append((pid, time, [(sym, os.path.basename(dso)) for sym, dso in frames]))
    return by_comm, count


def check(directory, configs=CONFIGS):
    n = failed = 0

    def result(ok, name):
        nonlocal n, failed
        n += 1
        failed += not ok
        print(f"{'ok' if ok else 'not ok'} {n} - daemon: {name}")

    registered = registrations(os.path.join(directory, "daemon.log"))
    for config in configs + LONG:
        path = os.path.join(directory, f"{config}.data")
        if not os.path.exists(path):
            if config not in LONG:
                result(False, f"{config}: recording exists")
            continue
        by_comm, _ = by_program(path)
        arm64 = chains.arm64(path)
        for comm, (what, broken) in PROGRAMS.items():
            complete, total, load, early, ends = tally(by_comm[comm], registered,
                                                       roots(comm, arm64))
            rest = total - load
            share = complete / max(total, 1)
            print(f"# {config} {comm}: {complete}/{total} samples reach the start "
                  f"({100 * share:.1f}%); {load} while loading; of the others "
                  f"{complete}/{rest} ({100 * complete / max(rest, 1):.1f}%); "
                  f"{early} before the daemon registered an object of their chain, "
                  f"without them {complete}/{rest - early} "
                  f"({100 * complete / max(rest - early, 1):.1f}%)")
            if config.startswith("base"):
                if broken and arm64 and comm in DEBIANS:
                    result(True, f"{config}: {what}: without the daemon, chains broken "
                                 f"({complete}/{total}) # SKIP Debian's arm64 programs keep "
                                 f"frame records")
                elif broken:
                    result(total >= MIN_SAMPLES and share < BASE_MAX,
                           f"{config}: {what}: without the daemon, chains broken "
                           f"({complete}/{total})")
                continue
            if total < MIN_SAMPLES:
                result(False, f"{config}: {what}: at least {MIN_SAMPLES} samples ({total})")
                continue
            goal = "met" if share >= GOAL else "not met"
            print(f"# {config} {comm}: issue goal >= {100 * GOAL:.0f}% of all samples: "
                  f"{goal} ({100 * share:.1f}%)")
            ok = complete >= GOAL_REGISTERED * (rest - early) and early <= MAX_DELAYED * rest
            result(ok, f"{config}: {what}: >= {100 * GOAL_REGISTERED:.0f}% of the samples "
                       f"outside loading and the daemon's delay reach the start "
                       f"({complete}/{rest - early}; delay {early} of {rest}, at most "
                       f"{100 * MAX_DELAYED:.0f}%)")
            for end, count in ends.most_common(3 if ok else 6):
                print(f"#   incomplete, ends {end}: {count}")
    return failed == 0


def figures(directory):
    """Prints, per recording and program, the complete share of all
    samples and of those outside loading, and each recording's bytes per
    sample (of all its samples, every process's)."""
    for config in ("base-g", "daemon-g", "daemon-defer", "dwarf"):
        path = os.path.join(directory, f"{config}.data")
        if not os.path.exists(path):
            continue
        by_comm, count = by_program(path)
        arm64 = chains.arm64(path)
        print(f"{config}: {os.path.getsize(path) / max(count, 1):.0f} bytes per sample "
              f"({count} samples)")
        for comm in PROGRAMS:
            complete, total, load, _, _ = tally(by_comm[comm], {}, roots(comm, arm64))
            print(f"  {comm:16} {100 * complete / max(total, 1):5.1f}% of {total:5} samples, "
                  f"{100 * complete / max(total - load, 1):5.1f}% outside loading")


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "check":
        sys.exit(0 if check(sys.argv[2], tuple(sys.argv[3:]) or CONFIGS) else 1)
    if len(sys.argv) == 3 and sys.argv[1] == "figures":
        figures(sys.argv[2])
        return
    sys.exit(__doc__)


if __name__ == "__main__":
    main()
