#!/usr/bin/env bash
# tests/fs_rename.sh - namespace operations through the mount behave as
# POSIX (Linux) says, and survive a remount:
#   save to x.tmp + rename over x (and the new version is stored as a small
#   delta), overwrite in place, rename of a whole directory, over an empty
#   directory, over a non-empty one (ENOTEMPTY), file<->directory (EISDIR,
#   ENOTDIR), renameat2 RENAME_NOREPLACE (EEXIST) and RENAME_EXCHANGE, a
#   directory into its own subdirectory (EINVAL), unlink of an open file,
#   directory mtimes on create/unlink/rename/mkdir/rmdir/symlink, a hard
#   link, symlink + readlink, chmod/chown/utimens/touch -d, truncate grow
#   and shrink, sparse writes (dd seek), O_APPEND, patching a committed file
#   in place (dd conv=notrunc, open r+).
# The same operations run on a plain directory; after a remount both trees
# must be identical (bytes, types, modes, owners, symlink targets, mtimes
# that were set explicitly).
# make check may run this with a POSIX sh: it needs bash.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/fs_lib.sh"
fs_init

STORE=$WORK/store
MNT=$WORK/mnt
PLAIN=$WORK/plain
DATA=$WORK/drift
mkdir -p "$PLAIN" "$DATA"

step "generating three versions of an 8 MB bf16 safetensors file with small ULP drift"
"$PY" "$FS_UTIL" drift "$DATA" --n 3 --elems 4000000 || die "fs_util.py drift failed"

cat >"$WORK/ops.py" <<'PY'
import ctypes, errno, hashlib, os, random, stat, sys, time

root, phase, kind, data = sys.argv[1:5]
MNT = kind == "mnt"
fails = 0
os.chdir(root)


def ok(m):
    print("  [%s] ok: %s" % (kind, m))


def bad(m):
    global fails
    fails += 1
    print("  [%s] FAIL: %s" % (kind, m))


def rnd(n, seed):
    return random.Random(seed).randbytes(n)


def put(p, b):
    with open(p, "wb") as f:
        f.write(b)


def get(p):
    try:
        with open(p, "rb") as f:
            return f.read()
    except OSError as e:  # a failed read is a failed comparison, not a crash
        return b"<read failed: %s>" % str(e).encode()


def ls(p):
    try:
        return sorted(os.listdir(p))
    except OSError as e:
        return "<listdir failed: %s>" % e


class NoStat:
    st_mode = st_uid = st_gid = st_size = st_nlink = -1
    st_mtime_ns = st_ctime_ns = st_atime_ns = -1


def st(p, follow=True):
    try:
        return os.stat(p) if follow else os.lstat(p)
    except OSError as e:
        print("    stat %s: %s" % (p, e))
        return NoStat()


SECTIONS = []


def section(fn):
    SECTIONS.append(fn)
    return fn


def run_sections():
    import traceback
    for fn in SECTIONS:
        print("%s: %s" % ("phase " + phase, fn.__doc__))
        try:
            fn()
        except Exception:
            bad("section '%s' stopped by an exception:\n%s" % (fn.__doc__, traceback.format_exc()))


def ename(e):
    return errno.errorcode.get(e, str(e))


def expect_err(what, name, fn, *a):
    try:
        fn(*a)
    except OSError as e:
        if e.errno == getattr(errno, name):
            ok("%s -> %s" % (what, name))
        else:
            bad("%s: expected %s, got %s (%s)" % (what, name, ename(e.errno), e))
        return
    bad("%s: expected %s, but it succeeded" % (what, name))


def expect_ok(what, fn, *a):
    try:
        r = fn(*a)
        ok(what)
        return r
    except OSError as e:
        bad("%s: %s" % (what, e))


def same(what, got, exp):
    if got == exp:
        ok(what)
    else:
        if isinstance(exp, bytes):
            d = next((i for i in range(min(len(got), len(exp))) if got[i] != exp[i]), min(len(got), len(exp)))
            bad("%s: content differs (len %d vs %d expected, first difference at %d)" % (what, len(got), len(exp), d))
        else:
            bad("%s: got %.200r, expected %.200r" % (what, got, exp))


