#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Check perf callchains of tests/progs/sframe-workload.

Reads `perf script` output (it runs perf itself, in the guest root via
scripts/rootfs-exec), classifies each sample by its leaf function and
checks the user callchain against the call paths the workload is built
with.  No fixed text is compared: samples are parsed into frames.

  chains.py check DIR [NAME...]
                            TAP results for the recordings in DIR
                            (module-g, module-defer, base-g, base-defer, dwarf,
                            or the NAMEs given: arm64 has no fp,defer)
  chains.py demo BASE MOD   the two callchains of one leaf side by side
  chains.py share FILE      "complete total" for one recording
  chains.py save DIR NAME...
                            keep perf script's output of the recordings
                            NAME beside them, for a check elsewhere (the
                            arm64 guest's DWARF recordings: the host's
                            perf cannot unwind aarch64 stacks)

Recordings of the arm64 guest are checked on the x86-64 host: with
SFRAME_PERF_SYMFS=DIR, perf reads the objects under DIR (the guest's
root, and its shared directories at their own paths; see
scripts/run-tests).  Each check reads the recordings' architecture from
their header, not from the machine it runs on.
"""

import collections
import hashlib
import os
import re
import subprocess
import sys

PROG = "sframe-workload"
LIB = "libsframe-workload"

CHAIN = ["chain_leaf_spin", "chain_hotel", "chain_golf", "chain_foxtrot",
         "chain_echo", "chain_delta", "chain_charlie", "chain_bravo",
         "chain_alpha", "phase_chain", "main"]
# Every call path of the workload, leaf first, down to its root (main, or
# the thread start routine).  "*" is one frame outside the program: the
# signal trampoline (__restore_rt, in libc) between a handler and the code
# the signal interrupted.
PATHS = {
    "chain": CHAIN,
    "bigframe": ["bigframe_leaf_spin", "frame_40k", "frame_256b",
                 "phase_bigframe", "main"],
    "vla": ["vla_leaf_spin", "vla_frame", "phase_vla", "main"],
    "recurse": ["recurse_leaf_spin"] + ["recurse_deep"] * 64 +
               ["phase_recurse", "main"],
    "plt": ["workload_lib_leaf_spin", "workload_lib_middle",
            "workload_lib_entry", "phase_plt", "main"],
    "signal": ["signal_leaf_spin", "signal_handler", "*",
               "signal_interrupted_spin", "phase_signal", "main"],
    "threads": ["thread_leaf_spin", "thread_work", "thread_start"],
}
# Every signal interrupts signal_interrupted_spin, which arms and disarms
# the timer itself (tests/progs/sframe-workload.c): a handler's frame
# below the trampoline is never phase_signal's.
ROOTS = {"main", "thread_start"}
LEAVES = {path[0]: phase for phase, path in PATHS.items()}
LEAVES["signal_interrupted_spin"] = "signal"
OWN = {f for path in PATHS.values() for f in path if f != "*"}

FRAME = re.compile(r"^\s+([0-9a-f]+)\s+(.*?)\s+\((.*)\)\s*$")
# A sample's first line under -F comm,pid,time --ns: command, pid, time.
TIMED = re.compile(r"^(\S.*?)\s+(\d+)\s+(\d+)\.(\d{9}):")


def own(frame):
    """Whether a (sym, dso) frame is the workload's own code."""
    sym, dso = frame
    base = os.path.basename(dso)
    return (base.startswith(PROG) or base.startswith(LIB)) and sym in OWN


def saved_script(path, args):
    """Where save() keeps perf script's output of PATH for ARGS."""
    key = hashlib.sha256("\0".join(args).encode()).hexdigest()[:12]
    return f"{path}.script-{key}"


def perf_script(path, *args):
    """perf script's output for the recording PATH with the options ARGS:
    a copy saved beside it for the same ARGS if there is one (see save()),
    else perf's own, reading objects under $SFRAME_PERF_SYMFS if set."""
    saved = saved_script(path, args)
    if os.path.exists(saved) and os.path.getmtime(saved) >= os.path.getmtime(path):
        with open(saved, encoding="utf-8", errors="replace") as f:
            return f.read()
    cmd = ["perf", "script", "-i", path, *args]
    if os.environ.get("SFRAME_PERF_SYMFS"):
        cmd.append("--symfs=" + os.environ["SFRAME_PERF_SYMFS"])
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    if os.environ.get("SFRAME_PERF_SAVE") == "1":
        with open(saved, "w", encoding="utf-8") as f:
            f.write(out)
    return out


