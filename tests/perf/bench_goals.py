#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The cost goals of issue 25, from the latest output of each benchmark:
one table, each figure with the goal, whether it is met, the command that
measures it and when it last ran.  scripts/bench prints it at its end.

  bench_goals.py OUT_DIR       ($SFRAME_CACHE/out)

A benchmark that has not run (on that kernel, for that architecture) gets
a row saying so and how to run it.  Figures are read from the reports the
benchmarks write (report.txt, results.txt, lookup.csv); nothing here
measures.
"""

import csv
import datetime
import os
import re
import sys

# Where each benchmark ran: the suffix of its output directory and the
# options that select it.
PLACES = (
    ("", "test kernel, x86-64", ""),
    ("-debian-7.3", "Debian 7.3, x86-64", " --kernel debian-7.3"),
    ("-arm64", "test kernel, arm64", " --arch arm64"),
    ("-debian-7.3-arm64", "Debian 7.3, arm64", " --arch arm64 --kernel debian-7.3"),
)
X86_PLACES = PLACES[:2]


class Row:
    """One figure: what, where, the value shown, the goal and whether the
    value meets it (None: no value)."""

    def __init__(self, measure, where, now, goal, met, command, when):
        self.measure, self.where, self.now, self.goal = measure, where, now, goal
        self.met, self.command, self.when = met, command, when


def ratio(text):
    """A figure such as '2.34x' as a float; None for '-' or anything else."""
    m = re.fullmatch(r"(-?[0-9]+(?:\.[0-9]+)?)x", text.strip())
    return float(m.group(1)) if m else None


def read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def when(path):
    try:
        t = os.path.getmtime(path)
    except OSError:
        return ""
    return datetime.datetime.fromtimestamp(t).strftime("%Y-%m-%d %H:%M")


def at_most(value, goal):
    return None if value is None else value <= goal


def at_least(value, goal):
    return None if value is None else value >= goal


def judge_pair(pair, goal):
    """The verdict on a slowdown pair (-F 1000, -F 10000), judged at
    -F 10000; none where a ratio is missing or not positive (a slowdown
    that came out negative: a run on the host's clock, not -icount)."""
    if not pair or any(v is None or v <= 0 for v in pair):
        return None
    return at_most(pair[1], goal)


def unwind_rows(out):
    """scripts/bench-unwind: the workload's slowdown, module and no-FP
    build over the stock kernel and the FP build, by call graph, rate and
    depth."""
    rows = []
    for suffix, where, opts in PLACES:
        path = os.path.join(out, "bench-unwind" + suffix, "report.txt")
        command = "SFRAME_TCG_ICOUNT=0 scripts/bench-unwind" + opts
        text = read(path)
        found = {}
        for name, key in (("-g", "g"), ("fp,defer", "defer")):
            m = text and re.search(
                rf"^\s*{re.escape(name)}: the module's slowdown over the stock kernel's frame "
                r"pointers: (\S+) at -F 1000, (\S+) at -F 10000", text, re.M)
            if m:
                found[key] = (ratio(m.group(1)), ratio(m.group(2)))
        m = text and re.search(
            r"^\s*-F 10000: the module's slowdown over the stock kernel's frame pointers: "
            r"10 frames (\S+), 30 frames (\S+), 100 frames (\S+)", text, re.M)
        depth = [ratio(g) for g in m.groups()] if m else None
        stamp = when(path)
        g = found.get("g")
        rows.append(Row("-g slowdown ÷ stock kernel's FP, -F 1000 / 10000", where,
                        fmt_pair(g), "≤ 1.5x", judge_pair(g, 1.5), command, stamp))
        if depth:
            rows.append(Row("-g slowdown at 10, 30, 100 frames, -F 10000", where,
                            ", ".join(fmt(d) for d in depth), "(reported)", None, command, stamp))
        if "arm64" not in suffix:
            d = found.get("defer")
            rows.append(Row("fp,defer slowdown ÷ stock fp,defer, -F 1000 / 10000", where,
                            fmt_pair(d), "≤ 1.5x", judge_pair(d, 1.5), command, stamp))
    return rows


def frame_cost_rows(out):
    """scripts/bench-frame-cost: instructions per frame against perf's own
    walk, and the workload walk's p99 over its p50."""
    rows = []
    for suffix, where, opts in PLACES:
        path = os.path.join(out, "bench-frame-cost" + suffix, "report.txt")
        command = "SFRAME_TCG_ICOUNT=0 scripts/bench-frame-cost" + opts
        text = read(path) or ""
        stamp = when(path)
        # The first of these lines is the per-frame ratio (the per-sample
        # ones carry a ratio per depth).
        m = re.search(r"^\s+the module's SFrame walk, no-FP build\s+([0-9.]+x)\s*$", text, re.M)
        g = ratio(m.group(1)) if m else None
        rows.append(Row("instructions per SFrame frame ÷ perf's own, -g", where, fmt(g),
                        "≤ 1.5x", at_most(g, 1.5), command, stamp))
        if "arm64" not in suffix:
            m = re.search(r"^\s+the module's deferred SFrame walk, no-FP build\s+([0-9.]+x)\s*$",
                          text, re.M)
            d = ratio(m.group(1)) if m else None
            rows.append(Row("instructions per SFrame frame ÷ perf's own, fp,defer", where, fmt(d), "≤ 1.5x", at_most(d, 1.5),
                            command, stamp))
        m = re.search(r"^\s+the module's SFrame walk, sframe-workload \(-F 1000\)"
                      r"\s+\d+\s+(\d+)\s+(\d+)\s+\d+\s+([0-9.]+x)", text, re.M)
        p = ratio(m.group(3)) if m else None
        now = f"{fmt(p)} ({m.group(1)} / {m.group(2)})" if m else fmt(None)
        rows.append(Row("sframe-workload walk p99 ÷ p50 (instructions)", where, now, "≤ 2x",
                        at_most(p, 2.0), command, stamp))
        # Not a goal: perf's own walk of the same workload's frame-pointer
        # build, for reference.  The workload's phases walk chains of
        # different depths, so a p99 and a p50 are walks of different
        # lengths; the ratio says as much about that mix as about a walk.
        m = re.search(r"^\s+perf's own walk, sframe-workload-fp \(-F 1000\)"
                      r"\s+\d+\s+(\d+)\s+(\d+)\s+\d+\s+([0-9.]+x)", text, re.M)
        if m:
            own = ratio(m.group(3))
            rows.append(Row("  (perf's own walk of the same workload, FP build)", where,
                            f"{fmt(own)} ({m.group(1)} / {m.group(2)})", "-", None, command,
                            stamp))
    return rows


def idle_rows(out):
    """scripts/bench-idle: fork-, exec- and mmap-heavy work, module loaded
    and nobody profiling, against the module not loaded."""
    rows = []
    for suffix, where, opts in X86_PLACES:
        path = os.path.join(out, "bench-idle" + suffix, "report.txt")
        text = read(path) or ""
        m = re.search(r"^\s+all\s+\d+ us\s+\d+ us\s+([0-9.]+x)", text, re.M)
        r = ratio(m.group(1)) if m else None
        rows.append(Row("fork+exec+mmap work, module loaded ÷ not", where, fmt(r, 3), "≤ 1.01x",
                        at_most(r, 1.01), "SFRAME_TCG_ICOUNT=0 scripts/bench-idle" + opts,
                        when(path)))
    return rows


def startup_rows(out):
    """scripts/bench-startup: gzip -1 of a small file under the audit
    library, against gzip alone (CPU time)."""
    rows = []
    for suffix, where, opts in X86_PLACES:
        path = os.path.join(out, "bench-startup" + suffix, "results.txt")
        command = "SFRAME_TCG_ICOUNT=0 scripts/bench-startup" + opts
        us = {}
        for line in (read(path) or "").splitlines():
            f = line.split()
            if len(f) >= 2 and f[1].isdigit():
                us[f[0]] = int(f[1])
        plain = us.get("plain")
        stamp = when(path)

        def over(key, wrapped):
            if not plain or key not in us:
                return None
            # A variant with-env starts: less with-env's own run.
            extra = us["wrapped"] - plain if wrapped and "wrapped" in us else 0
            return (us[key] - extra) / plain

        audit = over("audit", True)
        note = "" if "wrapped" in us or audit is None else " (env counted)"
        rows.append(Row("start-up, LD_AUDIT, warm cache ÷ plain", where, fmt(audit) + note,
                        "≤ 1.1x", at_most(audit, 1.1), command, stamp))
        # Not a goal: what any auditor that calls libc costs (the loader
        # loads a second libc for it), below which ours cannot go.
        floor = over("noop-libc", True)
        rows.append(Row("  (floor: a no-op LD_AUDIT library with libc)", where, fmt(floor), "-",
                        None, command, stamp))
        warm = over("warm", False)
        rows.append(Row("start-up, sframectl run, warm cache ÷ plain", where, fmt(warm), "≤ 1.1x",
                        at_most(warm, 1.1), command, stamp))
        cold = over("system", False)
        rows.append(Row("start-up, sframectl run, first after install ÷ plain", where, fmt(cold),
                        "≤ 2x", at_most(cold, 2.0), command, stamp))
        audit_cold = over("audit-system", True)
        rows.append(Row("start-up, LD_AUDIT, first after install ÷ plain", where,
                        fmt(audit_cold), "≤ 2x", at_most(audit_cold, 2.0), command, stamp))
    return rows


def decoder_rows(out):
    """scripts/bench-decoder: ns per lookup of libsframe over ours (the
    row table), on the host."""
    path = os.path.join(out, "bench-decoder", "lookup.csv")
    command = "sudo scripts/bench-decoder"
    ns = {}
    text = read(path)
    if text:
        lines = [line for line in text.splitlines() if not line.startswith("#")]
        table = list(csv.reader(lines))
        if table:
            versions = table[0][1:]
            for r in table[1:]:
                for v, cell in zip(versions, r[1:]):
                    try:
                        ns[(r[0], v)] = float(cell)
                    except ValueError:
                        pass
    rows = []
    for version, goal in (("SFrame V2", 2.0), ("SFrame V3", 3.0)):
        ours = next((n for (name, v), n in ns.items() if v == version and "row table" in name),
                    None)
        theirs = next((n for (name, v), n in ns.items() if v == version and "libsframe" in name),
                      None)
        r = theirs / ours if ours and theirs else None
        rows.append(Row(f"decoder lookup, libsframe ÷ ours, {version[7:]}", "host", fmt(r),
                        f"≥ {goal:g}x", at_least(r, goal), command, when(path)))
    return rows


def fmt(value, digits=2):
    return "-" if value is None else f"{value:.{digits}f}x"


def fmt_pair(pair):
    if not pair:
        return "-"
    text = f"{fmt(pair[0])} / {fmt(pair[1])}"
    if any(v is not None and v <= 0 for v in pair):
        text += " (not -icount?)"
    return text


def by_measure(rows):
    """`rows` with each measure's rows together (every place), measures
    in the order they first come."""
    order = {}
    for r in rows:
        order.setdefault(r.measure, len(order))
    return sorted(rows, key=lambda r: order[r.measure])


def goal_rows(out):
    rows = []
    for bench in (unwind_rows, frame_cost_rows, idle_rows, startup_rows, decoder_rows):
        rows += by_measure(bench(out))
    return rows


def render(rows):
    """The table, one row per figure; a figure not measured says how."""
    lines = []
    heads = ("measure", "where", "now", "goal", "")
    cells = []
    for r in rows:
        status = {True: "met", False: "not met", None: ""}[r.met]
        now = r.now if r.when else "not run"
        cells.append((r.measure, r.where, now, r.goal, status))
    widths = [max(len(c[i]) for c in cells + [heads]) for i in range(len(heads))]
    lines.append("  ".join(h.ljust(w) for h, w in zip(heads, widths)).rstrip())
    for c in cells:
        lines.append("  ".join(x.ljust(w) for x, w in zip(c, widths)).rstrip())
    lines.append("")
    lines.append("commands (latest run of each):")
    seen = set()
    for r in rows:
        if r.command in seen:
            continue
        seen.add(r.command)
        lines.append(f"  {r.when or 'not run':<16}  {r.command}")
    return "\n".join(lines)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: bench_goals.py OUT_DIR")
    try:
        print("Issue 25's cost goals, from the latest output of each benchmark "
              f"({sys.argv[1]}):")
        print(render(goal_rows(sys.argv[1])))
    except BrokenPipeError:
        # A reader that stopped early (| head).
        sys.stderr.close()


if __name__ == "__main__":
    main()
