#!/usr/bin/env bash
# tests/fs_eio.sh - I/O errors reach the writer: the store on a small ext4
# (a loop device) that is shut down (EXT4_IOC_SHUTDOWN: every later write
# fails with EIO) while a file is open for writing.  In the write mode of
# the mount (FS_WRITE_MODE; make check runs it in each):
#   - a write or the fsync after the shutdown fails with EIO (never
#     silently succeeds), so does close() or it had failed before,
#   - the daemon survives it and unmounts.
# Needs root (mount -o loop) and mkfs.ext4.
# make check may run this with a POSIX sh: it needs bash.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/fs_lib.sh"
fs_init

[ "$(id -u)" -eq 0 ] || fs_skip_or_fail "mount -o loop needs root"
command -v mkfs.ext4 >/dev/null || die "mkfs.ext4 (e2fsprogs) is required"
EXT=$WORK/ext4
MNT=$WORK/mnt
STORE=$EXT/store

step "a 128 MiB ext4 on a loop device for the store"
truncate -s 128M "$WORK/img" || die "truncate failed"
mkfs.ext4 -q -F "$WORK/img" || die "mkfs.ext4 failed"
mkdir -p "$EXT"
mount -o loop "$WORK/img" "$EXT" || fs_skip_or_fail "mount -o loop failed (no loop devices?)"
FS_TMPFS+=("$EXT")
fs_mount "$STORE" "$MNT"
say "write mode: $(fs_write_mode "$MNT")"

cat >"$WORK/eio.py" <<'PY'
import errno, fcntl, os, sys

mnt, ext = sys.argv[1:3]
EXT4_IOC_SHUTDOWN = 0x8004587D  # _IOR('X', 125, __u32)
NOLOGFLUSH = 2
fails = 0


def bad(m):
    global fails
    fails += 1
    print("    FAIL: " + m, flush=True)


fd = os.open(os.path.join(mnt, "f"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
os.write(fd, os.urandom(1 << 20))
os.fsync(fd)
print("    ok: 1 MiB written and fsync'ed before the shutdown", flush=True)
d = os.open(ext, os.O_RDONLY)
fcntl.ioctl(d, EXT4_IOC_SHUTDOWN, NOLOGFLUSH.to_bytes(4, "little"))
os.close(d)
got = None
try:
    for _ in range(16):
        os.write(fd, os.urandom(1 << 20))
    os.fsync(fd)
except OSError as e:
    got = e.errno
if got == errno.EIO:
    print("    ok: EIO at write or fsync after the shutdown", flush=True)
else:
    bad("after the shutdown: write and fsync gave %s, not EIO" %
        (errno.errorcode.get(got, got) if got else "no error"))
try:
    os.close(fd)
except OSError as e:
    print("    ok: close: %s" % e, flush=True)
sys.exit(1 if fails else 0)
PY

step "shut the store's filesystem down while a file is written"
"$PY" "$WORK/eio.py" "$MNT" "$EXT" || bad "the writer did not see EIO"
pid=$(fs_mount_pid "$MNT")
check "the daemon survives the I/O errors" pid_alive "$pid"
step "unmount"
fs_force_umount "$MNT" 60
if pid_alive "$pid"; then bad "the daemon is still running"; else ok "the daemon exited"; fi
fs_finish
