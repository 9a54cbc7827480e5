# SPDX-License-Identifier: GPL-2.0
# Registrations that follow the process: exec registers the program (and its
# interpreter), fork children inherit the parent's, each side's later
# changes are its own; the admin switches; a corrupt section at exec; fork
# cycles with 50 dlopen()ed libraries; unload while processes fork and exec.
# tests/progs/lifecycle never registers anything itself.  The perf
# recordings go to $SFRAME_OUT/lifecycle; scripts/run-tests checks their
# callchains on the host (tests/perf/own_chains.py lifecycle).  arm64 has
# no fp,defer in Linux 7.3: that recording is skipped there, and
# $SFRAME_OUT/lifecycle/recordings names the ones to check.
. "$SFRAME_SRC/tests/lib.sh"

L=$PROGS/lifecycle
LS=$PROGS/lifecycle-static
CTL=$PROGS/unwind-ctl
SCTL=$SFRAMECTL
D=/tmp/sframe-lifecycle
SECONDS_SPIN=${SFRAME_LIFECYCLE_SECONDS:-1.5}
stress() { [ "${SFRAME_STRESS:-0}" = 1 ]; }
rm -rf "$D" "$SFRAME_OUT/lifecycle"
mkdir -p "$D" "$SFRAME_OUT/lifecycle"

# rec NAME PERF-OPTIONS... -- CMD...: perf record of CMD into $D/NAME.data
# (perf cannot write onto the 9p share), kept for the host's check.
rec() {
	local name=$1
	shift
	perf record --no-bpf-event -B -q -N -e cpu-clock -F 1000 -o "$D/$name.data" "$@" >"$D/$name.log" 2>&1 &&
		cp "$D/$name.data" "$SFRAME_OUT/lifecycle/"
}
# mix NAME PERF-OPTIONS...: one recording of the static program, the
# dynamic one, and the dynamic one's three pre-forked workers.
mix() {
	local name=$1
	shift
	rec "$name" "$@" -- sh -c "'$LS' spin $SECONDS_SPIN && '$L' spin $SECONDS_SPIN &&
		'$L' prefork $SECONDS_SPIN 3"
}

# --- Baseline: without the module, frame pointers alone break. ---------------
unload_module
check "baseline: perf record -g" mix base -g

check "insmod" insmod "$SFRAME_KO"
check "exec and fork switches are on by default" sh -c "test \$((\$('$CTL' get) & 12)) = 12"

# --- exec ---------------------------------------------------------------------
check "exec registers a dynamic program, flagged exec" sh -c "'$L' count | grep -qx 'sections 1 exec 1 inherited 0'"
check "exec registers a static program, flagged exec" sh -c "'$LS' count | grep -qx 'sections 1 exec 1 inherited 0'"
listed_as_exec() {
	"$L" spin 30 &
	local pid=$! rc=1
	for _ in $(seq 10); do
		sleep 0.5
		"$SCTL" list --pid "$pid" 2>/dev/null | grep -q " exec .*/lifecycle\$" && { rc=0; break; }
	done
	kill "$pid"
	wait "$pid" 2>/dev/null
	return $rc
}
check "sframectl list shows where a registration came from" listed_as_exec
check "module: perf record -g" mix module-g -g
if [ "$DEFER" = 1 ]; then
	check "module: perf record --call-graph fp,defer" mix module-defer --call-graph fp,defer
else
	skip "module: perf record --call-graph fp,defer" "$NO_DEFER"
	echo "base module-g exec-off fork-off" >"$SFRAME_OUT/lifecycle/recordings"
fi

# A corrupt .sframe: the exec succeeds, nothing is registered, one log line.
corrupt() {
	python3 - "$L" "$D/lifecycle-corrupt" <<'EOF' || return 1
import struct, sys
data = bytearray(open(sys.argv[1], "rb").read())
phoff, = struct.unpack_from("<Q", data, 32)
phentsize, phnum = struct.unpack_from("<HH", data, 54)
for i in range(phnum):
    p_type, _, p_offset = struct.unpack_from("<IIQ", data, phoff + i * phentsize)
    if p_type == 0x6474e554:
        data[p_offset:p_offset + 2] = b"\0\0"   # the magic
        break
else:
    sys.exit("no PT_GNU_SFRAME")
open(sys.argv[2], "wb").write(data)
EOF
	chmod +x "$D/lifecycle-corrupt"
	local before after out
	before=$(dmesg | grep -c "exec by pid")
	out=$("$D/lifecycle-corrupt" count) || return 1
	after=$(dmesg | grep -c "exec by pid")
	echo "$out; log lines: $before -> $after"
	[ "$out" = "sections 0 exec 0 inherited 0" ] && [ "$after" = $((before + 1)) ]
}
check_show "exec of a program with a corrupt .sframe: runs, nothing registered, one log line" corrupt

# --- fork ---------------------------------------------------------------------
check_show "a child's and its parent's unregister are their own; a child's own registration and its inherited ones pass to its child" "$L" independence

# --- The switches. -------------------------------------------------------------
check "switch exec off" sh -c "test \$((\$('$CTL' set 4 0) & 4)) = 0"
check "exec off: nothing registered" sh -c "'$L' count | grep -qx 'sections 0 exec 0 inherited 0'"
check "exec off: perf record -g" rec exec-off -g -- "$LS" spin "$SECONDS_SPIN"
check "switch exec on, fork off" sh -c "test \$((\$('$CTL' set 12 4) & 12)) = 4"
check "fork off: perf record -g" rec fork-off -g -- "$L" prefork "$SECONDS_SPIN" 3
check "switch fork on" sh -c "test \$((\$('$CTL' set 8 8) & 12)) = 12"
check "an unprivileged user cannot switch them" setpriv --reuid=65534 --regid=65534 --clear-groups \
	"$CTL" expect 1 12 0

# --- Fork cycles: counters and kmemleak. -----------------------------------------
# 100 cycles (8 children at a time) in make test, 10,000 in make stress.
cycles=100
stress && cycles=10000
kmemleak=/sys/kernel/debug/kmemleak
[ -w $kmemleak ] && echo clear >$kmemleak
check_show "$cycles fork/exit cycles with 50 dlopen()ed libraries: inherited, counters back" \
	"$SCTL" run -- "$L" forkloop "$cycles" "$PROGS"
check "counters back to zero after the parent exits" sh -c \
	"'$SCTL' status | grep -qx 'sections: 0'"
if [ -w $kmemleak ]; then
	check "kmemleak reports nothing for the module" kmemleak_clean
elif on_test_kernel; then
	_result "not ok" "kmemleak not available ($kmemleak)"
else
	skip "kmemleak reports nothing for the module" "no kmemleak in $SFRAME_KERNEL ($kmemleak)"
fi

# --- Unload while processes fork and exec. -------------------------------------
# make test has 10-module's 4 reloads under the same churn (in the test
# kernel and Debian's); make stress adds 50 here, a loaded module each time
# for 0.2 s, so that task works are queued when it goes.
if stress; then
	check "rmmod/insmod 50 times while processes fork and exec" reload_while_churning 50 0.2
fi
load_module
