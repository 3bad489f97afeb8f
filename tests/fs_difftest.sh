#!/usr/bin/env bash
# tests/fs_difftest.sh - differential random-operation test of the mount:
# tests/fs_difftest.py runs a long seeded random sequence of file operations
# (open flags, sparse writes, reads, truncates, renames, unlinks, mkdir/rmdir,
# fsync, mmap reads, "ulpfs sync") on the mount and on a plain directory side
# by side and compares them after every step; remounts (all descriptors
# closed first) are served here with fs_lib.sh's fs_remount, through two
# FIFOs ("remount" -> "ok").
#
#   tests/fs_difftest.sh                 the "make check" run: 3000 ops with
#                                        seed 1, then 2000 with a random
#                                        (printed) seed, a few remounts each
#   tests/fs_difftest.sh ARGS...         one run with fs_difftest.py's ARGS,
#                                        e.g. --seed 7 --ops 100000
#                                        --remount-every 5000
#
# A divergence prints the seed, the operation's index, the last 20
# operations and the difference; the same options reproduce it.
# FUSE unavailable is a FAILURE unless ULPFS_ALLOW_SKIP=1 (then exit 77).
#
# Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.

# make check may run this with a POSIX sh: it needs bash.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/fs_lib.sh"
fs_init

DIFFTEST=$FS_SRCDIR/tests/fs_difftest.py
NRUN=0

# difftest_run ARGS...: a fresh store, mount and plain directory; run the
# tester; serve its remount requests; unmount.
difftest_run() {
	local store mnt plain req resp pid cmd rc
	NRUN=$((NRUN + 1))
	store=$WORK/store-$NRUN mnt=$WORK/mnt-$NRUN plain=$WORK/plain-$NRUN
	req=$WORK/req-$NRUN resp=$WORK/resp-$NRUN
	mkdir -p "$plain"
	step "run $NRUN: fs_difftest.py $*"
	fs_mount "$store" "$mnt"
	local pt=
	[ "$(fs_write_mode "$mnt")" = passthrough ] && pt=--passthrough
	mkfifo "$req" "$resp" || die "mkfifo failed"
	# Read-write opens of the FIFOs never block, whatever the tester does.
	exec 3<>"$req" 4<>"$resp"
	fs_bg "$PY" "$DIFFTEST" --mnt "$mnt" --plain "$plain" --ctl-req "$req" --ctl-resp "$resp" $pt "$@" 3<&- 4<&-
	pid=$FS_BG_LAST
	local part=
	while :; do
		if IFS= read -r -t 2 cmd <&3; then
			cmd=$part$cmd part=
			case $cmd in
			remount)
				fs_remount "$store" "$mnt" 3<&- 4<&-
				echo ok >&4
				;;
			*) die "unknown request from fs_difftest.py: '$cmd'" ;;
			esac
		else
			# A timeout in the middle of a line leaves what it read
			# in cmd: the rest comes with the next read.
			part=$part$cmd
			pid_alive "$pid" || break
		fi
	done
	wait "$pid"
	rc=$?
	fs_bg_forget "$pid"
	exec 3<&- 4<&-
	if [ "$rc" -eq 0 ]; then ok "run $NRUN: no divergence"; else bad "run $NRUN: fs_difftest.py exited $rc"; fi
	fs_umount "$mnt"
}

if [ "$#" -gt 0 ]; then
	difftest_run "$@"
else
	difftest_run --seed 1 --ops 3000 --remount-every 1000
	difftest_run --ops 2000 --remount-every 700
fi
fs_finish