def recorded_arch(path):
    """The machine the recording PATH was made on ("aarch64", "x86_64"),
    from its header."""
    out = subprocess.run(["perf", "report", "-i", path, "--header-only"],
                         check=True, capture_output=True, text=True).stdout
    m = re.search(r"^# arch : (\S+)$", out, re.M)
    return m.group(1) if m else None


def arm64(path):
    """Whether the recording PATH was made on arm64."""
    return recorded_arch(path) == "aarch64"


# Where an AArch64 user address keeps its pointer authentication code.
PAC_BITS = 0xFFFF << 48


def without_signed_lr(frames, addrs):
    """FRAMES without the entry perf's tool adds for an AArch64 sample
    whose caller is still in the link register, where it is that
    register's value signed with a pointer authentication code.

    perf 7.3's tool (get_leaf_frame_caller_aarch64(), tools/perf/util/)
    works the leaf's caller out of the sampled registers and adds it after
    the leaf unless it equals the entry there.  The module puts that
    caller there (sframe_unwind's sample_chain_entry()), stripped of its
    code, as the stock unwinder strips return addresses; the tool's copy,
    from the register, keeps the code, so the two differ and the tool adds
    an address nothing maps ([unknown]) before the module's own entry.  A
    program built with -mbranch-protection=standard shows it in samples
    taken in a prologue: a tool artifact, taken out here so the chain is
    judged as the kernel gave it."""
    if (len(frames) > 2 and frames[1] == ("[unknown]", "[unknown]")
            and addrs[1] & PAC_BITS and addrs[1] & ~PAC_BITS == addrs[2]):
        return frames[:1] + frames[2:]
    return frames


def script_samples(path, timed=False):
    """Yield (comm, user frames leaf first as (sym, dso)) for each sample
    of the recording PATH (also used by daemon_chains.py); with TIMED,
    (comm, pid, time in ns, frames)."""
    fields = "comm,pid,time,ip,sym,dso" if timed else "comm,tid,ip,sym,dso"
    out = perf_script(path, "-F", fields, "--no-inline", "--ns")
    head, frames, addrs = None, None, None
    for line in out.splitlines():
        m = FRAME.match(line)
        if m:
            # Kernel frames (of a sample taken in the kernel) come first.
            if frames is not None and int(m.group(1), 16) < 1 << 63:
                sym = re.sub(r"\+0x[0-9a-f]+$", "", m.group(2))
                frames.append((sym, m.group(3)))
                addrs.append(int(m.group(1), 16))
            continue
        if frames is not None:
            yield head + (without_signed_lr(frames, addrs),)
        head, frames, addrs = None, None, None
        if timed:
            t = TIMED.match(line)
            if t:
                head = (t.group(1), int(t.group(2)), int(t.group(3)) * 10**9 + int(t.group(4)))
        elif line.split():
            head = (line.split()[0],)
        if head:
            frames, addrs = [], []
    if frames is not None:
        yield head + (without_signed_lr(frames, addrs),)


def samples(path):
    """Yield each workload sample's user frames, leaf first, as (sym, dso)."""
    for comm, frames in script_samples(path):
        if comm.startswith(PROG) and frames:
            yield frames


def expected_suffixes():
    """Every complete chain that is a correct one: suffixes of PATHS."""
    ok = set()
    for path in PATHS.values():
        for i in range(len(path)):
            ok.add(tuple(path[i:]))
    return ok


SUFFIXES = expected_suffixes()


def classify(frames):
    """(phase or None, complete?, own path up to the root or None)."""
    if not frames or frames[0][0] not in OWN or not own(frames[0]):
        return None, False, None
    leaf = frames[0][0]
    phase = LEAVES.get(leaf)
    if phase is None:
        for name, path in PATHS.items():
            if leaf in path:
                phase = name
                break
    chain = []
    for frame in frames:
        chain.append(frame[0] if own(frame) else "*")
        if own(frame) and frame[0] in ROOTS:
            break
    else:
        return phase, False, None
    ownpath = tuple(f for f in chain if f != "*")
    return phase, tuple(chain) in SUFFIXES, ownpath


