# SPDX-License-Identifier: GPL-2.0
# perf callchains with the unwinder: record tests/progs/sframe-workload
# (no frame pointers, SFrame) without the module (the baseline), with it
# under -g and --call-graph fp,defer, and with --call-graph dwarf for
# comparison.  The recordings go to $SFRAME_OUT/perf; the callchains are
# checked on the host by tests/perf/chains.py (scripts/run-tests runs it
# in the guest root, where perf script is fast).  Here: the hooks, their
# control, their counters, and unload while perf samples the whole system.
# The arm64 recordings are checked on the host too (perf --symfs: see
# tests/perf/chains.py), but for the DWARF ones' perf script, run here.
# On arm64 the workload is recorded three more times, each into
# $SFRAME_OUT/perf-BUILD: built with pointer authentication and BTI (pac),
# and from sid's toolchain, whose binutils writes SFrame V3, plain (v3) and
# signed (v3-pac).  arm64 has no deferred user unwinding in Linux 7.3 (no
# CONFIG_UNWIND_USER): perf record --call-graph fp,defer takes the
# synchronous path there, so the deferred hook has no target and those
# checks are skipped.
. "$SFRAME_SRC/tests/lib.sh"

defer=$DEFER
no_defer=$NO_DEFER

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
	perf record --no-bpf-event -B -N -e cpu-clock -F 1000 "$@" -o "/tmp/$name.data" -- \
		"$W" "$SECONDS_EACH" >"$D/$name.log" 2>&1 || { cat "$D/$name.log"; return 1; }
	cp "/tmp/$name.data" "$D/$name.data" && rm -f "/tmp/$name.data"
}

# to_check DIR NAME...: the host checks the recordings NAME of DIR (not
# all five: arm64 has no fp,defer), and reads perf script's output of a
# DWARF one saved here: the host's perf cannot unwind aarch64 stacks.
to_check() {
	local dir=$1
	shift
	echo "$*" >"$dir/recordings"
	case " $* " in
	*" dwarf "*) python3 "$SFRAME_SRC/tests/perf/chains.py" save "$dir" dwarf ;;
	esac
}

counter() { "$CTL" stats | awk -v n="$1" '$1 == n { print $2 }'; }

# Switches: 1 and 2 the hooks, 4 and 8 exec registration and fork
# inheritance; without a deferred hook, 2 reads as off.
all_on=15
[ "$defer" = 1 ] || all_on=13

unload_module
check "baseline: perf record -g" record base-g -g
if [ "$defer" = 1 ]; then
	check "baseline: perf record --call-graph fp,defer" record base-defer --call-graph fp,defer
fi
# dwarf_refused: perf's DWARF recording refused by the kernel, as on
# Debian's arm64 kernel (ARM64_SVE): perf adds SVE's VG to the sampled
# user registers, an "extended" register cpu-clock cannot record.
dwarf_refused() { grep -q "doesn't support sampling/overflow-interrupts" "$D/dwarf.log"; }
dwarf=dwarf
# On arm64 perf script of a DWARF recording runs here, under TCG (the
# host's perf cannot unwind aarch64 stacks: to_check): at 250 Hz, a
# quarter of the samples, still a hundred and more per leaf compared.
dwarf_opts=(--call-graph dwarf)
[ "${SFRAME_ARCH:-x86_64}" != arm64 ] || dwarf_opts+=(-F 250)
if record dwarf "${dwarf_opts[@]}" >/dev/null 2>&1; then
	_result ok "perf record --call-graph dwarf"
elif [ "${SFRAME_ARCH:-x86_64}" = arm64 ] && dwarf_refused; then
	skip "perf record --call-graph dwarf" "the kernel refuses it: SVE's VG register with cpu-clock"
	dwarf=
else
	_result "not ok" "perf record --call-graph dwarf"
	sed 's/^/# /' "$D/dwarf.log" | tail -10
fi

check "insmod" insmod "$SFRAME_KO"
if [ "$defer" = 1 ]; then
	check "both hooks installed and on" test "$("$CTL" get)" = 15
	check "no hook failure in the log" sh -c '! dmesg | grep -q "sframe_unwind: cannot hook"'
else
	check "the sample hook installed and on" test "$("$CTL" get)" = "$all_on"
