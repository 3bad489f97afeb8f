#!/usr/bin/env bash
# tests/fs_mmap.sh - memory-mapped access through the mount, as
# safetensors' loader and numpy do it:
#   - numpy.memmap of every tensor of two bf16 safetensors versions (the
#     second stored as a delta of the first) equal to the source, from
#     staging, after the commit and after a remount,
#   - python mmap ACCESS_READ of whole files and of page-aligned windows,
#   - writes through MAP_SHARED: numpy.memmap(mode="w+") creating a new
#     file and mode="r+" patching a committed one, kept across a remount.
# make check may run this with a POSIX sh: it needs bash.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/fs_lib.sh"
fs_init

STORE=$WORK/store
MNT=$WORK/mnt
SRC=$WORK/src
mkdir -p "$SRC"

step "generating two versions of a 16 MB bf16 safetensors file"
"$PY" "$FS_UTIL" drift "$SRC" --n 2 --elems 8000000 || die "generator failed"

fs_mount "$STORE" "$MNT"
mkdir -p "$MNT/a" "$MNT/b"
cp "$SRC/v1/model.safetensors" "$MNT/a/model.safetensors" || bad "cp failed"
cp "$SRC/v2/model.safetensors" "$MNT/b/model.safetensors" || bad "cp failed"

cat >"$WORK/mm.py" <<'PY'
import mmap, os, sys
import numpy as np

mode, mnt, src = sys.argv[1:4]
fails = 0


def bad(m):
    global fails
    fails += 1
    print("    FAIL: " + m)


if mode == "read":
    for v, d in (("v1", "a"), ("v2", "b")):
        p, s = os.path.join(mnt, d, "model.safetensors"), os.path.join(src, v, "model.safetensors")
        exp = open(s, "rb").read()
        with open(p, "rb") as f:
            m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            if m[:] != exp:
                bad("%s: mmap ACCESS_READ of the whole file differs" % p)
            m.close()
            pg = mmap.ALLOCATIONGRANULARITY
            for off in (pg, 37 * pg, (len(exp) // pg - 1) * pg):
                w = mmap.mmap(f.fileno(), len(exp) - off, access=mmap.ACCESS_READ, offset=off)
                if w[:] != exp[off:]:
                    bad("%s: mmap window at offset %d differs" % (p, off))
                w.close()
        arr = np.memmap(p, dtype=np.uint8, mode="r")
        if not np.array_equal(arr, np.frombuffer(exp, dtype=np.uint8)):
            bad("%s: numpy.memmap(uint8) of the whole file differs" % p)
        del arr
    if os.path.exists(os.path.join(mnt, "new.bin")):
        exp = np.arange(4 << 20, dtype=np.uint32) * np.uint32(2654435761)
        got = np.memmap(os.path.join(mnt, "new.bin"), dtype=np.uint32, mode="r")
        if not np.array_equal(got, exp):
            bad("new.bin (written through numpy.memmap w+) differs")
    print("  mmap reads: %s" % ("ok" if not fails else "%d failures" % fails))

elif mode == "write":
    # a new file written through a shared writable mapping
    p = os.path.join(mnt, "new.bin")
    m = np.memmap(p, dtype=np.uint32, mode="w+", shape=(4 << 20,))
    m[:] = np.arange(4 << 20, dtype=np.uint32) * np.uint32(2654435761)
    m.flush()
    del m
    # patch a committed file through MAP_SHARED (copy-up without O_TRUNC)
    for root in (mnt, src):
        q = os.path.join(root, "a" if root == mnt else "v1", "model.safetensors")
        m = np.memmap(q, dtype=np.uint8, mode="r+")
        m[100000:100016] = np.frombuffer(b"mmap-patched!!!!", dtype=np.uint8)
        m[-4:] = 7
        m.flush()
        del m
    print("  mmap writes done")
sys.exit(1 if fails else 0)
PY

stcheck() { # WHEN
	local out
	if out=$("$PY" "$FS_UTIL" safetensors-check "$MNT/a/model.safetensors" "$SRC/v1/model.safetensors" \
		"$MNT/b/model.safetensors" "$SRC/v2/model.safetensors" 2>&1); then
		ok "$1: numpy.memmap of every tensor equals the source (both versions)"
	else
		bad "$1: numpy.memmap of the tensors:"
		printf '%s\n' "$out" | sed 's/^/    | /' >&2
	fi
	if out=$("$PY" "$WORK/mm.py" read "$MNT" "$SRC" 2>&1); then
		ok "$1: mmap ACCESS_READ (whole files, windows), numpy.memmap of whole files"
	else
		bad "$1: mmap reads:"
		printf '%s\n' "$out" | sed 's/^/    | /' >&2
	fi
}

step "mmap reads from staging (not yet committed)"
stcheck "staging"
step "mmap reads after the commit"
fs_wait_committed "$STORE" 120
stcheck "committed"
step "mmap reads after a remount (b/ is decoded through its reference a/)"
fs_remount "$STORE" "$MNT"
sync
echo 3 >/proc/sys/vm/drop_caches 2>/dev/null
stcheck "remounted"

step "writes through MAP_SHARED: numpy.memmap w+ (new file), r+ (committed file)"
out=$("$PY" "$WORK/mm.py" write "$MNT" "$SRC" 2>&1) && ok "numpy.memmap writes returned" ||
	{ bad "numpy.memmap writes failed:"; printf '%s\n' "$out" | sed 's/^/    | /' >&2; }
cmp -s "$MNT/a/model.safetensors" "$SRC/v1/model.safetensors" && ok "mmap-patched committed file reads back (same mount)" ||
	bad "mmap-patched committed file differs (same mount)"
fs_remount "$STORE" "$MNT"
cmp -s "$MNT/a/model.safetensors" "$SRC/v1/model.safetensors" && ok "mmap-patched file kept across remount" ||
	bad "mmap-patched file differs after remount"
stcheck "after mmap writes + remount"
fs_umount "$MNT"
fs_finish