def exists(p):
    return os.path.lexists(p)


libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD = -100
RENAME_NOREPLACE, RENAME_EXCHANGE = 1, 2


def renameat2(a, b, flags):
    if libc.renameat2(AT_FDCWD, a.encode(), AT_FDCWD, b.encode(), ctypes.c_uint(flags)) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), a)


v = [None] + [get(os.path.join(data, "v%d" % i, "model.safetensors")) for i in (1, 2, 3)]

if phase == "1":
    print("phase 1: create the files and directories the later phases work on")
    os.makedirs("save")
    put("save/x", v[1])
    os.makedirs("tree/d1/sub")
    put("tree/d1/sub/a", rnd(100000, 1))
    put("tree/d1/sub/b", rnd(5000, 2))
    put("tree/d1/c", b"hello\n")
    os.makedirs("ren/src1")
    put("ren/src1/f", rnd(7000, 3))
    os.makedirs("ren/emptydst")
    os.makedirs("ren/src2")
    put("ren/src2/h", rnd(100, 4))
    os.makedirs("ren/nonempty")
    put("ren/nonempty/g", rnd(100, 5))
    put("ren/file1", rnd(3000, 6))
    put("ren/file2", rnd(4000, 7))
    put("ren/xa", b"A" * 1000)
    put("ren/xb", b"B" * 2000)
    os.makedirs("c")
    for i, n in enumerate(["shrink", "grow", "append", "patch", "dd", "unlink", "ftrunc", "beyond"]):
        put("c/" + n, rnd(262144 + 17 * i, 100 + i))
    os.makedirs("meta")
    for i, n in enumerate(["chmod", "chown", "utime", "touchd"]):
        put("meta/" + n, rnd(1000, 200 + i))
    ok("phase 1 done")

elif phase == "2":
    print("phase 2: save to x.tmp, then rename over the committed x")
    put("save/x.tmp", v[2])
    expect_ok("rename save/x.tmp -> save/x (over an existing file)", os.rename, "save/x.tmp", "save/x")
    same("save/x has the new content", get("save/x"), v[2])
    same("save/x.tmp is gone", exists("save/x.tmp"), False)

elif phase == "3":
    print("phase 3: overwrite save/x in place (O_TRUNC)")
    put("save/x", v[3])
    same("save/x has the third version", get("save/x"), v[3])

