# SPDX-License-Identifier: GPL-2.0
# The module loads, creates /dev/sframe for every user, answers the version
# ioctl by the documented rules, and unloads cleanly, many times.
. "$SFRAME_SRC/tests/lib.sh"

unload_module
check "insmod" insmod "$SFRAME_KO"
check "/dev/sframe is a character device" test -c /dev/sframe
check "/dev/sframe has mode 0666" test "$(stat -c %a /dev/sframe)" = 666
check "version ioctl answers" "$PROGS/abi-version" basic
check "version ioctl as an unprivileged user" setpriv --reuid=65534 --regid=65534 --clear-groups "$PROGS/abi-version" basic
check "size below version 0 is EINVAL" "$PROGS/abi-version" too-small
check "non-zero reserved field is EINVAL" "$PROGS/abi-version" reserved
check "larger structure with zero tail accepted" "$PROGS/abi-version" zero-tail
check "larger structure with non-zero tail is E2BIG" "$PROGS/abi-version" nonzero-tail
check "bad pointer is EFAULT" "$PROGS/abi-version" bad-pointer
check "unknown commands are ENOTTY" "$PROGS/abi-version" unknown-command
check "rmmod" rmmod sframe_unwind
check "/dev/sframe is gone after rmmod" test ! -e /dev/sframe

# Each cycle patches two ftrace sites and waits for several grace periods:
# about 3 s under single-threaded TCG (5 on arm64), so make test runs 4 on
# the test kernels, whose lockdep and KASAN (x86-64) see the races, 2 on
# Debian's, and make stress (SFRAME_STRESS=1) 100.
cycles=4
on_test_kernel || cycles=2
[ "${SFRAME_STRESS:-0}" = 1 ] && cycles=100
# Meanwhile processes exec (registered by the module at exec) and fork
# (children inherit).
check "insmod/rmmod $cycles times while processes fork and exec" reload_while_churning "$cycles"

# The device's file operations name the module as their owner, so a file
# open in another process pins it: rmmod is refused and the module stays,
# until the file is closed.  kmod's rmmod refuses by the reference count
# alone ("is in use"); the delete_module() system call itself answers
# EWOULDBLOCK (EAGAIN), not EBUSY, which is for modules others depend on.
delete_module_errno() {
	python3 -c 'import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
nr = {"x86_64": 176, "aarch64": 106}[os.uname().machine]
r = libc.syscall(nr, b"sframe_unwind", os.O_NONBLOCK)
print(0 if r == 0 else ctypes.get_errno())'
}
pinned_while_open() {
	local holder ready=/tmp/sframe-holder.ready out errno=none held=1
	rm -f "$ready"
	insmod "$SFRAME_KO" || return 1
	sh -c 'exec 3</dev/sframe && touch "$1" && exec sleep 60' sh "$ready" &
	holder=$!
	for _ in $(seq 100); do [ -e "$ready" ] && break; sleep 0.1; done
	if [ -e "$ready" ]; then
		echo "refcnt while open: $(cat /sys/module/sframe_unwind/refcnt)"
		out=$(rmmod sframe_unwind 2>&1) && held=0
		echo "rmmod: ${out:-succeeded}"
		errno=$(delete_module_errno)
		echo "delete_module errno: $errno"
		module_loaded sframe_unwind && test -c /dev/sframe &&
			"$PROGS/abi-version" basic || held=0
	else
		echo "the holder did not open /dev/sframe"
		held=0
	fi
	kill "$holder"
	wait "$holder" 2>/dev/null
	[ "$held" = 1 ] && [ "$errno" = 11 ] && rmmod sframe_unwind && ! module_loaded sframe_unwind
}
check_show "an open /dev/sframe pins the module (EAGAIN), rmmod after close" pinned_while_open
