# SPDX-License-Identifier: GPL-2.0
# The loader side: sframe-audit.so registers what glibc's loader maps
# (start-up objects, dlopen, dlmopen) and removes it on dlclose; sframectl
# status/list/register/unregister/run.  The programs are tests/progs/dlwork
# and libsfwork.so (SFrame, no frame pointer); the user-space tools are the
# cargo release builds (scripts/run-tests builds them before booting).
. "$SFRAME_SRC/tests/lib.sh"

# Sections generated from .eh_frame (libc, ld.so, the vDSO) are
# 45-synth's subject; here they would only blur the counts of sections.
export SFRAME_AUDIT_SYNTH=0
CTL=$SFRAMECTL
AUDIT=$AUDIT_LIB
LIB=$PROGS/libsfwork.so
DL=$PROGS/dlwork
# perf cannot write its output onto the 9p share: work in the guest's /tmp
# and copy its files back at the end.
D=/tmp/sframe-loader
WORK=${SFRAME_LOADER_SECONDS:-3}
# 100 cycles in make test (about 15 s under TCG), 1000 in make stress.
CYCLES=100
[ "${SFRAME_STRESS:-0}" = 1 ] && CYCLES=1000
rm -rf "$D"
mkdir -p "$D"


# start NAME WORD CMD...: CMD in the background, output in $D/NAME.out;
# waits until it prints WORD.  Sets $bg.
start() {
	local name=$1 word=$2
	shift 2
	"$@" >"$D/$name.out" 2>"$D/$name.err" &
	bg=$!
	local deadline=$((SECONDS + 900))
	while [ $SECONDS -lt $deadline ]; do
		grep -q "^$word" "$D/$name.out" 2>/dev/null && return 0
		kill -0 "$bg" 2>/dev/null || break
		sleep 0.2
	done
	echo "$name did not print $word:"
	cat "$D/$name.out" "$D/$name.err"
	return 1
}

stop() {
	kill "$bg" 2>/dev/null
	wait "$bg" 2>/dev/null
	return 0
}

# The sections `sframectl list --pid` shows for $bg whose object is $1.
sections_of() { "$CTL" list --pid "$bg" | grep -c " $1\$"; }

# --- Without the module, the audit library changes nothing. ---------------

unload_module
same_without_module() {
	local rc1=0 rc2=0
	"$DL" "$LIB" open work:0.2 close cycle:20 print exit:3 >"$D/plain.out" 2>"$D/plain.err" || rc1=$?
	LD_AUDIT=$AUDIT "$DL" "$LIB" open work:0.2 close cycle:20 print exit:3 \
		>"$D/audit.out" 2>"$D/audit.err" || rc2=$?
	[ "$rc1" = 3 ] && [ "$rc2" = 3 ] && cmp "$D/plain.out" "$D/audit.out" &&
		cmp "$D/plain.err" "$D/audit.err" && [ ! -s "$D/audit.err" ]
}
check "no module: audited program's output and exit status unchanged" same_without_module
check "no module: sframectl run runs the program anyway" sh -c \
	"'$CTL' run -- '$DL' '$LIB' open work:0.2 close cycle:20 print exit:3 >'$D/run.out' 2>/dev/null; [ \$? = 3 ] && cmp '$D/run.out' '$D/plain.out'"
status_says_not_loaded() {
	local out rc=0
	out=$("$CTL" status 2>&1) || rc=$?
	echo "$out"
	[ "$rc" != 0 ] && echo "$out" | grep -q 'not loaded'
}
check "no module: status says so and fails" status_says_not_loaded
check "no module: list explains" sh -c "'$CTL' list 2>&1 | grep -q 'module is not loaded'"

# --- With the module. --------------------------------------------------------

check "insmod" insmod "$SFRAME_KO"
check "status reports the module" sh -c "'$CTL' status | grep -q '^module: loaded'"
sections0=$(status_of sections)
bytes0=$(status_of bytes)
registered0=$(status_of registered)

same_with_module() {
	local rc=0
	LD_AUDIT=$AUDIT "$DL" "$LIB" open work:0.2 close cycle:20 print exit:3 \
		>"$D/audit2.out" 2>"$D/audit2.err" || rc=$?
	[ "$rc" = 3 ] && cmp "$D/plain.out" "$D/audit2.out" && [ ! -s "$D/audit2.err" ]
}
check "module: audited program's output and exit status unchanged" same_with_module

