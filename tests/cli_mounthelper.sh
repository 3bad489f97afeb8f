#!/usr/bin/env bash
# tests/cli_mounthelper.sh - mount.ulpfs, the mount(8) helper:
#   - its argument translation, without mounting (-f: fake, -v: verbose):
#     mount(8)'s and systemd's options are dropped, ulpfs's kept
#   - a real "mount -t ulpfs -o settle=50,defaults,_netdev,noauto STORE MNT"
#     and "mount MNT" from an fstab file (mount --fstab), in a private
#     mount namespace (unshare -m) where an overlay puts the helper into
#     /sbin (mount(8) looks for helpers there only), files written and read
#     back, "ulpfs umount"
#   - a bad option reaches ulpfs and fails the mount (exit non-zero)
# FUSE unavailable is a FAILURE unless ULPFS_ALLOW_SKIP=1 (then exit 77).
# Environment: ULPFS, MOUNT_ULPFS (the built helper; default: next to
# $ULPFS).
#
# Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/cli_lib.sh"
cli_init

H=${MOUNT_ULPFS:-$(dirname "$ULPFS")/mount.ulpfs}
[ -x "$H" ] || die "mount.ulpfs not found at $H (run make, or set MOUNT_ULPFS)"
STORE=$WORK/store
MNT=$WORK/mnt
SB=$WORK/sbin
mkdir -p "$SB" "$MNT"
# The helper, pointed at the binary under test.
sed "s|^ulpfs=.*|ulpfs=$ULPFS|" "$H" >"$SB/mount.ulpfs" && chmod +x "$SB/mount.ulpfs"

step "argument translation (-f -v: print, do not mount)"
tr_check() { # EXPECTED ARGS...
	local exp=$1 got
	shift
	got=$("$SB/mount.ulpfs" "$@" -fv 2>&1 >/dev/null | sed -n 's/^mount.ulpfs: [^ ]* //p')
	if [ "$got" = "$exp" ]; then ok "mount.ulpfs $* -> ulpfs $got"; else bad "mount.ulpfs $*: got 'ulpfs $got', expected 'ulpfs $exp'"; fi
}
tr_check "mount -o settle=500 /s /m" /s /m -o defaults,settle=500,_netdev
tr_check "mount -o rw,keyframe=8,cache=1G /s /m" /s /m -o rw,noauto,keyframe=8,user,nofail,cache=1G,x-systemd.automount,comment=foo
tr_check "mount /s /m" /s /m -o defaults
tr_check "mount /s /m" /s /m
tr_check "mount -o ro,settle=5 /s /m" /s /m -n -o ro -o settle=5 -t ulpfs
tr_check "mount -o allow_other /s /m" -s /s /m -oallow_other,_netdev
"$SB/mount.ulpfs" /s 2>/dev/null
[ $? = 2 ] && ok "one argument: usage error (2)" || bad "mount.ulpfs with one argument should exit 2"

command -v unshare >/dev/null || die "unshare (util-linux) is required"
grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null ||
	die "no overlay filesystem: cannot put mount.ulpfs into /sbin in a private namespace"

step "a real mount -t ulpfs, and an fstab line, in a private mount namespace"
cat >"$WORK/fstab" <<EOF
# test fstab
$STORE  $MNT  ulpfs  defaults,settle=50,_netdev,noauto,nofail,x-systemd.requires=foo  0 0
EOF
cat >"$WORK/inner.sh" <<'EOF'
set -u
ULPFS=$1 STORE=$2 MNT=$3 SB=$4 WORK=$5
fails=0
b() { echo "    FAIL: $*"; fails=$((fails + 1)); }
o() { echo "    ok: $*"; }
mount -t overlay overlay -o "lowerdir=$SB:/usr/sbin" /usr/sbin || { echo "    FAIL: overlay on /usr/sbin"; exit 3; }
[ -x /sbin/mount.ulpfs ] || { echo "    FAIL: /sbin/mount.ulpfs not visible"; exit 3; }
done_mount() { findmnt -n -M "$MNT" -o FSTYPE,SOURCE 2>/dev/null | tail -n1; }
cleanup() { findmnt -n -M "$MNT" >/dev/null 2>&1 && { fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT"; }; }
trap cleanup EXIT
bash "$WORK/ns_detach_fuse.sh" || { echo "    FAIL: detaching the copies of other FUSE mounts"; exit 3; }

# 1. mount -t ulpfs
if mount -t ulpfs -o settle=50,defaults,_netdev,noauto "$STORE" "$MNT"; then
	t=$(done_mount)
	case $t in fuse.ulpfs*) o "mount -t ulpfs: $t" ;; *) b "mount -t ulpfs returned 0 but the mount is '$t'" ;; esac
	echo hello >"$MNT/hello.txt" && [ "$(cat "$MNT/hello.txt")" = hello ] && o "write/read through it" || b "write/read"
	"$ULPFS" umount "$MNT" && o "ulpfs umount" || b "ulpfs umount failed"
else
	b "mount -t ulpfs -o settle=50,defaults,_netdev,noauto failed (exit $?)"
fi

# 2. fstab: mount MNT
if mount --fstab "$WORK/fstab" "$MNT"; then
	t=$(done_mount)
	case $t in fuse.ulpfs*) o "mount MNT from an fstab line: $t" ;; *) b "fstab mount is '$t'" ;; esac
	[ "$(cat "$MNT/hello.txt" 2>/dev/null)" = hello ] && o "the file written before is there" || b "hello.txt lost"
	"$ULPFS" umount "$MNT" && o "ulpfs umount" || b "ulpfs umount failed"
else
	b "mount --fstab WORK/fstab MNT failed (exit $?)"
fi

# 3. an option ulpfs refuses fails the mount
if mount -t ulpfs -o settle=50,writeback_cache "$STORE" "$MNT" 2>"$WORK/err"; then
	b "mount -t ulpfs -o writeback_cache succeeded"
	"$ULPFS" umount "$MNT"
else
	grep -q writeback_cache "$WORK/err" && o "writeback_cache refused: $(head -n1 "$WORK/err")" || b "writeback_cache refused without naming it: $(cat "$WORK/err")"
fi
findmnt -n -M "$MNT" >/dev/null 2>&1 && b "still mounted at the end"
exit $((fails > 0))
EOF
cp "$FS_SRCDIR/tests/ns_detach_fuse.sh" "$WORK/"
# The namespace dies with unshare; its mounts with it.  The daemon, if one
# survives (it cannot reach its mount any more), is found by its store.
timeout -k 5 120 unshare -m --propagation private bash "$WORK/inner.sh" "$ULPFS" "$STORE" "$MNT" "$SB" "$WORK" >"$WORK/inner.log" 2>&1
rc=$?
sed 's/^/  /' "$WORK/inner.log"
n=$(grep -c 'FAIL' "$WORK/inner.log")
[ "$rc" = 0 ] && [ "$n" = 0 ] && ok "mount -t ulpfs and fstab mounts in a private namespace" || bad "mount(8) integration: exit $rc, $n failure(s) (above)"
if pid=$(fs_daemon_pid "$STORE" 2>/dev/null); then
	bad "a daemon (PID $pid) is still serving $STORE after the namespace ended"
	kill "$pid" 2>/dev/null
	wait_pid_gone "$pid" 30 || kill -9 "$pid"
fi
is_mounted "$MNT" && bad "$MNT is mounted outside the namespace"
fs_finish
