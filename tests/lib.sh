# SPDX-License-Identifier: GPL-2.0
# Helpers for guest test scripts (sourced).  Each check prints one KTAP-style
# result line, "ok N - name" or "not ok N - name", to stdout and to
# $SFRAME_OUT/results.tap, which scripts/run-tests counts.

RESULTS=${SFRAME_OUT:-/tmp}/results.tap
# The test programs scripts/run-tests built: out/progs, or out/progs-arm64
# (cross-built) in the arm64 guest; and sframectl and the audit library,
# cargo's release build, or its aarch64 cross build in the arm64 guest.
case ${SFRAME_ARCH:-x86_64} in
arm64)
	PROGS=${SFRAME_PROGS:-$SFRAME_SRC/out/progs-arm64}
	TOOLS=$SFRAME_SRC/target/aarch64-unknown-linux-gnu/release
	;;
*)
	PROGS=${SFRAME_PROGS:-$SFRAME_SRC/out/progs}
	TOOLS=$SFRAME_SRC/target/release
	;;
esac
SFRAMECTL=$TOOLS/sframectl
AUDIT_LIB=$TOOLS/libsframe_audit.so
# Deferred user unwinding (perf record --call-graph fp,defer): x86-64 only
# in Linux 7.3.  Elsewhere perf takes the synchronous path, the deferred
# hook has no target, and a suite skips those checks with NO_DEFER.
DEFER=1
NO_DEFER=
if [ "${SFRAME_ARCH:-x86_64}" = arm64 ]; then
	DEFER=0
	NO_DEFER="arm64 has no deferred user unwinding (CONFIG_UNWIND_USER) in Linux 7.3"
fi
# The recordings' callchains are checked on the host (scripts/run-tests),
# where perf script is fast; the arm64 guest's too, with perf reading the
# arm64 objects under --symfs (tests/perf/chains.py).
: "${TEST_GROUP:=$(basename "$0" .sh)}"
_n=0

_t=$SECONDS
# _result STATUS NAME: one result line; a step that took 5 s or more (since
# the previous result) says so, for whoever trims the suite's time.
_result() {
	local status=$1 name=$2 took=$((SECONDS - _t))
	_n=$((_n + 1))
	[ "$took" -lt 5 ] || name="$name # ${took} s"
	printf '%s %d - %s: %s\n' "$status" "$_n" "$TEST_GROUP" "$name" | tee -a "$RESULTS"
	_t=$SECONDS
}

# _check SHOW NAME CMD...: passes when CMD exits 0; CMD's output is shown
# (as comments) on failure, or always if SHOW is 1.
_check() {
	local show=$1 name=$2 out rc=0
	shift 2
	out=$("$@" 2>&1) || rc=$?
	if [ "$rc" = 0 ]; then _result ok "$name"; else _result "not ok" "$name"; fi
	if [ "$rc" != 0 ] || [ "$show" = 1 ]; then
		printf '%s\n' "$out" | sed 's/^/# /' | tail -20
	fi
}

# check NAME CMD...: passes when CMD exits 0; its output is shown on failure.
check() { _check 0 "$@"; }

# check_show NAME CMD...: check, and show CMD's output (figures) whether it
# passed or not.
check_show() { _check 1 "$@"; }

# check_fails NAME CMD...: passes when CMD exits non-zero.
check_fails() {
	local name=$1
	shift
	if "$@" >/dev/null 2>&1; then
		_result "not ok" "$name"
	else
		_result ok "$name"
	fi
}

# skip NAME REASON: a check this kernel cannot run, counted as passed and
# marked as a TAP skip with the reason.
skip() { _result ok "$1 # SKIP $2"; }

# The kernel under test: "test" (the debug test kernel) or the name given
# to guest-run --kernel (debian-7.3).  A debugging feature missing from the
# test kernel is a failure; from a distribution kernel, a skip.
on_test_kernel() { [ "${SFRAME_KERNEL:-test}" = test ]; }

module_loaded() { grep -q "^$1 " /proc/modules; }

load_module() {
	module_loaded sframe_unwind || insmod "$SFRAME_KO"
}

unload_module() {
	! module_loaded sframe_unwind || rmmod sframe_unwind
}

# kmemleak_clean: no kmemleak report names the module (two scans: an object
# is reported only once it looked unreferenced at two scans).
kmemleak_clean() {
	local k=/sys/kernel/debug/kmemleak
	echo scan >$k && echo scan >$k
	grep -q sframe_unwind $k || return 0
	# The reports that name the module, for the failure's output.
	awk '/^unreferenced object/ { if (r ~ /sframe_unwind/) print r; r = "" } { r = r $0 "\n" }
		END { if (r ~ /sframe_unwind/) print r }' $k | head -60
	return 1
}

