# SPDX-License-Identifier: GPL-2.0
# Hardening (issue 23): what one user can make the module hold or wait for,
# and what it can learn of others.  Each check fails on the module as it
# was when the issue was filed and passes once its finding is fixed:
#
# - STATS and LIST tell a user nothing of other users' registrations;
# - the ioctl fuzzer as root of a user namespace with subordinate ids;
# - fork children that unregister what they inherited pin no kernel memory
#   outside their memory cgroup, and no more than the limits allow;
# - 16 subordinate ids of one user do not take the module-wide limits;
# - a user's forks of a process the daemon registered do not use up the
#   daemon's (root's) limits;
# - exec loops of a program with a 16 MiB .sframe do not stall another
#   user's register and list;
# - rmmod finishes while an exec's registration waits on a FUSE server
#   that stopped answering.
#
# Limits are set small with module parameters so that each runs in
# seconds under TCG.  tests/progs/hardening.c holds the cases.
. "$SFRAME_SRC/tests/lib.sh"

H=$PROGS/hardening
L=$PROGS/lifecycle
CTL=$SFRAMECTL
UCTL=$PROGS/unwind-ctl
CG=/sys/fs/cgroup
D=/tmp/sframe-hardening
stress() { [ "${SFRAME_STRESS:-0}" = 1 ]; }
rm -rf "$D"
mkdir -p "$D"

# as UID CMD...: CMD as user and group UID, without supplementary groups.
as() {
	local u=$1
	shift
	setpriv --reuid="$u" --regid="$u" --clear-groups -- "$@"
}
# $(as_cmd UID) CMD... &: the same in the background, where $! must be
# CMD's pid (a function run with & is a subshell of its own: $! would be
# root's subshell, and killing it would leave CMD running).
as_cmd() { echo "setpriv --reuid=$1 --regid=$1 --clear-groups --"; }

# figure NAME FILE: the value of a "NAME VALUE" line of FILE.
figure() { awk -v k="$1" '$1 == k { print $2 }' "$2"; }

# The memory controller of cgroup v2, and an empty cgroup NAME in it.
cgroup_v2() {
	if ! mountpoint -q $CG; then
		mount -t cgroup2 none $CG || return 1
	fi
	grep -qw memory $CG/cgroup.controllers &&
		echo +memory >$CG/cgroup.subtree_control
}
new_cgroup() {
	rmdir "$CG/$1" 2>/dev/null
	mkdir "$CG/$1" && grep -qw memory "$CG/$1/cgroup.controllers"
}
check "cgroup v2 with the memory controller" cgroup_v2
# Unprivileged user namespaces (Debian's switch, where the kernel has it).
[ ! -w /proc/sys/kernel/unprivileged_userns_clone ] ||
	echo 1 >/proc/sys/kernel/unprivileged_userns_clone

reload() {
	unload_module && insmod "$SFRAME_KO" "$@"
}

# --- STATS and LIST: nothing of other users (finding 5) -------------------------
check "insmod" reload

# An unprivileged user's STATS, before root runs a program that exec
# registers and perf samples, and while it runs: the same (or STATS
# refused).  The module's figures were module-wide: user nobody read root's
# sections, copies, bytes (the program's .sframe length), processes and
# unwind counters.
stats_private() {
	local before after p rc=0
	before=$(as 65534 "$H" stats) || { echo "$before"; return 1; }
	"$L" spin 60 &
	p=$!
	wait_for 20 sh -c "'$CTL' list --pid $p | grep -q ' exec '" || rc=1
	perf record --no-bpf-event -B -q -g -F 500 -o "$D/stats.data" -p "$p" -- sleep 2 >/dev/null 2>&1 || rc=1
	after=$(as 65534 "$H" stats) || rc=1
	kill "$p"
	wait "$p" 2>/dev/null
	echo "user nobody, before: $before"
	echo "user nobody, while root's program ran: $after"
	[ "$rc" = 0 ] && [ "$before" = "$after" ]
}
check_show "STATS: user nobody reads nothing of root's registration and sampling" stats_private

# LIST's "shared" on a user's own process counts only that user's
# registrations: root registers the same program's .sframe into a process
# of user 1000 and one of user 1001 (as the daemon does: one copy, root's);
# user 1000 must not learn that user 1001 runs the program too.
shared_private() {
	local a b out rc=0
	"$UCTL" set 4 0 >/dev/null || return 1
	$(as_cmd 1000) "$L" spin 60 &
	a=$!
	$(as_cmd 1001) "$L" spin 60 &
	b=$!
	sleep 0.5
	"$CTL" register --pid "$a" --no-synth >/dev/null &&
		"$CTL" register --pid "$b" --no-synth >/dev/null || rc=1
	out=$(as 1000 "$H" shared "$a") || rc=1
	"$UCTL" set 4 4 >/dev/null || rc=1
	kill "$a" "$b"
	wait "$a" "$b" 2>/dev/null
	echo "$out"
	[ "$rc" = 0 ] && [ "$(echo "$out" | figure max_shared /dev/stdin)" = 0 ]
}
check_show "LIST: shared counts none of another user's processes (root registered both)" shared_private