elif phase == "4":
  @section
  def renames():
    "renames"
    a, b = get("tree/d1/sub/a"), get("tree/d1/sub/b")
    expect_ok("rename a whole directory tree/d1 -> tree/d2", os.rename, "tree/d1", "tree/d2")
    same("tree/d1 is gone", exists("tree/d1"), False)
    same("tree/d2/sub/a moved with its directory", get("tree/d2/sub/a"), a)
    same("tree/d2/sub/b moved with its directory", get("tree/d2/sub/b"), b)
    same("tree/d2/c moved with its directory", get("tree/d2/c"), b"hello\n")
    expect_ok("move a subdirectory to another parent: tree/d2/sub -> ren/sub", os.rename, "tree/d2/sub", "ren/sub")
    same("ren/sub/a readable at its new place", get("ren/sub/a"), a)
    same("listing of tree/d2", ls(("tree/d2")), ["c"])
    f = get("ren/src1/f")
    expect_ok("rename a directory over an existing empty directory", os.rename, "ren/src1", "ren/emptydst")
    same("ren/emptydst/f is the moved file", get("ren/emptydst/f"), f)
    same("ren/src1 is gone", exists("ren/src1"), False)
    expect_err("rename a directory over a non-empty directory", "ENOTEMPTY", os.rename, "ren/src2", "ren/nonempty")
    same("both directories intact after ENOTEMPTY",
         (ls(("ren/src2")), ls(("ren/nonempty"))), (["h"], ["g"]))
    expect_err("rename a file over a directory", "EISDIR", os.rename, "ren/file1", "ren/nonempty")
    expect_err("rename a directory over a file", "ENOTDIR", os.rename, "ren/src2", "ren/file1")
    expect_err("renameat2(RENAME_NOREPLACE) onto an existing file", "EEXIST", renameat2, "ren/file1", "ren/file2", RENAME_NOREPLACE)
    same("both files intact after EEXIST", (len(get("ren/file1")), len(get("ren/file2"))), (3000, 4000))
    expect_ok("renameat2(RENAME_NOREPLACE) onto a new name", renameat2, "ren/file1", "ren/file1b", RENAME_NOREPLACE)
    same("ren/file1b has the content", len(get("ren/file1b")), 3000)
    expect_ok("renameat2(RENAME_EXCHANGE) of two files", renameat2, "ren/xa", "ren/xb", RENAME_EXCHANGE)
    same("contents exchanged", (get("ren/xa"), get("ren/xb")), (b"B" * 2000, b"A" * 1000))
    expect_err("rename a directory into its own subdirectory", "EINVAL", os.rename, "tree/d2", "tree/d2/inside")
    os.makedirs("tree/d2/deep/er")
    expect_err("rename a directory into its own grandchild", "EINVAL", os.rename, "tree/d2", "tree/d2/deep/er/x")
    expect_ok("rename a file onto itself (no-op)", os.rename, "ren/file2", "ren/file2")
    same("file unchanged after rename onto itself", len(get("ren/file2")), 4000)
    expect_err("rename of a missing file", "ENOENT", os.rename, "ren/nosuch", "ren/x")
    expect_err("rename into a missing directory", "ENOENT", os.rename, "ren/file2", "ren/nodir/x")
    expect_err("rmdir of a non-empty directory", "ENOTEMPTY", os.rmdir, "ren/nonempty")
    expect_err("unlink of a directory", "EISDIR", os.unlink, "ren/nonempty")
    expect_err("mkdir over an existing file", "EEXIST", os.mkdir, "ren/file2")
    expect_err("O_CREAT|O_EXCL on an existing file", "EEXIST", os.open, "ren/file2", os.O_CREAT | os.O_EXCL | os.O_WRONLY)

  @section
  def unlink_open():
    "unlink of open files"
    exp = get("c/unlink")
    fd = os.open("c/unlink", os.O_RDONLY)
    expect_ok("unlink c/unlink (committed) while open", os.unlink, "c/unlink")
    same("c/unlink gone from the namespace", exists("c/unlink"), False)
    same("the open fd still reads the whole content", os.pread(fd, len(exp) + 10, 0), exp)
    os.close(fd)
    fd = os.open("c/tmpopen", os.O_CREAT | os.O_RDWR, 0o644)
    os.write(fd, rnd(50000, 9))
    expect_ok("unlink a file still open for writing", os.unlink, "c/tmpopen")
    os.write(fd, b"tail")
    same("write + read through the fd of the unlinked file", os.pread(fd, 60000, 0), rnd(50000, 9) + b"tail")
    os.close(fd)
    same("the unlinked file does not come back", exists("c/tmpopen"), False)
    put("c/over_src", rnd(70000, 21))
    old = get("ren/xa")
    fd = os.open("ren/xa", os.O_RDONLY)
    expect_ok("rename a file over an open (committed) file", os.rename, "c/over_src", "ren/xa")
    same("the open fd of the replaced file still reads its old content", os.pread(fd, 1 << 20, 0), old)
    os.close(fd)
    same("the new content is at the name", get("ren/xa"), rnd(70000, 21))
    fd = os.open("c/moving", os.O_CREAT | os.O_WRONLY, 0o644)
    os.write(fd, rnd(30000, 22))
    expect_ok("rename a file while it is open for writing", os.rename, "c/moving", "c/moved")
    os.write(fd, b"written after the rename")
    os.close(fd)
    same("writes after the rename land in the renamed file", get("c/moved"), rnd(30000, 22) + b"written after the rename")
    same("nothing left at the old name", exists("c/moving"), False)

  @section
  def dir_mtimes():
    "directory mtimes (and ctimes) change with their entries"
    os.makedirs("dm/a")
    os.makedirs("dm/b")

    def dir_changes(what, dirs, fn, *a):
        before = [st(d) for d in dirs]
        time.sleep(0.03)
        fn(*a)
        after = [st(d) for d in dirs]
        for d, s0, s1 in zip(dirs, before, after):
            if s1.st_mtime_ns > s0.st_mtime_ns and s1.st_ctime_ns > s0.st_ctime_ns:
                ok("%s updates the mtime and ctime of %s" % (what, d))
            else:
                bad("%s: %s mtime %d -> %d, ctime %d -> %d (must increase)" % (
                    what, d, s0.st_mtime_ns, s1.st_mtime_ns, s0.st_ctime_ns, s1.st_ctime_ns))

    dir_changes("create", ["dm/a"], put, "dm/a/f", b"x")
    dir_changes("mkdir", ["dm/a"], os.mkdir, "dm/a/sd")
    dir_changes("symlink", ["dm/a"], os.symlink, "f", "dm/a/ln")
    dir_changes("rename within a directory", ["dm/a"], os.rename, "dm/a/f", "dm/a/g")
    dir_changes("rename across directories", ["dm/a", "dm/b"], os.rename, "dm/a/g", "dm/b/g")
    dir_changes("rename over an existing file", ["dm/b"], os.rename, "dm/a/ln", "dm/b/g")
    dir_changes("unlink", ["dm/b"], os.unlink, "dm/b/g")
    dir_changes("rmdir", ["dm/a"], os.rmdir, "dm/a/sd")
    if MNT:
        nl = st("dm").st_nlink
        same("nlink of a directory with 2 subdirectories is 4 (or 1)", nl in (4, 1), True)

  @section
  def links():
    "links"
    expect_ok("hard link", os.link, "ren/file2", "ren/hard")
    same("st_nlink of both names is 2", (st("ren/file2").st_nlink, st("ren/hard").st_nlink), (2, 2))
    same("the link reads the same bytes", get("ren/hard"), get("ren/file2"))
    expect_ok("symlink to a relative target", os.symlink, "../c/patch", "meta/lnk")
    same("readlink", os.readlink("meta/lnk"), "../c/patch")
    same("lstat says symlink", stat.S_ISLNK(st("meta/lnk", False).st_mode), True)
    same("read through the symlink", get("meta/lnk"), get("c/patch"))
    expect_ok("dangling symlink", os.symlink, "nowhere/at/all", "meta/dangling")
    same("readlink of the dangling symlink", os.readlink("meta/dangling"), "nowhere/at/all")
    long_target = "x/" * 1000 + "end"
    expect_ok("symlink with a 2003-byte target", os.symlink, long_target, "meta/longlink")
    same("readlink of the long target", os.readlink("meta/longlink"), long_target)
    expect_ok("symlink to a directory", os.symlink, "../tree", "meta/dirlink")
    same("listing through a directory symlink", ls(("meta/dirlink")), ["d2"])

  @section
  def attrs():
    "attributes"
    expect_ok("chmod 0604", os.chmod, "meta/chmod", 0o604)
    same("mode after chmod", stat.S_IMODE(st("meta/chmod").st_mode), 0o604)
    expect_ok("chmod 0750 of a directory", os.chmod, "dm/b", 0o750)
    same("directory mode after chmod", stat.S_IMODE(st("dm/b").st_mode), 0o750)
    expect_ok("chown 1234:5678", os.chown, "meta/chown", 1234, 5678)
    s = st("meta/chown")
    same("owner after chown", (s.st_uid, s.st_gid), (1234, 5678))
    t_a, t_m = 1000000000123456789, 1234567890987654321
    expect_ok("utimensat with nanoseconds", lambda: os.utime("meta/utime", ns=(t_a, t_m)))
    s = st("meta/utime")
    same("mtime after utimensat (ns)", s.st_mtime_ns, t_m)
    same("atime after utimensat (ns)", s.st_atime_ns, t_a)

  @section
  def data_ops():
    "truncate, sparse, append, patch"
    c = get("c/shrink")
    expect_ok("truncate (shrink) a committed file to 1000 bytes", os.truncate, "c/shrink", 1000)
    same("content after shrink", get("c/shrink"), c[:1000])
    c = get("c/grow")
    expect_ok("truncate (grow) a committed file to 1 MiB", os.truncate, "c/grow", 1 << 20)
    same("content after grow (zero filled)", get("c/grow"), c + bytes((1 << 20) - len(c)))
    c = get("c/ftrunc")
    fd = os.open("c/ftrunc", os.O_RDWR)
    os.ftruncate(fd, 100)
    os.pwrite(fd, b"Z" * 10, 200)
    os.ftruncate(fd, 150)
    os.close(fd)
    same("ftruncate shrink, write past EOF, ftruncate again", get("c/ftrunc"),
         c[:100] + bytes(50))
    fd = os.open("c/new_trunc", os.O_CREAT | os.O_RDWR, 0o644)
    os.write(fd, rnd(10000, 11))
    os.ftruncate(fd, 5000)
    os.ftruncate(fd, 8000)
    os.close(fd)
    same("truncate of a file still being written (staging)", get("c/new_trunc"), rnd(10000, 11)[:5000] + bytes(3000))
    with open("c/sparse", "wb") as f:
        f.seek(10 << 20)
        f.write(b"end")
    same("sparse file: size", st("c/sparse").st_size, (10 << 20) + 3)
    same("sparse file: a hole reads as zeros", get("c/sparse"), bytes(10 << 20) + b"end")
    c = get("c/beyond")
    with open("c/beyond", "r+b") as f:
        f.seek(1 << 20)
        f.write(b"far")
    same("write far beyond EOF of a committed file", get("c/beyond"), c + bytes((1 << 20) - len(c)) + b"far")
    c = get("c/append")
    with open("c/append", "ab") as f:
        f.write(b"appended line\n")
    fd = os.open("c/append", os.O_WRONLY | os.O_APPEND)
    os.lseek(fd, 0, os.SEEK_SET)
    os.write(fd, b"second")  # O_APPEND ignores the offset
    os.close(fd)
    same("O_APPEND appends to a committed file", get("c/append"), c + b"appended line\nsecond")
    c = bytearray(get("c/patch"))
    with open("c/patch", "r+b") as f:  # no O_TRUNC: copy-up, then patch
        f.seek(1000)
        f.write(b"PATCHED-BYTES!!!")
    c[1000:1016] = b"PATCHED-BYTES!!!"
    same("open r+ (no O_TRUNC) and patch 16 bytes of a committed file", get("c/patch"), bytes(c))
  run_sections()

