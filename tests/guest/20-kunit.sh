# SPDX-License-Identifier: GPL-2.0
# The KUnit suites of sframe_unwind_test.ko all pass.  They run when the
# module loads or through debugfs (see below); results come from debugfs, KTAP.
. "$SFRAME_SRC/tests/lib.sh"

# The registry's fault-injection test fails its own allocations through
# fail-nth; let that reach GFP_KERNEL allocations too (failslab skips
# allocations that may sleep by default), and without the stack trace
# failslab prints for each failure it injects (a splat for check-dmesg).
failslab=/sys/kernel/debug/failslab
[ -w $failslab/ignore-gfp-wait ] && echo N >$failslab/ignore-gfp-wait && echo 0 >$failslab/verbose
# A kernel without KUnit (Debian's) has no test module: say so, as a skip.
if [ -z "${SFRAME_TEST_KO:-}" ]; then
	skip "sframe_unwind_test" "$SFRAME_KERNEL has no KUnit (CONFIG_KUNIT unset)"
	exit 0
fi
if ! insmod "$SFRAME_TEST_KO"; then
	_result "not ok" "insmod sframe_unwind_test"
	exit 0
fi
suites=0
for dir in /sys/kernel/debug/kunit/sframe_unwind*; do
	[ -f "$dir/results" ] || continue
	suites=$((suites + 1))
	suite=$(basename "$dir")
	# Without CONFIG_KUNIT_AUTORUN_ENABLED (Debian's config, which the test
	# kernel keeps) loading registers the suites without running them, and
	# debugfs reports a suite that never ran as "ok" with no case lines.
	# Run it through debugfs then.
	grep -q -E '^    (not )?ok ' "$dir/results" || echo 1 >"$dir/run"
	mkdir -p "$SFRAME_OUT/kunit"
	cp "$dir/results" "$SFRAME_OUT/kunit/$suite.ktap"
	# Each test case's line is indented one level: "    ok 3 name".
	while read -r status num rest; do
		name=${rest#- }
		if [ "$status" = ok ]; then
			_result ok "kunit $suite: $name"
		else
			_result "not ok" "kunit $suite: $name"
			sed 's/^/# /' "$dir/results" | tail -30
		fi
	done < <(sed -n -E 's/^    (not ok|ok) /\1 /p' "$dir/results" | sed 's/^not ok/not_ok/')
	top=$(grep -E '^(not )?ok [0-9]+ ' "$dir/results" | tail -1)
	cases=$(sed -n -E 's/^    1\.\.([0-9]+)$/\1/p' "$dir/results")
	ran=$(grep -c -E '^    (not )?ok ' "$dir/results")
	[ "$ran" = "${cases:-none}" ] || top="not ok: $ran of ${cases:-?} cases ran"
	case $top in
	ok*) _result ok "kunit suite $suite (${cases:-?} cases)" ;;
	*) _result "not ok" "kunit suite $suite: ${top:-no result}" ;;
	esac
done
[ "$suites" -gt 0 ] || _result "not ok" "kunit: no sframe_unwind suites in debugfs"
[ -w $failslab/ignore-gfp-wait ] && echo Y >$failslab/ignore-gfp-wait && echo 2 >$failslab/verbose
check "rmmod sframe_unwind_test" rmmod sframe_unwind_test
