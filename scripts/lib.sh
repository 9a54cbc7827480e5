# SPDX-License-Identifier: GPL-2.0
# Shared settings for the scripts in this directory.  Sourced, not run.

set -euo pipefail

SFRAME_TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# Versions the project is tested with.  Changing one invalidates the caches
# that depend on it.
KERNEL_SERIES=7.3
LLVM_MAJOR=19
BINDGEN_VERSION=0.72.1
VIRTME_NG_VERSION=1.42
GUEST_SUITE=trixie

# Everything built or downloaded lives outside the repository.
SFRAME_CACHE=${SFRAME_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sframe-unwind}

export PATH="$HOME/.cargo/bin:$HOME/.local/bin:$PATH"

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# Progress of long steps.  On a terminal, one status line on standard
# error, redrawn in place while a step works: what it has done (objects
# built of the total expected and the time left) or how long it has run.
# When standard error is not a terminal (CI logs) or with
# SFRAME_PROGRESS=0, nothing but the one line per step the scripts log.
progress_on() { [ "${SFRAME_PROGRESS:-1}" != 0 ] && [ -t 2 ]; }
progress_show() { printf '\r\033[K%s' "${1:0:$((${COLUMNS:-80} - 1))}" >&2; }
progress_clear() { if progress_on; then printf '\r\033[K' >&2; fi; }

# duration SECONDS: "42 s", "3 min 05 s", "1 h 02 min".
duration() {
	local s=$1
	if [ "$s" -lt 60 ]; then echo "$s s"
	elif [ "$s" -lt 3600 ]; then printf '%d min %02d s\n' $((s / 60)) $((s % 60))
	else printf '%d h %02d min\n' $((s / 3600)) $((s % 3600 / 60)); fi
}

# Counts and times of the last complete run of each kind of step.
progress_dir() { echo "${PROGRESS_DIR:-$SFRAME_CACHE/progress}"; }
progress_get() { cat "$(progress_dir)/$1" 2>/dev/null || true; }
progress_put() { mkdir -p "$(progress_dir)" && echo "$2" >"$(progress_dir)/$1.tmp" && mv "$(progress_dir)/$1.tmp" "$(progress_dir)/$1"; }

# progress_wait PID LABEL [LOG PATTERN TOTAL]: wait for PID and return
# its exit status; meanwhile, on a terminal, show LABEL, the time spent
# and, with LOG, how many of its lines match PATTERN (grep -E: a build's
# objects) out of TOTAL (empty if unknown), with the time left at the pace
# so far.
progress_wait() {
	local pid=$1 label=$2 log=${3:-} pattern=${4:-} total=${5:-}
	local start=$SECONDS n elapsed text
	if progress_on; then
		while kill -0 "$pid" 2>/dev/null; do
			elapsed=$((SECONDS - start))
			text="$label: $(duration "$elapsed")"
			if [ -n "$log" ]; then
				n=$(grep -cE -- "$pattern" "$log" 2>/dev/null || true)
				if [ -z "$total" ]; then
					[ "${n:-0}" = 0 ] || text="$label: $n done, $(duration "$elapsed")"
				elif [ "${n:-0}" -le "$total" ]; then
					text="$label: $n/$total ($((100 * n / total))%), $(duration "$elapsed")"
					# At the pace so far, once there is one.
					if [ "$n" -ge 20 ] && [ "$elapsed" -ge 20 ]; then
						text+=", about $(duration $((elapsed * (total - n) / n))) left"
					fi
				else
					text="$label: $n (more than the $total of the last run), $(duration "$elapsed")"
				fi
			fi
			progress_show "$text"
			sleep 1
		done
		progress_clear
	fi
	wait "$pid"
}