elif phase == "5":
    print("phase 5: more patches to committed files, after a remount")
    c = bytearray(get("c/patch"))
    fd = os.open("c/patch", os.O_WRONLY)
    os.pwrite(fd, b"\xff" * 3, len(c) - 3)
    os.close(fd)
    c[-3:] = b"\xff" * 3
    same("patch the last 3 bytes of a committed file (O_WRONLY, no O_TRUNC)", get("c/patch"), bytes(c))
    expect_ok("unlink a committed file", os.unlink, "ren/file2")
    same("and it is gone", exists("ren/file2"), False)

sys.exit(1 if fails else 0)
PY

# run_ops PHASE: the phase on the plain directory (the reference), then on
# the mount.
run_ops() {
	"$PY" "$WORK/ops.py" "$PLAIN" "$1" plain "$DATA" >"$WORK/plain-$1.log" 2>&1 ||
		{ cat "$WORK/plain-$1.log" >&2; die "phase $1 fails on a plain directory: the test itself is broken"; }
	local out
	out=$("$PY" "$WORK/ops.py" "$MNT" "$1" mnt "$DATA" 2>&1)
	local rc=$?
	printf '%s\n' "$out" | sed 's/^/  /'
	[ "$rc" -eq 0 ] || bad "phase $1: $(printf '%s\n' "$out" | grep -c FAIL) operation(s) misbehaved in the mount (see FAIL lines above)"
}

