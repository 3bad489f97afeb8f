#!/usr/bin/env bash
# tests/fs_local.sh - ulpfs behaves as a local filesystem (issue 13):
#   special files (FIFOs, sockets, character and block devices) with
#   rename, unlink, chmod, chown, utimens, kept across a remount;
#   renameat2 RENAME_WHITEOUT;
#   extended attributes (user.*, trusted.*, security.*, POSIX ACLs) through
#   setfattr/getfattr, setfacl/getfacl, cp -a and rsync -aX, across a
#   remount, with their errors (ENODATA, EEXIST, ERANGE, E2BIG) and ACLs
#   enforced for an unprivileged user (setpriv to nobody);
#   POSIX's errors and times (tests/fs_errors.py) as root and as nobody;
#   hard links (tests/fs_links.py): versions through either name, names
#   removed in every order, gc and verify; cp -al of a checkpoint run, then
#   further training into the original, against a plain directory.
# Mounted with default_permissions,allow_other (so that nobody may enter).
# make check may run this with a POSIX sh: it needs bash.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/fs_lib.sh"
fs_init

STORE=$WORK/store
MNT=$WORK/mnt
FS_MOUNT_OPTS=${FS_MOUNT_OPTS:+$FS_MOUNT_OPTS,}default_permissions,allow_other
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
# renameat2 RENAME_WHITEOUT (overlayfs' upper layer): the old name becomes
# a whiteout, a character device 0:0, in the same rename.
echo wh >"$MNT/wh-src"
check "renameat2 RENAME_WHITEOUT" "$PY" -c "
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
a, b = sys.argv[1].encode(), sys.argv[2].encode()
if libc.renameat2(-100, a, -100, b, 4) != 0:
    sys.exit(os.strerror(ctypes.get_errno()))" "$MNT/wh-src" "$MNT/wh-dst"
check "the whiteout is a character device 0:0" test "$(stat -c '%F %t:%T %a' "$MNT/wh-src")" = "character special file 0:0 0"
check "the file moved" test "$(cat "$MNT/wh-dst")" = wh
check "rm of the whiteout" rm "$MNT/wh-src" "$MNT/wh-dst"

step "extended attributes: setfattr/getfattr, errors"
echo data >"$MNT/x.txt"
mkdir "$MNT/xd"
check "setfattr user.*" setfattr -n user.note -v "step 100" "$MNT/x.txt"
check "setfattr trusted.*" setfattr -n trusted.t -v 0x00ff00 "$MNT/x.txt"
check "setfattr security.*" setfattr -n security.s -v lbl "$MNT/x.txt"
check "setfattr on a directory" setfattr -n user.d -v dir "$MNT/xd"
check "getfattr user.note" test "$(getfattr --only-values -n user.note "$MNT/x.txt")" = "step 100"
check "getfattr -d lists user.*" test "$(getfattr -d --absolute-names "$MNT/x.txt" | grep -c '^user\.')" = 1
check "getfattr -m - lists all three" test "$(getfattr -m - --absolute-names "$MNT/x.txt" | grep -c '^[a-z]*\.')" = 3
cat >"$WORK/xattr_errors.py" <<'PY'
import errno, os, sys
p = sys.argv[1]
fails = 0
def expect(what, want, f, *a):
    global fails
    try:
        f(*a)
        got = "success"
    except OSError as e:
        got = errno.errorcode.get(e.errno, str(e.errno))
    if got == want:
        print("  ok: %s: %s" % (what, got))
    else:
        fails += 1
        print("  FAIL: %s: %s, expected %s" % (what, got, want))