# --- The fuzzer in a user namespace (issue 23's tests) ---------------------------
fuzz=3000
stress && fuzz=100000
# Exec and fork registration off: the fuzzer's program registers itself.
check "exec and fork registration off" sh -c "'$UCTL' set 12 0 >/dev/null"
check_show "fuzz: $fuzz ioctls as root of user 1000's namespace (ids 100000-100015)" \
	"$H" userns 1000 100000 16 "$PROGS/registry" fuzz $fuzz $RANDOM
check "exec and fork registration on" sh -c "'$UCTL' set 12 12 >/dev/null"

# --- Fork snapshots: charged and bounded (finding 1) ------------------------------
# A parent registers FORK_SECTIONS one-byte ranges (one shared copy) and
# forks FORK_CHILDREN children one after another; each unregisters all it
# inherited and sleeps.  Compared with the same children of a parent with
# one section, each child may pin 64 KiB more at most: of kernel memory not
# charged to their memory cgroup, and in the second half of them (once a
# user limit of twice the parent's sections is reached) at all.  The
# module kept each child's snapshot, 4096 sections of 48 bytes, a 256 KiB
# GFP_ATOMIC allocation, whole after the child unregistered: not charged,
# and bounded by the number of processes only: 261 KiB a child then, and
# 277 KiB past the limit.  The bound leaves room for the slab's noise:
# from -14 to 23 KiB a child in runs of the fixed module.
FORK_SECTIONS=4096
FORK_CHILDREN=32
check "insmod max_sections_per_user=$((2 * FORK_SECTIONS + 64))" \
	reload max_sections_per_user=$((2 * FORK_SECTIONS + 64))
fork_pin() {
	new_cgroup sframe-fork || return 1
	timeout 600 sh -c 'echo $$ >"$1/cgroup.procs" && exec "$2" fork-pin "$1" "$3" "$4"' \
		_ "$CG/sframe-fork" "$H" $FORK_SECTIONS $FORK_CHILDREN >"$D/fork.out" 2>&1
}
fork_rc=0
fork_pin || fork_rc=$?
# fork_within FIGURE: the run succeeded, and FIGURE (KiB per child) is at
# most 64; the run's figures in any case.
fork_within() {
	local v
	grep -v -E '^[a-z_]+ -?[0-9]+$' "$D/fork.out"
	v=$(figure "$1" "$D/fork.out")
	[ "$fork_rc" = 0 ] && [ -n "$v" ] && [ "$v" -le 64 ]
}
check_show "fork: $FORK_CHILDREN children that unregister $FORK_SECTIONS inherited sections pin nothing outside their memory cgroup" \
	fork_within uncharged_per_child_kib
check_show "fork: ... and nothing more once the user's section limit is reached" \
	fork_within second_half_per_child_kib
rmdir "$CG/sframe-fork" 2>/dev/null

# --- Subordinate ids (finding 3) ------------------------------------------------
# 64 sections and 8 copies a user, 8 users' worth module-wide.  User 1000's
# namespace maps 16 ids (100000-100015, as /etc/subuid would): each fills
# a user's limits.  User 2000 must still get its own share, and the 16 ids
# together hold one user's share at most.  The module counted per kuid:
# the 16 ids took 16 shares, the module-wide limits, and left user 2000
# nothing.
per=64
copies=8
# A copy's bytes and its lookup index, as the module charges them.
len=$("$H" copy-bytes)
user_bytes=$((copies * len + len / 2))
check "insmod with 64 sections and $user_bytes bytes a user, 8 users' worth in all" \
	reload max_sections_per_user=$per max_total_sections=$((8 * per)) \
	max_bytes_per_user=$user_bytes max_total_bytes=$((8 * user_bytes))
subuid() {
	new_cgroup sframe-subuid && new_cgroup sframe-other &&
		timeout 300 "$H" subuid-fill 1000 100000 16 $per $copies "$CG/sframe-subuid" \
			2000 "$CG/sframe-other" >"$D/subuid.out" 2>&1
}
subuid_rc=0
subuid || subuid_rc=$?
subuid_other() {
	grep -v -E '^[a-z_]+ -?[0-9]+$' "$D/subuid.out"
	[ "$subuid_rc" = 0 ] && [ "$(figure other_sections "$D/subuid.out")" = $per ] &&
		[ "$(figure other_copies "$D/subuid.out")" = $copies ]
}
check_show "subordinate ids: another user still registers its share after 16 ids of one user filled theirs" \
	subuid_other
