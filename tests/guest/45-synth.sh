# SPDX-License-Identifier: GPL-2.0
# SFrame generated from .eh_frame, used automatically: programs whose
# frames are in objects without .sframe (Debian's libc, its stripped gzip
# and python3) run under `sframectl run` (the audit library generates and
# caches their sections) and are recorded with perf -g and --call-graph
# fp,defer, with the module and without it (the baseline), and with
# --call-graph dwarf, whose call paths the host check compares with ours
# (not on arm64: see the arm64 note in tests/perf/synth_chains.py).
# All four run in one recording per configuration: perf's own start and
# end cost more than the workloads under TCG.  The recordings go to
# $SFRAME_OUT/synth; their chains are counted on the host by
# tests/perf/synth_chains.py (scripts/run-tests runs it in the guest root,
# where perf script is fast; $SFRAME_OUT/synth/recordings names those to
# check when they are not all of them).  Here: the cache (cold, warm, corrupt,
# unwritable, switched off), the system's cache (fill-cache) and register
# --pid of a stock program.
. "$SFRAME_SRC/tests/lib.sh"

CTL=$SFRAMECTL
# arm64: no fp,defer (Linux 7.3 has no CONFIG_UNWIND_USER there).
defer=$DEFER
no_defer=$NO_DEFER
D=$SFRAME_OUT/synth
SECS=${SFRAME_SYNTH_SECONDS:-1.5}
# libc-work does a fixed amount of work (its -n), the same in every
# recording: DWARF's paths are compared with ours.
ROUNDS=${SFRAME_SYNTH_ROUNDS:-8}
# A cache of our own, empty at the start: the guest's $HOME is read-only.
export XDG_CACHE_HOME=/tmp/synth-cache-home
CACHE=$XDG_CACHE_HOME/sframe-unwind/synth
# The system's cache (sframectl fill-cache): ours too, absent at the start.
export SFRAME_SYSTEM_CACHE=/tmp/synth-system-cache
# libc as the loader names it (debug messages) and as maps do (list).
LIBC='/libc\.so\.6'
rm -rf "$D" "$XDG_CACHE_HOME" "$SFRAME_SYSTEM_CACHE"
mkdir -p "$D"