expect("get a missing attribute", "ENODATA", os.getxattr, p, "user.none")
expect("remove a missing attribute", "ENODATA", os.removexattr, p, "user.none")
expect("XATTR_CREATE of an existing one", "EEXIST", os.setxattr, p, "user.note", b"v", os.XATTR_CREATE)
expect("XATTR_REPLACE of a missing one", "ENODATA", os.setxattr, p, "user.none", b"v", os.XATTR_REPLACE)
expect("XATTR_CREATE of a new one", "success", os.setxattr, p, "user.new", b"", os.XATTR_CREATE)
expect("XATTR_REPLACE of an existing one", "success", os.setxattr, p, "user.new", b"v2", os.XATTR_REPLACE)
expect("a value over 64 KiB", "E2BIG", os.setxattr, p, "user.big", b"x" * 65537)
expect("a name over 255 bytes", "ERANGE", os.setxattr, p, "user." + "n" * 251, b"v")
expect("an unknown namespace", errno.errorcode[errno.EOPNOTSUPP], os.setxattr, p, "bogus.x", b"v")
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
buf = ctypes.create_string_buffer(1)
def erange(what, n):
    global fails
    e = ctypes.get_errno()
    if n == -1 and e == errno.ERANGE:
        print("  ok: %s into a small buffer: ERANGE" % what)
    else:
        fails += 1
        print("  FAIL: %s into a small buffer: %d errno %d" % (what, n, e))
erange("getxattr", libc.getxattr(p.encode(), b"user.note", buf, ctypes.c_size_t(1)))
erange("listxattr", libc.listxattr(p.encode(), buf, ctypes.c_size_t(1)))
c0 = os.stat(p).st_ctime_ns
os.setxattr(p, "user.c", b"1")
c1 = os.stat(p).st_ctime_ns
os.removexattr(p, "user.c")
c2 = os.stat(p).st_ctime_ns
if c0 < c1 < c2:
    print("  ok: setxattr and removexattr change ctime")
else:
    fails += 1
    print("  FAIL: ctime %d %d %d" % (c0, c1, c2))
os.removexattr(p, "user.new")
sys.exit(1 if fails else 0)
PY
check "xattr errors and flags" "$PY" "$WORK/xattr_errors.py" "$MNT/x.txt"

step "POSIX ACLs: setfacl/getfacl, inherited, enforced for nobody"
chmod o+x "$WORK" # nobody must reach the mount point
echo secret >"$MNT/acl.txt"
chmod 0600 "$MNT/acl.txt"
as_nobody() { setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; }
check "nobody cannot read a 0600 file" sh -c "! setpriv --reuid=nobody --regid=nogroup --clear-groups cat '$MNT/acl.txt' 2>/dev/null"
check "setfacl u:nobody:r" setfacl -m u:nobody:r "$MNT/acl.txt"
check "getfacl shows the entry" sh -c "getfacl -p '$MNT/acl.txt' | grep -qx 'user:nobody:r--'"
check "the mode's group bits are the mask" test "$(stat -c %a "$MNT/acl.txt")" = 640
check "nobody reads it through the ACL" test "$(as_nobody cat "$MNT/acl.txt")" = secret
check "nobody still cannot write" sh -c "! setpriv --reuid=nobody --regid=nogroup --clear-groups sh -c 'echo x >>$MNT/acl.txt' 2>/dev/null"
mkdir "$MNT/shared"
check "setfacl -d (default ACL)" setfacl -d -m u:nobody:rwx "$MNT/shared"
check "setfacl on the directory" setfacl -m u:nobody:rwx "$MNT/shared"
check "nobody creates a file in the shared dir" as_nobody sh -c "echo mine >'$MNT/shared/n.txt'"
touch "$MNT/shared/r.txt"
check "a new file inherits the default ACL" sh -c "getfacl -p '$MNT/shared/r.txt' | grep -q '^user:nobody:rwx'"
mkdir "$MNT/shared/sub"
check "a new directory inherits it as its default ACL too" sh -c "getfacl -p '$MNT/shared/sub' | grep -q '^default:user:nobody:rwx'"
check "nobody writes the inherited-ACL file" as_nobody sh -c "echo w >'$MNT/shared/r.txt'"
check "setfacl -b removes the ACL" setfacl -b "$MNT/acl.txt"
check "nobody is locked out again" sh -c "! setpriv --reuid=nobody --regid=nogroup --clear-groups cat '$MNT/acl.txt' 2>/dev/null"
check "setfacl -m again (kept for the remount)" setfacl -m u:nobody:r "$MNT/acl.txt"

