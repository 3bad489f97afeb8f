#!/usr/bin/env bash
# tests/fs_writes.sh - the write path in the write mode of the mount
# (FS_WRITE_MODE, see tests/fs_lib.sh; the default mode otherwise), each
# case done the same way on a plain file beside and compared byte for byte
# while open, after the commit and after a remount:
#   - O_APPEND (write and pwrite, which appends too, from two descriptors),
#   - sparse, out-of-order pwrites,
#   - ftruncate and truncate(2) while open, sizes seen by fstat at once,
#   - a reader open while the file is written sees every byte written,
#     and so does each new reader,
#   - writes through a shared writable mmap of a new file,
#   - fsync reaches the staging file (read there directly),
#   - mtime: writes move it, an explicit utime while open stays,
#   - a reader open across the commit keeps its content, and sees a later
#     writer's writes and a truncate by name,
#   - eight writers at once, each its own file,
#   - kill -9 while such a reader is open: the kept staging file goes at
#     the next mount, every file stays.
# make check may run this with a POSIX sh: it needs bash.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/fs_lib.sh"
fs_init

STORE=$WORK/store
MNT=$WORK/mnt
REF=$WORK/ref
mkdir -p "$REF"

cat >"$WORK/writes.py" <<'PY'
import errno, mmap, os, random, sys, threading, time

mnt, ref, staging, mode = sys.argv[1:5]
rnd = random.Random(11)
fails = 0


def bad(m):
    global fails
    fails += 1
    print("    FAIL: " + m, flush=True)


def ok(m):
    print("    ok: " + m, flush=True)


def data(n):
    return rnd.randbytes(n)


def same(name, what):
    a = open(os.path.join(mnt, name), "rb").read()
    b = open(os.path.join(ref, name), "rb").read()
    if a != b:
        bad("%s: %s: %d bytes on the mount, %d expected" %
            (name, what, len(a), len(b)))
    else:
        ok("%s: %s (%d bytes)" % (name, what, len(a)))


def both(name, flags, mode=0o644):
    return [os.open(os.path.join(d, name), flags, mode) for d in (mnt, ref)]


# O_APPEND: every write lands at the end, pwrite's offset notwithstanding.
fa = both("append", os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND)
fb = both("append", os.O_WRONLY | os.O_APPEND)
for i in range(40):
    b = data(rnd.randrange(1, 300000))
    for fd in (fa if i % 2 else fb):
        if i % 3:
            os.write(fd, b)
        else:
            os.pwrite(fd, b, 0)
sz = os.fstat(fa[0]).st_size
if sz != os.fstat(fa[1]).st_size:
    bad("append: fstat says %d while open, %d expected" %
        (sz, os.fstat(fa[1]).st_size))
same("append", "while open")
for fd in fa + fb:
    os.close(fd)

# Sparse, out-of-order writes.
fs = both("sparse", os.O_RDWR | os.O_CREAT | os.O_TRUNC)
offs = [rnd.randrange(0, 64 << 20) for _ in range(60)]
rnd.shuffle(offs)
for o in offs:
    b = data(rnd.randrange(1, 200000))
    for fd in fs:
        os.pwrite(fd, b, o)
same("sparse", "while open")
if os.fstat(fs[0]).st_size != os.fstat(fs[1]).st_size:
    bad("sparse: size %d, expected %d" %
        (os.fstat(fs[0]).st_size, os.fstat(fs[1]).st_size))
for fd in fs:
    os.close(fd)

# Truncation while open, through the descriptor and through the path.
ft = both("trunc", os.O_RDWR | os.O_CREAT | os.O_TRUNC)
b = data(3 << 20)
for fd in ft:
    os.write(fd, b)
for fd in ft:
    os.ftruncate(fd, 1 << 20)
if os.fstat(ft[0]).st_size != 1 << 20:
    bad("trunc: fstat %d after ftruncate to 1 MiB" % os.fstat(ft[0]).st_size)
b = data(100)
for fd in ft:
    os.pwrite(fd, b, 2 << 20)
for d in (mnt, ref):
    os.truncate(os.path.join(d, "trunc"), 5 << 20)
if os.fstat(ft[0]).st_size != 5 << 20:
    bad("trunc: fstat %d after truncate to 5 MiB" % os.fstat(ft[0]).st_size)
b = data(4096)
for fd in ft:
    os.pwrite(fd, b, 4 << 20)