# progress_relay LABEL NAME: copy standard input to standard output, line
# by line; on a terminal, while no line comes, a status line says how long
# LABEL has run, and until the first line how long it took the last time
# to start (NAME.start, stored).
progress_relay() {
	local label=$1 name=$2 start=$SECONDS line buf= first= last rc
	if ! progress_on; then
		cat
		return
	fi
	last=$(progress_get "$name.start")
	# At once, not after the first second without output: the status
	# says what is starting even when its first line is already there.
	progress_show "$label: starting, 0 s${last:+ (the last time: $(duration "$last"))}"
	while :; do
		rc=0
		IFS= read -r -t 1 line || rc=$?
		if [ "$rc" = 0 ]; then
			progress_clear
			printf '%s\n' "$buf$line"
			buf=
			if [ -z "$first" ]; then
				first=$((SECONDS - start))
				progress_put "$name.start" "$first"
			fi
		elif [ "$rc" -gt 128 ]; then
			buf+=$line
		else
			progress_clear
			[ -z "$buf$line" ] || printf '%s' "$buf$line"
			return 0
		fi
		if [ -z "$first" ]; then
			progress_show "$label: starting, $(duration $((SECONDS - start)))${last:+ (the last time: $(duration "$last"))}"
		else
			progress_show "$label: $(duration $((SECONDS - start)))"
		fi
	done
}

# guest_pipes CONSOLE LABEL NAME CMD...: CMD (vng) with its standard
# output and error on pipes, never on the caller's files.  virtme-ng gives
# QEMU the guest's output as files, "-chardev file,path=/proc/self/fd/1"
# (and fd/2 for the console), and QEMU opens a file chardev with O_TRUNC:
# were our standard output a regular file (the caller's log, `make demo
# >demo.log`), everything written to it before the boot would be gone.
# (Each port also reopens the stream at its own offset, so a file would
# have had the ports' writes over each other.)  The pipes are copied out:
# standard output to ours through progress_relay LABEL NAME, standard
# error to the file CONSOLE.  The status is CMD's (pipefail).
guest_pipes() {
	local console=$1 label=$2 name=$3
	shift 3
	{
		"$@" </dev/null 2>&1 >&3 3>&- | cat >"$console" 3>&-
	} 3>&1 | progress_relay "$label" "$name"
}

# progress_run LABEL LOG PATTERN TOTAL CMD...: CMD, its output appended to
# LOG, under progress_wait.
progress_run() {
	local label=$1 log=$2 pattern=$3 total=$4
	shift 4
	"$@" >>"$log" 2>&1 &
	progress_wait $! "$label" "$log" "$pattern" "$total"
}

# kbuild_run NAME LABEL LOG KMAKE TARGET...: `KMAKE prepare`, then `KMAKE
# TARGET...` (KMAKE: a command running the kernel's make in its
# directories), their output appended to LOG, with progress: Kbuild logs
# one line per step ("  CC      kernel/fork.o").  The total is the count
# of the last complete build of NAME (stored when one completes); without
# one, the steps of `prepare` and those a dry run (make -n) of the rest
# lists.
KBUILD_STEP='^  [A-Z]'
kbuild_run() {
	local name=$1 label=$2 log=$3 kmake=$4 total
	shift 4
	total=$(progress_get "$name.count")
	progress_run "$label" "$log" "$KBUILD_STEP" "$total" "$kmake" prepare || return
	if [ -z "$total" ]; then
		total=$(($(grep -cE -- "$KBUILD_STEP" "$log" || true) +
			$("$kmake" -n -k "$@" 2>/dev/null | grep -c "echo '  [A-Z]" || true)))
	fi
	progress_run "$label" "$log" "$KBUILD_STEP" "$total" "$kmake" "$@" || return
	progress_put "$name.count" "$(grep -cE -- "$KBUILD_STEP" "$log" || true)"
}