# `sframectl run` starts the program from a constructor, before the
# standard library's start-up (samples/sframectl/src/run.rs, EARLY_RUN):
# what it passes on is what `main`'s path passes on, and a failure is
# reported once, by `main`.
run_env() {
	local out want
	want="$PROGS/libnoop-audit.so:$(readlink -f "$AUDIT")"
	out=$(LD_AUDIT=$PROGS/libnoop-audit.so "$CTL" run --debug -- \
		sh -c 'echo "$LD_AUDIT $SFRAME_AUDIT_DEBUG $0 $1"' "a b" --x 2>/dev/null)
	echo "got: $out"
	echo "want: $want 1 a b --x"
	[ "$out" = "$want 1 a b --x" ]
}
check "module: sframectl run adds its library to LD_AUDIT, passes the arguments" run_env
run_missing() {
	local rc=0
	"$CTL" run -- /nonexistent/program 2>"$D/missing.err" || rc=$?
	cat "$D/missing.err"
	[ "$rc" = 1 ] && [ "$(wc -l <"$D/missing.err")" = 1 ] &&
		grep -q "cannot run /nonexistent/program" "$D/missing.err"
}
check "module: sframectl run of a missing program says so once" run_missing
# std_startups CMD...: how many sigaltstack() calls CMD made (the standard
# library's start-up makes them), counted by a preloaded wrapper; without
# the wrapper, what is missing (no count, so that neither check passes).
std_startups() {
	[ -f "$PROGS/libcount-sigaltstack.so" ] || {
		echo "no $PROGS/libcount-sigaltstack.so"
		return
	}
	rm -f "$D/sigaltstack.log"
	LD_PRELOAD=$PROGS/libcount-sigaltstack.so SIGALTSTACK_LOG=$D/sigaltstack.log "$@" >/dev/null 2>&1
	if [ -f "$D/sigaltstack.log" ]; then wc -l <"$D/sigaltstack.log"; else echo 0; fi
}
check "module: sframectl status has the standard library's start-up (2+ sigaltstack)" \
	test "$(std_startups "$CTL" status)" -ge 2
check "module: sframectl run starts the program before it (no sigaltstack)" \
	test "$(std_startups "$CTL" run -- /bin/true)" = 0

# sections_while_paused NAME WANT-MAIN WANT-LIB ACTION...: runs the program
# under `sframectl run` with ACTIONs, then has it pause, and compares how
# many sections its main program and the library have (- for any).
sections_while_paused() {
	local name=$1 want_main=$2 want_lib=$3 rc
	shift 3
	start "$name" paused "$CTL" run -- "$DL" "$LIB" "$@" pause || return 1
	"$CTL" list --pid "$bg"
	{ [ "$want_main" = - ] || [ "$(sections_of "$DL")" = "$want_main" ]; } &&
		[ "$(sections_of "$LIB")" = "$want_lib" ]
	rc=$?
	stop
	return $rc
}
check "run: main program and dlopen()ed library are registered" \
	sections_while_paused open 1 1 open
check "run: a dlmopen() namespace's copy is registered too" \
	sections_while_paused mopen - 2 open mopen
check "dlclose: the library's section is gone from list" \
	sections_while_paused close 1 0 open close

# A vfork() child that leaves with exit() runs la_objclose() for every
# object, with its parent's memory: the parent's registrations of its
# start-up objects (libc's generated sections, in the program's namespace
# and the audit library's) must stay.
libc_sections_while_paused() {
	local n
	start "$1" paused env SFRAME_AUDIT_SYNTH=1 XDG_CACHE_HOME="$D/cache" \
		"$CTL" run -- "$DL" "$LIB" "${@:2}" pause || return 1
	"$CTL" list --pid "$bg" >&2
	n=$("$CTL" list --pid "$bg" | grep -c '/libc\.so\.6$')
	stop
	echo "$n"
}
vfork_exit_keeps_libc() {
	local plain after
	plain=$(libc_sections_while_paused plain-libc)
	after=$(libc_sections_while_paused vfork-libc vfork-exit)
	echo "libc sections: $plain, after a vfork() child's exit(): $after"
	[ "$plain" -ge 1 ] && [ "$after" = "$plain" ]
}
check_show "vfork: a child's exit() leaves the parent's start-up registrations" \
	vfork_exit_keeps_libc

# The audit library keeps /dev/sframe and the cache directories open while
# the loader loads the program, and closes them before the program's code
# runs; a dlopen() opens and closes its own.  None is left to the program.
no_descriptor_left() {
	local fds rc
	start fds paused env SFRAME_AUDIT_SYNTH=1 XDG_CACHE_HOME="$D/cache" "$CTL" run -- "$DL" "$LIB" open pause || return 1
	fds=$(ls -l "/proc/$bg/fd")
	echo "$fds"
	[ "$(sections_of "$DL")" = 1 ] && [ "$(sections_of "$LIB")" = 1 ] &&
		! echo "$fds" | grep -q -e /dev/sframe -e sframe-unwind
	rc=$?
	stop
	return $rc
}
check "run: no descriptor of the audit library left to the program" no_descriptor_left

reopened_elsewhere() {
	local first second row start
	start reopen paused "$CTL" run -- "$DL" "$LIB" open base close block open base pause || return 1
	first=$(sed -n '1s/^base //p' "$D/reopen.out")
	second=$(sed -n '2s/^base //p' "$D/reopen.out")
	row=$("$CTL" list --pid "$bg" | grep " $LIB\$")
	echo "bases $first $second; $row"
	stop
	start=$(echo "$row" | awk '{ split($2, r, "-"); print r[1] }')
	[ "$first" != "$second" ] && [ "$(echo "$row" | wc -l)" = 1 ] &&
		[ $((start)) -ge $((second)) ] && [ $((start)) -lt $((second + 0x100000)) ]
}
check "re-dlopen at another address: registered at the new one" reopened_elsewhere

