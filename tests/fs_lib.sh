# tests/fs_lib.sh - shared helpers of the filesystem integration tests
# (tests/fs_*.sh) and bench/fs_bench.sh.  Source it; do not run it.
#
# What it gives a test:
#   fs_init                 checks FUSE and $ULPFS, makes $WORK (mktemp -d),
#                           installs the clean-up trap
#   fs_mount STORE MNT [O]  "ulpfs mount -o settle=50[,O] STORE MNT", checks
#                           that MNT is a FUSE mount, finds the daemon's PID
#                           ($FS_LAST_PID) and remembers both for clean-up
#   fs_umount MNT           "ulpfs umount MNT"; checks that it returned only
#                           after the daemon exited
#   fs_remount STORE MNT [O]
#   fs_daemon_pid STORE     the PID of the daemon serving STORE (only one
#                           this test started: it must hold /dev/fuse open
#                           and name our STORE in its argv)
#   fs_wait_committed STORE [SECONDS]  wait for STORE/staging to be empty
#   fs_sha_tree DIR         "sha256  ./path" of every file, sorted
#   train LOG ARGS...       "${TRAIN[@]}" ARGS (a test's examples/train.py
#                           command), output into LOG
#   fs_compare_trees A B WHAT
#   step / say / ok / bad / die / fs_finish
#
# On every exit path (success, failure, SIGINT/SIGTERM from timeout(1)) the
# trap kills the background processes the test started (by PID), unmounts
# every mount it made (fusermount3 -u, lazily if busy), waits for each
# daemon, unmounts its tmpfs mounts and removes $WORK.
#
# Environment: ULPFS (the binary; required), ULPFS_ALLOW_SKIP=1 (exit 77
# instead of failing when FUSE or a forced write mode is unavailable),
# ULPFS_KEEP_WORK=1 (keep $WORK for a post-mortem), FS_MOUNT_OPTS (extra -o
# options for every mount), FS_WRITE_MODE=passthrough|direct|cached (mount
# with -o write_mode=MODE and check, with "ulpfs stats", that the daemon
# uses it: make check runs the mount tests so in each mode, Makefile.am),
# ULPFS_TEST_TIMEOUT (the seconds after which make check kills the test:
# the watchdog below fires before that).
#
# Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.

set -u -o pipefail

FS_TEST=${FS_TEST:-$(basename "$0" .sh)}
FS_SRCDIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY=/usr/bin/python3 # the interpreter that has torch and numpy
FS_UTIL=$FS_SRCDIR/tests/fs_util.py
WORK=""
FS_FAILS=0
FS_MOUNTS=()  # mountpoints we mounted and have not unmounted yet
FS_DAEMONS=() # their daemons' PIDs (same index)
FS_STORES=()  # their stores (same index)
FS_TMPFS=()   # tmpfs mounts to remove at exit
FS_BG=()      # background processes we started
FS_ALL_STORES=() # every store mounted (for daemon.log on failure)
FS_WATCHDOG=""   # the watchdog's PID (fs_watchdog_start)
FS_LAST_PID=""
FS_NMOUNT=0
FS_T0=$SECONDS
FS_START_EPOCH=$(date +%s)

say() { printf '[%s] %s\n' "$FS_TEST" "$*"; }
# A step of a test, with the seconds since the test began (where its time goes).
step() { printf '\n[%s] === %s (at %ds)\n' "$FS_TEST" "$*" "$((SECONDS - FS_T0))"; }
ok() { printf '[%s]   ok: %s\n' "$FS_TEST" "$*"; }
# A failed check: reported, counted, the test goes on (fs_finish fails).
bad() {
	printf '[%s]   FAIL: %s\n' "$FS_TEST" "$*" >&2
	FS_FAILS=$((FS_FAILS + 1))
}
# A failure after which the test cannot go on.
die() {
	printf '[%s] FATAL: %s\n' "$FS_TEST" "$*" >&2
	FS_FAILS=$((FS_FAILS + 1))
	exit 1
}
# check DESCRIPTION COMMAND...: ok or bad.
check() {
	local what=$1
	shift
	if "$@"; then ok "$what"; else bad "$what"; fi
}