# The steps of a long run (scripts/run-tests) and the time left.
# steps_begin KIND, then steps_done NAME RESULT SECONDS as each step ends
# (from any subshell), then steps_end once the run is over.  steps_done
# logs one line, "NAME: RESULT, 42 s; about 9 min 10 s left": the time the
# last complete run of KIND took after the end of NAME.  Each run's times
# are stored (KIND.steps: its end since the start, its duration, its name)
# for the next; steps_last NAME prints the last run's duration of NAME.
steps_begin() {
	STEPS_KIND=$1
	STEPS_T0=$(date +%s)
	STEPS_LAST=$(progress_get "$1.steps")
	mkdir -p "$(progress_dir)"
	# Runs of two checkouts may overlap; an unfinished run's file is
	# removed the next day.
	find "$(progress_dir)" -name '*.steps.*' -mtime +1 -delete
	STEPS_NOW=$(mktemp "$(progress_dir)/$1.steps.XXXXXX")
}
steps_last() {
	awk -v name="$1" '{ at = $1; secs = $2; $1 = $2 = ""; if (substr($0, 3) == name) print secs }' <<<"$STEPS_LAST" | tail -1
}
steps_done() {
	local name=$1 result=$2 secs=$3 at left
	at=$(($(date +%s) - STEPS_T0))
	printf '%s %s %s\n' "$at" "$secs" "$name" >>"$STEPS_NOW"
	left=$(awk -v name="$1" '{ at = $1; $1 = $2 = ""; n = substr($0, 3) }
		n == name { mine = at } n == "(end)" { end = at }
		END { if (mine != "" && end > mine) print end - mine }' <<<"$STEPS_LAST")
	progress_clear
	log "$name: $result, $(duration "$secs")${left:+; about $(duration "$left") left}"
}
steps_end() {
	printf '%s 0 (end)\n' "$(($(date +%s) - STEPS_T0))" >>"$STEPS_NOW"
	mv "$STEPS_NOW" "$(progress_dir)/$STEPS_KIND.steps"
}

# suite_steps LABEL LOG SHOW: the output of tests/guest/run-all ("# NN-name"
# as a suite starts, "# NN-name: 42 s" as it ends, TAP lines between) from
# standard input into LOG; each suite a step (steps_done, as "LABEL:
# NN-name") as it ends, with its results and its time in the guest; on a
# terminal the failures as they come and, if SHOW is 1, a status line: the
# suite running and its results so far, or how long the guest has been
# booting.
suite_steps() {
	local label=$1 log=$2 show=$3 rc line buf= suite= ok=0 bad=0 t=$SECONDS last= booted=
	while :; do
		rc=0
		IFS= read -r -t 1 line || rc=$?
		if [ "$rc" -gt 128 ]; then
			buf+=$line
		elif [ "$rc" != 0 ] && [ -z "$buf$line" ]; then
			break
		else
			line=$buf$line buf=
			printf '%s\n' "$line" >&4
			if [[ $line =~ ^#\ ([0-9][0-9]-[a-z0-9-]+):\ ([0-9]+)\ s$ ]]; then
				steps_done "$label: ${BASH_REMATCH[1]}" "$ok passed, $bad failed" "${BASH_REMATCH[2]}"
				suite= t=$SECONDS
			elif [[ $line =~ ^#\ ([0-9][0-9]-[a-z0-9-]+)$ ]]; then
				suite=${BASH_REMATCH[1]} ok=0 bad=0 t=$SECONDS booted="between suites, "
				last=$(steps_last "$label: $suite")
			elif [[ $line == "ok "* ]]; then
				ok=$((ok + 1))
			elif [[ $line == "not ok "* ]]; then
				bad=$((bad + 1))
				if progress_on; then
					progress_clear
					printf '%s\n' "$line"
				fi
			fi
			[ "$rc" = 0 ] || break
		fi
		if [ "$show" = 1 ] && progress_on; then
			if [ -n "$suite" ]; then
				progress_show "$label: $suite: $ok passed, $bad failed, $(duration $((SECONDS - t)))${last:+ (the last run: $(duration "$last"))}"
			else
				progress_show "$label: ${booted:-booting, }$(duration $((SECONDS - t)))"
			fi
		fi
	done 4>"$log"
	progress_clear
}

# debootstrap_run NAME LOG ARG...: debootstrap ARG..., its output appended
# to LOG, with progress: one "I: Retrieving/Validating/Extracting/
# Unpacking/Configuring ..." line per package and step, against the count
# of NAME's last complete run (stored).
debootstrap_run() {
	local name=$1 log=$2 step='^I: (Retrieving|Validating|Extracting|Unpacking|Configuring) '
	shift 2
	progress_run "debootstrap" "$log" "$step" "$(progress_get "$name.count")" debootstrap "$@" || return
	progress_put "$name.count" "$(grep -cE -- "$step" "$log" || true)"
}

# The Debian mirror this machine already uses, read from its apt sources.
debian_mirror() {
	local uri
	uri=$(sed -n 's/^URIs:[[:space:]]*//p' /etc/apt/sources.list.d/*.sources 2>/dev/null |
		tr ' ' '\n' | grep -v -- '-security' | grep -m1 -i debian || true)
	if [ -z "$uri" ] && [ -f /etc/apt/sources.list ]; then
		uri=$(awk '$1 == "deb" && $0 !~ /security/ { for (i = 2; i <= NF; i++) if ($i ~ /:\/\//) { print $i; exit } }' \
			/etc/apt/sources.list)
	fi
	[ -n "$uri" ] || die "no Debian mirror found in the machine's apt sources"
	printf '%s\n' "${uri%/}"
}

# A private apt configuration for suites the host does not use (trixie,
# trixie-backports): downloads only, the host's package state is untouched.
private_apt() {
	local root=$SFRAME_CACHE/apt mirror
	if [ ! -f "$root/sources.list" ]; then
		mirror=$(debian_mirror)
		mkdir -p "$root/lists/partial" "$root/archives/partial"
		{
			echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror $GUEST_SUITE main"
			echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror $GUEST_SUITE-backports main"
		} >"$root/sources.list.tmp"
		mv "$root/sources.list.tmp" "$root/sources.list"
	fi
	"${PRIVATE_APT_CMD:-apt-get}" -o Dir::Etc::SourceList="$root/sources.list" \
		-o Dir::Etc::SourceParts=/dev/null \
		-o Dir::State::Lists="$root/lists" \
		-o Dir::Cache::Archives="$root/archives" \
		-o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache= \
		-o APT::Architecture=amd64 -o APT::Sandbox::User=root "$@"
}

# Boot-time trimming of a guest root, applied to new and existing roots
# alike (bump the version to re-apply).  virtme-ng-init runs
# systemd-tmpfiles and a full udev coldplug and settle before the command:
# under TCG that was 35 of the 45 s from boot to command.  virtme-ng needs
# udev only for the /dev/virtio-ports/ links through which the command's
# input and output and its exit status go: every tmpfiles.d entry and
# every udev rule but 50-udev-default.rules (which has the links' rule) is
# masked, and systemd-udevd is a script that makes those links and exits.
# With the rules masked, the coldplug still took 51 s of a boot of the
# test kernel on 2026-12-07 (203 devices, each event handled by a worker,
# about 95 ms each with lockdep), 73 s of an arm64 one; with the script,
# the trigger wrote to each device's uevent file with no daemon to hear
# it (7 to 13 s, 30 on arm64).  So udevadm (which virtme-ng's init, the
# compiled one or, for arm64, the shell script, runs from /usr/bin) is a
# script too, that ends its trigger and settle at once and hands every
# other command to the distribution's, kept as udevadm.distro;
# systemd-udevd.distro, the distribution's link to it, follows it there
# (2026-12-08, alone on the machine: the test kernel's boot reached its
# command in 17 to 19 s instead of 29, the arm64 test kernel's in 92 to
# 98 s instead of 123).  A root already tuned at this version is left as
# it is.
ROOTFS_TUNED=.sframe-tuned-v3
# root_script PATH: standard input as an executable script at PATH, written
# beside it and moved into place, so a tune never leaves half a script.
root_script() {
	cat >"$1.tmp" && chmod 755 "$1.tmp" && mv "$1.tmp" "$1"
}
rootfs_tune() {
	local r=$1 f udevd udevadm
	[ ! -f "$r/$ROOTFS_TUNED" ] || return 0
	mkdir -p "$r/etc/udev/rules.d" "$r/etc/tmpfiles.d"
	for f in "$r"/usr/lib/udev/rules.d/*.rules; do
		[ "${f##*/}" = 50-udev-default.rules ] || ln -sfn /dev/null "$r/etc/udev/rules.d/${f##*/}"
	done
	for f in "$r"/usr/lib/tmpfiles.d/*.conf; do
		ln -sfn /dev/null "$r/etc/tmpfiles.d/${f##*/}"
	done
	udevd=$r/usr/lib/systemd/systemd-udevd
	udevadm=$r/usr/bin/udevadm
	if [ -f "$udevadm" ]; then
		# The distribution's, unless it is this script (a root tuned
		# before), even over an older one a package upgrade left.
		grep -q rootfs_tune "$udevadm" || mv -f "$udevadm" "$udevadm.distro"
		root_script "$udevadm" <<'SH'
#!/bin/sh
# sframe-unwind's guest root (scripts/lib.sh, rootfs_tune): virtme-ng's
# coldplug has no udev daemon to hear it here, so a trigger or a settle
# ends at once; every other command is the distribution's udevadm.distro.
case ${1:-} in
trigger | settle) exit 0 ;;
esac
exec /usr/bin/udevadm.distro "$@"
SH
	fi
	if [ -e "$udevd" ] || [ -L "$udevd" ]; then
		[ -e "$udevd.distro" ] || [ -L "$udevd.distro" ] || mv "$udevd" "$udevd.distro"
		# The distribution's link to udevadm, to where its binary is now.
		if [ "$(readlink "$udevd.distro")" = ../../bin/udevadm ] && [ -e "$udevadm.distro" ]; then
			ln -sfn ../../bin/udevadm.distro "$udevd.distro"
		fi
		root_script "$udevd" <<'SH'
#!/bin/sh
# sframe-unwind's guest root (scripts/lib.sh, rootfs_tune): virtme-ng starts
# systemd-udevd only for these links, made here; the distribution's is
# systemd-udevd.distro.
mkdir -p /dev/virtio-ports
for p in /sys/class/virtio-ports/*; do
	read -r name <"$p/name" 2>/dev/null || continue
	[ -n "$name" ] && ln -sfn "../${p##*/}" "/dev/virtio-ports/$name"
done
exit 0
SH
	fi
	touch "$r/$ROOTFS_TUNED"
}

# bench_kernel NAME [--arch arm64] [--kernel KERNEL]: a benchmark's
# arguments.  Sets kernel_args (for scripts/guest-run: empty for the test
# kernel), arch_args (--arch arm64, or empty), bench_arch (x86_64 or arm64),
# bench_progs (where the guest finds the test programs of that
# architecture, under the repository) and bench_out, the benchmark's output
# directory under $SFRAME_CACHE/out (NAME, NAME-KERNEL, then -arm64).
# --arch arm64 only where the caller set bench_arm64=1 first.
# checkout_key: a key of this checkout's path ($SFRAME_TOP), for what is
# kept outside the repository one copy per checkout (cargo's target
# directory, the guests' output, the Debian module builds).
checkout_key() {
	printf %s "$SFRAME_TOP" | sha256sum | cut -c1-12
}

# debian_module_dir DK: where scripts/debian-kernel builds this
# checkout's module for the Debian kernel in DK, one directory per
# checkout: two checkouts' runs at once (a CI clone beside a working
# tree, benchmarks of two trees) each boot their own module.
debian_module_dir() {
	printf '%s/module-%s\n' "$1" "$(checkout_key)"
}

bench_kernel() {
	local name=$1 usage
	shift
	usage="usage: $name ${bench_arm64:+[--arch arm64] }[--kernel debian-7.3]"
	kernel_args=() arch_args=() bench_arch=x86_64 bench_progs=out/progs
	bench_out=$SFRAME_CACHE/out/$name
	while [ $# -gt 0 ]; do
		case $1 in
		--kernel) [ $# -ge 2 ] || die "$usage"; kernel_args=(--kernel "$2") bench_out+=-$2; shift 2 ;;
		--arch)
			[ $# -ge 2 ] || die "$usage"
			case $2 in
			x86_64) ;;
			arm64) [ "${bench_arm64:-0}" = 1 ] || die "$name runs on x86-64 only"
				arch_args=(--arch arm64) bench_arch=arm64 bench_progs=out/progs-arm64 ;;
			*) die "$usage" ;;
			esac
			shift 2
			;;
		*) die "$usage" ;;
		esac
	done
	[ "$bench_arch" = x86_64 ] || bench_out+=-$bench_arch
}