subuid_share() {
	local n
	n=$(figure ns_sections "$D/subuid.out")
	echo "the 16 ids hold $n sections; one user may hold $per"
	[ "$subuid_rc" = 0 ] && [ -n "$n" ] && [ "$n" -le $per ]
}
check_show "subordinate ids: the 16 ids of one user hold one user's share at most" subuid_share
rmdir "$CG/sframe-subuid" "$CG/sframe-other" 2>/dev/null

# --- The daemon's limits and fork children (finding 2) ---------------------------
# The daemon registers every process; its copies are root's.  User 1000's
# process with 50 libraries (53 sections, root's copies) forks 16
# children: 848 inherited sections, over root's limit of 400.  A new
# process of user 1001 must still be registered by the daemon.  The
# module charged an inherited section to the copy's owner, root: the
# daemon then got ENOSPC for every process.
export SFRAME_RUN_DIR=$D/run XDG_CACHE_HOME=$D/cache
DPID=
# Whatever happens to this script, its daemon does not outlive it.
trap '[ -z "$DPID" ] || kill -TERM "$DPID" 2>/dev/null' EXIT
start_daemon() {
	"$CTL" daemon --cache-mb 16 -v >/dev/null 2>"$D/daemon.log" &
	DPID=$!
	wait_for 180 sh -c "'$CTL' status 2>/dev/null | grep -q '^daemon scans: [1-9]'"
}
stop_daemon() {
	[ -z "$DPID" ] || { kill -TERM "$DPID" && wait "$DPID"; }
	DPID=
}
registered() { "$CTL" list --pid "$1" | grep -q "$2"; }
check "insmod max_sections_per_user=400" reload max_sections_per_user=400
# In this shell, not in a check's subshell, which would lose its pid.
rc=0
start_daemon || rc=$?
check "daemon starts and scans every process" test $rc = 0
daemon_forks() {
	local p q rc=0
	$(as_cmd 1000) "$H" fork-hold "$PROGS" 16 >"$D/hold.out" 2>&1 &
	p=$!
	wait_for 240 grep -q '^holding' "$D/hold.out" || rc=1
	cat "$D/hold.out"
	$(as_cmd 1001) sleep 600 &
	q=$!
	if wait_for 30 registered "$q" 'libc.so.6$'; then
		echo "user 1001's new process: registered"
	else
		echo "user 1001's new process: not registered after 30 s"
		rc=1
	fi
	if [ "$rc" != 0 ]; then
		"$CTL" status 2>&1 | tail -12
		tail -15 "$D/daemon.log"
	else
		grep -i -E 'space|limit|refus' "$D/daemon.log" | tail -3
	fi
	kill "$q" "$p"
	wait "$q" "$p" 2>/dev/null
	return $rc
}
check_show "daemon: a user's 16 forks of a registered process leave the daemon able to register others" \
	daemon_forks
rc=0
stop_daemon || rc=$?
check "daemon exits 0 on SIGTERM" test $rc = 0
unset SFRAME_RUN_DIR XDG_CACHE_HOME

# --- One mutex (finding 4) -------------------------------------------------------
# A program with a valid 16 MiB .sframe and 4 executable segments: each
# exec registers the section 4 times.  User 1000 keeps one running (its
# copy stays) and execs it in 8 loops; meanwhile user 1001 registers,
# lists and unregisters a small section of its own for LAT_SECONDS.  Its
# 99th percentile latency must stay under LAT_P99_MS.  Under TCG, beside
# another guest on 2 cores (2026-12-04): p99 43 ms; 247 ms with the module
# as it was when issue 23 was filed (one mutex held across the
# comparisons).  10 s make about 850 rounds (1,706 in 20 s on
# 2026-12-05), so the percentile stands on 8 of them; make stress
# measures for 60 s.
LAT_SECONDS=10
[ "${SFRAME_STRESS:-0}" = 1 ] && LAT_SECONDS=60
LAT_P99_MS=150
check "insmod" reload
big=$D/big-sframe
check_show "a program with a 16 MiB .sframe and 4 executable segments" \
	"$H" mkelf "$big" 4 20480 $((16 << 20))