# lifecycle_churn: processes exec (the module registers them) and fork
# (children inherit) without end; none opens /dev/sframe, whose open file
# would pin the module.  For running in the background while modules come
# and go.
lifecycle_churn() {
	while :; do
		"$PROGS/lifecycle-static" spin 0
		"$PROGS/lifecycle" prefork 0 5
	done >/dev/null 2>&1
}

# status_of NAME: one field of `sframectl status` (the module's, or the
# daemon's "daemon ..."); empty if there is none.
status_of() {
	"$SFRAMECTL" status 2>/dev/null |
		awk -F': ' -v n="$1" '$1 == n { print $2 }'
}

# record_into DIR CONFIG SCRIPT FREQ PERF-OPTIONS...: `sh SCRIPT` under
# perf record at FREQ Hz into DIR/CONFIG.data, its output in
# DIR/CONFIG.log (shown if perf fails), through the guest's /tmp: perf
# maps its output, which 9p shares cannot.  Every perf record of the suites
# has --no-bpf-event and -B: no check reads BPF events or build ids, and
# under TCG perf's thread for the first cost each recording about 0.8 s
# (perf record -g of `true`: 2.65 s with it, 1.88 s without, on the test
# kernel), its pass over the samples for the second about 1 s a second
# recorded.
record_into() {
	local dir=$1 config=$2 script=$3 freq=$4
	shift 4
	perf record --no-bpf-event -B -N -e cpu-clock -F "$freq" "$@" -o "/tmp/$config.data" -- \
		sh "$script" >"$dir/$config.log" 2>&1 || { cat "$dir/$config.log"; return 1; }
	cp "/tmp/$config.data" "$dir/$config.data" && rm -f "/tmp/$config.data"
}

# daemon_workload FILE SECONDS SCALE: FILE, a shell script of the programs
# the daemon's callchains are measured on (tests/guest/55-daemon.sh,
# scripts/bench-daemon): the SFrame test program and dlwork (libsfwork.so
# opened and closed 3 times, then opened again and worked in) for SECONDS
# each, Debian's gzip -9, and a pipeline of Debian's od and sort, on
# random inputs (FILE.*.in) SCALE times the size that takes about 2 s
# under TCG.
daemon_workload() {
	local file=$1 secs=$2 scale=$3
	head -c $((2500000 * scale)) /dev/urandom >"$file.gzip.in"
	head -c $((200000 * scale)) /dev/urandom >"$file.od.in"
	cat >"$file" <<SH
'$PROGS/sframe-workload' $secs >/dev/null
'$PROGS/dlwork' '$PROGS/libsfwork.so' cycle:3 open work:$secs close >/dev/null
/usr/bin/gzip -9 -c '$file.gzip.in' >/dev/null
od -An -tx1 -w8 '$file.od.in' | sort | md5sum >/dev/null
SH
}

# reload_while_churning N [SECONDS]: N times, load the module (unless it is
# loaded), check its device, wait SECONDS, unload it, while lifecycle_churn
# forks and execs: probes and task works come and go with the module.
reload_while_churning() {
	local i rc=0 pid
	lifecycle_churn &
	pid=$!
	for i in $(seq "$1"); do
		module_loaded sframe_unwind || insmod "$SFRAME_KO" || { rc=1; break; }
		test -c /dev/sframe || { rc=1; break; }
		[ -z "${2:-}" ] || sleep "$2"
		rmmod sframe_unwind || { rc=1; break; }
	done
	kill "$pid"
	wait "$pid" 2>/dev/null
	return $rc
}

# in_memory FILE...: the system's files FILE... and the objects they load
# (ldd) copied up into the tmpfs of the guest's /usr overlay (touch copies
# a file up whole), so that runs read them from memory: the 9p root keeps
# no page cache.  Anything outside /usr (the tests' own files, in /tmp or
# the shared directories) is left where it is.
in_memory() {
	local f real
	for f in "$@" $(ldd "$@" 2>/dev/null |
		awk '/=>/ { print $3; next } NF > 1 && $1 ~ /^\// { print $1 }' | sort -u); do
		real=$(readlink -f "$f")
		case $real in /usr/*) touch "$real" ;; esac
	done
}

# wait_for SECONDS CMD...: CMD until it succeeds, at most SECONDS seconds.
wait_for() {
	local end=$((SECONDS + $1))
	shift
	until "$@"; do
		[ $SECONDS -lt $end ] || return 1
		sleep 0.2
	done
}
