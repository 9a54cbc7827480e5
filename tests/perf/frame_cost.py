#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Figures from a scripts/bench-frame-cost run directory: instructions per
frame and per sample of each walk (results.txt), and where the walks'
instructions go (profile-*.txt, `perf script` of a kernel-only cpu-clock
recording taken while the walks ran).  Prints the tables of
Documentation/benchmarks.rst and writes DIR/*.csv for scripts/bench's plots.

  frame_cost.py DIR
"""

import bisect
import collections
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import write_csv  # noqa: E402

VARIANTS = [
    ("stock-fp", "perf's own frame-pointer walk (stock kernel, -fp build)"),
    ("module-fp", "the module's frame-pointer step (unwind_fp_only=1, -fp build)"),
    ("sframe-fpbuild", "the module's SFrame walk, -fp build (same stacks)"),
    ("sframe", "the module's SFrame walk, no-FP build"),
]


def load(directory):
    """{(key, depth): instructions per fault} and {("stats.KEY", counter):
    value} from results.txt."""
    values = {}
    with open(os.path.join(directory, "results.txt")) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 3 and parts[0].startswith("stats."):
                values[(parts[0], parts[1])] = int(parts[2])
            elif len(parts) == 3 and parts[1].isdigit():
                values[(parts[0], int(parts[1]))] = float(parts[2])
    return values


def short_name(name):
    """A demangled Rust name without crate hashes and generic arguments,
    its last three path components: enough to tell functions apart."""
    name = re.sub(r"\[[0-9a-f]+\]", "", name)
    # "<Type as Trait>::f" and "<Type>::f" name Type's f.
    name = re.sub(r"^<([^<>]*?)(?: as [^<>]*)?>::", r"\1::", name)
    while True:
        shorter = re.sub(r"<[^<>]*>", "", name)
        if shorter == name:
            break
        name = shorter
    parts = [p for p in name.split("::") if p and not p.startswith("{")]
    return "::".join(parts[-3:])


def demangle(names):
    """{raw: demangled} for the Rust names among NAMES (binutils' c++filt
    reads Rust's v0 mangling); empty if c++filt cannot be run."""
    rust = sorted({n for n in names if n.startswith("_R")})
    try:
        out = subprocess.run(["c++filt"], input="\n".join(rust), capture_output=True,
                             text=True, check=True).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        return {}
    return dict(zip(rust, out)) if len(out) == len(rust) else {}


def load_kallsyms(path):
    """Sorted (address, name, raw name) of the guest's /proc/kallsyms,
    Rust names demangled (demangle())."""
    syms = []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 3:
                syms.append((int(parts[0], 16), parts[2]))
    names = demangle(n for _, n in syms)
    syms = [(a, short_name(names.get(n, n)), n) for a, n in syms]
    syms.sort()
    return syms


def load_walkprof(path, syms):
    """The phases of scripts/walkprof.c's output: (walks, instructions,
    {function: instructions}, {function: calls}, [instructions of each
    walk], [(pc, instructions, executions) of each block]) each, blocks
    named by the function they start in; a call is an execution of a
    function's first block."""
    addrs = [a for a, _, _ in syms]
    phases, cur = [], None
    with open(path) as f:
        for line in f:
            parts = line.split()
            if parts and parts[0] == "phase":
                cur = (int(parts[3]), int(parts[5]), collections.Counter(), collections.Counter(),
                       [], [])
            elif parts and parts[0] == "walks" and cur:
                cur[4].extend(int(x) for x in parts[1:])
            elif parts == ["end"] and cur:
                phases.append(cur)
                cur = None
            elif cur and len(parts) == 3:
                pc, insns, count = int(parts[0], 16), int(parts[1]), int(parts[2])
                i = bisect.bisect_right(addrs, pc) - 1
                name = syms[i][1] if i >= 0 else "?"
                cur[2][name] += insns * count
                if i >= 0 and syms[i][0] == pc:
                    cur[3][name] += count
                cur[5].append((pc, insns, count))
    return phases


# What a function is for, by its name (first match wins): for the
# kernel's functions, and the module's where its .ko has no line tables.
COMPONENTS = [
    ("ftrace hook (trampoline, callback, redirect)", r"ftrace|accept|_shim$|regs_|sframe_current|sframe_user"),
    ("user reads", r"copy_from_user|copy_user|rep_movs|__get_user|user_mem|sframe_read_user|"
                   r"nmi_uaccess|fault|extable|exception|irqentry|error_|bad_area|"
                   r"bsearch|cmp_ex|restore_regs|iret"),
    ("lockdep and RCU checks", r"rcu|lock|lockdep|held|mark_|hardirqs"),
    ("section lookup (per-mm tree, cached section)", r"maple|mas_|mtree|mm_has_sections|WalkRows::switch|"
                                       r"Section::parse|with_table|with_index|AdoptedSet"),
    ("row lookup (row table, decoder)",
     r"WalkRows|^lookup::|find_row|find_fde|search|fre|decode_row|index|table"),
    ("unwind step (rules, checks)", r"unwind::|step|recover|is_text|follows_call|strip"),
    ("counters and clock", r"counters|Tally|now_ns|ktime|sched_clock"),
    ("walk loop and callchain store", r"callchain_store|callchain_user|CallchainEntry"),
]

# Where the module's instructions are, by the source file (and function)
# its line tables give for each: the innermost of the module's own frames
# of the inlining chain (the core library's are its callers' work).
SOURCE_COMPONENTS = [
    ("row lookup (row table, decoder)", r"rust/sframe/src/decoder/(table|lookup|index|fde|fre|"
                                        r"header|budget|bytes)\.rs"),
    ("section lookup (per-mm tree, cached section)", r"rust/registry/"),
    ("unwind step (rules, checks)", r"rust/sframe/src/decoder/unwind/(rules|amd64|aarch64)\.rs|"
                                    r"unwind_frame"),
    ("walk loop (limits, span and CFA checks)", r"rust/sframe/src/decoder/unwind/mod\.rs"),
    ("user reads", r"rust/abstractions/user_mem\.rs"),
    ("counters and clock", r"rust/unwind/counters\.rs|fast_clock"),
    ("walk loop and callchain store", r"rust/unwind/|rust/arch/"),
]
MODULE_FILE = re.compile(r"/rust/(sframe_unwind\.rs|(abstractions|arch|device|lifecycle|registry|"
                         r"sframe|unwind)/)")


def component(name):
    for comp, pattern in COMPONENTS:
        if re.search(pattern, name):
            return comp
    return "other"


class ModuleLines:
    """The module's instructions attributed to its sources: the .ko the
    guest loaded (its copy in the run directory), built with line tables
    (KRUSTFLAGS=-Cdebuginfo=line-tables-only, which changes no
    instruction)."""

    def __init__(self, ko):
        self.ko_path = ko
        self.where = {}
        try:
            nm = subprocess.run(["nm", ko], capture_output=True, text=True, check=True).stdout
            dis = subprocess.run(["objdump", "-d", "--no-show-raw-insn", "-j", ".text", ko],
                                 capture_output=True, text=True, check=True).stdout
            heads = subprocess.run(["readelf", "-S", ko], capture_output=True, text=True,
                                   check=True).stdout
        except (OSError, subprocess.CalledProcessError):
            self.ok = False
            return
        self.ok = ".debug_line" in heads
        self.value = {}
        for line in nm.splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[1] in "tT":
                self.value[parts[2]] = int(parts[0], 16)
        self.insns = sorted(int(m.group(1), 16) for m in
                            re.finditer(r"^\s+([0-9a-f]+):", dis, re.M))

    def offsets(self, pc, n, sym):
        """The .ko offsets of the `n` instructions from `pc`, in the
        module function `sym` (address, short name, raw name)."""
        base = self.value.get(sym[2])
        if base is None:
            return []
        i = bisect.bisect_left(self.insns, pc - sym[0] + base)
        return self.insns[i:i + n]

    def resolve(self, offsets):
        """Each offset's component, from one addr2line run."""
        todo = sorted(set(offsets) - set(self.where))
        if not todo:
            return
        out = subprocess.run(["addr2line", "-e", self.ko_path, "-j", ".text", "-i", "-f", "-a"],
                             input="\n".join(f"{o:#x}" for o in todo), capture_output=True,
                             text=True).stdout.splitlines()
        cur, chain = None, []
        for line in out + ["0x0"]:
            if re.fullmatch(r"0x[0-9a-f]+", line):
                if cur is not None:
                    self.where[cur] = self.classify(chain)
                cur, chain = int(line, 16), []
            else:
                chain.append(line)

    @staticmethod
    def classify(chain):
        """The component of an inlining chain (function, file:line pairs,
        innermost first)."""
        frames = list(zip(chain[0::2], chain[1::2]))
        for func, place in frames:
            if MODULE_FILE.search(place):
                for comp, pattern in SOURCE_COMPONENTS:
                    if re.search(pattern, place) or re.search(pattern, func):
                        return comp
                return "other"
        return "other"


def components(blocks, syms, lines):
    """{component: instructions} of a phase's blocks: the module's by
    their sources where `lines` can, the rest by function name."""
    addrs = [a for a, _, _ in syms]
    by_comp = collections.Counter()
    split = []
    for pc, n, count in blocks:
        i = bisect.bisect_right(addrs, pc) - 1
        sym = syms[i] if i >= 0 else (0, "?", "?")
        offs = lines.offsets(pc, n, sym) if lines.ok and sym[2].startswith("_R") else []
        if len(offs) == n:
            split.append((offs, count))
        else:
            by_comp[component(sym[1])] += n * count
    lines.resolve([o for offs, _ in split for o in offs])
    for offs, count in split:
        for o in offs:
            by_comp[lines.where.get(o, "other")] += count
    return by_comp


# The phases the guest profiles, in order (scripts/bench-frame-cost): the
# deepest walk-cost run ({hi}: its depth), then a second of sframe-workload (every phase) at
# -F 1000, on the stock kernel (-fp builds), then with the module (no-FP
# builds).
PROFILED = [
    "perf's own walk, walk-cost-fp ({hi} frames)",
    "perf's own walk, sframe-workload-fp (-F 1000)",
    "the module's SFrame walk, walk-cost ({hi} frames)",
    "the module's SFrame walk, sframe-workload (-F 1000)",
]


def percentile(values, q):
    """The nearest-rank `q` percentile of `values` (sorted)."""
    return values[min(len(values) - 1, max(0, -(-q * len(values) // 100) - 1))]


def print_percentiles(d, phases, hi):
    """Instructions per walk, p50, p99 and max, of each profiled phase."""
    print("Instructions per walk in the kernel (every instruction inside perf_callchain_user(), "
          "scripts/walkprof.c)")
    print()
    print(f"  {'walks':<52}{'walks':>7}{'p50':>9}{'p99':>9}{'max':>9}{'p99/p50':>9}")
    rows = []
    for name, phase in zip(PROFILED, phases):
        name = name.format(hi=hi)
        walks = sorted(phase[4])
        if not walks:
            continue
        p50, p99 = percentile(walks, 50), percentile(walks, 99)
        print(f"  {name:<52}{len(walks):7d}{p50:9d}{p99:9d}{walks[-1]:9d}{p99 / max(p50, 1):8.2f}x")
        rows.append([name, str(p50), str(p99), str(walks[-1])])
    print()
    write_csv(d, "walk-percentiles", "Instructions per walk: p50, p99, max (-icount)",
              "instructions per walk", ["walks", "p50", "p99", "max"], rows)


# The deferred path's boot (DIR/deferred, x86-64): the same faults under
# --call-graph fp,defer, the walk done by unwind_user() on the way back to
# user space (perf's own frame-pointer walk, or the module's), and the
# plugin's window on unwind_user() instead.
DEFERRED_VARIANTS = [
    ("stock-defer", "perf's own deferred walk (stock kernel, -fp build)"),
    ("sframe-defer", "the module's deferred SFrame walk, no-FP build"),
]
DEFERRED_PROFILED = [
    "perf's own deferred walk, walk-cost-fp ({hi} frames)",
    "the module's deferred walk, walk-cost ({hi} frames)",
]


def per_frame_table(d, v, variants, what, csv_prefix):
    """The table of instructions per sample and per frame of `variants`
    (results.txt keys), the first being perf's own walk; returns the
    deepest depth."""
    depths = sorted({depth for key, depth in v if not key.startswith("stats.")})
    lo, hi = depths[0], depths[-1]
    print(f"Instructions per sample (page fault) beyond the same fault without -g, "
          f"under -icount, {what}; chains of {', '.join(map(str, depths))} frames")
    print()
    header = "  " + f"{'walk':<64}" + "".join(f"{f'{x} frames':>13}" for x in depths) + \
        f"{'per frame':>12}"
    print(header)
    per_frame, per_sample = {}, {}
    for key, name in variants:
        if (key, lo) not in v:
            continue
        row = []
        for depth in depths:
            row.append(v[(key, depth)] - v[("nog", depth)])
        slope = (v[(key, hi)] - v[(key, lo)]) / (hi - lo)
        per_frame[key], per_sample[key] = slope, row
        print(f"  {name:<64}" + "".join(f"{x:13.0f}" for x in row) + f"{slope:12.1f}")
    print()
    own = variants[0][0]
    base = per_frame.get(own)
    if base:
        print("  per frame, relative to perf's own frame-pointer walk:")
        for key, name in variants:
            if key in per_frame:
                print(f"    {name:<62} {per_frame[key] / base:6.2f}x")
        print("  per sample, relative to perf's own frame-pointer walk (same depth):")
        for key, name in variants:
            if key in per_sample and key != own:
                ratios = "  ".join(f"{a / b:5.2f}x" for a, b in zip(per_sample[key], per_sample[own]))
                print(f"    {name:<62} {ratios}")
    print(f"  (a fault without perf: {v.get(('none', lo), 0):.0f} instructions; "
          f"its sample without -g adds {v.get(('nog', lo), 0) - v.get(('none', lo), 0):.0f})")
    print()
    write_csv(d, f"{csv_prefix}instructions-per-frame",
              f"Instructions per frame of a user-stack walk, {what} (-icount)",
              "instructions per frame", ["walk", "per frame"],
              [[name, f"{per_frame[key]:.1f}"] for key, name in variants if key in per_frame])
    write_csv(d, f"{csv_prefix}instructions-per-sample",
              f"Instructions a sample adds, by chain depth, {what} (-icount)",
              "instructions per sample",
              ["walk"] + [f"{x} frames" for x in depths],
              [[name] + [f"{x:.0f}" for x in per_sample[key]] for key, name in variants
               if key in per_sample])
    return hi


def profile_report(d, pairs, frames, window, hi):
    """Where the instructions of each (variant, phase) of `pairs` go, the
    module's (the second) per frame from its `frames` counter."""
    syms = load_kallsyms(os.path.join(d, "kallsyms.txt"))
    lines = ModuleLines(os.path.join(d, "sframe_unwind.ko"))
    if not lines.ok:
        print("(no line tables in the run's sframe_unwind.ko: the module's instructions "
              "go by function name)")
        print()
    for i, ((key, name), phase) in enumerate(pairs):
        walks, total, by_fn, calls, _, blocks = phase
        per_walk = total / max(walks, 1)
        module = i == 1 and bool(frames)
        print(f"Where {name}'s instructions go ({hi} frames deep; every instruction inside")
        print(f"{window} counted by scripts/walkprof.c): {walks} walks, "
              f"{per_walk:.0f} instructions per walk" +
              (f", {total / frames:.0f} per frame ({frames / max(walks, 1):.1f} frames per walk)"
               if module else ""))
        scale = frames if module else walks
        unit = "per frame" if module else "per walk"
        by_comp = components(blocks, syms, lines)
        rows = []
        for comp, n in by_comp.most_common():
            print(f"  {comp:<52} {n / scale:9.1f} {unit}  {100 * n / total:5.1f}%")
            rows.append([comp, f"{n / scale:.1f}"])
        print("  functions:")
        for fn, n in by_fn.most_common(14):
            print(f"    {fn[:58]:<58} {n / scale:9.1f} {unit}  {calls[fn] / max(walks, 1):6.1f} calls/walk")
        print()
        write_csv(d, f"profile-{key}", f"Where {name}'s instructions go",
                  f"instructions {unit}", ["component", "instructions"], rows)


def deferred_report(d):
    """The deferred path's tables and profile, from DIR/deferred."""
    dd = os.path.join(d, "deferred")
    if not os.path.exists(os.path.join(dd, "results.txt")):
        return 0
    v = load(dd)
    hi = per_frame_table(d, v, DEFERRED_VARIANTS, "--call-graph fp,defer (unwind_user())",
                         "deferred-")
    prof_path = os.path.join(dd, "walkprof.txt")
    if not (os.path.exists(os.path.join(dd, "kallsyms.txt")) and os.path.exists(prof_path)):
        return 0
    phases = load_walkprof(prof_path, load_kallsyms(os.path.join(dd, "kallsyms.txt")))
    if len(phases) < len(DEFERRED_PROFILED):
        print(f"deferred/walkprof.txt has {len(phases)} phases, not {len(DEFERRED_PROFILED)}: "
              "no profile")
        return 1
    print("Instructions per walk in the kernel (every instruction inside unwind_user(), "
          "scripts/walkprof.c)")
    print()
    print(f"  {'walks':<52}{'walks':>7}{'p50':>9}{'p99':>9}{'max':>9}")
    for name, phase in zip(DEFERRED_PROFILED, phases):
        name = name.format(hi=hi)
        walks = sorted(phase[4])
        if walks:
            print(f"  {name:<52}{len(walks):7d}{percentile(walks, 50):9d}"
                  f"{percentile(walks, 99):9d}{walks[-1]:9d}")
    print()
    profile_report(dd, list(zip(DEFERRED_VARIANTS, phases[:2])),
                   v.get(("stats.profile", "frames_deferred")), "unwind_user()", hi)
    return 0


def main():
    d = sys.argv[1]
    v = load(d)
    hi = per_frame_table(d, v, VARIANTS, "-g", "")

    syms_path = os.path.join(d, "kallsyms.txt")
    prof_path = os.path.join(d, "walkprof.txt")
    if os.path.exists(syms_path) and os.path.exists(prof_path):
        phases = load_walkprof(prof_path, load_kallsyms(syms_path))
        # The boot goes on after the last marker: what it walks there (the
        # timed runs) is one more phase, dumped at exit, not profiled.
        if len(phases) < len(PROFILED):
            print(f"walkprof.txt has {len(phases)} phases, not {len(PROFILED)}: no profile")
            return 1
        print_percentiles(d, phases, hi)
        profile_report(d, [(VARIANTS[0], phases[0]), (VARIANTS[3], phases[2])],
                       v.get(("stats.profile", "frames_sample")), "perf_callchain_user()", hi)
    return deferred_report(d)


if __name__ == "__main__":
    sys.exit(main())