def path_runs(keys):
    """Per leaf, a Counter of own paths in runs, from KEYS: each sample's
    (leaf, own path) in recording order, None for one without a complete
    chain.  A run of consecutive samples with the same leaf and path counts
    once: they are one observation of one stack, not several (see the
    agreement rule below)."""
    runs = collections.defaultdict(collections.Counter)
    last = None
    for key in keys:
        if key is not None and key != last:
            runs[key[0]][key[1]] += 1
        last = key
    return runs


def tally(path):
    """Per phase: [samples, complete]; per leaf, a Counter of complete own
    paths in runs (path_runs())."""
    counts = collections.defaultdict(lambda: [0, 0])
    keys = []
    examples = {}
    for frames in samples(path):
        phase, complete, ownpath = classify(frames)
        keys.append((frames[0][0], ownpath) if complete else None)
        if phase is None:
            continue
        counts[phase][0] += 1
        if complete:
            counts[phase][1] += 1
        examples.setdefault((phase, frames[0][0], complete), frames)
    return counts, path_runs(keys), examples


# A call path one recording saw and the other did not is a disagreement
# unless timing explains it.  Which paths a recording sees can depend on
# timing (before the workload's signal phase armed its timer in
# signal_interrupted_spin, how often a signal landed in phase_signal
# itself did), and timing differs between recordings (DWARF's stack
# copies slow the workload down), so a path is tolerated on one side
# alone when it is rare there (under RARE_SHARE of that leaf's runs) or
# when the other side had too few runs to be expected to see it (all of
# them would miss it with probability (1 - share) ** n of at least
# MISS_CHANCE).  A common path the other unwinder never produces is a
# disagreement.
#
# The chances assume independent observations, so they count runs
# (path_runs()), not samples.  The signal handler spins at least as long
# as the timer's interval, so its signals mostly come back to back, each
# delivered as the one before returns, at the same interrupted PC: a
# signal that landed in phase_signal once kept phase_signal below the
# trampoline for every handler until the interrupted code ran again.
# One such landing gave 21 of 133 samples of the test kernel's -g
# recording in a CI run (DWARF's: 0 of 136), which a count of samples
# took for a common path DWARF never produces.
RARE_SHARE = 0.1
MISS_CHANCE = 1e-3


def disagreements(dwarf, ours, unit="samples"):
    """Paths (Counters of own path -> UNIT, samples by default) that timing
    cannot explain."""
    if dwarf and not ours:
        return [f"ours has no complete path, dwarf has {sum(dwarf.values())}"]
    found = []
    for seen, other, who, missing in ((dwarf, ours, "dwarf", "ours"),
                                      (ours, dwarf, "ours", "dwarf")):
        total = sum(seen.values())
        others = sum(other.values())
        for path, hits in sorted(seen.items()):
            if path in other:
                continue
            share = hits / total
            chance = (1 - share) ** others
            text = (f"only {who} has {' <- '.join(path)} ({hits}/{total} {unit}; "
                    f"{missing}: 0/{others}; chance {chance:.1e})")
            if share >= RARE_SHARE and chance < MISS_CHANCE:
                found.append(text)
            else:
                print(f"# tolerated: {text}")
    return found


class Tap:
    def __init__(self):
        self.n = 0
        self.failed = 0

    def result(self, ok, name, detail=""):
        self.n += 1
        self.failed += not ok
        print(f"{'ok' if ok else 'not ok'} {self.n} - perf: {name}")
        if detail and not ok:
            for line in detail.splitlines():
                print(f"# {line}")


def share(counts):
    total = sum(c[0] for c in counts.values())
    complete = sum(c[1] for c in counts.values())
    return complete, total


def show(frames, limit=14):
    return "\n".join(f"  {sym} ({os.path.basename(dso)})" for sym, dso in frames[:limit])


RECORDINGS = ("module-g", "module-defer", "base-g", "base-defer", "dwarf")