# bench_build: the module and the test programs a benchmark's guest runs,
# for bench_arch (bench_kernel), with KRUSTFLAGS=$SFRAME_MODULE_KRUSTFLAGS.
# arm64: as scripts/run-tests builds them (the programs in the x86-64 root
# with trixie's cross compiler; the module for the arm64 test kernel, while
# scripts/debian-kernel builds Debian's).
bench_build() {
	"$SFRAME_TOP/scripts/kernel" "${arch_args[@]}" >/dev/null
	"$SFRAME_TOP/scripts/rootfs" >/dev/null
	if [ "$bench_arch" = arm64 ]; then
		[ -n "${kernel_args[*]}" ] ||
			"$SFRAME_TOP/scripts/module-arm64" ${SFRAME_MODULE_KRUSTFLAGS:+KRUSTFLAGS="$SFRAME_MODULE_KRUSTFLAGS"} >/dev/null
		"$SFRAME_TOP/scripts/rootfs" --arch arm64 >/dev/null
		build_progs arm64
	else
		make -C "$SFRAME_TOP" -s module ${SFRAME_MODULE_KRUSTFLAGS:+KRUSTFLAGS="$SFRAME_MODULE_KRUSTFLAGS"}
		build_progs
	fi
}

# build_progs [arm64]: the test programs (tests/progs), built in the guest
# root (its binutils emits SFrame V2) into out/progs, where the guest finds
# them; with arm64, their arm64 builds (trixie's cross compiler, in the
# same root) into out/progs-arm64.
build_progs() {
	local -a args=(O="$SFRAME_TOP/out/progs")
	[ "${1:-}" != arm64 ] || args=(O="$SFRAME_TOP/out/progs-arm64" CC=aarch64-linux-gnu-gcc arm64)
	"$SFRAME_TOP/scripts/rootfs-exec" -- make -s -C "$SFRAME_TOP/tests/progs" "${args[@]}"
}

