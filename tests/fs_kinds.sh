#!/usr/bin/env bash
# tests/fs_kinds.sh - every node-level operation on every kind of node,
# live and in the control directory, gives the result it gave before the
# FUSE layer dispatched through per-kind tables (tests/fs_kinds.py holds
# the table): EROFS, EXDEV, ENOTDIR, EISDIR, ENODATA ... as they were.
# FUSE unavailable is a FAILURE unless ULPFS_ALLOW_SKIP=1 (then exit 77).
#
# Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/cli_lib.sh"
cli_init snapshot sync

STORE=$WORK/store
MNT=$WORK/mnt
fs_mount "$STORE" "$MNT"

step "a file with two versions, a symlink, a FIFO, a snapshot"
mkdir "$MNT/a" || die "mkdir"
head -c 65536 /dev/urandom >"$MNT/a/f" || die "write 1"
expect 0 "sync" sync "$MNT"
head -c 65536 /dev/urandom >"$MNT/a/f" || die "write 2"
expect 0 "sync" sync "$MNT"
echo g >"$MNT/a/g" && ln -s f "$MNT/a/sl" && mkfifo "$MNT/a/fifo" || die "nodes"
expect 0 "snapshot create s1" snapshot create --store "$STORE" s1
[ -e "$MNT/.ulpfs/versions/a/f/2" ] || die "a/f has no version 2"

step "every operation on every kind"
check "results as before the restructuring" "$PY" "$FS_SRCDIR/tests/fs_kinds.py" "$MNT" ${FS_KINDS_ARGS:-}
fs_umount "$MNT"
fs_finish