# Complete chains through the library under perf record -g: the recordings
# (dlopen, reopen, pid, many-g, many-defer) are checked on the host, by
# tests/perf/loader_chains.py.
record() {
	local name=$1
	shift
	record_as "$name" -g "$@"
}
# record_as NAME CALL-GRAPH-OPTIONS CMD...: the same, with other call-graph
# options (one word, split here).
record_as() {
	local name=$1 callgraph=$2
	shift 2
	# shellcheck disable=SC2086 # the options, word-split on purpose
	perf record --no-bpf-event -B -q -N -e cpu-clock -F 1000 $callgraph -o "$D/$name.data" -- "$@" >"$D/$name.log" 2>&1 ||
		{ cat "$D/$name.log"; return 1; }
}
unwinder_walks() { "$CTL" status | awk -F': ' '$1 == "unwind walks (sample)" { print $2 }'; }

check "perf record -g of a dlopen()ing program" record dlopen "$CTL" run -- "$DL" "$LIB" open work:"$WORK" close
check "perf record -g across dlclose and re-dlopen elsewhere" record reopen \
	"$CTL" run -- "$DL" "$LIB" open work:0.3 base close block open base work:"$WORK" close
# A chain through all 50 of manylibs' libraries: a walk across more objects
# than the deferred path keeps parsed at once (checked on the host too).
check "perf record -g of a chain through 50 libraries" record many-g \
	"$CTL" run -- "$PROGS/manylibs" chain 1
check "perf record --call-graph fp,defer of the chain through 50 libraries" record_as many-defer \
	"--call-graph fp,defer" "$CTL" run -- "$PROGS/manylibs" chain 1

# 1,000 dlopen/dlclose cycles leave nothing behind.
cycles_leave_nothing() {
	start cycles paused "$CTL" run -- "$DL" "$LIB" cycle:$CYCLES pause || return 1
	"$CTL" list --pid "$bg"
	local lib_sections during registered
	lib_sections=$(sections_of "$LIB")
	during=$(status_of sections)
	registered=$(status_of registered)
	stop
	echo "library sections $lib_sections; module sections $during (before: $sections0)," \
		"registered $registered (before: $registered0)"
	[ "$lib_sections" = 0 ] && [ "$during" -le $((sections0 + 2)) ] &&
		[ "$registered" -ge $((registered0 + CYCLES)) ]
}
check "$CYCLES dlopen/dlclose cycles: no library section left" cycles_leave_nothing
check "after exit: module holds no more sections than before" test "$(status_of sections)" = "$sections0"
check "after exit: module holds no more bytes than before" test "$(status_of bytes)" = "$bytes0"

# register --pid: profile a process started without the audit library.
if start running base "$DL" "$LIB" open base work:600; then
	check "before register --pid: nothing registered" test "$(sections_of "$LIB")" = 0
	check "register --pid registers a running process's objects" "$CTL" register --pid "$bg"
	check "the library and the program are listed" sh -c \
		"'$CTL' list --pid $bg | grep -q ' $LIB\$' && '$CTL' list --pid $bg | grep -q ' $DL\$'"
	check "register --pid again: already registered, no error" "$CTL" register --pid "$bg"
	check "register --pid as another user: permission denied, explained" sh -c \
		"setpriv --reuid=65534 --regid=65534 --clear-groups '$CTL' register --pid $bg 2>&1 | grep -q 'permission denied'"
	check "perf record -g -p of the registered process" sh -c \
		"perf record --no-bpf-event -B -q -N -e cpu-clock -F 1000 -g -o '$D/pid.data' -p $bg -- sleep $WORK >'$D/pid.log' 2>&1"
	check "unregister --pid removes them" sh -c \
		"'$CTL' unregister --pid $bg && '$CTL' list --pid $bg | grep -q ': 0 sections'"
else
	_result "not ok" "register --pid: test process did not start"
fi
stop
check "register --pid --no-synth of a process without .sframe fails, explained" sh -c \
	"sleep 30 & p=\$!; '$CTL' register --no-synth --pid \$p 2>&1 | grep -q 'has an SFrame section'; r=\$?; kill \$p; exit \$r"
check "list of every process runs" "$CTL" list
check "after all: module sections back to $sections0" test "$(status_of sections)" = "$sections0"
echo "# unwinder walks (sample path) so far: $(unwinder_walks)"

# The program itself is registered by the module at exec already.
check "manylibs with the audit library: 51 objects registered" sh -c \
	"LD_AUDIT='$AUDIT' SFRAME_AUDIT_DEBUG=1 '$PROGS/manylibs' 2>&1 | grep -cE ': (registered text|text .* already registered)' | grep -qx 51"
unload_module
mkdir -p "$SFRAME_OUT/loader"
find "$D" -maxdepth 1 -type f -exec cp {} "$SFRAME_OUT/loader/" \;