# flame_script ROOT DATA [OPTION]...: `perf script` of the recording DATA
# as samples/sframe-flame reads it, run in the guest root ROOT (where the
# recorded objects are; DATA's directory must be visible there: the
# repository, or under $SFRAME_CACHE/out), with perf script's OPTIONs
# (--comms NAME).  Without the period field each sample counts once.
flame_script() {
	local root=$1 data=$2
	shift 2
	"$SFRAME_TOP/scripts/rootfs-exec" --root "$root" --share "$(dirname "$data")" -- \
		perf script -i "$data" -F comm,pid,tid,time,event,ip,sym,dso --no-inline "$@"
}

# /dev/kvm may exist while KVM guests cannot run (qemu fails on MSR 0x10a on
# some hosts, or the guest never starts): boot the real kernel once with KVM,
# with a time limit, and remember the answer in the cache.
kvm_works() {
	local stamp=$SFRAME_CACHE/kvm-probe kernel=$1 root=$2
	if [ ! -f "$stamp" ]; then
		mkdir -p "$SFRAME_CACHE"
		if [ -w /dev/kvm ] && timeout -k 5 60 vng --run "$kernel" --root "$root" --user root --force-9p \
			--memory 1G --exec true </dev/null >/dev/null 2>&1; then
			echo yes >"$stamp"
		else
			echo no >"$stamp"
		fi
		log "KVM guests $(sed 's/no/do not run: using TCG/; s/yes/run/' "$stamp") (probe cached in $stamp)"
	fi
	[ "$(cat "$stamp")" = yes ]
}

