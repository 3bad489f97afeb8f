#!/usr/bin/env bash
# tests/fs_copyrange.sh - copy_file_range(2) between files of the mount,
# served by the daemon, each copy done the same way on plain files beside
# (make check runs it in each write mode):
#   - a committed file copied whole into a new file (what cp does): by
#     reference where the destination is not written by the kernel itself
#     (direct I/O: nothing decoded, at the copy nor at its commit, and the
#     new version stores almost nothing; passthrough: copied through
#     staging into the file the kernel writes), a tensor file and a
#     generic one, and by cp(1);
#   - whole chunks at the same offsets into a new file, by reference too
#     (direct I/O), and a whole file copied in calls of odd sizes;
#   - partial and unaligned copies, into a new file and into the middle of
#     a committed one, within one file (disjoint ranges; overlapping ones
#     are EINVAL), and from a sparse file still being written (its hole
#     stays a hole in the destination's staging file);
#   - every file and every version exact against the plain files, after a
#     remount too, and ulpfs verify passes.
# make check may run this with a POSIX sh: it needs bash.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/fs_lib.sh"
fs_init

STORE=$WORK/store
MNT=$WORK/mnt
REF=$WORK/ref
mkdir -p "$REF"

cat >"$WORK/copyrange.py" <<'PY'
import errno, hashlib, json, os, random, struct, subprocess, sys

mnt, ref, store, ulpfs, mode = sys.argv[1:6]
fails = 0
MIB = 1 << 20


def bad(m):
    global fails
    fails += 1
    print("    FAIL: " + m, flush=True)


def ok(m):
    print("    ok: " + m, flush=True)


def run(*a):
    return subprocess.run([ulpfs] + list(a), check=True, capture_output=True,
                          text=True).stdout


def decodes():
    return json.loads(run("stats", "--json", mnt))["cache"]["decodes"]


def settle():
    run("sync", mnt)
    run("gc", mnt)


def digest(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(16 << 20), b""):
            h.update(b)
    return h.hexdigest()


def same(name, what):
    if digest(os.path.join(mnt, name)) != digest(os.path.join(ref, name)):
        bad("%s: %s: differs from the plain file" % (name, what))
    else:
        ok("%s: %s: same bytes as the plain file" % (name, what))


def both(name, flags):
    return [os.open(os.path.join(d, name), flags, 0o644) for d in (mnt, ref)]


def copy(fi, fo, off_in, off_out, n):
    """copy_file_range until n bytes are copied or the source ends (the
    call may return short counts)."""
    done = 0
    while done < n:
        k = os.copy_file_range(fi, fo, n - done, off_in + done, off_out + done)
        if k == 0:
            break
        done += k
    return done


def copy_both(src, dst, dst_flags, off_in, off_out, n):
    got = []
    for d in (mnt, ref):
        fi = os.open(os.path.join(d, src), os.O_RDONLY)
        fo = os.open(os.path.join(d, dst), dst_flags, 0o644)
        got.append(copy(fi, fo, off_in, off_out, n))
        os.close(fi)
        os.close(fo)
    if got[0] != got[1]:
        bad("%s -> %s: %d bytes copied, %d on the plain file" % (src, dst, got[0], got[1]))
    return got[0]


def newest(name):
    out = json.loads(run("log", "--json", os.path.join(mnt, name)))
    vs = out["versions"] if isinstance(out, dict) else out
    return max(vs, key=lambda v: v["seq"])


def safetensors(rnd, n):
    """A safetensors file of n float32 elements in two tensors."""
    half = n // 2
    hdr = json.dumps({"a": {"dtype": "F32", "shape": [half], "data_offsets": [0, 4 * half]},
                      "b": {"dtype": "F32", "shape": [n - half],
                            "data_offsets": [4 * half, 4 * n]}}).encode()
    hdr += b" " * (-len(hdr) % 8)
    body = struct.pack("<%df" % n, *(rnd.gauss(0, 0.02) for _ in range(n)))
    return struct.pack("<Q", len(hdr)) + hdr + body


rnd = random.Random(11)
files = {"gen": rnd.randbytes(12 * MIB + 12345), "model.safetensors": safetensors(rnd, 1 << 20)}
for name, data in files.items():
    for d in (mnt, ref):
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)
settle()

