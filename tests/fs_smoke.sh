#!/usr/bin/env bash
# tests/fs_smoke.sh - smoke test of the mount: ulpfs mount, everyday file
# operations (cp, dd, python writes with seeks, truncate, rename over,
# symlinks, chmod/touch, rm -rf, a hard link), read-back, ulpfs
# umount, remount, the same bytes and metadata again, umount.
#
# FUSE unavailable is a FAILURE unless ULPFS_ALLOW_SKIP=1 (then exit 77).
# Environment: ULPFS (the binary; "make check" sets it).
#
# Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.

# make check may run this with a POSIX sh: it needs bash.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
set -u -o pipefail

T=fs_smoke
PY=/usr/bin/python3
FAILS=0
WORK=""
MNT=""
STORE=""

say() { printf '[%s] %s\n' "$T" "$*"; }
bad() {
	printf '[%s]   FAIL: %s\n' "$T" "$*" >&2
	FAILS=$((FAILS + 1))
}
die() {
	printf '[%s] FATAL: %s\n' "$T" "$*" >&2
	FAILS=$((FAILS + 1))
	exit 1
}
check() { # check WHAT COMMAND...
	local what=$1
	shift
	if "$@"; then say "  ok: $what"; else bad "$what"; fi
}

unavailable() {
	{
		echo "*** $T: FUSE IS NOT AVAILABLE: $*"
		if [ "${ULPFS_ALLOW_SKIP:-0}" = 1 ]; then
			echo "*** ULPFS_ALLOW_SKIP=1: SKIPPING (exit 77)."
		else
			echo "*** This is a FAILURE (set ULPFS_ALLOW_SKIP=1 to skip)."
		fi
	} >&2
	[ "${ULPFS_ALLOW_SKIP:-0}" = 1 ] && exit 77
	exit 1
}

is_mounted() { grep -qF " $1 " /proc/self/mountinfo; }

daemon_pid() { tr -dc 0-9 <"$STORE/daemon.pid" 2>/dev/null; }

# On every exit path: unmount what we mounted, wait for our daemon.
cleanup() {
	local rc=$? pid n
	trap - EXIT INT TERM HUP
	set +e
	if [ -n "$MNT" ] && is_mounted "$MNT"; then
		pid=$(daemon_pid)
		say "cleanup: unmounting $MNT"
		fusermount3 -u "$MNT" 2>/dev/null || fusermount3 -uz "$MNT"
		for n in $(seq 600); do
			[ -n "$pid" ] && [ -d "/proc/$pid" ] || break
			sleep 0.1
		done
	fi
	if [ -n "$WORK" ] && [ -d "$WORK" ]; then
		if grep -qF " $WORK/" /proc/self/mountinfo; then
			echo "[$T] WARNING: something is still mounted under $WORK" >&2
		elif [ "${ULPFS_KEEP_WORK:-0}" = 1 ]; then
			echo "[$T] keeping $WORK" >&2
		else
			rm -rf --one-file-system "$WORK"
		fi
	fi
	[ "$rc" -eq 0 ] && [ "$FAILS" -gt 0 ] && rc=1
	exit "$rc"
}

# ---------------------------------------------------------------- setup

[ -n "${ULPFS:-}" ] || die "ULPFS is not set (make check sets it)"
[ -x "$ULPFS" ] || die "ULPFS=$ULPFS is not executable"
[ -e /dev/fuse ] || unavailable "/dev/fuse does not exist"
[ -r /dev/fuse ] && [ -w /dev/fuse ] || unavailable "/dev/fuse is not readable and writable"
command -v fusermount3 >/dev/null || unavailable "fusermount3 is not installed"
grep -qw fuse /proc/filesystems || unavailable "the kernel has no fuse filesystem"
"$ULPFS" mount --help >/dev/null || die "'ulpfs mount --help' fails"
"$ULPFS" umount --help >/dev/null || die "'ulpfs umount --help' fails"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/ulpfs-$T.XXXXXX") || die "mktemp failed"
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP
STORE=$WORK/store
MNT=$WORK/mnt
REF=$WORK/ref
mkdir -p "$MNT" "$REF"

mount_it() {
	local out rc
	# FS_WRITE_MODE: make check runs this in each write mode (Makefile.am)
	out=$("$ULPFS" mount -o "settle=20${FS_WRITE_MODE:+,write_mode=$FS_WRITE_MODE}" "$STORE" "$MNT" 2>&1)
	rc=$?
	[ "$rc" -eq 0 ] || { printf '%s\n' "$out" >&2; die "ulpfs mount failed (exit $rc)"; }
	is_mounted "$MNT" || die "ulpfs mount returned 0 but $MNT is not mounted"
	local line
	line=$(findmnt -n -M "$MNT" -o FSTYPE,SOURCE | tail -n1)
	check "mountinfo shows fuse.ulpfs from the store ($line)" \
		test "$line" = "fuse.ulpfs $(realpath "$STORE")"
	if [ -n "${FS_WRITE_MODE:-}" ]; then
		line=$("$ULPFS" stats "$MNT" | sed -n 's/^writes *//p')
		check "the mount writes in mode $FS_WRITE_MODE ($line)" \
			test "$line" = "$FS_WRITE_MODE"
	fi
}