# update_sources DIR FILES: copy FILES (one path per line, relative to the
# current directory) into DIR, a copy of the module's sources kept with its
# build products for incremental builds: a file whose bytes differ from
# DIR's copy is replaced and gets the time of now, one that is the same is
# left untouched (its time too).  Not the files' own times: DIR may have
# been built last from another checkout, whose files can be newer than
# this one's, and make would then keep that checkout's objects.
update_sources() {
	local dir=$1 files=$2 stage f
	stage=$(mktemp -d "${TMPDIR:-/tmp}/sframe-src.XXXXXX")
	tar -c -f - --verbatim-files-from -T - <<<"$files" | tar -x -f - -C "$stage"
	while IFS= read -r f; do
		[ -n "$f" ] || continue
		if ! cmp -s "$stage/$f" "$dir/$f"; then
			mkdir -p "$dir/$(dirname "$f")"
			# Without -p, cp gives the copy the time of now: newer
			# than any object.
			cp -f "$stage/$f" "$dir/$f"
		fi
	done <<<"$files"
	rm -rf "$stage"
}

# prune_sources DIR FILES: remove from DIR, a copy of the module's sources
# kept over earlier ones (its build products beside them, for incremental
# builds), the source files of rust/ and include/ that FILES (one path per
# line, as scripts/module-sources prints) no longer lists: a file moved in
# the tree must not stay behind in the copy (rustc refuses a module found
# at both foo.rs and foo/mod.rs).  Generated sources (rust/generated/)
# stay.
prune_sources() {
	local dir=$1 files=$2 stale
	stale=$(cd "$dir" && find rust include -type f \( -name '*.rs' -o -name '*.c' -o -name '*.h' \) \
		-not -path 'rust/generated/*' 2>/dev/null | sort | comm -23 - <(sort <<<"$files"))
	[ -z "$stale" ] || (cd "$dir" && xargs -d '\n' rm -f -- <<<"$stale")
}