fs_finish() {
	local t=$((SECONDS - FS_T0))
	[ -e "$WORK/watchdog.fired" ] && bad "the watchdog stopped this test's daemons (see WATCHDOG above)"
	if [ "$FS_FAILS" -gt 0 ]; then
		printf '\n[%s] FAILED: %d check(s) failed (%ds)\n' "$FS_TEST" "$FS_FAILS" "$t" >&2
		exit 1
	fi
	printf '\n[%s] PASSED (%ds)\n' "$FS_TEST" "$t"
	exit 0
}

fs_skip_or_fail() {
	fs_unavailable "FUSE IS NOT AVAILABLE: $*" \
		"The filesystem integration tests need /dev/fuse," \
		"fusermount3 (Debian: apt-get install fuse3) and the" \
		"right to mount (root, or a container with /dev/fuse)."
}

# fs_unavailable WHAT LINE...: say loudly that WHAT this test needs is
# missing, then fail, or skip (exit 77) with ULPFS_ALLOW_SKIP=1.
fs_unavailable() {
	local l
	{
		echo "***************************************************************"
		echo "*** $FS_TEST: $1"
		shift
		for l in "$@"; do echo "*** $l"; done
		if [ "${ULPFS_ALLOW_SKIP:-0}" = 1 ]; then
			echo "*** ULPFS_ALLOW_SKIP=1: SKIPPING (exit 77)."
		else
			echo "*** This is a FAILURE (set ULPFS_ALLOW_SKIP=1 to skip)."
		fi
		echo "***************************************************************"
	} >&2
	[ "${ULPFS_ALLOW_SKIP:-0}" = 1 ] && exit 77
	exit 1
}

# ---------------------------------------------------------------- processes

# A PID is alive when it exists and is not a zombie.
pid_alive() {
	local st t
	[ -n "${1:-}" ] || return 1
	# Every thread: a killed process's leader is a zombie while its other
	# threads still exit, holding its files (a store's flock) until the
	# last one has.
	for t in /proc/"$1"/task/*/stat; do
		st=$(awk '{ sub(/^[^)]*\) /, ""); print $1 }' "$t" 2>/dev/null) || continue
		[ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ] && return 0
	done
	return 1
}

# pgrp_alive PGID: whether a process of group PGID is alive.
pgrp_alive() {
	local f line
	for f in /proc/[0-9]*/stat; do
		read -r line <"$f" 2>/dev/null || continue
		# after the command name: state, parent, group
		read -r -a line <<<"${line##*) }"
		[ "${line[2]}" = "$1" ] && [ "${line[0]}" != Z ] && [ "${line[0]}" != X ] && return 0
	done
	return 1
}

# wait_while SECONDS CMD ARGS...: 0 once CMD ARGS fails, 1 if it still
# succeeds after SECONDS.
wait_while() {
	local n=$(($1 * 20))
	shift
	while "$@"; do
		n=$((n - 1))
		[ "$n" -le 0 ] && return 1
		sleep 0.05
	done
	return 0
}

# wait_pid_gone PID SECONDS, wait_pgrp_gone PGID SECONDS: 0 when the
# process, every process of the group, is gone in time.
wait_pid_gone() { wait_while "$2" pid_alive "$1"; }
wait_pgrp_gone() { wait_while "$2" pgrp_alive "$1"; }