latency() {
	local holder loops=() i rc=0
	$(as_cmd 1000) "$big" hold &
	holder=$!
	wait_for 120 sh -c "'$CTL' list --pid $holder | grep -q ': 4 sections'" ||
		{ echo "the program was not registered 4 times"; rc=1; }
	for i in 1 2 3 4 5 6 7 8; do
		$(as_cmd 1000) sh -c "while :; do '$big'; done" &
		loops+=($!)
	done
	sleep 2
	as 1001 "$H" latency $LAT_SECONDS >"$D/latency.out" 2>&1 || rc=1
	kill "${loops[@]}" "$holder"
	wait "${loops[@]}" "$holder" 2>/dev/null
	cat "$D/latency.out"
	local p99
	p99=$(figure p99_ms "$D/latency.out")
	[ "$rc" = 0 ] && [ -n "$p99" ] && [ "$p99" -lt $LAT_P99_MS ]
}
check_show "another user's register, list, unregister: p99 under $LAT_P99_MS ms during 8 exec loops of it" latency

# --- rmmod and a hung FUSE server (finding 6) -------------------------------------
# A program whose .sframe lies 8 MiB into its file, served by a FUSE
# server that answers no read beyond 4 MiB: the exec reads the headers,
# then the module's exec registration faults on the .sframe and waits.
# rmmod must end within 10 s all the same: unload, or be refused as "in
# use" (FUSE without async reads reads in the caller even for FOLL_NOWAIT,
# and the read pins the module); once the server is killed (which aborts
# the connection: the waiting read fails), it must unload within 10 s.
# The module waited for every pending exec work, without bound.
fuse_rmmod() {
	local mnt=$D/fuse srv prog rm rm_rc=0 rc=0
	"$H" mkelf "$D/stall" 1 $((8 << 20)) 65536 >/dev/null || return 1
	mkdir -p "$mnt"
	"$PROGS/fuse-stall" "$mnt" "$D/stall" $((4 << 20)) >"$D/fuse.log" 2>&1 &
	srv=$!
	wait_for 20 test -x "$mnt/prog" || { cat "$D/fuse.log"; kill "$srv"; return 1; }
	"$mnt/prog" hold &
	prog=$!
	if wait_for 20 grep -q '^stalled' "$D/fuse.log"; then
		echo "exec registration waits on the server: $(head -1 "$D/fuse.log")"
	else
		echo "no read of the .sframe waits on the server"
	fi
	# rmmod_within SECONDS: rmmod ends (unloads, or is refused) in time;
	# its exit status is left in $rm_rc.
	rmmod_within() {
		local i
		rmmod sframe_unwind 2>"$D/rmmod.err" &
		rm=$!
		for i in $(seq $(($1 * 10))); do
			kill -0 "$rm" 2>/dev/null || break
			sleep 0.1
		done
		if kill -0 "$rm" 2>/dev/null; then
			echo "rmmod still waiting after $1 s"
			return 1
		fi
		rm_rc=0
		wait "$rm" || rm_rc=$?
	}
	# While the read waits: rmmod unloads, or is refused as in use (the
	# read pins the module), in under 10 s either way.
	if rmmod_within 10; then
		if [ "$rm_rc" = 0 ]; then
			echo "rmmod unloaded the module in under 10 s"
		elif grep -q "in use" "$D/rmmod.err"; then
			echo "rmmod refused at once: $(cat "$D/rmmod.err")"
		else
			echo "rmmod failed otherwise: $(cat "$D/rmmod.err")"
			rc=1
		fi
	else
		rc=1
	fi
	# The server goes: the connection is aborted, the read fails, and the
	# module (if still loaded) unloads in under 10 s.
	kill -KILL "$srv"
	wait "$srv" 2>/dev/null
	if [ "$rc" = 0 ] && [ "$rm_rc" != 0 ]; then
		if rmmod_within 10 && [ "$rm_rc" = 0 ]; then
			echo "rmmod unloaded the module once the server was killed"
		else
			echo "rmmod did not unload the module once the server was killed: $(cat "$D/rmmod.err")"
			rc=1
		fi
	fi
	if [ "$rc" != 0 ] && kill -0 "$rm" 2>/dev/null; then
		wait_for 60 sh -c "! kill -0 $rm 2>/dev/null" &&
			echo "rmmod done once the server was killed" ||
			echo "rmmod still waiting 60 s after the server was killed"
		wait "$rm"
	fi
	kill -KILL "$prog" 2>/dev/null
	wait "$prog" 2>/dev/null
	umount -l "$mnt"
	return $rc
}
check "insmod" reload
check_show "rmmod ends within 10 s while an exec's registration waits on a stalled FUSE server, and unloads once it is gone" fuse_rmmod
check "the module loads again" load_module
