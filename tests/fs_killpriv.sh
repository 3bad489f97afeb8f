#!/usr/bin/env bash
# tests/fs_killpriv.sh - set-user-ID and set-group-ID bits in the write mode
# of the mount (FS_WRITE_MODE, see tests/fs_lib.sh): writes, truncates,
# O_TRUNC opens and chowns by nobody and by root clear them or keep them as
# on the local filesystem under TMPDIR (ext4), done the same way there in
# the same run (tests/fs_killpriv.py).  The daemon takes that job from the
# kernel (FUSE_HANDLE_KILLPRIV_V2, src/fs/fs_io.c), so that the kernel
# stops asking for security.capability before each write: a passthrough
# dd then sends the daemon no request per write, which ulpfs stats shows.
# Mounted with default_permissions,allow_other (so that nobody may enter).
# make check may run this with a POSIX sh: it needs bash.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/fs_lib.sh"
fs_init

STORE=$WORK/store
MNT=$WORK/mnt
REF=$WORK/ref
FS_MOUNT_OPTS=${FS_MOUNT_OPTS:+$FS_MOUNT_OPTS,}default_permissions,allow_other
export FS_MOUNT_OPTS
mkdir -p "$MNT" "$REF"
chmod 755 "$WORK" # nobody must reach the mount point and the reference
chmod 777 "$REF"
case $(findmnt -n -o FSTYPE -T "$REF") in
fuse*) die "the reference directory $REF is on FUSE: set TMPDIR to a local filesystem" ;;
esac
fs_mount "$STORE" "$MNT"
chmod 777 "$MNT"
say "write mode: $(fs_write_mode "$MNT"); reference on $(findmnt -n -o FSTYPE -T "$REF")"

step "set-user-ID and set-group-ID bits, against $(findmnt -n -o FSTYPE -T "$REF")"
"$PY" "$FS_SRCDIR/tests/fs_killpriv.py" "$MNT" "$REF" "$ULPFS" || bad "modes differ from the reference (above)"

# requests MNT OPCODE: how many of them the daemon has read so far.
requests() {
	"$ULPFS" stats --json "$1" | "$PY" -c '
import json, sys
r = json.load(sys.stdin)["requests"]
print(-1 if r is None else r.get(sys.argv[1], 0))' "$2"
}

step "requests per write: a dd of 64 MiB"
mode=$(fs_write_mode "$MNT")
head -c $((64 << 20)) /dev/urandom >"$WORK/src"
w0=$(requests "$MNT" WRITE) x0=$(requests "$MNT" GETXATTR)
dd if="$WORK/src" of="$MNT/dd" bs=1M conv=fsync status=none || bad "dd failed"
w1=$(requests "$MNT" WRITE) x1=$(requests "$MNT" GETXATTR)
say "the dd sent $((w1 - w0)) WRITE and $((x1 - x0)) GETXATTR requests ($mode)"
check "the dd's bytes" cmp -s "$WORK/src" "$MNT/dd"
case $mode in
passthrough)
	check "no WRITE request reached the daemon" test "$((w1 - w0))" = 0
	# one for the new inode at its first write, none per write
	check "at most one GETXATTR (security.capability), not one per write" test "$((x1 - x0))" -le 1
	;;
direct*)
	check "WRITE requests carry the data (64 MiB)" test "$((w1 - w0))" -ge 64
	check "no GETXATTR per write" test "$((x1 - x0))" -le 1
	;;
cached*)
	check "requests are not counted in write_mode=cached" test "$w1" = -1
	;;
*) bad "unknown write mode: $mode" ;;
esac

fs_umount "$MNT"
fs_finish