# binfmt_run EMULATOR -- CMD...: run CMD (a chroot into a foreign root) with
# that architecture's programs run by QEMU's user-mode EMULATOR
# (qemu-aarch64-static, from qemu-user-static), through a binfmt_misc entry
# of this process's own.  binfmt_misc need not be mounted on the host: CMD
# runs in a private mount namespace that mounts it.  Its entries are the
# kernel's, seen by every process while they exist, but an instance's
# entries go when its last mount does: the entry goes when CMD ends, however
# it ends (and is removed by name, in case the host has it mounted too).
# "F": the kernel opens the emulator at registration, so it need not exist
# inside the chroot.
binfmt_run() {
	local emu=$1 path magic mask name
	shift
	[ "${1:-}" != -- ] || shift
	case $emu in
	qemu-aarch64-static)
		magic='\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00'
		mask='\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff'
		;;
	*) die "binfmt_run: unknown emulator $emu" ;;
	esac
	path=$(command -v "$emu") || die "$emu not found (scripts/setup installs qemu-user-static)"
	name=sframe-${emu%-static}-$$
	# shellcheck disable=SC2016
	unshare --mount --propagation private /bin/sh -c '
		d=/proc/sys/fs/binfmt_misc name=$1 entry=$2
		shift 2
		{ [ -e "$d/register" ] || mount -t binfmt_misc binfmt_misc "$d"; } &&
			printf "%s" "$entry" >"$d/register" ||
			{ echo "error: cannot register $name with binfmt_misc" >&2; exit 125; }
		rc=0
		"$@" || rc=$?
		[ ! -e "$d/$name" ] || echo -1 >"$d/$name"
		exit $rc' sh "$name" ":$name:M::$magic:$mask:$path:F" "$@"
}
