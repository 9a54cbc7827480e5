# SPDX-License-Identifier: GPL-2.0
# perf callchains with the unwinder: record tests/progs/sframe-workload
# (no frame pointers, SFrame) without the module (the baseline), with it
# under -g and --call-graph fp,defer, and with --call-graph dwarf for
# comparison.  The recordings go to $SFRAME_OUT/perf; the callchains are
# checked on the host by tests/perf/chains.py (scripts/run-tests runs it
# in the guest root, where perf script is fast).  Here: the hooks, their
# control, their counters, and unload while perf samples the whole system.
. "$SFRAME_SRC/tests/lib.sh"

W=$PROGS/sframe-workload
CTL=$PROGS/unwind-ctl
D=$SFRAME_OUT/perf
SECONDS_EACH=${SFRAME_PERF_SECONDS:-2.8}
rm -rf "$D"
mkdir -p "$D"

# record NAME PERF-OPTIONS...: the whole workload under perf record.  perf
# writes to the guest's /tmp (it maps its output, which 9p shares cannot),
# then the file is copied out.
record() {
	local name=$1
	shift
	perf record -N -e cpu-clock -F 1000 "$@" -o "/tmp/$name.data" -- \
		"$W" "$SECONDS_EACH" >"$D/$name.log" 2>&1 || { cat "$D/$name.log"; return 1; }
	cp "/tmp/$name.data" "$D/$name.data" && rm -f "/tmp/$name.data"
}

counter() { "$CTL" stats | awk -v n="$1" '$1 == n { print $2 }'; }

unload_module
check "baseline: perf record -g" record base-g -g
check "baseline: perf record --call-graph fp,defer" record base-defer --call-graph fp,defer
check "perf record --call-graph dwarf" record dwarf --call-graph dwarf

check "insmod" insmod "$SFRAME_KO"
# Switches: 1 and 2 the hooks, 4 and 8 exec registration and fork inheritance.
check "both hooks installed and on" test "$("$CTL" get)" = 15
check "no hook failure in the log" sh -c '! dmesg | grep -q "sframe_unwind: cannot hook"'
check "module: perf record -g" record module-g -g
check "module: perf record --call-graph fp,defer" record module-defer --call-graph fp,defer
check "the workload registered its objects" grep -q "2 objects registered" "$D/module-g.log"
check "no samples lost" sh -c "! grep -q -i 'lost' $D/module-g.log $D/module-defer.log"
check "sample-path walks counted" test "$(counter walks_sample)" -gt 100
check "deferred walks counted" test "$(counter walks_deferred)" -gt 100
check "SFrame frames counted" test "$(counter frames_sframe)" -gt 1000
check "signal frames crossed" test "$(counter frames_signal)" -gt 0
check "walk time counted" test "$(counter ns_sample)" -gt 0
"$CTL" stats | sed 's/^/# /'

# Control: unprivileged users may read, not change; unknown bits are EINVAL.
check "control: unprivileged read" setpriv --reuid=65534 --regid=65534 --clear-groups "$CTL" get
check "control: unprivileged change is EPERM" setpriv --reuid=65534 --regid=65534 --clear-groups \
	"$CTL" expect 1 1 0
check "control: unknown bit is EINVAL" "$CTL" expect 22 0x100 0x100
check "control: sample hook off" test "$("$CTL" set 1 0)" = 14
hooks_off_sample() {
	local before after
	before=$(counter walks_sample)
	perf record -q -N -e cpu-clock -F 1000 -g -o /tmp/off.data -- "$W" 0.5 chain >/dev/null 2>&1 || return 1
	after=$(counter walks_sample)
	[ "$before" = "$after" ]
}
check "control: a hook that is off is not used" hooks_off_sample
check "control: sample hook back on" test "$("$CTL" set 1 1)" = 15
check "control: deferred hook off and on" sh -c "test \"\$($CTL set 2 0)\" = 13 && test \"\$($CTL set 2 2)\" = 15"

# Unload while perf samples every CPU and the replacements run.
cycles=3
[ "${SFRAME_STRESS:-0}" = 1 ] && cycles=100
unload_during_perf() {
	local g d i
	perf record -q -N -a -g -e cpu-clock -F 10000 -o /tmp/all-g.data >/dev/null 2>&1 &
	g=$!
	perf record -q -N -a --call-graph fp,defer -e cpu-clock -F 1000 -o /tmp/all-d.data >/dev/null 2>&1 &
	d=$!
	sleep 2
	for i in $(seq "$cycles"); do
		module_loaded sframe_unwind || insmod "$SFRAME_KO" || break
		"$W" 2 chain recurse signal >/dev/null 2>&1 &
		# Unload once the workload is being unwound (both paths if possible).
		for _ in $(seq 50); do
			[ "$(counter walks_sample)" -gt 0 ] && [ "$(counter walks_deferred)" -gt 0 ] && break
			sleep 0.1
		done
		rmmod sframe_unwind || break
		wait $!
	done
	kill -INT "$g" "$d"
	wait "$g" "$d"
	[ "$i" = "$cycles" ] && ! module_loaded sframe_unwind
}
check "rmmod/insmod $cycles times during perf record -a -g -F 10000" unload_during_perf
rm -f /tmp/all-g.data /tmp/all-d.data /tmp/off.data
unload_module