# fs_lock_holders STORE: the processes with STORE's lock file open (what
# a mount refused as "in use" waited for), each with its threads' states.
fs_lock_holders() {
	local lock fd pid ino
	lock=$(realpath -m "$1/lock")
	for fd in /proc/[0-9]*/fd/*; do
		[ "$(readlink "$fd" 2>/dev/null)" = "$lock" ] || continue
		pid=${fd#/proc/}
		pid=${pid%%/*}
		echo "    | $lock is open in PID $pid ($(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | cut -c1-120)), threads: $(ps -L -o stat= -p "$pid" | tr -s ' \n' ' ')"
	done
	ino=$(stat -c %i "$lock" 2>/dev/null) &&
		grep -E ":$ino " /proc/locks | sed "s#^#    | /proc/locks: #"
}

# train LOG ARGS...: run the test's examples/train.py command ("${TRAIN[@]}")
# with ARGS, output into LOG (shown, and a failure counted, if it fails).
train() {
	local log=$1
	shift
	if ! timeout -k 5 300 "${TRAIN[@]}" "$@" >"$log" 2>&1; then
		sed 's/^/    | /' "$log" >&2
		bad "examples/train.py $* failed"
		return 1
	fi
}

# fs_sides DIR: "PATH SEQ SIDE" for every live version under DIR of a mount
# (SIDE: the path of the version it is coded given, src/store/side.h, or -).
fs_sides() {
	"$ULPFS" log --json "$1" | "$PY" -c 'import json, sys
for v in json.load(sys.stdin):
    if v["state"] == "live":
        print(v["path"], v["seq"], v["side"]["path"] if v["side"] else "-")'
}

# Start a background command and remember its PID ($! of the caller is
# not visible, so the PID is left in FS_BG_LAST).
fs_bg() {
	"$@" &
	FS_BG_LAST=$!
	FS_BG+=("$FS_BG_LAST")
}

fs_bg_forget() {
	local p keep=()
	for p in "${FS_BG[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
	FS_BG=("${keep[@]}")
}

# ------------------------------------------------------------------ mounts

is_fuse_mount() {
	local t
	t=$(findmnt -n -M "$1" -o FSTYPE 2>/dev/null | tail -n1) || return 1
	case $t in fuse | fuse.*) return 0 ;; esac
	return 1
}

is_mounted() { findmnt -n -M "$1" >/dev/null 2>&1; }

# Does PID hold /dev/fuse open?
pid_has_fuse_fd() {
	local f
	for f in /proc/"$1"/fd/*; do
		[ "$(readlink "$f" 2>/dev/null)" = /dev/fuse ] && return 0
	done
	return 1
}

pid_argv_mentions() { { tr '\0' '\n' <"/proc/$1/cmdline"; } 2>/dev/null | grep -qF -- "$2"; }

# fs_fuse_pids PATH: the PIDs, one a line, of the live processes other
# than this shell whose argv names PATH and which hold /dev/fuse open.
fs_fuse_pids() {
	local p pid
	for p in /proc/[0-9]*; do
		pid=${p#/proc/}
		[ "$pid" = $$ ] && continue
		[ "$pid" = "${BASHPID:-}" ] && continue
		pid_argv_mentions "$pid" "$1" || continue
		pid_alive "$pid" || continue
		pid_has_fuse_fd "$pid" || continue
		echo "$pid"
	done
}

# fs_daemon_pid STORE: print the PID of the daemon serving STORE.  Only a
# process whose argv names STORE (a path under our own $WORK) and which holds
# /dev/fuse open qualifies, so we can never pick someone else's process.
fs_daemon_pid() {
	local store pid cands=()
	store=$(realpath -m "$1")
	if [ -r "$store/daemon.pid" ]; then
		pid=$(tr -dc 0-9 <"$store/daemon.pid")
		if [ -n "$pid" ] && pid_alive "$pid" && pid_has_fuse_fd "$pid"; then
			echo "$pid"
			return 0
		fi
	fi
	mapfile -t cands < <(fs_fuse_pids "$store")
	if [ "${#cands[@]}" -eq 1 ]; then
		echo "${cands[0]}"
		return 0
	fi
	echo "fs_daemon_pid: ${#cands[@]} candidate daemons for $store: ${cands[*]:-}" >&2
	return 1
}

fs_opts() {
	local o="settle=50"
	[ -n "${FS_WRITE_MODE:-}" ] && o="$o,write_mode=$FS_WRITE_MODE"
	[ -n "${FS_MOUNT_OPTS:-}" ] && o="$o,$FS_MOUNT_OPTS"
	[ -n "${1:-}" ] && o="$o,$1"
	echo "$o"
}

# fs_mount STORE MNT [OPTS]
fs_mount() {
	local store=$1 mnt=$2 opts log rc
	opts=$(fs_opts "${3:-}")
	mkdir -p "$mnt"
	FS_NMOUNT=$((FS_NMOUNT + 1))
	log=$WORK/mount-$FS_NMOUNT.log
	say "mount: $(basename "$ULPFS") mount -o $opts $store $mnt"
	timeout -k 5 120 "$ULPFS" mount -o "$opts" "$store" "$mnt" >"$log" 2>&1
	rc=$?
	if [ "$rc" -ne 0 ]; then
		sed 's/^/    | /' "$log" >&2
		fs_lock_holders "$store" >&2
		if is_mounted "$mnt"; then FS_MOUNTS+=("$mnt") FS_DAEMONS+=("") FS_STORES+=("$store"); fi
		[ "$rc" = 124 ] && die "ulpfs mount did not return within 120 s"
		die "ulpfs mount failed (exit $rc)"
	fi
	if ! is_fuse_mount "$mnt"; then
		sed 's/^/    | /' "$log" >&2
		die "ulpfs mount returned 0 but $mnt is not a FUSE mount (the mount must be ready when the command returns)"
	fi
	FS_LAST_PID=$(fs_daemon_pid "$store") || FS_LAST_PID=""
	case " ${FS_ALL_STORES[*]} " in *" $store "*) ;; *) FS_ALL_STORES+=("$store") ;; esac
	FS_MOUNTS+=("$mnt")
	FS_DAEMONS+=("$FS_LAST_PID")
	FS_STORES+=("$store")
	[ -n "$FS_LAST_PID" ] || die "mounted, but cannot find the daemon's PID (no $store/daemon.pid, no process with /dev/fuse open whose argv names $store)"
	fs_check_write_mode "$mnt" "${FS_WRITE_MODE:-}"
}

# The write mode the daemon serving MNT uses ("passthrough", "direct", ...
# with the reason when passthrough was refused).
fs_write_mode() {
	"$ULPFS" stats "$1" 2>/dev/null | sed -n 's/^writes *//p'
}