def check(directory, names=RECORDINGS):
    tap = Tap()
    results = {}
    for name in names:
        path = os.path.join(directory, name + ".data")
        if not os.path.exists(path):
            tap.result(False, f"{name}: recording exists", path)
            continue
        results[name] = tally(path)

    for name in ("module-g", "module-defer"):
        if name not in results:
            continue
        counts, _, examples = results[name]
        complete, total = share(counts)
        print(f"# {name}: {complete}/{total} workload samples complete")
        for phase in PATHS:
            n, c = counts.get(phase, [0, 0])
            bad = [ex for (p, _, ok), ex in examples.items() if p == phase and not ok]
            detail = f"{c}/{n} complete" + (
                "\nfirst incomplete chain:\n" + show(bad[0]) if bad else "")
            tap.result(n >= 5 and c >= 0.99 * n,
                       f"{name}: {phase}: >= 99% of {n} samples have the complete chain",
                       detail)
        tap.result(total > 0 and complete >= 0.99 * total,
                   f"{name}: >= 99% of all workload samples complete ({complete}/{total})")

    for name in ("base-g", "base-defer"):
        if name not in results:
            continue
        counts, _, _ = results[name]
        complete, total = share(counts)
        print(f"# {name}: {complete}/{total} workload samples complete (baseline)")
        tap.result(total > 0 and complete < 0.5 * total,
                   f"{name}: without the module chains are broken ({complete}/{total} complete)")
        broken = [p for p in PATHS if p not in ("vla",)
                  and counts.get(p, [0, 0])[1] < 0.5 * max(counts.get(p, [0, 0])[0], 1)]
        tap.result(len(broken) >= len(PATHS) - 2,
                   f"{name}: broken in most phases ({', '.join(broken)})")

    if "dwarf" in results:
        _, dwarf_paths, _ = results["dwarf"]
        for name in ("module-g", "module-defer"):
            if name not in results:
                continue
            _, ours, examples = results[name]
            compared = 0
            diffs = []
            for phase, path in PATHS.items():
                leaf = path[0]
                if not dwarf_paths.get(leaf):
                    print(f"# {name}: {leaf}: DWARF's stack copy does not reach the root")
                    continue
                # No sample of ours at that leaf, complete or not, is no
                # path to compare (the phase's completeness is checked
                # above).  Seen once under fp,defer for the signal
                # handler's leaf; why is not known (perhaps a deferred
                # chain takes its leaf at the return to user space, after
                # the handler returned).
                if not any(key[1] == leaf for key in examples):
                    print(f"# {name}: {leaf}: no sample of ours at that leaf, not compared")
                    continue
                compared += 1
                for line in disagreements(dwarf_paths[leaf], ours.get(leaf, {}), "runs"):
                    diffs.append(f"{leaf}: {line}")
            tap.result(compared >= 3 and not diffs,
                       f"{name}: call paths agree with --call-graph dwarf ({compared} leaves compared)",
                       "\n".join(diffs))
    return 1 if tap.failed else 0


def demo(base, mod):
    """The chain of the chain phase's leaf, without and with the module."""
    rows = []
    for path in (base, mod):
        counts, _, examples = tally(path)
        complete, total = share(counts)
        frames = (examples.get(("chain", "chain_leaf_spin", False))
                  or examples.get(("chain", "chain_leaf_spin", True)) or [])
        if path == mod:
            frames = examples.get(("chain", "chain_leaf_spin", True)) or frames
        rows.append((complete, total, [f"{sym}" if own((sym, dso)) else
                                       f"{sym} ({os.path.basename(dso)})"
                                       for sym, dso in frames[:16]]))
    width = 40
    print(f"{'without sframe_unwind.ko':<{width}} with sframe_unwind.ko")
    print(f"{'-' * (width - 2):<{width}} {'-' * (width - 2)}")
    for i in range(max(len(rows[0][2]), len(rows[1][2]))):
        left = rows[0][2][i] if i < len(rows[0][2]) else ""
        right = rows[1][2][i] if i < len(rows[1][2]) else ""
        print(f"{left[:width - 2]:<{width}} {right}")
    print()
    for label, (complete, total, _) in zip(("without", "with"), rows):
        pct = 100.0 * complete / total if total else 0.0
        print(f"complete chains {label} the module: {complete}/{total} ({pct:.1f}%)")
    return 0


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "check":
        return check(sys.argv[2], tuple(sys.argv[3:]) or RECORDINGS)
    if len(sys.argv) >= 4 and sys.argv[1] == "demo":
        return demo(sys.argv[2], sys.argv[3])
    if len(sys.argv) >= 3 and sys.argv[1] == "share":
        counts, _, _ = tally(sys.argv[2])
        complete, total = share(counts)
        print(complete, total)
        return 0
    if len(sys.argv) >= 4 and sys.argv[1] == "save":
        os.environ["SFRAME_PERF_SAVE"] = "1"
        for name in sys.argv[3:]:
            tally(os.path.join(sys.argv[2], name + ".data"))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