# Whole files into new files.
byref = mode != "passthrough"
for name, data in files.items():
    dst = name + ".copy"
    d0 = decodes()
    n = copy_both(name, dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0, 0, len(data) + 100)
    if n != len(data):
        bad("%s: whole copy returned %d of %d bytes" % (name, n, len(data)))
    run("sync", mnt)
    dec = decodes() - d0
    v = newest(dst)
    if byref and (dec or v["stored"] > (64 << 10)):
        bad("%s: copied by reference decoded %d chunks, stores %d bytes" % (name, dec, v["stored"]))
    elif byref:
        ok("%s: copied by reference: 0 chunks decoded (copy and commit), %d bytes stored for %d"
           % (name, v["stored"], len(data)))
    else:
        ok("%s: copied through staging (passthrough destination): %d chunks decoded, %d bytes stored"
           % (name, dec, v["stored"]))
    same(dst, "copied whole")
for d in (mnt, ref):
    if subprocess.run(["cp", os.path.join(d, "gen"), os.path.join(d, "gen.cp")]).returncode:
        bad("cp(1) in %s failed" % d)
same("gen.cp", "cp(1) of a committed file within the mount")

# Whole chunks (2 MiB) at equal offsets into new files: by reference too
# (the bytes before the range are zeros, a hole): nothing decoded at the
# copy; the commit decodes none of the range's chunks (at most the
# source's chunks under the zeros, the zero chunks coded against them, and
# its last chunk when it is partial), and stores almost nothing.  At other
# offsets through staging.
gsize = len(files["gen"])
for dst, off, n, aligned in (("ref.tail", 4 * MIB, gsize, True),
                             ("ref.head", 0, 8 * MIB, True),
                             ("ref.mid", 2 * MIB, 8 * MIB, True),
                             ("ref.odd", MIB, 8 * MIB, False)):
    d0 = decodes()
    got = copy_both("gen", dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, off, off, n)
    want = min(n, gsize - off)
    if got != want:
        bad("%s: copied %d of %d bytes" % (dst, got, want))
    run("sync", mnt)
    dec = decodes() - d0
    v = newest(dst)
    what = "[%d, %d) of gen at the same offsets" % (off, off + want)
    outside = off // (2 * MIB) + (1 if (off + want) % (2 * MIB) else 0)
    if byref and aligned and (dec > outside or v["stored"] > (64 << 10)):
        bad("%s: %s, whole chunks: %d chunks decoded, %d bytes stored"
            % (dst, what, dec, v["stored"]))
    elif byref and aligned:
        ok("%s: %s by reference: %d chunks decoded (at most %d), %d bytes stored"
           % (dst, what, dec, outside, v["stored"]))
    else:
        ok("%s: %s through staging: %d chunks decoded, %d bytes stored"
           % (dst, what, dec, v["stored"]))
    same(dst, what)

