# SPDX-License-Identifier: GPL-2.0
# The section registry: register/list/unregister, every errno, lifetime
# (munmap, exec, fork, exit), sharing, limits, permissions, concurrency,
# an ioctl fuzz loop and kmemleak.  SFRAME_STRESS=1 runs the long variants.
. "$SFRAME_SRC/tests/lib.sh"

R=$PROGS/registry
stress() { [ "${SFRAME_STRESS:-0}" = 1 ]; }
# The ioctls alone: the module's own registrations at exec and fork (and
# their cases here) are 35-lifecycle's.
insmod_ioctl_only() {
	insmod "$SFRAME_KO" "$@" && "$PROGS/unwind-ctl" set 12 0 >/dev/null
}

unload_module
check "insmod (exec and fork registration off)" insmod_ioctl_only
check "register, list and remove the program's own .sframe" "$R" self
check "each errno (EINVAL, EFAULT, E2BIG, EEXIST, ENOENT, ENOTTY)" "$R" errno
check "munmap or MAP_FIXED over registered text drops it" "$R" munmap
check "file-backed text: kept through mprotect(), dropped when unmapped, moved or replaced" "$R" munmap-file
check "exec registration off: the new image has no registrations" "$R" exec
check "fork inheritance off: the child starts empty" "$R" fork
# Other processes: a set-user-ID-root copy of the program checks that a
# descriptor does not follow its process into a set-user-ID program (output
# says if the copy could not run as root).
cp "$R" /tmp/registry-suid && chmod 4755 /tmp/registry-suid
check_show "another process through /proc/PID/mem or auxv (own, child, root's, exited, setuid exec)" \
	"$R" procfd /tmp/registry-suid
check_show "the same section in 100 processes is held once" "$R" share 100
check_show "a copy whose last user went is kept, and taken back by the next registration" "$R" kept
check "bytes that differ from a held or kept copy only in their middle are compared, not shared" "$R" middle
check_show "registration by tag: found without the bytes, by its user only" "$R" tag
check "as an unprivileged user" setpriv --reuid=65534 --regid=65534 --clear-groups "$R" self
if stress; then
	check_show "8 threads for 30 s" "$R" threads 30
else
	check_show "8 threads for 10 s" "$R" threads 10
fi
if stress; then
	check_show "fuzz: 100000 ioctls" "$R" fuzz 100000 $RANDOM
else
	check_show "fuzz: 10000 ioctls" "$R" fuzz 10000 $RANDOM
fi
check_show "registration of a libc-sized section (figures)" "$R" bench 10

procs=300
stress && procs=1000
kmemleak=/sys/kernel/debug/kmemleak
if [ -w $kmemleak ]; then
	echo clear >$kmemleak
	check_show "$procs processes register and exit: counters back to zero" "$R" churn $procs
	check "kmemleak reports nothing for the module" kmemleak_clean
else
	check "$procs processes register and exit: counters back to zero" "$R" churn $procs
	if on_test_kernel; then
		_result "not ok" "kmemleak not available ($kmemleak)"
	else
		skip "kmemleak reports nothing for the module" "no kmemleak in $SFRAME_KERNEL ($kmemleak)"
	fi
fi
# What one copy of the program's section is charged: its bytes and its
# lookup index (the byte limits below are counted in copies).
charge=$("$R" copy-charge) || charge=
check "a copy is charged its bytes and its lookup index ($charge bytes)" test -n "$charge"
check "rmmod" rmmod sframe_unwind

check "insmod with max_sections_per_mm=4 and max_total_bytes of one copy" \
	insmod_ioctl_only max_sections_per_mm=4 max_total_bytes="${charge:-1}"
check "limits: ENOSPC per process and module-wide" "$R" limits
check "rmmod" rmmod sframe_unwind

# Kept copies: a quarter of max_kept_bytes a user (room for two copies of
# the program's section and 4 bytes here), none with max_kept_bytes=0.
kept_max=$((8 * (${charge:-1} + 4)))
check "insmod with max_kept_bytes of 8 copies" insmod_ioctl_only max_kept_bytes=$kept_max
check_show "kept copies: a user keeps a quarter of max_kept_bytes, the oldest go" \
	"$R" kept-bound 5 $kept_max
check "rmmod" rmmod sframe_unwind
check "insmod with max_kept_bytes of 4 copies" insmod_ioctl_only max_kept_bytes=$((4 * (${charge:-1} + 4) + 2))
check_show "a user's only kept copy pushed out by another: the next one taken back is charged to the user" \
	setpriv --reuid=65534 --regid=65534 --clear-groups "$R" kept-one
check "rmmod" rmmod sframe_unwind
check "insmod with max_kept_bytes=0" insmod_ioctl_only max_kept_bytes=0
check_show "max_kept_bytes=0: nothing is kept" "$R" kept-bound 3 0
check "rmmod" rmmod sframe_unwind

# Per-user limits: 256 sections and 64 distinct copies a user (each 4 bytes
# longer than the program's, the same index); 16 other users hold 64
# copies each while the first user's process exits.
charge=${charge:-1}
check "insmod with max_sections_per_user=256 and max_bytes_per_user of 64 copies" \
	insmod_ioctl_only max_sections_per_user=256 max_bytes_per_user=$((64 * (charge + 4) + charge / 2))
check_show "limits: one user fills its own, others still register, no sharing across users" \
	"$R" userlimits 256 64 16
check "rmmod" rmmod sframe_unwind

# Registrations belong to the mm, not the file: rmmod frees them while their
# process lives on, and the process exits cleanly afterwards.
hold() {
	local out=/tmp/registry-hold pid
	insmod_ioctl_only || return 1
	"$R" hold >$out &
	pid=$!
	for _ in $(seq 100); do grep -q ready $out && break; sleep 0.1; done
	grep -q ready $out || return 1
	rmmod sframe_unwind || return 1
	kill $pid && wait $pid
	[ $? = 143 ]
}
check "rmmod while a process holds a registration" hold
load_module