fi
check "module: perf record -g" record module-g -g
if [ "$defer" = 1 ]; then
	check "module: perf record --call-graph fp,defer" record module-defer --call-graph fp,defer
else
	skip "module: perf record --call-graph fp,defer" "$no_defer"
fi
check "the workload registered its objects" grep -q "2 objects registered" "$D/module-g.log"
check "no samples lost" sh -c "! cat $D/module-*.log | grep -q -i 'lost'"
check "sample-path walks counted" test "$(counter walks_sample)" -gt 100
if [ "$defer" = 1 ]; then
	check "deferred walks counted" test "$(counter walks_deferred)" -gt 100
else
	skip "deferred walks counted" "$no_defer"
fi
check "SFrame frames counted" test "$(counter frames_sframe)" -gt 1000
check "signal frames crossed" test "$(counter frames_signal)" -gt 0
check "walk time counted" test "$(counter ns_sample)" -gt 0
"$CTL" stats | sed 's/^/# /'

# arm64: the same workload from other builds, with and without the module
# (one unload for all of them).  DWARF is the reference for the unsigned
# V3 build; perf's DWARF unwinder does not strip signed return addresses.
if [ "${SFRAME_ARCH:-x86_64}" = arm64 ]; then
	builds="pac v3 v3-pac"
	# build_label BUILD: how the results name a build.
	build_label() {
		case $1 in
		pac) echo "pointer authentication" ;;
		v3) echo "SFrame V3" ;;
		v3-pac) echo "SFrame V3, pointer authentication" ;;
		esac
	}
	# sframe_version FILE: the version byte of FILE's .sframe header
	# (readelf -x: the section's bytes in file order; magic 0xdee2 first).
	sframe_version() {
		readelf -x .sframe "$1" | awk '$1 ~ /^0x/ { print substr($2, 5, 2); exit }'
	}
	# sframe_versions_are VERSION BUILD: the program and its library both.
	sframe_versions_are() {
		local f v
		for f in "$PROGS/sframe-workload$2" "$PROGS/libsframe-workload$2.so"; do
			v=$(sframe_version "$f")
			[ "$v" = "0$1" ] || { echo "$f: .sframe version ${v:-none}, not $1"; return 1; }
		done
	}
	check "the workload's .sframe is SFrame V2 (trixie's binutils)" sframe_versions_are 2 ""
	for b in $builds; do
		W=$PROGS/sframe-workload-$b
		D=$SFRAME_OUT/perf-$b
		rm -rf "$D"
		mkdir -p "$D"
		v=2
		case $b in v3*) v=3 ;; esac
		check "$(build_label "$b"): the workload's .sframe is SFrame V$v" sframe_versions_are "$v" "-$b"
		check "$(build_label "$b"): module: perf record -g" record module-g -g
		check "$(build_label "$b"): the workload registered its objects" \
			grep -q "2 objects registered" "$D/module-g.log"
	done
	unload_module
	for b in $builds; do
		W=$PROGS/sframe-workload-$b
		D=$SFRAME_OUT/perf-$b
		check "$(build_label "$b"): baseline: perf record -g" record base-g -g
	done
	W=$PROGS/sframe-workload-v3
	D=$SFRAME_OUT/perf-v3
	if [ -n "$dwarf" ]; then
		check "SFrame V3: perf record --call-graph dwarf" record dwarf "${dwarf_opts[@]}"
	else
		skip "SFrame V3: perf record --call-graph dwarf" "the kernel refuses it: SVE's VG register with cpu-clock"
	fi
	# The first arm64 runs: perf's DWARF unwinder reached main from no
	# leaf of the signed builds (it does not strip the signed return
	# addresses).
	for b in pac v3-pac; do
		skip "$(build_label "$b"): --call-graph dwarf as the reference" \
			"perf's DWARF unwinder does not reach main through signed return addresses"
	done
	check "insmod" insmod "$SFRAME_KO"
	W=$PROGS/sframe-workload
	D=$SFRAME_OUT/perf
	# shellcheck disable=SC2086 # $dwarf: empty when the kernel refused it
	arm64_to_check() {
		local rc=0
		to_check "$SFRAME_OUT/perf" module-g base-g $dwarf || rc=1
		to_check "$SFRAME_OUT/perf-pac" module-g base-g || rc=1
		to_check "$SFRAME_OUT/perf-v3" module-g base-g $dwarf || rc=1
		to_check "$SFRAME_OUT/perf-v3-pac" module-g base-g || rc=1
		return $rc
	}
	check "perf script of the DWARF recordings, for the host" arm64_to_check
