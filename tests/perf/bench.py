#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Figures from a scripts/bench-unwind run directory (results.txt and the
perf.data files), printed as the tables of Documentation/benchmarks.rst,
and written to DIR/*.csv for scripts/bench's plots (samples/sframe-plot).

  bench.py DIR
"""

import os
import re
import subprocess
import sys


def load(directory):
    values = {}
    with open(os.path.join(directory, "results.txt")) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 2 and parts[1].isdigit():
                values[parts[0]] = int(parts[1])
    return values


def perf_stats(path):
    """(samples, lost samples) from perf report --stats."""
    out = subprocess.run(["perf", "report", "-i", path, "--stats"],
                         capture_output=True, text=True).stdout
    samples = lost = 0
    for line in out.splitlines():
        m = re.match(r"\s*(SAMPLE|LOST|LOST_SAMPLES) events:\s+(\d+)", line)
        if m and m.group(1) == "SAMPLE":
            samples = max(samples, int(m.group(2)))
        elif m:
            lost += int(m.group(2))
    # LOST events count records; the lost sample count is in their payload.
    dump = subprocess.run(["perf", "script", "-i", path, "--show-lost-events",
                           "-F", "period"], capture_output=True, text=True).stdout
    lost_samples = sum(int(n) for n in re.findall(r"LOST (\d+) events", dump))
    return samples, max(lost, lost_samples)


def write_csv(directory, name, title, unit, header, rows):
    """A table for samples/sframe-plot: DIR/NAME.csv."""
    def field(x):
        return f'"{x}"' if "," in str(x) else str(x)
    with open(os.path.join(directory, name + ".csv"), "w") as f:
        f.write(f"# title: {title}\n# unit: {unit}\n")
        for row in [header] + rows:
            f.write(",".join(field(x) for x in row) + "\n")


def per_frame(v, before, after, path="sample"):
    ns = v[f"{after}.ns_{path}"] - v[f"{before}.ns_{path}"]
    frames = v[f"{after}.frames_{path}"] - v[f"{before}.frames_{path}"]
    walks = v[f"{after}.walks_{path}"] - v[f"{before}.walks_{path}"]
    return ns / max(frames, 1), frames / max(walks, 1), ns / max(walks, 1)


def slowdown_of(v, key, idle):
    """The workload's slowdown (%) under recording KEY against run IDLE."""
    w, w0 = v.get(f"work.{key}", 0), v.get(f"work.{idle}", 0)
    return (w0 / w - 1) * 100 if w and w0 else None


def depth_table(d, v):
    """The recurse phase alone at each depth of BENCH_DEPTHS (the chain is
    the depth plus 6 frames): slowdown per recording and rate, and the
    module's over the stock kernel's frame pointers."""
    depths = [int(x) for x in os.environ.get("BENCH_DEPTHS", "").split()]
    depths = [x for x in depths if f"work.idle-d{x}" in v]
    if not depths:
        return
    recordings = [
        ("FP build, -g, stock kernel", "fp-g", "idle-fp"),
        ("no-FP build, -g, sframe_unwind", "sframe-g", "idle"),
        ("no-FP build, --call-graph dwarf", "dwarf", "idle"),
    ]
    print("Slowdown against chain depth (the recurse phase alone)")
    print()
    print(f"  {'':<44}" + "".join(f"{f'{x + 6} frames':>12}" for x in depths))
    for rate in ("1000", "10000"):
        rows = []
        for name, key, idle in recordings:
            cells = [slowdown_of(v, f"{key}-{rate}-d{x}", f"{idle}-d{x}") for x in depths]
            label = f"{name}, -F {rate}"
            print(f"  {label:<44}" + "".join(f"{c:11.1f}%" if c is not None else f"{'-':>12}"
                                            for c in cells))
            rows.append([name] + [f"{max(c, 0):.1f}" if c is not None else "" for c in cells])
        write_csv(d, f"overhead-depth-{rate}",
                  f"Slowdown against chain depth, -F {rate} (the recurse phase)",
                  "% slower than unprofiled", ["profiling"] + [f"{x + 6} frames" for x in depths],
                  rows)
    for rate in ("1000", "10000"):
        ratios = []
        for x in depths:
            a = slowdown_of(v, f"sframe-g-{rate}-d{x}", f"idle-d{x}")
            b = slowdown_of(v, f"fp-g-{rate}-d{x}", f"idle-fp-d{x}")
            ratios.append(f"{a / b:.2f}x" if a is not None and b and b > 0 else "-")
        print(f"  -F {rate}: the module's slowdown over the stock kernel's frame pointers: "
              + ", ".join(f"{x + 6} frames {r}" for x, r in zip(depths, ratios)))
    print()


def main():
    d = sys.argv[1]
    v = load(d)

    print("Unwind cost per frame, in the kernel (STATS ns_sample / frames_sample), -F 10000")
    print()
    rows = [
        ("SFrame, -fp build (same stacks)", "m2", "m3"),
        ("frame pointers, -fp build (unwind_fp_only=1)", "f0", "f1"),
        ("SFrame, no-FP build", "m0", "m1"),
    ]
    res = {}
    for name, a, b in rows:
        nsf, fpw, nsw = per_frame(v, a, b)
        res[name] = nsf
        print(f"  {name:<48} {nsf:8.1f} ns/frame  {fpw:5.1f} frames/walk  {nsw:9.1f} ns/walk")
    # The deferred path's walks (STATS ns_deferred / frames_deferred).
    if "m4.ns_deferred" in v:
        nsf, fpw, nsw = per_frame(v, "m3", "m4", "deferred")
        print(f"  {'SFrame, no-FP build, fp,defer (deferred path)':<48} {nsf:8.1f} ns/frame  "
              f"{fpw:5.1f} frames/walk  {nsw:9.1f} ns/walk")
    sf, fp = res[rows[0][0]], res[rows[1][0]]
    print(f"  SFrame / frame pointer per frame (same stacks): {sf / fp:.2f}x")
    print()
    write_csv(d, "ns-per-frame", "Unwind cost per frame in the kernel, -F 10000 (TCG)",
              "ns per frame", ["walk", "ns per frame"],
              [[name, f"{res[name]:.1f}"] for name, _, _ in rows])

    print("Profiling overhead: workload throughput (leaf calls) relative to unprofiled")
    print()
    print(f"  {'':<44}{'-F 1000':>12}{'-F 10000':>12}")
    slowdown, rows = {}, []
    for name, key, idle in [
        ("FP build, -g, stock kernel", "fp-g", "idle-fp"),
        ("no-FP build, -g, sframe_unwind", "sframe-g", "idle"),
        ("FP build, fp,defer, stock kernel", "fp-defer", "idle-fp"),
        ("no-FP build, fp,defer, sframe_unwind", "sframe-defer", "idle"),
        ("no-FP build, --call-graph dwarf", "dwarf", "idle"),
    ]:
        cells = []
        for rate in ("1000", "10000"):
            w, w0 = v.get(f"work.{key}-{rate}", 0), v.get(f"work.{idle}", 0)
            slow = (w0 / w - 1) * 100 if w and w0 else None
            slowdown[(key, rate)] = slow
            cells.append(slow)
        if all(c is None for c in cells):
            continue
        print(f"  {name:<44}" + "".join(f"{c:11.1f}%" if c is not None else f"{'-':>12}"
                                        for c in cells))
        rows.append([name] + [f"{max(c, 0):.1f}" if c is not None else "0" for c in cells])
    for label, ours, theirs in (("-g", "sframe-g", "fp-g"), ("fp,defer", "sframe-defer", "fp-defer")):
        ratios = []
        for rate in ("1000", "10000"):
            a, b = slowdown.get((ours, rate)), slowdown.get((theirs, rate))
            ratios.append(f"{a / b:.2f}x" if a is not None and b and b > 0 else "-")
        print(f"  {label}: the module's slowdown over the stock kernel's frame pointers: "
              f"{ratios[0]} at -F 1000, {ratios[1]} at -F 10000")
    print()
    write_csv(d, "overhead", "Profiling overhead: the workload's slowdown",
              "% slower than unprofiled", ["profiling", "-F 1000", "-F 10000"], rows)

    depth_table(d, v)

    print("perf.data bytes per sample and lost samples")
    print()
    sizes = {}
    for name, key in [
        ("sframe_unwind -g, -F 1000", "sframe-g-1000"),
        ("--call-graph dwarf, -F 1000", "dwarf-1000"),
        ("sframe_unwind -g, -F 10000", "sframe-g-10000"),
        ("--call-graph dwarf, -F 10000", "dwarf-10000"),
    ]:
        path = os.path.join(d, key + ".data")
        if not os.path.exists(path):
            # No DWARF recording: the kernel refused it (arm64).
            continue
        size = os.path.getsize(path)
        samples, lost = perf_stats(path)
        per = size / max(samples, 1)
        sizes[key] = per
        print(f"  {name:<32} {size:>10} bytes {samples:>7} samples {per:9.0f} B/sample  lost {lost}")
    for rate in ("1000", "10000"):
        if f"dwarf-{rate}" in sizes and f"sframe-g-{rate}" in sizes:
            ratio = sizes[f"dwarf-{rate}"] / max(sizes[f"sframe-g-{rate}"], 1)
            print(f"  -F {rate}: DWARF / SFrame bytes per sample: {ratio:.1f}x")
    write_csv(d, "bytes-per-sample", "perf.data bytes per sample", "bytes per sample",
              ["recording", "-F 1000", "-F 10000"],
              [[label, f"{sizes[f'{key}-1000']:.0f}", f"{sizes[f'{key}-10000']:.0f}"]
               for label, key in (("sframe_unwind -g", "sframe-g"),
                                  ("--call-graph dwarf", "dwarf"))
               if f"{key}-1000" in sizes and f"{key}-10000" in sizes])
    return 0


if __name__ == "__main__":
    sys.exit(main())