# fs_check_write_mode MNT MODE: the mount at MNT writes in MODE (no-op when
# MODE is empty).  A forced passthrough the kernel refused is said loudly
# and fails the test, unless ULPFS_ALLOW_SKIP=1 (then it is skipped).
fs_check_write_mode() {
	local got
	[ -n "${2:-}" ] || return 0
	got=$(fs_write_mode "$1")
	[ "$got" = "$2" ] && return 0
	[ "$2" = passthrough ] &&
		fs_unavailable "FUSE PASSTHROUGH IS NOT AVAILABLE: the mount writes" \
			"in mode '$got'.  It needs Linux 6.9+ with" \
			"CONFIG_FUSE_PASSTHROUGH and a daemon with CAP_SYS_ADMIN."
	die "write_mode=$2 asked for, the mount writes in mode '$got'"
}

fs_forget_mount() {
	local i m=() d=() s=()
	for i in "${!FS_MOUNTS[@]}"; do
		if [ "${FS_MOUNTS[$i]}" != "$1" ]; then
			m+=("${FS_MOUNTS[$i]}") d+=("${FS_DAEMONS[$i]}") s+=("${FS_STORES[$i]}")
		fi
	done
	FS_MOUNTS=("${m[@]}") FS_DAEMONS=("${d[@]}") FS_STORES=("${s[@]}")
}

fs_mount_pid() {
	local i
	for i in "${!FS_MOUNTS[@]}"; do
		[ "${FS_MOUNTS[$i]}" = "$1" ] && echo "${FS_DAEMONS[$i]}" && return 0
	done
	return 1
}

