#!/usr/bin/env bash
# tests/fs_umount_ns.sh - "ulpfs umount" while another mount namespace holds
# a copy of the mount.
#
# A mount namespace made while ulpfs is mounted (unshare -m, a container, a
# service with PrivateTmp) starts with a copy of the mount, and the kernel
# ends the daemon's session only when the last copy goes.  ulpfs umount used
# to wait for that for ever.  It must: return within seconds; commit every
# file closed so far; say which processes hold the copy and exit 1 (the
# store is still open); and the copy keeps working as a local filesystem's
# would.  Once the other namespace is gone, the daemon closes the store.
#
# Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/fs_lib.sh"
fs_init
command -v unshare >/dev/null || die "unshare (util-linux) is required"

STORE=$WORK/store
MNT=$WORK/mnt
fs_mount "$STORE" "$MNT"
pid=$FS_LAST_PID

step "a file closed before another namespace copies the mount, one after"
head -c 300000 /dev/urandom >"$WORK/a"
head -c 200000 /dev/urandom >"$WORK/b"
cp "$WORK/a" "$MNT/a"
mkfifo "$WORK/go" "$WORK/done"
# The other namespace: reads a from its copy, waits, then writes c into it.
# It first lets go of its copies of other tests' mounts, whose umount it
# would otherwise fail (tests/ns_detach_fuse.sh).
fs_bg unshare -m --propagation private bash -c '
	bash "$3" "$1" || exit 5
	cmp -s "$1/a" "$2/a" || exit 3
	read -r _ <"$2/go"
	cp "$2/b" "$1/c" && cmp -s "$1/c" "$2/b" || exit 4
	echo done >"$2/done"
	read -r _ <"$2/go"' ns "$MNT" "$WORK" "$FS_SRCDIR/tests/ns_detach_fuse.sh"
ns=$FS_BG_LAST
# tell: one line to the other namespace, which must be reading (bounded:
# if it died, this fails instead of blocking)
tell() { timeout 30 bash -c 'echo go >"$1"' tell "$WORK/go"; }
cp "$WORK/b" "$MNT/b"

step "ulpfs umount while the copy lives"
t0=$(date +%s.%N)
timeout -k 5 60 "$ULPFS" umount "$MNT" >"$WORK/umount.out" 2>&1
rc=$?
secs=$(calc "$(date +%s.%N) - $t0" 2)
msg=$(cat "$WORK/umount.out")
[ "$rc" = 1 ] && ok "umount exits 1 in ${secs}s: $msg" ||
	bad "umount exit $rc after ${secs}s (expected 1 within seconds): $msg"
grep -q "1 other mount namespace still holds a copy" <<<"$msg" && grep -q "(process $ns)" <<<"$msg" &&
	ok "it names the namespace's process ($ns)" || bad "the message does not name process $ns"
grep -q "every file closed so far is committed" <<<"$msg" && ok "it says what is committed" ||
	bad "the message does not say that the closed files are committed"
is_mounted "$MNT" && bad "$MNT still mounted here"
pid_alive "$pid" && ok "the daemon goes on serving the copy" || bad "the daemon exited"
fs_forget_mount "$MNT"

"$ULPFS" log --store "$STORE" --json a >"$WORK/log.a" 2>&1 && "$ULPFS" log --store "$STORE" --json b >"$WORK/log.b" 2>&1 &&
	ok "log of a and b through the daemon's control socket: both committed" ||
	bad "a or b not committed: $(cat "$WORK/log.a" "$WORK/log.b")"

step "the copy goes on working"
tell && timeout 30 bash -c 'read -r _ <"$1"' wait "$WORK/done" && ok "the other namespace wrote c into its copy" || bad "no answer from the other namespace"

step "the other namespace exits: the daemon closes the store"
tell
wait "$ns"
nrc=$?
fs_bg_forget "$ns"
[ "$nrc" = 0 ] && ok "the other namespace read a and wrote c exactly" || bad "the other namespace failed (exit $nrc)"
wait_pid_gone "$pid" 60 && ok "the daemon exited once the last copy went" || {
	bad "daemon $pid still running 60 s after the copy went"
	kill -9 "$pid"
}

step "remount: a, b and c exact"
fs_mount "$STORE" "$MNT"
for f in a b; do
	cmp -s "$WORK/$f" "$MNT/$f" && ok "$f exact" || bad "$f differs"
done
cmp -s "$WORK/b" "$MNT/c" && ok "c (written through the copy) exact" || bad "c differs"
fs_umount "$MNT"

fs_finish
