# SPDX-License-Identifier: GPL-2.0
# In the guest of tests/host/deb-test: Debian's 7.3 kernel, booted on a
# copy of its root into which both packages were installed with apt.
# The module is loaded as a user loads it (modprobe: the DKMS build must
# be where modprobe finds it), the daemon is started as its systemd unit
# starts it (the installed unit's ExecStart, environment, directories and
# capability bounding set: virtme-ng's init is not systemd), and gzip is
# recorded system-wide.  The recording goes to $SFRAME_OUT/deb, where
# tests/perf/deb_chains.py counts its chains on the host.
#
#   guest.sh VERSION        VERSION: the packages' (the module reports it)
. "$SFRAME_SRC/tests/lib.sh"

VERSION=$1
UNIT=/usr/lib/systemd/system/sframectl-daemon.service
D=$SFRAME_OUT/deb
rm -rf "$D"
mkdir -p "$D"

check "modprobe sframe_unwind" modprobe sframe_unwind
from_dkms() {
	local f
	f=$(modinfo -F filename sframe_unwind)
	echo "$f"
	[[ $f == */updates/dkms/sframe_unwind.ko* ]]
}
check_show "the module loaded is the one DKMS installed (updates/dkms)" from_dkms
check "it reports the packages' version ($VERSION)" \
	sh -c "sframectl status | grep -qx 'module version: $VERSION'"
# With --debug the audit library says what it registers: it was found
# (in the multiarch directory, sframectl run's default) and loaded.
check_show "sframectl run finds and loads the packaged audit library" \
	sh -c 'sframectl run --debug -- /bin/true 2>&1 | tee /tmp/run.log | grep -m2 "^sframe-audit: " && ! grep -q "cannot find" /tmp/run.log'

# unit KEY: the values of KEY in the installed unit, one per line.
unit() { sed -n "s/^$1=//p" "$UNIT"; }
DPID=
# start_as_unit: the daemon in the background of this shell (not of a
# check's subshell, which would lose its pid), then waits for its first
# scan.
start_as_unit() {
	local caps exec_start dir
	exec_start=$(unit ExecStart)
	caps=$(unit CapabilityBoundingSet | tr ' ' '\n' | sed 's/^CAP_/+/' | tr 'A-Z' 'a-z' | paste -sd,)
	# RuntimeDirectory= and CacheDirectory=, made as systemd makes them;
	# the root is read-only in the guest: a tmpfs stands in for /var/cache.
	mkdir -p "/run/$(unit RuntimeDirectory)"
	dir=/var/cache/$(unit CacheDirectory)
	mkdir -p "$dir" 2>/dev/null || { mount -t tmpfs cache /var/cache && mkdir -p "$dir"; }
	echo "ExecStart: $exec_start; bounding set: $caps; environment: $(unit Environment | paste -sd' ')"
	# shellcheck disable=SC2046
	setpriv --bounding-set=-all,"$caps" --no-new-privs -- \
		env $(unit Environment) $exec_start >/dev/null 2>"$D/daemon.log" &
	DPID=$!
	local end=$((SECONDS + 300))
	until sframectl status 2>/dev/null | grep -q '^daemon scans: [1-9]'; do
		kill -0 "$DPID" 2>/dev/null && [ $SECONDS -lt $end ] || { cat "$D/daemon.log"; return 1; }
		sleep 0.5
	done
	sframectl status | grep -E '^daemon: running'
}
rc=0
start_as_unit >/tmp/deb-start.log 2>&1 || rc=$?
check_show "the daemon starts as its unit would, and scans every process" \
	sh -c "cat /tmp/deb-start.log; exit $rc"

# daemon_idle: the daemon used under 10% of a CPU over 2 s.
daemon_idle() {
	local a b
	read -r -a a <"/proc/$DPID/stat"
	sleep 2
	read -r -a b <"/proc/$DPID/stat"
	[ $((b[13] + b[14] - a[13] - a[14])) -lt 20 ]
}
# A user's first perf and gzip runs make the daemon generate their
# objects' sections (seconds under TCG); measured here is what follows.
# The first gzip also sizes the recorded one to about 5 s, whatever the
# guest's speed (KVM or TCG).
GZ_IN=/tmp/deb-gzip.in
warm() {
	local t0 t1 ms
	perf record -N -a -o /tmp/deb-warm.data -q -- true && rm -f /tmp/deb-warm.data
	head -c 2500000 /dev/urandom >/tmp/deb-small.in
	t0=$(date +%s%N)
	gzip -9 -c /tmp/deb-small.in >/dev/null
	t1=$(date +%s%N)
	ms=$(((t1 - t0) / 1000000 + 1))
	# 2.5 MB took ms: about 5 s of it, between 2.5 and 200 MB.
	size=$((2500000 * 5000 / ms))
	[ $size -ge 2500000 ] || size=2500000
	[ $size -le 200000000 ] || size=200000000
	echo "2.5 MB in $ms ms: recording gzip -9 of $size bytes"
	head -c $size /dev/urandom >"$GZ_IN"
	rm -f /tmp/deb-small.in
	local end=$((SECONDS + 600))
	until daemon_idle; do [ $SECONDS -lt $end ] || return 1; done
}
check_show "daemon warm: perf's and gzip's objects generated" warm
record() {
	perf record -N -a -g -e cpu-clock -F 1000 -k CLOCK_MONOTONIC -o /tmp/daemon-g.data -- \
		gzip -9 -c "$GZ_IN" >/dev/null 2>"$D/record.log" || { cat "$D/record.log"; return 1; }
	cp /tmp/daemon-g.data "$D/" && rm -f /tmp/daemon-g.data
}
check "perf record -a -g of gzip, with the daemon running" record
rm -f "$GZ_IN"
rc=0
if [ -n "$DPID" ]; then
	kill -TERM "$DPID" && wait "$DPID" || rc=$?
else
	rc=1
fi
check "the daemon exits 0 on SIGTERM" test $rc = 0
check "rmmod sframe_unwind" rmmod sframe_unwind
