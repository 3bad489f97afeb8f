#!/usr/bin/env bash
# tests/fs_snapmeta.sh - snapshots keep whole inodes (issue 13): FIFOs,
# sockets, character and block devices, symlinks, empty directories, with
# their mode, owner, device number and times; extended attributes and
# POSIX ACLs; hard links as one inode with several names.
#   - .ulpfs/snapshots/NAME/ shows the tree as it was (tests/fs_snaptree.py
#     manifests compared), after the live tree changed and after a remount;
#     getfattr/getfacl there give what the files had; the kernel enforces
#     the snapshot's ACLs for an unprivileged user (setpriv to nobody)
#   - a subtree snapshot keeps the links within it
#   - "ulpfs restore --snapshot" brings the special files, symlinks,
#     directories, modes, owners, times, xattrs, ACLs and links back
# Mounted with default_permissions,allow_other (so that nobody may enter).
# FUSE unavailable is a FAILURE unless ULPFS_ALLOW_SKIP=1 (then exit 77).
#
# Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/cli_lib.sh"
cli_init snapshot restore sync

STORE=$WORK/store
MNT=$WORK/mnt
TREE=$FS_SRCDIR/tests/fs_snaptree.py
FS_MOUNT_OPTS=${FS_MOUNT_OPTS:+$FS_MOUNT_OPTS,}default_permissions,allow_other
export FS_MOUNT_OPTS
for t in setfattr getfattr setfacl getfacl setpriv; do
	command -v "$t" >/dev/null || die "$t is missing (apt-get install attr acl util-linux)"
done
fs_mount "$STORE" "$MNT"

# same WHAT A B: the two manifests are equal (the difference shown if not)
same() {
	if diff -u "$2" "$3" >"$WORK/diff"; then
		ok "$1"
	else
		bad "$1"
		sed 's/^/    | /' "$WORK/diff" | head -40 >&2
	fi
}

step "a tree of every kind, with owners, modes, times, xattrs, ACLs, links"
mkdir -p "$MNT/run/d" "$MNT/run/empty" "$MNT/other"
head -c 300000 /dev/urandom >"$MNT/run/f"
echo small >"$MNT/run/d/g"
ln "$MNT/run/f" "$MNT/run/d/f-link" || die "link"
ln "$MNT/run/f" "$MNT/other/f-outside" || die "link outside the subtree"
mkfifo -m 0640 "$MNT/run/fifo" || die "mkfifo"
mknod "$MNT/run/null" c 1 3 || die "mknod c"
mknod "$MNT/run/blk" b 7 0 || die "mknod b"
"$PY" -c "import socket,sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])" "$MNT/run/sock" || die "socket"
ln -s d/g "$MNT/run/sl" || die "symlink"
chown 12:34 "$MNT/run/null" && chmod 0600 "$MNT/run/null" || die "chown/chmod"
chown 5:6 "$MNT/run/d" && chmod 0750 "$MNT/run/d" || die "chown/chmod dir"
chmod 0600 "$MNT/run/d/g" || die "chmod"
setfattr -n user.note -v "step 100" "$MNT/run/f" || die "setfattr"
setfattr -n trusted.t -v 0x00ff00 "$MNT/run/null" || die "setfattr trusted"
setfattr -n user.d -v dir "$MNT/run/empty" || die "setfattr dir"
setfacl -m u:nobody:r "$MNT/run/d/g" || die "setfacl"
echo secret >"$MNT/run/secret" && chmod 0600 "$MNT/run/secret" || die "secret"
setfacl -m u:nobody:r "$MNT/run/secret" || die "setfacl secret"
setfacl -m d:u:nobody:rx "$MNT/run/empty" || die "setfacl default"
touch -h -d "2001-02-03 04:05:06" "$MNT/run/sock" "$MNT/run/sl" "$MNT/run/fifo"
touch -a -d "2002-03-04 05:06:07" "$MNT/run/null"
touch -d "2003-04-05 06:07:08" "$MNT/run/empty" "$MNT/run/d/g"
expect 0 "sync" sync "$MNT"
"$PY" "$TREE" "$MNT" >"$WORK/live.m" || die "manifest of the live tree"
"$PY" "$TREE" "$MNT/run" >"$WORK/run.m" || die "manifest of run/"
expect 0 "snapshot create s1 (whole store)" snapshot create --store "$STORE" s1
expect 0 "snapshot create s2 run (a subtree)" snapshot create --store "$STORE" s2 run
"$PY" "$TREE" "$MNT" --content >"$WORK/live.c" || die "contents of the live tree"