# In calls of 3 MiB + 5 each (as a caller may make, and the 4 GiB that a
# FUSE reply counts): each by reference up to its last chunk boundary, the
# next on from there; the whole is the source's version again.
d0 = decodes()
for d in (mnt, ref):
    fi = os.open(os.path.join(d, "gen"), os.O_RDONLY)
    fo = os.open(os.path.join(d, "ref.parts"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    pos = 0
    while pos < gsize:
        k = os.copy_file_range(fi, fo, 3 * MIB + 5, pos, pos)
        if k <= 0:
            break
        pos += k
    os.close(fi)
    os.close(fo)
run("sync", mnt)
dec, v = decodes() - d0, newest("ref.parts")
if byref and (dec or v["stored"] > (64 << 10)):
    bad("ref.parts: copied in parts: %d chunks decoded, %d bytes stored" % (dec, v["stored"]))
else:
    ok("ref.parts: copied in calls of 3 MiB + 5: %d chunks decoded, %d bytes stored"
       % (dec, v["stored"]))
same("ref.parts", "copied in calls of 3 MiB + 5")

# Partial and unaligned: into a new file, and into the middle of a
# committed one (a copy-up).
copy_both("gen", "part", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 1000, 5, 3 * MIB + 7)
same("part", "3 MiB + 7 from offset 1000 to offset 5 of a new file")
copy_both("gen", "gen.copy", os.O_WRONLY, 4 * MIB, 2 * MIB, 4 * MIB)
same("gen.copy", "4 MiB copied into the middle of a committed copy, aligned")
copy_both("model.safetensors", "gen.copy", os.O_WRONLY, 77, 11 * MIB + 3, 2 * MIB)
same("gen.copy", "2 MiB copied over its end, unaligned (it grows)")
copy_both("gen", "gen.copy", os.O_WRONLY, len(files["gen"]) - 10, 0, 100)
same("gen.copy", "a copy from 10 bytes before the source's end (short)")

# Within one file: disjoint ranges work, overlapping ones are EINVAL.
copy_both("part", "part", os.O_WRONLY, 0, 2 * MIB, MIB)
same("part", "1 MiB copied within the file, disjoint")
errs = []
for d in (mnt, ref):
    fd = os.open(os.path.join(d, "part"), os.O_RDWR)
    try:
        os.copy_file_range(fd, fd, MIB, 0, 4096)
        errs.append(0)
    except OSError as e:
        errs.append(e.errno)
    os.close(fd)
if errs[0] != errs[1] or errs[0] != errno.EINVAL:
    bad("overlapping copy within a file: errno %s, plain file %s" % tuple(errs))
else:
    ok("overlapping copy within a file: EINVAL, as on the plain file")

# From a sparse file still being written: the hole stays a hole.
fds = both("sparse", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
blob = rnd.randbytes(MIB)
for fd in fds:
    os.pwrite(fd, blob, 0)
    os.pwrite(fd, blob[::-1], 256 * MIB)
outs = both("sparse.copy", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
for d, fo in zip((mnt, ref), outs):
    fi = os.open(os.path.join(d, "sparse"), os.O_RDONLY)
    copy(fi, fo, 0, 0, 257 * MIB)
    os.close(fi)
ino = os.fstat(outs[0]).st_ino
sb = os.stat(os.path.join(store, "staging", str(ino)))
if sb.st_blocks * 512 > 8 * MIB or sb.st_size != 257 * MIB:
    bad("the copy of a sparse file: %d bytes of blocks, size %d" % (sb.st_blocks * 512, sb.st_size))
else:
    ok("the copy of a sparse file: %d bytes of blocks for a size of %d" % (sb.st_blocks * 512, sb.st_size))
for fd in fds + outs:
    os.close(fd)
same("sparse.copy", "copied from a sparse file being written")
settle()
sys.exit(1 if fails else 0)
PY

# versions_exact: every version of every file the copies made, as the
# plain files had them at the end (each has one) - and the files.
versions_exact() {
	local f n
	for f in gen.copy model.safetensors.copy part sparse.copy ref.tail ref.head ref.mid ref.odd ref.parts; do
		n=$("$ULPFS" log --json "$MNT/$f" | "$PY" -c 'import json,sys; o=json.load(sys.stdin); v=o["versions"] if isinstance(o,dict) else o; print(max(x["seq"] for x in v))')
		cmp -s "$MNT/.ulpfs/versions/$f/$n" "$REF/$f" || bad "$1: version $n of $f differs"
	done
	fs_compare_trees "$REF" "$MNT" "$1"
}

fs_mount "$STORE" "$MNT"
step "copy_file_range within the mount ($(fs_write_mode "$MNT"))"
"$PY" "$WORK/copyrange.py" "$MNT" "$REF" "$STORE" "$ULPFS" "$(fs_write_mode "$MNT")" ||
	bad "copy_file_range cases failed"
cmp -s "$MNT/.ulpfs/versions/gen.copy/1" "$REF/gen" && ok "gen.copy's first version is the whole copy" ||
	bad "gen.copy's first version differs from its source"
versions_exact "after the copies"
fs_remount "$STORE" "$MNT"
versions_exact "after a remount"
"$ULPFS" verify "$MNT" >"$WORK/verify.log" 2>&1 && ok "ulpfs verify passes" || {
	sed 's/^/    | /' "$WORK/verify.log" >&2
	bad "ulpfs verify failed"
}
fs_umount "$MNT"
fs_finish
