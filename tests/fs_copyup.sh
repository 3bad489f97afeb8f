#!/usr/bin/env bash
# tests/fs_copyup.sh - appends, in-place patches and sparse files through
# the mount (issue 14), each done the same way on a plain file beside:
#   - a committed multi-chunk file opened for appending and for patching in
#     the middle: nothing is decoded while it is open (the store's "chunks
#     decoded" counter, ulpfs stats --json), reads merge the written bytes
#     with the committed ones, the new version stores what changed (coded
#     against the previous one, the rest as identical chunks), its commit
#     decodes no chunk left unchanged, and every version is exact
#     afterwards;
#   - a torch.save file and a safetensors file patched 4 KiB inside a
#     tensor: the commit decodes at most the chunk written into (the new
#     version takes the chunks of the one before), stores under 64 KiB,
#     and both versions are exact, also after a remount;
#   - fallocate: punching a hole in and zeroing a range of a committed
#     file, KEEP_SIZE reserving without growing;
#   - a sparse file with a 1 GiB hole: its staging file and its stored
#     object stay at the data's size, SEEK_DATA/SEEK_HOLE through the mount
#     answer as on the plain file while it is staged, and it reads back
#     exactly, the hole as zeros;
#   - kill -9 of the daemon while a committed file is open for appending
#     and a tensor file for patching: after a remount the committed
#     versions are intact.
# make check may run this with a POSIX sh: it needs bash.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/fs_lib.sh"
fs_init

STORE=$WORK/store
MNT=$WORK/mnt
REF=$WORK/ref
mkdir -p "$REF"

cat >"$WORK/copyup.py" <<'PY'
import ctypes, hashlib, json, os, random, subprocess, sys

mnt, ref, store, ulpfs = sys.argv[1:5]
fails = 0
libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long,
                           ctypes.c_long]
KEEP_SIZE, PUNCH_HOLE, ZERO_RANGE = 1, 2, 16


def bad(m):
    global fails
    fails += 1
    print("    FAIL: " + m, flush=True)


def ok(m):
    print("    ok: " + m, flush=True)