# fs_umount MNT: the real "ulpfs umount"; fatal if it fails.
fs_umount() {
	local mnt=$1 pid rc t0 log
	pid=$(fs_mount_pid "$mnt") || pid=""
	log=$WORK/umount.log
	t0=$(date +%s.%N)
	timeout -k 5 "${FS_UMOUNT_TIMEOUT:-300}" "$ULPFS" umount "$mnt" >"$log" 2>&1
	rc=$?
	FS_UMOUNT_SECS=$(calc "$(date +%s.%N) - $t0")
	if [ "$rc" -ne 0 ]; then
		sed 's/^/    | /' "$log" >&2
		[ "$rc" = 124 ] && die "ulpfs umount $mnt did not return within ${FS_UMOUNT_TIMEOUT:-300} s"
		die "ulpfs umount $mnt failed (exit $rc)"
	fi
	is_mounted "$mnt" && die "ulpfs umount returned 0 but $mnt is still mounted"
	if [ -n "$pid" ] && pid_alive "$pid"; then
		bad "ulpfs umount returned while the daemon (PID $pid) was still running (it must return only after the daemon exited)"
		wait_pid_gone "$pid" 300 || die "daemon $pid still running 300 s after umount"
	fi
	fs_forget_mount "$mnt"
	say "umount: done in ${FS_UMOUNT_SECS}s"
}

fs_remount() {
	fs_umount "$2"
	fs_mount "$@"
}

# Unmount a mount whose daemon may be dead (kill -9): fusermount3 -u, lazy
# if busy, then wait for the daemon to go.
fs_force_umount() {
	local mnt=$1 pid
	pid=$(fs_mount_pid "$mnt") || pid=""
	if is_mounted "$mnt"; then
		fusermount3 -u "$mnt" 2>/dev/null || fusermount3 -uz "$mnt" 2>/dev/null ||
			umount -l "$mnt" 2>/dev/null
	fi
	if [ -n "$pid" ] && ! wait_pid_gone "$pid" "${2:-120}"; then
		say "daemon $pid still running after unmount; killing it (kill -9 $pid)"
		kill -9 "$pid" 2>/dev/null
		wait_pid_gone "$pid" 10
	fi
	fs_forget_mount "$mnt"
}

fs_mount_tmpfs() { # DIR SIZE
	mkdir -p "$1"
	mount -t tmpfs -o "size=$2" ulpfs-test "$1" || return 1
	FS_TMPFS+=("$1")
}