step "the snapshot shows the tree as it was"
S1=$MNT/.ulpfs/snapshots/s1
"$PY" "$TREE" "$S1" >"$WORK/s1.m" || bad "manifest of s1"
same "s1: every entry's type, mode, owner, device, times, links, xattrs as live" "$WORK/live.m" "$WORK/s1.m"
"$PY" "$TREE" "$S1" --content >"$WORK/s1.c" || bad "contents of s1"
same "s1: contents as live" "$WORK/live.c" "$WORK/s1.c"
check "s1: a hard link is one inode" test "$(stat -c %i "$S1/run/f")" = "$(stat -c %i "$S1/run/d/f-link")"
check "s1: the FIFO" test "$(stat -c '%F %a' "$S1/run/fifo")" = "fifo 640"
check "s1: the device" test "$(stat -c '%F %a %u:%g %t:%T' "$S1/run/null")" = "character special file 600 12:34 1:3"
check "s1: getfattr" test "$(getfattr --only-values -n user.note "$S1/run/f")" = "step 100"
getfacl -p "$MNT/run/d/g" 2>/dev/null | sed 1d >"$WORK/acl.live"
getfacl -p "$S1/run/d/g" 2>/dev/null | sed 1d >"$WORK/acl.s1"
same "s1: getfacl as live" "$WORK/acl.live" "$WORK/acl.s1"
# s2 holds run/ only: f has the two names inside it, not the third.
"$PY" "$TREE" "$MNT/.ulpfs/snapshots/s2/run" >"$WORK/s2.m" || bad "manifest of s2"
sed 's/nlink=3/nlink=2/' "$WORK/run.m" >"$WORK/run2.m"
same "s2 (subtree): as live, the links counted within it" "$WORK/run2.m" "$WORK/s2.m"

step "the snapshot's ACLs are enforced"
chmod o+x "$WORK" # nobody must reach the mount point
NOBODY="setpriv --reuid=nobody --regid=nogroup --clear-groups"
check "nobody reads s1/run/secret (0600) through its ACL" $NOBODY cat "$S1/run/secret"
check "nobody may not reach s1/run/d/g (its directory is 0750, 5:6)" sh -c "! $NOBODY cat '$S1/run/d/g' 2>/dev/null"
check "nobody may not list s1/run/d (0750, owner 5:6)" sh -c "! $NOBODY ls '$S1/run/d' 2>/dev/null"
check "a snapshot's xattrs are read-only" sh -c "! setfattr -n user.x -v 1 '$S1/run/f' 2>/dev/null"

step "the live tree changes; the snapshot does not"
rm "$MNT/run/fifo" "$MNT/run/d/f-link" "$MNT/run/sl"
chmod 0644 "$MNT/run/null" && chown 0:0 "$MNT/run/null"
setfattr -n user.note -v changed "$MNT/run/f"
setfattr -x user.d "$MNT/run/empty"
setfacl -b "$MNT/run/d/g" "$MNT/run/secret"
rmdir "$MNT/run/empty"
echo new >"$MNT/run/f"
mkfifo "$MNT/run/new-fifo"
expect 0 "sync" sync "$MNT"
"$PY" "$TREE" "$S1" >"$WORK/s1b.m" || bad "manifest of s1 after the changes"
same "s1 unchanged by the live changes" "$WORK/live.m" "$WORK/s1b.m"

step "remount"
fs_remount "$STORE" "$MNT"
"$PY" "$TREE" "$S1" --content >"$WORK/s1r.c" || bad "contents of s1 after remount"
same "s1 after remount" "$WORK/live.c" "$WORK/s1r.c"

step "restore --snapshot s1 brings every kind back"
expect 0 "restore --snapshot s1" restore --store "$STORE" --snapshot s1
expect 0 "sync" sync "$MNT"
# new-fifo was made after the snapshot: restore leaves it, as other new
# files (then it goes, and run/ gets the snapshot's times once more).
check "restore leaves what was made since" test -p "$MNT/run/new-fifo"
rm -f "$MNT/run/new-fifo"
expect 0 "restore --snapshot s1 again" restore --store "$STORE" --snapshot s1
grep -q "0 files restored" "$OUT_F" && ok "nothing to write the second time" || bad "second restore: $(cat "$OUT_F")"
"$PY" "$TREE" "$MNT" --content >"$WORK/restored.c" || bad "contents of the restored tree"
same "the restored tree is the snapshot's" "$WORK/live.c" "$WORK/restored.c"
fs_remount "$STORE" "$MNT"
"$PY" "$TREE" "$MNT" --content >"$WORK/restored2.c" || bad "restored tree after remount"
same "the restored tree after remount" "$WORK/live.c" "$WORK/restored2.c"
fs_umount "$MNT"
fs_finish