step "xattrs and ACLs through cp -a and rsync -aX, across a remount"
PLAIN=$WORK/plain
mkdir -p "$PLAIN/src"
echo a >"$PLAIN/src/a"
setfattr -n user.k -v v1 "$PLAIN/src/a"
setfacl -m u:nobody:rw "$PLAIN/src/a"
mkdir "$PLAIN/src/d"
setfattr -n user.dir -v dv "$PLAIN/src/d"
check "cp -a into the mount" cp -a "$PLAIN/src" "$MNT/cpa"
check "rsync -aXA into the mount" rsync -aXA "$PLAIN/src/" "$MNT/rsx/"
fs_remount "$STORE" "$MNT"
# Every xattr and ACL of a tree, in name order (readdir orders differ).
dumpx() {
	(cd "$1" && find . -mindepth 1 | LC_ALL=C sort | while read -r f; do
		getfattr -h -d -m - --absolute-names "$f" 2>/dev/null
		getfacl -p "$f" 2>/dev/null
	done)
}
check "cp -a kept every xattr and ACL" test "$(dumpx "$PLAIN/src")" = "$(dumpx "$MNT/cpa")"
check "rsync -aXA kept every xattr and ACL" test "$(dumpx "$PLAIN/src")" = "$(dumpx "$MNT/rsx")"
check "x.txt kept its xattrs across the remount" test "$(getfattr --only-values -n user.note "$MNT/x.txt")" = "step 100"
check "the ACL is kept and enforced after the remount" test "$(as_nobody cat "$MNT/acl.txt")" = secret
mkdir -p "$WORK/back"
check "rsync -aXA out of the mount" rsync -aXA "$MNT/rsx/" "$WORK/back/"
check "what came out has the same xattrs and ACLs" test "$(dumpx "$PLAIN/src")" = "$(dumpx "$WORK/back")"
check "an xattr goes with its file" sh -c "rm '$MNT/cpa/a' && echo n >'$MNT/cpa/a' && ! getfattr -n user.k '$MNT/cpa/a' 2>/dev/null"

step "POSIX errors and times, as root and as nobody"
mkdir -p "$MNT/err-root" "$MNT/err-nobody" "$MNT/sticky"
chown nobody:nogroup "$MNT/err-nobody"
chmod 1777 "$MNT/sticky"
echo x >"$MNT/sticky/theirs"
check "as root" "$PY" "$FS_SRCDIR/tests/fs_errors.py" "$MNT/err-root" "$MNT" "$MNT/sticky"
echo x >"$MNT/sticky/theirs"
check "as nobody" setpriv --reuid=nobody --regid=nogroup --clear-groups \
	"$PY" "$FS_SRCDIR/tests/fs_errors.py" "$MNT/err-nobody" "$MNT" "$MNT/sticky"

step "hard links: versions through either name, names removed in every order, gc, verify"
check "fs_links.py versions" "$PY" "$FS_SRCDIR/tests/fs_links.py" versions "$MNT" "$ULPFS"

step "cp -al of a checkpoint run, then further training into the original"
mkdir -p "$WORK/plainrun" "$MNT/mrun"
"$PY" "$FS_SRCDIR/tests/fs_links.py" run "$WORK/plainrun" >"$WORK/plain.manifest" || bad "the run on a plain directory failed"
"$PY" "$FS_SRCDIR/tests/fs_links.py" run "$MNT/mrun" >"$WORK/mnt.manifest" || bad "the run in the mount failed"
check "the linked copy kept the old content (as on a local filesystem)" grep -q "^linked/checkpoint-100/optimizer.pt 1 " "$WORK/mnt.manifest"
check "every path, link count and hash as on a plain directory" diff "$WORK/plain.manifest" "$WORK/mnt.manifest"
fs_remount "$STORE" "$MNT"
check "link counts survive a remount" test "$(stat -c %h "$MNT/mrun/linked/checkpoint-100/model.safetensors")" = 1
check "and the content" test "$(sha256sum <"$MNT/mrun/linked/checkpoint-100/model.safetensors")" = "$(sha256sum <"$WORK/plainrun/linked/checkpoint-100/model.safetensors")"

fs_umount "$MNT"
fs_finish