fs_cleanup() {
	local rc=$? p i
	trap - EXIT INT TERM HUP
	set +e
	[ -n "$FS_WATCHDOG" ] && kill "$FS_WATCHDOG" 2>/dev/null && wait "$FS_WATCHDOG" 2>/dev/null
	for p in "${FS_BG[@]}"; do
		kill -9 "$p" 2>/dev/null && wait "$p" 2>/dev/null
	done
	for ((i = ${#FS_MOUNTS[@]} - 1; i >= 0; i--)); do
		say "cleanup: unmounting ${FS_MOUNTS[$i]}"
		fs_force_umount "${FS_MOUNTS[$i]}" 120
	done
	if [ "$rc" -ne 0 ] || [ "$FS_FAILS" -gt 0 ]; then
		for p in "${FS_ALL_STORES[@]}"; do
			[ -s "$p/daemon.log" ] || continue
			echo "[$FS_TEST] last lines of $p/daemon.log:" >&2
			tail -n 25 "$p/daemon.log" | sed 's/^/    | /' >&2
		done
	fi
	for ((i = ${#FS_TMPFS[@]} - 1; i >= 0; i--)); do
		umount "${FS_TMPFS[$i]}" 2>/dev/null || umount -l "${FS_TMPFS[$i]}"
	done
	if [ -n "$WORK" ] && [ -d "$WORK" ]; then
		if grep -qF " $WORK/" /proc/self/mountinfo; then
			echo "[$FS_TEST] WARNING: something is still mounted under $WORK; not removing it" >&2
		elif [ "${ULPFS_KEEP_WORK:-0}" = 1 ]; then
			echo "[$FS_TEST] keeping $WORK (ULPFS_KEEP_WORK=1)" >&2
		else
			rm -rf --one-file-system "$WORK"
		fi
	fi
	exit "$rc"
}

# ---------------------------------------------------------------- watchdog

# A test that hangs in a FUSE request is killed by make check's timeout(1)
# with nothing said: the request waits in the kernel, so the test's trap
# does not run before the KILL.  Shortly before that timeout
# (ULPFS_TEST_TIMEOUT), the watchdog shows this test's processes and the
# state and stacks of every daemon it started, then kills those daemons:
# the request fails, the test goes on to fail and cleans up.
fs_watchdog_start() {
	local t=${ULPFS_TEST_TIMEOUT:-0} at
	[ "$t" -gt 0 ] 2>/dev/null || return 0
	at=$((t >= 180 ? t - 90 : t / 2))
	(
		trap 'kill "$s" 2>/dev/null; exit 0' TERM
		sleep "$at" &
		s=$!
		wait "$s"
		fs_watchdog_fire "$at" "$t"
	) &
	FS_WATCHDOG=$!
}

fs_watchdog_fire() {
	local p pids=() n=0
	mapfile -t pids < <(fs_fuse_pids "$WORK")
	: >"$WORK/watchdog.fired"
	{
		echo "[$FS_TEST] WATCHDOG: still running after $1 s (make check stops it at $2 s); its daemons: ${pids[*]:-none}"
		echo "[$FS_TEST] WATCHDOG: the test's processes:"
		ps -e -o pgid=,pid=,stat=,wchan:32=,args= |
			awk -v g="$(ps -o pgid= -p $$ | tr -d ' ')" '$1 == g' | cut -c1-200 | sed 's/^/    | /'
		for p in "${pids[@]}"; do
			echo "[$FS_TEST] WATCHDOG: daemon $p, its threads (tid, state, kernel wait):"
			ps -L -o tid=,stat=,wchan:32= -p "$p" | sed 's/^/    | /'
			n=$((n + 1))
			if [ "$n" -le 3 ] && command -v gdb >/dev/null; then
				echo "[$FS_TEST] WATCHDOG: daemon $p, its stacks (gdb):"
				timeout -k 5 20 gdb -p "$p" -batch -ex 'thread apply all bt' 2>&1 |
					grep -E '^(Thread|#)' | head -n 400 | sed 's/^/    | /'
			fi
			echo "[$FS_TEST] WATCHDOG: kill -9 $p"
			kill -9 "$p" 2>/dev/null
		done
	} >&2
}

# ------------------------------------------------------------------- setup

fs_init() {
	if [ -z "${ULPFS:-}" ]; then
		for c in "$FS_SRCDIR/_build/ulpfs" "$FS_SRCDIR/ulpfs"; do
			[ -x "$c" ] && ULPFS=$c && break
		done
	fi
	[ -n "${ULPFS:-}" ] || die "ULPFS is not set (make check sets it; else ULPFS=path/to/ulpfs)"
	[ -x "$ULPFS" ] || die "ULPFS=$ULPFS is not an executable"
	ULPFS=$(realpath "$ULPFS")
	[ -x "$PY" ] || die "$PY not found (Debian: apt-get install python3 python3-numpy python3-torch)"

	# FUSE itself
	[ -e /dev/fuse ] || fs_skip_or_fail "/dev/fuse does not exist"
	[ -r /dev/fuse ] && [ -w /dev/fuse ] || fs_skip_or_fail "/dev/fuse is not readable and writable by $(id -un)"
	command -v fusermount3 >/dev/null || fs_skip_or_fail "fusermount3 is not installed"
	grep -qw fuse /proc/filesystems || modprobe fuse 2>/dev/null ||
		fs_skip_or_fail "the kernel has no fuse filesystem"
	command -v findmnt >/dev/null || die "findmnt (util-linux) is required"

	# The binary must have the mount commands: a missing command is a
	# failure, never a skip.
	if ! "$ULPFS" mount --help >/dev/null 2>&1; then
		"$ULPFS" mount --help 2>&1 | sed 's/^/    | /' >&2
		die "'$ULPFS mount --help' fails: this ulpfs has no working mount command"
	fi
	"$ULPFS" umount --help >/dev/null 2>&1 || die "'$ULPFS umount --help' fails: this ulpfs has no working umount command"

	WORK=$(mktemp -d "${TMPDIR:-/tmp}/ulpfs-$FS_TEST.XXXXXX") || die "mktemp -d failed"
	trap fs_cleanup EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	trap 'exit 129' HUP
	fs_watchdog_start
	say "ulpfs: $ULPFS"
	say "work:  $WORK"
}

# --------------------------------------------------------------- checking

# "sha256  ./path" for every regular file under DIR, sorted by path.
fs_sha_tree() {
	(cd "$1" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0r sha256sum)
}

# Types and paths of everything under DIR (f/d/l), sorted.
fs_list_tree() {
	(cd "$1" && find . -mindepth 1 -printf '%y %p\n' | LC_ALL=C sort)
}

# fs_compare_trees EXPECTED ACTUAL WHAT: same files, same bytes.
fs_compare_trees() {
	local a b
	a=$(fs_sha_tree "$1") || { bad "$3: cannot read $1"; return 1; }
	b=$(fs_sha_tree "$2") || { bad "$3: reading $2 failed"; return 1; }
	if [ "$a" = "$b" ] && [ -n "$a" ]; then
		ok "$3: $(printf '%s\n' "$b" | wc -l) files bit-exact"
		return 0
	fi
	bad "$3: trees differ (expected $1, got $2):"
	diff <(printf '%s\n' "$a") <(printf '%s\n' "$b") | head -20 | sed 's/^/    | /' >&2
	return 1
}

# (Not .held-*: committed, kept only while the kernel still reads them as
# passthrough backing files, store/backing.c.)
fs_staged_count() { find "$1/staging" -type f ! -name '.held-*' 2>/dev/null | wc -l; }

# fs_wait_committed STORE [SECONDS]: wait for an empty STORE/staging.
fs_wait_committed() {
	local store=$1 n=$((${2:-120} * 50))
	while [ "$(fs_staged_count "$store")" -gt 0 ]; do
		n=$((n - 1))
		if [ "$n" -le 0 ]; then
			bad "staging of $store did not drain within ${2:-120} s: $(find "$store/staging" -type f | head -5 | tr '\n' ' ')"
			return 1
		fi
		sleep 0.02
	done
	return 0
}

fs_bytes() { du -sb "$@" 2>/dev/null | awk '{ s += $1 } END { printf "%.0f\n", s }'; }

# Sum of the sizes of the regular files under DIR... (no directory blocks).
fs_file_bytes() { find "$@" -type f -printf '%s\n' 2>/dev/null | awk '{ s += $1 } END { printf "%.0f\n", s }'; }

fs_mib() { calc "$1 / 1048576" 1; }

# fs_versions_and_objects STORE MNT: "V O", the live and ghost versions
# of the store mounted at MNT and its object files (equal: no orphans).
fs_versions_and_objects() {
	local v o
	v=$("$ULPFS" log --json "$2" | "$PY" -c 'import json, sys
print(sum(1 for v in json.load(sys.stdin) if v["state"] in ("live", "ghost")))')
	o=$(find "$1/objects" -maxdepth 1 -type f ! -name '.*' | wc -l)
	echo "$v $o"
}

# calc EXPR [DECIMALS]: floating-point arithmetic (awk; bc may be missing).
calc() { awk "BEGIN { printf \"%.${2:-3}f\", $1 }" 2>/dev/null || printf '?'; }

# Free bytes of the filesystem holding DIR.
fs_free_bytes() { df -B1 --output=avail "$1" | tail -n1 | tr -d ' '; }