# "type mode uid gid size path -> target" for everything; sizes of
# directories are not compared.
meta_tree() {
	(cd "$1" && find . -mindepth 1 -printf '%y %m %U %G %s %p -> %l\n' |
		awk '$1 == "d" { $5 = "-" } { print }' | LC_ALL=C sort)
}

objects_list() { (cd "$STORE/objects" && find . -type f -printf '%p %s\n' | LC_ALL=C sort); }

step "phase 1: creating files and directories"
fs_mount "$STORE" "$MNT"
run_ops 1
touch -d "2001-02-03 04:05:06.5" "$PLAIN/meta/touchd" "$MNT/meta/touchd" || bad "touch -d through the mount failed"
[ "$(stat -c %Y "$MNT/meta/touchd")" = "$(stat -c %Y "$PLAIN/meta/touchd")" ] &&
	ok "touch -d sets the mtime" || bad "touch -d: mtime $(stat -c %y "$MNT/meta/touchd"), expected $(stat -c %y "$PLAIN/meta/touchd")"
fs_remount "$STORE" "$MNT" # commits everything
v1obj=$(fs_file_bytes "$STORE/objects")
objects_list >"$WORK/objects.1"
say "objects/ after the first commit: $v1obj bytes"

# The newest version is standalone and the one before it is coded again
# against it (reverse deltas): what a save costs is what the store grows
# by once that flip is done ("ulpfs gc" waits for it).
objects_total() { awk '{ s += $2 } END { printf "%.0f\n", s }' "$1"; }