same("trunc", "while open")
for fd in ft:
    os.close(fd)

# Readers of a file being written.
fw = both("growing", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
r0 = os.open(os.path.join(mnt, "growing"), os.O_RDONLY)
expect = b""
stale = 0
for i in range(48):
    b = data(100003)
    for fd in fw:
        os.write(fd, b)
    expect += b
    got = os.pread(r0, len(expect) + 10, 0)
    if got != expect:
        stale += 1
    if i % 12 == 5:
        r1 = os.open(os.path.join(mnt, "growing"), os.O_RDONLY)
        if os.read(r1, len(expect) + 10) != expect:
            bad("growing: a new reader after %d writes sees other bytes" %
                (i + 1))
        os.close(r1)
    if os.stat(os.path.join(mnt, "growing")).st_size != len(expect):
        stale += 1
if stale:
    bad("growing: the open reader or stat saw stale data %d times" % stale)
else:
    ok("growing: the open reader saw every write at once")
os.close(r0)
for fd in fw:
    os.close(fd)

# A shared writable mapping of a new file.
for d in (mnt, ref):
    fd = os.open(os.path.join(d, "mapped"),
                 os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    os.ftruncate(fd, 4 << 20)
    m = mmap.mmap(fd, 4 << 20, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    r = random.Random(5)
    for _ in range(200):
        o = r.randrange(0, (4 << 20) - 5000)
        m[o:o + 5000] = r.randbytes(5000)
    m.flush()
    m.close()
    os.close(fd)
same("mapped", "after close")

# fsync reaches the staging file.
path = os.path.join(mnt, "synced")
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
b = data(3 << 20)
os.write(fd, b)
os.fsync(fd)
st = os.path.join(staging, str(os.fstat(fd).st_ino))
try:
    got = open(st, "rb").read()
    if got != b:
        bad("synced: the staging file holds %d bytes, %d written" %
            (len(got), len(b)))
    else:
        ok("synced: fsync'ed bytes are in the staging file")
except OSError as e:
    bad("synced: staging file %s: %s" % (st, e))
open(os.path.join(ref, "synced"), "wb").write(b)

# mtime: a write moves it; an explicit one set while open stays.
m0 = os.fstat(fd).st_mtime_ns
time.sleep(0.05)
os.write(fd, b"x")
open(os.path.join(ref, "synced"), "ab").write(b"x")
m1 = os.stat(path).st_mtime_ns
if m1 <= m0:
    bad("synced: mtime %d after a write, %d before" % (m1, m0))
else:
    ok("synced: a write moves the mtime")
os.utime(path, ns=(10**18, 10**18))
os.close(fd)
time.sleep(0.1)
if os.stat(path).st_mtime_ns != 10**18:
    bad("synced: mtime %d after close, 10^18 set while open" %
        os.stat(path).st_mtime_ns)
else:
    ok("synced: utime while open stays after close")

# A reader that opened while the file was written keeps that content
# after the commit; then, as on a local filesystem, a new writer and a
# truncate by name change the one file it reads, in every mode (with
# passthrough the kernel serves the reader from the writer's staging file,
# which the store keeps for it past the commit and writes again).
path = os.path.join(mnt, "held")
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, b"held" * 1000)
r = os.open(path, os.O_RDONLY)
os.close(fd)
open(os.path.join(ref, "held"), "wb").write(b"held" * 1000)
ino = str(os.stat(path).st_ino)
deadline = time.time() + 60
while ino in os.listdir(staging) and time.time() < deadline:
    time.sleep(0.02)
if ino in os.listdir(staging):
    bad("held: not committed within 60 s")
if os.pread(r, 8, 0) != b"heldheld":
    bad("held: the reader lost its content at the commit")
if mode == "passthrough" and ".held-" + ino not in os.listdir(staging):
    bad("held: the committed staging file was not kept for the reader")
try:
    fd = os.open(path, os.O_WRONLY)
    os.pwrite(fd, b"HELD", 0)
    got = os.pread(r, 8, 0)
    if got != b"HELDheld":
        bad("held: the reader sees %r after a later writer's write" % got)
    else:
        ok("held: a later writer opens beside the reader, which sees it")
    os.close(fd)
except OSError as e:
    bad("held: a writer beside a reader of the committed content: %s" % e)
try:
    os.truncate(path, 6)
    got = os.pread(r, 100, 0)
    if got != b"HELDhe" or os.fstat(r).st_size != 6:
        bad("held: after truncate(2) the reader sees %r" % got)
    else:
        ok("held: truncate(2) by name reaches the reader")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    os.write(fd, b"ld" + b"held" * 998)
    os.close(fd)
except OSError as e:
    bad("held: truncate(2) beside the reader: %s" % e)
os.close(r)
open(os.path.join(ref, "held"), "wb").write(b"HELD" + b"held" * 999)
deadline = time.time() + 60
while {ino, ".held-" + ino} & set(os.listdir(staging)) and \
        time.time() < deadline:
    time.sleep(0.02)
if {ino, ".held-" + ino} & set(os.listdir(staging)):
    bad("held: staging still holds %s after the last close and 60 s" %
        sorted({ino, ".held-" + ino} & set(os.listdir(staging))))
same("held", "written again beside a reader")

# A reader of the committed file first, then a writer: the kernel allows
# no passthrough open beside an open that uses the page cache, so the
# writer gets direct_io; the reader sees what it writes.
r = os.open(path, os.O_RDONLY)
os.pread(r, 4000, 0)
try:
    fd = os.open(path, os.O_WRONLY)
    os.pwrite(fd, b"HELD", 0)
    got = os.pread(r, 8, 0)
    if got != b"HELDheld":
        bad("held: the earlier reader sees %r after a write" % got)
    else:
        ok("held: a writer beside an earlier reader; the reader sees it")
    os.close(fd)
    with open(os.path.join(ref, "held"), "r+b") as f:
        f.write(b"HELD")
except OSError as e:
    bad("held: a writer beside an earlier reader: %s" % e)
os.close(r)

# Eight writers at once.
def writer(k):
    r = random.Random(k)
    with open(os.path.join(mnt, "w%d" % k), "wb") as f, \
            open(os.path.join(ref, "w%d" % k), "wb") as g:
        for _ in range(16):
            b = r.randbytes(1 << 20)
            f.write(b)
            g.write(b)


ts = [threading.Thread(target=writer, args=(k,)) for k in range(8)]
for t in ts:
    t.start()
for t in ts:
    t.join()
for k in range(8):
    same("w%d" % k, "eight writers")
sys.exit(1 if fails else 0)
PY

fs_mount "$STORE" "$MNT"
say "write mode: $(fs_write_mode "$MNT")"
step "write cases (mount and plain files side by side)"
"$PY" "$WORK/writes.py" "$MNT" "$REF" "$STORE/staging" "$(fs_write_mode "$MNT")" || bad "write cases failed"
fs_wait_committed "$STORE" || true
step "after the commit"
fs_compare_trees "$MNT" "$REF" "committed files"
[ "$(stat -c %Y "$MNT/synced")" = 1000000000 ] || bad "mtime of synced lost at the commit: $(stat -c %Y "$MNT/synced")"
fs_remount "$STORE" "$MNT"
step "after a remount"
fs_compare_trees "$MNT" "$REF" "remounted files"
[ "$(stat -c %Y "$MNT/synced")" = 1000000000 ] || bad "mtime of synced lost at the remount: $(stat -c %Y "$MNT/synced")"

step "kill -9 while a reader that opened beside a writer is still open"
exec 7>"$MNT/kept"
printf 'kept\n' >&7
exec 8<"$MNT/kept"
exec 7>&-
printf 'kept\n' >"$REF/kept"
fs_wait_committed "$STORE" 60 || bad "kept: not committed"
ino=$(stat -c %i "$MNT/kept")
if [ "$(fs_write_mode "$MNT")" = passthrough ]; then
	[ -e "$STORE/staging/.held-$ino" ] && ok "kept: staging/.held-$ino kept for the reader" ||
		bad "kept: no staging/.held-$ino while the reader is open: $(ls -A "$STORE/staging")"
fi
pid=$(fs_mount_pid "$MNT")
kill -9 "$pid" || bad "kill -9 $pid failed"
wait_pid_gone "$pid" 10 || bad "daemon $pid still alive 10 s after kill -9"
exec 8<&-
fs_force_umount "$MNT" 30
fs_mount "$STORE" "$MNT"
[ -z "$(ls -A "$STORE/staging")" ] && ok "kept: staging is empty after the recovery" ||
	bad "kept: left in staging after the recovery: $(ls -A "$STORE/staging")"
fs_compare_trees "$MNT" "$REF" "files after kill -9 and remount"
fs_umount "$MNT"
fs_finish