umount_it() {
	local pid out rc
	pid=$(daemon_pid)
	[ -n "$pid" ] || bad "no $STORE/daemon.pid"
	out=$(timeout 300 "$ULPFS" umount "$MNT" 2>&1)
	rc=$?
	[ "$rc" -eq 0 ] || { printf '%s\n' "$out" >&2; die "ulpfs umount failed (exit $rc)"; }
	is_mounted "$MNT" && die "ulpfs umount returned 0 but $MNT is still mounted"
	if [ -n "$pid" ] && [ -d "/proc/$pid" ] &&
		! grep -q '^State:.*Z' "/proc/$pid/status" 2>/dev/null; then
		bad "ulpfs umount returned before the daemon ($pid) exited"
	fi
	check "staging is empty after umount" test -z "$(ls -A "$STORE/staging" 2>/dev/null)"
}

# Type, mode, size, mtime (s), target of every entry, sorted; and hashes.
snapshot() {
	(cd "$1" && find . -mindepth 1 -printf '%y %m %s %TY%Tm%Td%TH%TM%TS %p %l\n' |
		sed -e '/^d/d' -e 's/\.[0-9]* / /' | LC_ALL=C sort &&
		find . -mindepth 1 -type d -printf 'd %m %p\n' | LC_ALL=C sort &&
		find . -type f -print0 | LC_ALL=C sort -z | xargs -0r sha256sum)
}

# ------------------------------------------------------------ mount, write

say "store $STORE, mount point $MNT"
mount_it

dd if=/dev/urandom of="$REF/rand.bin" bs=1M count=6 status=none
head -c 300000 /dev/zero >"$REF/zeros.bin"
printf 'hello, ulpfs\n' >"$REF/hello.txt"

check "echo > file" sh -c "printf 'hello, ulpfs\n' > '$MNT/hello.txt'"
check "cat reads it back" test "$(cat "$MNT/hello.txt")" = "hello, ulpfs"
check "mkdir -p" mkdir -p "$MNT/a/b/c"
check "cp of 6 MiB of random data" cp "$REF/rand.bin" "$MNT/a/b/rand.bin"
check "cmp right after the write" cmp "$REF/rand.bin" "$MNT/a/b/rand.bin"
check "dd bs=64k" dd if="$REF/zeros.bin" of="$MNT/a/zeros.bin" bs=64k status=none
check "cmp dd output" cmp "$REF/zeros.bin" "$MNT/a/zeros.bin"

# Python: write, seek back, overwrite, append; the same on a plain file.
pywrite() {
	"$PY" - "$1" <<'EOF'
import os, sys
p = sys.argv[1]
with open(p, "wb") as f:
    f.write(bytes(range(256)) * 4096)
    f.seek(1000)
    f.write(b"X" * 5000)
    f.seek(0, os.SEEK_END)
    f.write(b"tail")
with open(p, "r+b") as f:
    f.seek(2_000_000)        # beyond the end: a hole
    f.write(b"after-hole")
with open(p, "ab") as f:
    f.write(b"appended")
EOF
}
check "python writes with seeks, holes, r+b and append" pywrite "$MNT/a/py.bin"
pywrite "$REF/py.bin"
check "python-written file reads back" cmp "$REF/py.bin" "$MNT/a/py.bin"

check "truncate -s shrinks" truncate -s 1000 "$MNT/a/zeros.bin"
check "truncate -s extends" truncate -s 5000 "$MNT/a/zeros.bin"
check "size after truncates is 5000" test "$(stat -c %s "$MNT/a/zeros.bin")" = 5000
head -c 5000 /dev/zero >"$REF/zeros5000.bin"
check "truncated file content" cmp "$REF/zeros5000.bin" "$MNT/a/zeros.bin"

check "O_TRUNC rewrite of a file" sh -c "printf 'short\n' > '$MNT/a/b/rand.bin'"
check "rewritten content" test "$(cat "$MNT/a/b/rand.bin")" = "short"
check "cp again over it" cp "$REF/rand.bin" "$MNT/a/b/rand.bin"
check "cmp after the second cp" cmp "$REF/rand.bin" "$MNT/a/b/rand.bin"

check "symlink" ln -s b/rand.bin "$MNT/a/link"
check "readlink" test "$(readlink "$MNT/a/link")" = "b/rand.bin"
check "read through the symlink" cmp "$REF/rand.bin" "$MNT/a/link"