step "phase 2: save to x.tmp + rename over x; the store must grow by a small delta"
run_ops 2
fs_wait_committed "$STORE" 60
"$ULPFS" gc "$MNT" >/dev/null || bad "ulpfs gc failed"
objects_list >"$WORK/objects.2"
new2=$(($(objects_total "$WORK/objects.2") - $(objects_total "$WORK/objects.1")))
raw=$(stat -c %s "$DATA/v2/model.safetensors")
say "new objects for version 2 of save/x: $new2 bytes (raw $raw, offline ulpfs bench: $("$ULPFS" bench --no-baselines --reps 1 "$DATA"/v1/model.safetensors "$DATA"/v2/model.safetensors 2>/dev/null | awk 'NR == 3 { print $3 }'))"
if [ "$new2" -gt 0 ] && [ "$new2" -lt $((raw / 4)) ]; then
	ok "version 2 (saved as x.tmp, renamed over x) costs a delta: $new2 bytes < 25% of $raw"
else
	bad "version 2 of save/x grew the store by $new2 bytes (raw $raw): the rename-over save did not get the previous x as its predecessor"
fi

step "phase 3: overwrite save/x in place; the store must grow by a small delta"
run_ops 3
fs_wait_committed "$STORE" 60
"$ULPFS" gc "$MNT" >/dev/null || bad "ulpfs gc failed"
objects_list >"$WORK/objects.3"
new3=$(($(objects_total "$WORK/objects.3") - $(objects_total "$WORK/objects.2")))
if [ "$new3" -gt 0 ] && [ "$new3" -lt $((raw / 4)) ]; then
	ok "version 3 (overwritten in place) costs a delta: $new3 bytes"
else
	bad "version 3 of save/x grew the store by $new3 bytes (raw $raw)"
fi

step "phase 4: renames, unlink of open files, directory mtimes, links, attributes, truncate, sparse, append, patch"
run_ops 4
# dd: a patch without truncation, and a sparse write at an offset
printf 'DDPATCH' | dd of="$PLAIN/c/dd" bs=1 seek=5000 conv=notrunc status=none
printf 'DDPATCH' | dd of="$MNT/c/dd" bs=1 seek=5000 conv=notrunc status=none || bad "dd conv=notrunc through the mount failed"
cmp -s "$PLAIN/c/dd" "$MNT/c/dd" && ok "dd conv=notrunc patch of a committed file" || bad "dd conv=notrunc: content differs"
head -c 4096 "$DATA/v1/model.safetensors" >"$WORK/blk"
dd if="$WORK/blk" of="$PLAIN/c/ddsparse" bs=4096 seek=2500 status=none
dd if="$WORK/blk" of="$MNT/c/ddsparse" bs=4096 seek=2500 status=none || bad "dd seek through the mount failed"
cmp -s "$PLAIN/c/ddsparse" "$MNT/c/ddsparse" && ok "dd seek=2500 (sparse) reads back" || bad "dd seek: content differs"
echo "appended by >>" >>"$PLAIN/c/append"
echo "appended by >>" >>"$MNT/c/append" || bad "shell >> through the mount failed"
cmp -s "$PLAIN/c/append" "$MNT/c/append" && ok "shell >> appends" || bad "shell >>: content differs"
mnt_list=$(fs_list_tree "$MNT")
plain_list=$(fs_list_tree "$PLAIN")
[ "$mnt_list" = "$plain_list" ] && ok "same tree as the plain directory before the remount" ||
	{ bad "trees differ before the remount:"; diff <(echo "$plain_list") <(echo "$mnt_list") | head -20 | sed 's/^/    | /' >&2; }