# The workloads: tests/progs/libc-work built with and without -Wa,--gsframe
# (ROUNDS rounds), Debian's gzip -9 on 1.5 MB of Python sources, Debian's
# python3 on a pure-Python loop for SECS seconds.
cat /usr/lib/python3*/*.py | head -c 1500000 >/tmp/synth-gzip.in
cat >/tmp/synth-work.py <<'PY'
import sys, time
end = time.monotonic() + float(sys.argv[1])
d = {}
while time.monotonic() < end:
    for i in range(2000):
        d[i % 97] = d.get(i % 97, 0) + i * i
    sorted(d.items(), key=lambda kv: (kv[1] % 13, kv[0]))
PY
cat >/tmp/synth-all.sh <<SH
'$CTL' run -- '$PROGS/libc-work-sframe' -n $ROUNDS
'$CTL' run -- '$PROGS/libc-work-nosframe' -n $ROUNDS
'$CTL' run -- /usr/bin/gzip -9 -c /tmp/synth-gzip.in >/dev/null
'$CTL' run -- /usr/bin/python3 /tmp/synth-work.py $SECS
SH
# The DWARF reference compresses the input twice over: Debian's gzip is
# stripped, so nearly all its samples share one leaf ("[unknown]") and
# path, and a stretch of them counts as one run (synth_chains.py,
# paths()).  Runs end at the few samples in libc or the loader, and on
# 1.5 MB they were too few to compare a leaf in one clean-clone run of
# 2026-12-05; twice the work gives twice as many.
cat /tmp/synth-gzip.in /tmp/synth-gzip.in >/tmp/synth-gzip-dwarf.in
sed 's|/tmp/synth-gzip.in|/tmp/synth-gzip-dwarf.in|' /tmp/synth-all.sh >/tmp/synth-dwarf.sh

# record CONFIG PERF-OPTIONS...: the four under perf record, into
# $D/CONFIG.data.  The long-* configurations (make stress) run the long
# workloads at 250 Hz, the DWARF reference the one above.
record() {
	local config=$1 script=/tmp/synth-all.sh freq=1000
	shift
	case $config in
	long-*) script=/tmp/synth-long.sh freq=250 ;;
	dwarf) script=/tmp/synth-dwarf.sh ;;
	esac
	record_into "$D" "$config" "$script" "$freq" "$@"
}

unload_module
check "baseline: perf record -g" record base-g -g
if [ "$defer" = 1 ]; then
	check "baseline: perf record --call-graph fp,defer" record base-defer --call-graph fp,defer
else
	skip "baseline: perf record --call-graph fp,defer" "$no_defer"
fi
check "no module: nothing generated (no cache directory)" test ! -e "$CACHE"

check "insmod" insmod "$SFRAME_KO"

# audit_log [ENV=VALUE...]: the audit library's messages for a short run
# of libc-work (no .sframe; libc has none either).
audit_log() {
	env SFRAME_AUDIT_DEBUG=1 "$@" "$CTL" run -- "$PROGS/libc-work-nosframe" 0 2>&1 >/dev/null
}
# The first run generates and stores; the second reads the cache.
cold_then_warm() {
	local cold warm
	cold=$(audit_log)
	warm=$(audit_log)
	echo "$cold" | grep 'PT_GNU_SFRAME'
	echo "$warm" | grep 'PT_GNU_SFRAME'
	echo "$cold" | grep -q "$LIBC: no PT_GNU_SFRAME: section generated, cached" &&
		echo "$warm" | grep -q "$LIBC: no PT_GNU_SFRAME: section from the cache ([0-9]* bytes), by tag: the module holds it" &&
		[ "$(echo "$warm" | grep -c ': registered text')" -ge 3 ]
}
check_show "cold cache: libc generated and stored; warm: registered by tag, unread" cold_then_warm
# A module loaded again holds no copy: the first start reads the cached
# section and gives it (filed under its tag), the next registers by tag.
reload_then_tag() {
	local first second
	rmmod sframe_unwind && insmod "$SFRAME_KO" || return 1
	first=$(audit_log)
	second=$(audit_log)
	echo "$first" | grep "$LIBC"
	echo "$first" | grep -q "$LIBC: no PT_GNU_SFRAME: section in the cache: the module holds no copy by its tag" &&
		echo "$first" | grep -q "$LIBC: no PT_GNU_SFRAME: section from the cache ([0-9]* bytes)$" &&
		echo "$second" | grep -q "$LIBC: no PT_GNU_SFRAME: section from the cache ([0-9]* bytes), by tag" &&
		"$CTL" status | grep -q '^registered by tag: [1-9]'
}
check_show "module reloaded: the cached section given once, then registered by tag" reload_then_tag
check "cache directory is mode 0700" test "$(stat -c %a "$CACHE")" = 700
check "cache files are named by build-id" sh -c "ls '$CACHE' | grep -q '^b-[0-9a-f]*\.sframe$'"

corrupt_is_replaced() {
	local f
	for f in "$CACHE"/b-*.sframe; do
		printf 'SFRCACHE garbage' | dd of="$f" bs=1 seek=0 conv=notrunc 2>/dev/null
	done
	audit_log | grep -q "$LIBC: no PT_GNU_SFRAME: section generated, cached (.*cache file ignored" &&
		audit_log | grep -q "$LIBC: no PT_GNU_SFRAME: section from the cache"
}
check "a corrupt cache file is ignored and replaced" corrupt_is_replaced
unwritable_generates() {
	audit_log XDG_CACHE_HOME=/proc/self | grep -q "$LIBC: no PT_GNU_SFRAME: section generated ("
}
check "unwritable cache: generated without it" unwritable_generates
off_generates_nothing() {
	audit_log SFRAME_AUDIT_SYNTH=0 |
		grep -q "$LIBC: no PT_GNU_SFRAME, none generated (no PT_GNU_EH_FRAME, or generation off)"
}
check "SFRAME_AUDIT_SYNTH=0: nothing generated" off_generates_nothing
# The system's cache, filled ahead of time as the Debian package fills it
# (there, for every library ldconfig lists; here libc's and a program's):
# read before the user's, which then generates nothing for them.  The
# program is a copy in /tmp: fill-cache takes only files every user may
# reach, and the checkout may be under a private directory.
SYS=$SFRAME_SYSTEM_CACHE
SYS_PROG=/tmp/synth-system-prog
install -m 0755 "$PROGS/libc-work-nosframe" "$SYS_PROG"
fill_system_cache() {
	local libc
	libc=$(ldconfig -p | awk '/libc\.so\.6 .*=> / { print $NF; exit }')
	"$CTL" fill-cache -v "$libc" "$SYS_PROG" || return 1
	[ "$(stat -c %a "$SYS")" = 755 ] &&
		[ "$(ls "$SYS" | grep -c '\.sframe$')" = 2 ] &&
		[ -z "$(find "$SYS" -type f ! -perm 0644)" ]
}
check_show "fill-cache: libc's and a program's sections, readable by all" fill_system_cache
check "sframectl status: the system cache and its sections" sh -c \
	"'$CTL' status | grep -x 'system cache: $SYS, [1-9][0-9]* sections, [0-9]* bytes'"
# fresh_log: the audit library's messages for a short run of that
# program, with a user cache that is empty.
fresh_log() {
	rm -rf /tmp/synth-fresh-home
	env SFRAME_AUDIT_DEBUG=1 XDG_CACHE_HOME=/tmp/synth-fresh-home "$@" \
		"$CTL" run -- "$SYS_PROG" 0 2>&1 >/dev/null
}
system_cache_first() {
	local out
	out=$(fresh_log)
	echo "$out" | grep 'PT_GNU_SFRAME'
	echo "$out" | grep -q "$LIBC: no PT_GNU_SFRAME: section from the system cache" &&
		echo "$out" | grep -q "(main program): no PT_GNU_SFRAME: section from the system cache" &&
		[ "$(echo "$out" | grep -c ': registered text')" -ge 3 ] &&
		! ls /tmp/synth-fresh-home/sframe-unwind/synth | grep -q -F -x -f <(ls "$SYS")
}
check_show "system cache: libc's section read from it, none made in an empty user cache" \
	system_cache_first
writable_system_cache_unused() {
	local rc=0 out
	chmod 0777 "$SYS"
	out=$(fresh_log)
	echo "$out" | grep -q "$LIBC: no PT_GNU_SFRAME: section generated, cached" || rc=1
	echo "$out" | grep -q "system cache $SYS: .*: not used" || rc=1
	chmod 0755 "$SYS"
	return $rc
}
check "a system cache writable by others is not read, and the debug log says why" \
	writable_system_cache_unused
check "fill-cache again: nothing generated" sh -c \
	"'$CTL' fill-cache '$SYS_PROG' | grep -q ': 0 sections generated'"
# Without a path, as the Debian package runs it: every library ldconfig
# lists, every program (gzip among them), the audit library and the
# running kernel's vDSO (generated, or skipped as the audit library skips
# it: its own .sframe, or no .eh_frame to generate from, as arm64's); the
# first start of gzip with an empty user cache then generates nothing.
WHOLE=/tmp/synth-whole-cache
fill_whole_system() {
	local log=/tmp/synth-whole.log
	rm -rf "$WHOLE"
	"$CTL" fill-cache -v --dir "$WHOLE" >"$log" || return 1
	tail -n 1 "$log"
	grep '^\[vdso\]: ' "$log"
	grep -q '^/usr/bin/gzip: generated' "$log" &&
		grep -q -E '^\[vdso\]: (generated|skipped: (has its own \.sframe|none generated: no PT_GNU_EH_FRAME))' "$log" &&
		[ -s "$WHOLE/.listed" ]
}
check_show "fill-cache without a path: the libraries, the programs and the vDSO" fill_whole_system
whole_first_start() {
	local out
	rm -rf /tmp/synth-fresh-home
	out=$(env SFRAME_AUDIT_DEBUG=1 XDG_CACHE_HOME=/tmp/synth-fresh-home \
		SFRAME_SYSTEM_CACHE="$WHOLE" "$CTL" run -- /usr/bin/gzip -c /tmp/synth-work.py 2>&1 >/dev/null)
	echo "$out" | grep 'PT_GNU_SFRAME'
	echo "$out" | grep -q '(main program): no PT_GNU_SFRAME: section from the system cache' &&
		echo "$out" | grep -q "$LIBC: no PT_GNU_SFRAME: section from the system cache" &&
		! echo "$out" | grep -q 'section generated' &&
		[ -z "$(ls -A /tmp/synth-fresh-home/sframe-unwind/synth 2>/dev/null)" ]
}
check_show "a first start of gzip after it: every section from the system cache, none generated" \
	whole_first_start
check "manylibs: 51 own sections and libc's generated one registered" sh -c \
	"SFRAME_AUDIT_DEBUG=1 '$CTL' run -- '$PROGS/manylibs' 2>&1 | grep -c ': registered text' |
	awk '{ exit !(\$1 >= 52) }'"

# register --pid of a stock program: its objects have no .sframe.
register_stock() {
	local p rc=0
	sleep 30 &
	p=$!
	"$CTL" register --pid "$p" || rc=$?
	"$CTL" list --pid "$p"
	"$CTL" list --pid "$p" | grep -q "$LIBC\$" && "$CTL" list --pid "$p" | grep -q '/sleep$' || rc=1
	kill "$p"
	wait "$p" 2>/dev/null
	return $rc
}
check_show "register --pid of /usr/bin/sleep: generated sections for sleep and libc" register_stock
# The next process's sections go by tag: the module kept the copies the
# first one's registrations filed under the sections' digests.
by_tag_count() {
	"$CTL" status | awk -F': ' '$1 == "registered by tag" { print $2 }'
}
register_stock_by_tag() {
	local p before after rc=0
	before=$(by_tag_count)
	sleep 30 &
	p=$!
	"$CTL" register --pid "$p" >/dev/null || rc=1
	after=$(by_tag_count)
	kill "$p"
	wait "$p" 2>/dev/null
	echo "registrations by tag: $before before, $after after"
	[ $rc = 0 ] && [ "$after" -ge $((before + 3)) ]
}
check_show "register --pid of another sleep: sleep's, libc's and the loader's sections by tag" \
	register_stock_by_tag

# Warm the cache for every object of the four (python3's is large), so that
# the recordings measure unwinding, not generation at start-up.
warm() {
	"$CTL" run -- "$PROGS/libc-work-sframe" 0 &&
		"$CTL" run -- /usr/bin/gzip -c /dev/null &&
		"$CTL" run -- /usr/bin/python3 -c pass
} >/dev/null
check "cache warm for the recordings" warm
check "module: perf record -g" record module-g -g
if [ "$defer" = 1 ]; then
	check "module: perf record --call-graph fp,defer" record module-defer --call-graph fp,defer
else
	skip "module: perf record --call-graph fp,defer" "$no_defer"
fi
check "no samples lost" sh -c "! grep -q -i 'lost' $D/module-*.log"
# The same under DWARF unwinding, whose call paths ours must agree with.
if [ "${SFRAME_ARCH:-x86_64}" != arm64 ]; then
	check "perf record --call-graph dwarf" record dwarf --call-graph dwarf
else
	skip "perf record --call-graph dwarf" "no reference on arm64 (tests/perf/synth_chains.py)"
	echo "module-g base-g" >"$D/recordings"
fi

# make stress: the four doing far more work (libc-work 100 times, about
# two minutes each under TCG; gzip 40 times; python3 60 s), sampled at 250
# Hz, so that start-up (0.4-0.7 s under TCG) is a small part of each
# program's life; synth_chains.py prints their shares of all samples
# against the issue's goals, as figures (start-up under TCG beside other
# guests: 1.4-2 s of each program).
if [ "${SFRAME_STRESS:-0}" = 1 ]; then
	for _ in $(seq 40); do cat /tmp/synth-gzip.in; done >/tmp/synth-gzip-long.in
	cat >/tmp/synth-long.sh <<SH
'$CTL' run -- '$PROGS/libc-work-sframe' -n $((ROUNDS * 100))
'$CTL' run -- '$PROGS/libc-work-nosframe' -n $((ROUNDS * 100))
'$CTL' run -- /usr/bin/gzip -9 -c /tmp/synth-gzip-long.in >/dev/null
'$CTL' run -- /usr/bin/python3 /tmp/synth-work.py 60
SH
	check "long run: perf record -g" record long-g -g
	check "long run: perf record --call-graph fp,defer" record long-defer --call-graph fp,defer
	rm -f /tmp/synth-gzip-long.in /tmp/synth-long.sh
fi
unload_module
rm -rf /tmp/synth-gzip.in /tmp/synth-gzip-dwarf.in /tmp/synth-work.py /tmp/synth-all.sh \
	/tmp/synth-dwarf.sh "$XDG_CACHE_HOME"
