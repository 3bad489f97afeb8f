#!/usr/bin/env bash
# tests/fs_local.sh - ulpfs behaves as a local filesystem (issue 13):
#   special files (FIFOs, sockets, character and block devices) with
#   rename, unlink, chmod, chown, utimens, kept across a remount;
#   extended attributes (user.*, trusted.*, security.*, POSIX ACLs) through
#   setfattr/getfattr, setfacl/getfacl, cp -a and rsync -aX, across a
#   remount, with their errors (ENODATA, EEXIST, ERANGE, E2BIG) and ACLs
#   enforced for an unprivileged user (setpriv to nobody);
#   hard links (tests/fs_links.py).
# Mounted with default_permissions, as root.
# make check may run this with a POSIX sh: it needs bash.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/fs_lib.sh"
fs_init

STORE=$WORK/store
MNT=$WORK/mnt
FS_MOUNT_OPTS=${FS_MOUNT_OPTS:+$FS_MOUNT_OPTS,}default_permissions
export FS_MOUNT_OPTS
for t in setfattr getfattr setfacl getfacl rsync setpriv; do
	command -v "$t" >/dev/null || die "$t is missing (apt-get install attr acl rsync util-linux)"
done
mkdir -p "$MNT"
fs_mount "$STORE" "$MNT"

step "special files: mkfifo, mknod (char, block), a UNIX socket"
check "mkfifo" mkfifo -m 0640 "$MNT/fifo"
check "mknod c 1 3" mknod "$MNT/null" c 1 3
check "mknod b 7 0" mknod "$MNT/blk" b 7 0
check "socket" "$PY" -c "import socket,sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])" "$MNT/sock"
check "fifo type and mode" test "$(stat -c '%F %a' "$MNT/fifo")" = "fifo 640"
check "char device numbers" test "$(stat -c '%F %t:%T' "$MNT/null")" = "character special file 1:3"
check "block device numbers" test "$(stat -c '%F %t:%T' "$MNT/blk")" = "block special file 7:0"
check "socket type" test "$(stat -c '%F' "$MNT/sock")" = "socket"
# The kernel serves the FIFO itself: bytes pass through it.
fs_bg sh -c "echo through-the-fifo >'$MNT/fifo'"
FIFO_W=$FS_BG_LAST
check "a FIFO carries data" test "$(timeout 20 cat "$MNT/fifo")" = "through-the-fifo"
wait "$FIFO_W"
fs_bg_forget "$FIFO_W"
check "rename a FIFO" mv "$MNT/fifo" "$MNT/fifo2"
check "chmod a device" chmod 0600 "$MNT/null"
check "chown a device" chown 12:34 "$MNT/null"
check "utimens a socket" touch -h -d "2001-02-03 04:05:06" "$MNT/sock"
check "rename a device over a FIFO" mv "$MNT/blk" "$MNT/fifo2"
check "the device took the name" test "$(stat -c '%F %t:%T' "$MNT/fifo2")" = "block special file 7:0"
check "mknod over an existing name fails" sh -c "! mknod '$MNT/null' c 1 5 2>/dev/null"
mkfifo "$MNT/gone" && check "unlink a FIFO" rm "$MNT/gone"
check "the unlinked FIFO is gone" test ! -e "$MNT/gone"
fs_remount "$STORE" "$MNT"
check "after remount: device kept mode, owner, numbers" \
	test "$(stat -c '%F %a %u:%g %t:%T' "$MNT/null")" = "character special file 600 12:34 1:3"
check "after remount: socket kept its mtime" test "$(stat -c '%Y' "$MNT/sock")" = "$(date -d '2001-02-03 04:05:06' +%s)"
check "after remount: FIFO gone, device under its name" test "$(stat -c '%F' "$MNT/fifo2")" = "block special file"
check "rm of special files" rm "$MNT/null" "$MNT/sock" "$MNT/fifo2"

fs_umount "$MNT"
fs_finish