step "remount; phase 5: patch committed files again"
fs_remount "$STORE" "$MNT"
run_ops 5

step "remount; the whole tree (bytes, types, modes, owners, symlinks, set mtimes) equals the plain one"
fs_remount "$STORE" "$MNT"
fs_compare_trees "$PLAIN" "$MNT" "all files after remount"
a=$(meta_tree "$PLAIN")
b=$(meta_tree "$MNT")
[ "$a" = "$b" ] && ok "types, modes, owners, sizes and symlink targets equal ($(echo "$b" | wc -l) entries)" ||
	{ bad "metadata differs after remount (< plain, > mount):"; diff <(echo "$a") <(echo "$b") | head -30 | sed 's/^/    | /' >&2; }
for f in meta/utime meta/touchd; do
	m1=$(stat -c '%y' "$PLAIN/$f")
	m2=$(stat -c '%y' "$MNT/$f")
	[ "$m1" = "$m2" ] && ok "$f: mtime kept across remount ($m2)" || bad "$f: mtime $m2 after remount, expected $m1"
done
# atime: what utimensat set, or a later access time (relatime); the plain
# copy's atime has been moved by our reads, so it is no reference here
b=$(stat -c %X "$MNT/meta/utime")
[ "$b" = 1000000000 ] || [ "$b" -ge "$FS_START_EPOCH" ] && ok "meta/utime: atime kept ($b)" ||
	bad "meta/utime: atime $b after remount, expected 1000000000 (as set) or a time after the test started"
[ "$(readlink "$MNT/meta/longlink" | wc -c)" -eq 2004 ] && ok "long symlink target kept" || bad "long symlink target changed"
n=$(find "$MNT" -name '.ulpfs*' | wc -l)
[ "$n" -eq 0 ] && ok "no control directory in the listing of the mount" || bad "find lists $n .ulpfs* entries (the control directory must be hidden)"

step "a renamed file keeps its history: mv of the file, then of its directory"
mkdir -p "$MNT/hist"
for i in 1 2 3; do
	cp "$DATA/v$i/model.safetensors" "$MNT/hist/a" || bad "cp v$i"
	"$ULPFS" sync "$MNT" || bad "ulpfs sync after v$i"
done
mv "$MNT/hist/a" "$MNT/hist/b" && mv "$MNT/hist" "$MNT/hist2" || bad "mv failed"
"$ULPFS" log --json "$MNT/hist2/b" >"$WORK/hist.json" || bad "ulpfs log hist2/b failed"
n=$("$PY" -c 'import json, sys
print(sum(1 for v in json.load(open(sys.argv[1])) if v["state"] == "live"))' "$WORK/hist.json")
[ "$n" = 3 ] && ok "hist2/b has the 3 versions written as hist/a" || bad "hist2/b has $n live versions, want 3"
for i in 1 2 3; do
	cmp -s "$MNT/.ulpfs/versions/hist2/b/$i" "$DATA/v$i/model.safetensors" &&
		ok ".ulpfs/versions/hist2/b/$i is what was written as version $i" ||
		bad ".ulpfs/versions/hist2/b/$i differs from version $i"
done
"$ULPFS" log "$MNT/hist/a" >/dev/null 2>&1 && bad "the old path still lists versions" ||
	ok "the old path has no versions left"

fs_umount "$MNT"
fs_finish