cp "$REF/hello.txt" "$MNT/a/tmp.txt"
check "rename over an existing file" mv "$MNT/a/tmp.txt" "$MNT/a/b/c/final.txt"
check "renamed content" cmp "$REF/hello.txt" "$MNT/a/b/c/final.txt"
check "source of the rename is gone" test ! -e "$MNT/a/tmp.txt"
mkdir -p "$MNT/ckpt.tmp/sub"
cp "$REF/hello.txt" "$MNT/ckpt.tmp/sub/h.txt"
check "rename of a whole directory" mv "$MNT/ckpt.tmp" "$MNT/ckpt-1"
check "file under the renamed directory" cmp "$REF/hello.txt" "$MNT/ckpt-1/sub/h.txt"

check "chmod 640" chmod 640 "$MNT/a/py.bin"
check "mode is 640" test "$(stat -c %a "$MNT/a/py.bin")" = 640
check "touch -d sets mtime" touch -d '2020-01-02 03:04:05' "$MNT/a/py.bin"
check "mtime is 2020-01-02" test "$(date -d "@$(stat -c %Y "$MNT/a/py.bin")" +%F)" = 2020-01-02

check "hard link" ln "$MNT/hello.txt" "$MNT/hardlink"
check "both names count (st_nlink 2)" test "$(stat -c %h "$MNT/hello.txt")" = 2
check "the link reads the same bytes" cmp "$REF/hello.txt" "$MNT/hardlink"
check "rm of the link" rm "$MNT/hardlink"
check "st_nlink back to 1, content kept" sh -c "test \"\$(stat -c %h '$MNT/hello.txt')\" = 1 && cmp '$REF/hello.txt' '$MNT/hello.txt'"

mkdir -p "$MNT/junk/x/y"
for i in 1 2 3; do printf '%s' "$i" >"$MNT/junk/x/y/f$i"; done
ln -s nowhere "$MNT/junk/dangling"
check "rm -rf of a tree" rm -rf "$MNT/junk"
check "the tree is gone" test ! -e "$MNT/junk"
check "ls -lR works" sh -c "ls -lR '$MNT' >/dev/null"
check "df on the mount" sh -c "df -P '$MNT' >/dev/null"

# Other processes must see everything at once; now remember the tree.
snapshot "$MNT" >"$WORK/before.txt" || bad "cannot list the mount"

# ------------------------------------------------------ umount, remount

say "ulpfs umount"
umount_it
say "remount"
mount_it
snapshot "$MNT" >"$WORK/after.txt" || bad "cannot list the remounted tree"
if cmp -s "$WORK/before.txt" "$WORK/after.txt"; then
	say "  ok: same tree, modes, sizes, mtimes, symlinks and bytes after the remount"
else
	bad "the tree differs after the remount:"
	diff "$WORK/before.txt" "$WORK/after.txt" | head -20 >&2
fi
check "python file after the remount" cmp "$REF/py.bin" "$MNT/a/py.bin"
check "random file after the remount" cmp "$REF/rand.bin" "$MNT/a/b/rand.bin"

# A committed file opened for writing without O_TRUNC is copied up.
check "append to a committed file" sh -c "printf 'more' >> '$MNT/hello.txt'"
check "appended content" test "$(cat "$MNT/hello.txt")" = "hello, ulpfs
more"

# Old versions, read-only, under the hidden control directory.
wait_for() { # wait_for PATH: up to 60 s
	local n
	for n in $(seq 600); do
		[ -e "$1" ] && return 0
		sleep 0.1
	done
	return 1
}
printf 'first\n' >"$MNT/hist.txt"
check "version 1 of a file appears in .ulpfs/versions" wait_for "$MNT/.ulpfs/versions/hist.txt/1"
cp "$REF/rand.bin" "$MNT/hist.txt"
check "version 2 appears" wait_for "$MNT/.ulpfs/versions/hist.txt/2"
check "version 1 reads back" test "$(cat "$MNT/.ulpfs/versions/hist.txt/1")" = first
check "version 2 reads back" cmp "$REF/rand.bin" "$MNT/.ulpfs/versions/hist.txt/2"
check "versions are read-only" sh -c "! (echo x > '$MNT/.ulpfs/versions/hist.txt/1') 2>/dev/null"
check "the control directory is not listed" sh -c "! ls -a '$MNT' | grep -q ulpfs"

# Errors of the helper.
"$ULPFS" umount "$WORK" >/dev/null 2>&1
check "umount of a directory that is not a mount fails with 1" test $? -eq 1
"$ULPFS" mount -o no_such_option "$STORE" "$MNT" >/dev/null 2>&1
check "mount with an unknown option fails with 2" test $? -eq 2
"$ULPFS" mount "$STORE" "$WORK/elsewhere-$$" >/dev/null 2>&1
check "mount on a missing mount point fails with 1" test $? -eq 1

say "final ulpfs umount"
umount_it

if [ "$FAILS" -gt 0 ]; then
	echo "[$T] FAILED: $FAILS check(s)" >&2
	exit 1
fi
say "PASSED"
exit 0