fi

# Control: unprivileged users may read, not change; unknown bits are EINVAL.
check "control: unprivileged read" setpriv --reuid=65534 --regid=65534 --clear-groups "$CTL" get
check "control: unprivileged change is EPERM" setpriv --reuid=65534 --regid=65534 --clear-groups \
	"$CTL" expect 1 1 0
check "control: unknown bit is EINVAL" "$CTL" expect 22 0x100 0x100
check "control: sample hook off" test "$("$CTL" set 1 0)" = $((all_on - 1))
hooks_off_sample() {
	local before after
	before=$(counter walks_sample)
	perf record --no-bpf-event -B -q -N -e cpu-clock -F 1000 -g -o /tmp/off.data -- "$W" 0.5 chain >/dev/null 2>&1 || return 1
	after=$(counter walks_sample)
	[ "$before" = "$after" ]
}
check "control: a hook that is off is not used" hooks_off_sample
check "control: sample hook back on" test "$("$CTL" set 1 1)" = "$all_on"
if [ "$defer" = 1 ]; then
	check "control: deferred hook off and on" sh -c "test \"\$($CTL set 2 0)\" = 13 && test \"\$($CTL set 2 2)\" = 15"
else
	# EOPNOTSUPP (95): the hook has no target on this kernel.
	check "control: the deferred hook cannot be turned on without its target" \
		"$CTL" expect 95 2 2
fi

# Unload while perf samples every CPU and the replacements run: each cycle
# about 5 s under TCG, alone; make test runs 2 on the test kernels, 1 on
# Debian's (no lockdep or KASAN there to see a race), make stress 100.
# The workload is stopped once the module is gone: what it does after is
# perf's own unwinder's.  The recordings are not read: -B spares perf
# record its pass over them for build ids at the end.
cycles=2
on_test_kernel || cycles=1
[ "${SFRAME_STRESS:-0}" = 1 ] && cycles=100
# unwound: the module has walked on the sample path, and on the deferred
# one where there is one.  One read of its counters: under perf record -a
# at 10 kHz each process started costs TCG about half a second, and the
# two reads and two awks a poll took made polls of 2 s.
unwound() {
	local name value sample=0 deferred=0
	while read -r name value _; do
		case $name in
		walks_sample) sample=$value ;;
		walks_deferred) deferred=$value ;;
		esac
	done < <("$CTL" stats)
	[ "$sample" -gt 0 ] && { [ "$defer" = 0 ] || [ "$deferred" -gt 0 ]; }
}
unload_during_perf() {
	local g d i w
	perf record --no-bpf-event -q -N -B -a -g -e cpu-clock -F 10000 -o /tmp/all-g.data >/dev/null 2>&1 &
	g=$!
	d=
	if [ "$defer" = 1 ]; then
		perf record --no-bpf-event -q -N -B -a --call-graph fp,defer -e cpu-clock -F 1000 -o /tmp/all-d.data >/dev/null 2>&1 &
		d=$!
	fi
	sleep 2
	for i in $(seq "$cycles"); do
		module_loaded sframe_unwind || insmod "$SFRAME_KO" || break
		"$W" 2 chain recurse signal >/dev/null 2>&1 &
		w=$!
		# Unload once the workload is being unwound (both paths if possible).
		for _ in $(seq 50); do
			unwound && break
			sleep 0.1
		done
		rmmod sframe_unwind || break
		kill "$w" 2>/dev/null
		wait "$w"
	done
	# shellcheck disable=SC2086 # $d: empty without a deferred recorder
	kill -INT "$g" $d
	# shellcheck disable=SC2086
	wait "$g" $d
	[ "$i" = "$cycles" ] && ! module_loaded sframe_unwind
}
check "rmmod/insmod $cycles times during perf record -a -g -F 10000" unload_during_perf
rm -f /tmp/all-g.data /tmp/all-d.data /tmp/off.data
unload_module