def stats():
    out = subprocess.run([ulpfs, "stats", "--json", mnt], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


def decodes():
    return stats()["cache"]["decodes"]


def sync():
    subprocess.run([ulpfs, "sync", mnt], check=True)


def settle():
    """Every closed file committed and every flip (older versions coded
    again against their successors, in the background) done."""
    sync()
    subprocess.run([ulpfs, "gc", mnt], check=True, capture_output=True)


def digest(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(16 << 20)
            if not b:
                return h.hexdigest()
            h.update(b)


def same(name, what):
    a, b = digest(os.path.join(mnt, name)), digest(os.path.join(ref, name))
    if a != b:
        bad("%s: %s: content differs from the plain file" % (name, what))
    else:
        ok("%s: %s: same bytes as the plain file" % (name, what))


def both(name, flags):
    return [os.open(os.path.join(d, name), flags, 0o644) for d in (mnt, ref)]


def fallocate(fd, mode, off, n):
    if libc.fallocate(fd, mode, off, n) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def newest(name):
    out = json.loads(subprocess.run([ulpfs, "log", "--json", os.path.join(mnt, name)], check=True,
                                    capture_output=True, text=True).stdout)
    vs = out["versions"] if isinstance(out, dict) else out
    return max(vs, key=lambda v: v["seq"])


def small_delta(name, what):
    """The newest version is coded against the one before it, what was not
    written as identical chunks: it stores what changed, not the file."""
    v = newest(name)
    if v["stored"] > (256 << 10) or not v["ref"] or v["ref"]["seq"] != v["seq"] - 1:
        bad("%s: %s: version %d stores %d bytes, reference %s" % (name, what, v["seq"], v["stored"], v["ref"]))
    else:
        ok("%s: %s: version %d stores %d bytes (of %d), coded against version %d"
           % (name, what, v["seq"], v["stored"], v["size"], v["ref"]["seq"]))


def version(name, n):
    with open(os.path.join(mnt, ".ulpfs/versions", name, str(n)), "rb") as f:
        return f.read()


# A committed file of twelve chunks.
rnd = random.Random(5)
v1 = rnd.randbytes(24 << 20)
for d in (mnt, ref):
    with open(os.path.join(d, "big"), "wb") as f:
        f.write(v1)
sync()

# Append one line: nothing decoded while it is open.
settle()
d0 = decodes()
fds = both("big", os.O_WRONLY | os.O_APPEND)
line = b"one more line\n"
for fd in fds:
    os.write(fd, line)
if decodes() != d0:
    bad("opening for append and appending decoded %d chunks" % (decodes() - d0))
else:
    ok("open for append + append: no chunk decoded")
for fd in fds:
    os.close(fd)
same("big", "after the append")
sync()
small_delta("big", "the append")
v2 = v1 + line

# Patch 4 KiB in the middle, read across it while open.  (The flip of
# version 1 against version 2 decodes in the background: waited for.)
settle()
mid = len(v2) // 2 + 77
patch = rnd.randbytes(4096)
d0 = decodes()
fds = both("big", os.O_RDWR)
for fd in fds:
    os.pwrite(fd, patch, mid)
if decodes() != d0:
    bad("opening for writing and patching decoded %d chunks" % (decodes() - d0))
else:
    ok("open + 4 KiB patch in the middle: no chunk decoded")
a, b = (os.pread(fd, 3 * 4096, mid - 4096) for fd in fds)
if a != b:
    bad("a read across the patch while open differs")
else:
    ok("a read across the patch while open merges old and new bytes")
d1 = decodes()
for fd in fds:
    os.close(fd)
sync()
# The commit hashes the eleven chunks not written into from version 2's
# index: it decodes at most the one written into (read above already).
if decodes() - d1 > 1:
    bad("the commit of the 4 KiB patch decoded %d chunks" % (decodes() - d1))
else:
    ok("the commit of the 4 KiB patch decoded %d chunks (of 12)" % (decodes() - d1))
small_delta("big", "the 4 KiB patch")
v3 = v2[:mid] + patch + v2[mid + 4096:]
for n, want in ((1, v1), (2, v2), (3, v3)):
    if version("big", n) != want:
        bad("version %d of big differs" % n)
    else:
        ok("version %d of big exact (%d bytes)" % (n, len(want)))

# Tensor files patched in place inside a tensor (torch.save, safetensors):
# the new version is cut into the chunks of the one before, the chunks
# left whole are coded as identical without being decoded, and the
# commit decodes only the chunk written into.
import io, struct
import torch


def safetensors_bytes(tensors):
    hdr, data = {"__metadata__": {"format": "pt"}}, b""
    for k, t in tensors.items():
        raw = t.view(torch.uint8).numpy().tobytes() if t.dtype == torch.bfloat16 \
            else t.numpy().tobytes()
        hdr[k] = {"dtype": {torch.bfloat16: "BF16", torch.float32: "F32"}[t.dtype],
                  "shape": list(t.shape), "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(hdr).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


torch.manual_seed(3)
weights = {"w": torch.randn(4096 * 2048).to(torch.bfloat16), "b": torch.randn(1000)}
buf = io.BytesIO()
torch.save(weights, buf)
CHUNK = 2 << 20
for name, data in (("model.pt", buf.getvalue()),
                   ("model.safetensors", safetensors_bytes(weights))):
    for d in (mnt, ref):
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)
    settle()
    with open(os.path.join(os.path.dirname(store), name + ".v1"), "wb") as f:
        f.write(data)
    # in the middle of a chunk in the middle of the weights
    off = len(data) // 2 // CHUNK * CHUNK + CHUNK // 2 + 99
    patch = rnd.randbytes(4096)
    d0 = decodes()
    fds = both(name, os.O_RDWR)
    for fd in fds:
        os.pwrite(fd, patch, off)
    # sampled while open: after close the commit may already have decoded
    # its one chunk (checked below)
    if decodes() != d0:
        bad("%s: open and patch decoded %d chunks" % (name, decodes() - d0))
    for fd in fds:
        os.close(fd)
    # (not settle(): ulpfs gc would turn the forward delta into a
    # standalone version, decoding it, as it does every forward chain)
    sync()
    n = decodes() - d0
    chunks = (len(data) + CHUNK - 1) // CHUNK
    if n > 1:
        bad("%s: the commit of a 4 KiB patch decoded %d chunks of %d" % (name, n, chunks))
    else:
        ok("%s: the commit of a 4 KiB patch decoded %d chunk(s) of %d" % (name, n, chunks))
    v = newest(name)
    if v["stored"] >= (64 << 10) or not v["ref"] or v["ref"]["seq"] != 1:
        bad("%s: the patch stores %d bytes, reference %s" % (name, v["stored"], v["ref"]))
    else:
        ok("%s: the patch stores %d bytes of %d" % (name, v["stored"], v["size"]))
    same(name, "after a 4 KiB patch")
    if version(name, 1) != data:
        bad("%s: version 1 differs" % name)
    else:
        ok("%s: version 1 exact" % name)

# fallocate on a committed file.
fds = both("big", os.O_RDWR)
for fd in fds:
    fallocate(fd, PUNCH_HOLE | KEEP_SIZE, 1 << 20, 3 << 20)
    fallocate(fd, KEEP_SIZE, len(v3), 1 << 20)
try:
    fallocate(fds[0], ZERO_RANGE, (9 << 20) + 5, 100000)
    try:
        fallocate(fds[1], ZERO_RANGE, (9 << 20) + 5, 100000)
    except OSError:  # the plain file's filesystem may not have it
        os.pwrite(fds[1], bytes(100000), (9 << 20) + 5)
except OSError as e:
    bad("ZERO_RANGE on the mount: %s" % e)
if os.fstat(fds[0]).st_size != len(v3):
    bad("KEEP_SIZE changed the size to %d" % os.fstat(fds[0]).st_size)
try:
    fallocate(fds[0], 8, 0, 4096)  # COLLAPSE_RANGE
    bad("COLLAPSE_RANGE did not fail")
except OSError as e:
    if e.errno == 95:
        ok("COLLAPSE_RANGE: EOPNOTSUPP")
    else:
        bad("COLLAPSE_RANGE: %s, EOPNOTSUPP expected" % e)
same("big", "punched and zeroed, while open")
for fd in fds:
    os.close(fd)
sync()
same("big", "punched and zeroed, committed")

# A sparse file: 1 MiB, a 1 GiB hole, 1 MiB.
settle()  # only what the new file adds is counted below
before = stats()["physical"]
GIB = 1 << 30
fds = both("sparse", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
blob = rnd.randbytes(1 << 20)
for fd in fds:
    os.pwrite(fd, blob, 0)
    os.pwrite(fd, blob[::-1], GIB)
ino = os.fstat(fds[0]).st_ino
sb = os.stat(os.path.join(store, "staging", str(ino)))
if sb.st_blocks * 512 > (8 << 20):
    bad("staging holds %d bytes of blocks for 2 MiB of data" % (sb.st_blocks * 512))
else:
    ok("staging: %d bytes of blocks for 2 MiB of data in %d bytes" %
       (sb.st_blocks * 512, sb.st_size))
for off in (0, 4096, 1 << 20, 1 << 29, GIB - 1, GIB, GIB + (1 << 20) - 1):
    for whence, wn in ((os.SEEK_DATA, "SEEK_DATA"), (os.SEEK_HOLE, "SEEK_HOLE")):
        got = []
        for fd in fds:
            try:
                got.append(os.lseek(fd, off, whence))
            except OSError as e:
                got.append("errno %d" % e.errno)
        if got[0] != got[1]:
            bad("lseek(%d, %s): %s on the mount, %s expected" % (off, wn, got[0], got[1]))
ok("lseek SEEK_DATA/SEEK_HOLE while staged: as on the plain file")
for fd in fds:
    os.close(fd)
settle()
grown = stats()["physical"] - before
if grown > (4 << 20):
    bad("the sparse file takes %d bytes in the store" % grown)
else:
    ok("the sparse file takes %d bytes in the store" % grown)
same("sparse", "committed, the hole read as zeros")
fd = os.open(os.path.join(mnt, "sparse"), os.O_RDONLY)
if os.lseek(fd, 0, os.SEEK_HOLE) != GIB + (1 << 20):
    bad("SEEK_HOLE of the committed file is not its end")
try:
    os.lseek(fd, GIB + (1 << 20), os.SEEK_DATA)
    bad("SEEK_DATA at the end did not fail")
except OSError as e:
    if e.errno != 6:
        bad("SEEK_DATA at the end: %s, ENXIO expected" % e)
os.close(fd)
sys.exit(1 if fails else 0)
PY

fs_mount "$STORE" "$MNT"
step "appends, patches, fallocate, sparse files (mount and plain files side by side)"
"$PY" "$WORK/copyup.py" "$MNT" "$REF" "$STORE" "$ULPFS" || bad "copy-up cases failed"

step "kill -9 of the daemon while a committed file is open for appending"
sha_before=$(sha256sum <"$MNT/big")
pt_before=$(sha256sum <"$MNT/model.pt")
cat >"$WORK/append.py" <<'PY'
import os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)
os.write(fd, b"never closed\n")
fd2 = os.open(sys.argv[3], os.O_RDWR)
os.pwrite(fd2, b"never closed\n", os.fstat(fd2).st_size // 2)
open(sys.argv[2], "w").close()
time.sleep(600)
PY
fs_bg "$PY" "$WORK/append.py" "$MNT/big" "$WORK/ready" "$MNT/model.pt"
wpid=$FS_BG_LAST
n=0
while [ ! -e "$WORK/ready" ]; do
	n=$((n + 1))
	[ "$n" -lt 3000 ] || die "the appending writer did not start within 60 s"
	pid_alive "$wpid" || die "the appending writer died"
	sleep 0.02
done
pid=$(fs_mount_pid "$MNT")
kill -9 "$pid" || bad "kill -9 $pid failed"
wait_pid_gone "$pid" 10 || bad "daemon $pid still alive 10 s after kill -9"
kill -9 "$wpid" 2>/dev/null
wait "$wpid" 2>/dev/null
fs_bg_forget "$wpid"
fs_force_umount "$MNT" 30
fs_mount "$STORE" "$MNT"
"$ULPFS" sync "$MNT" || bad "sync after the remount failed"
[ "$(sha256sum <"$MNT/big")" = "$sha_before" ] && ok "the committed version is intact" ||
	bad "big changed after kill -9 between open and close"
[ "$(sha256sum <"$MNT/model.pt")" = "$pt_before" ] &&
	ok "the committed version of the patched tensor file is intact" ||
	bad "model.pt changed after kill -9 between open and close"
for f in model.pt model.safetensors; do
	cmp -s "$MNT/.ulpfs/versions/$f/1" "$WORK/$f.v1" &&
		ok "$f: version 1 exact after the remount" ||
		bad "$f: version 1 differs after the remount"
done
fs_compare_trees "$REF" "$MNT" "after kill -9 and a remount"
"$ULPFS" verify "$MNT" >"$WORK/verify.log" 2>&1 && ok "ulpfs verify passes" || {
	sed 's/^/    | /' "$WORK/verify.log" >&2
	bad "ulpfs verify failed"
}
fs_umount "$MNT"
fs_finish
