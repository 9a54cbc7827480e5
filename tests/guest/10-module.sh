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

cycle() {
	local i
	for i in $(seq 100); do
		insmod "$SFRAME_KO" || return 1
		test -c /dev/sframe || return 1
		rmmod sframe_unwind || return 1
	done
}
check "insmod/rmmod 100 times" cycle
check "rmmod while /dev/sframe is open is refused" sh -c '
	insmod "$SFRAME_KO" && exec 3</dev/sframe && ! rmmod sframe_unwind 2>/dev/null &&
	exec 3<&- && rmmod sframe_unwind'
