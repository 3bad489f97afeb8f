#!/usr/bin/env bash
# bench/copyup_bench.sh - what an append or an in-place patch of a large
# committed file costs through the mount (issue 14), against the backing
# filesystem in the same run:
#
#   bench/copyup_bench.sh [--mib N] [--reps R] [--kind generic|safetensors|torch]
#
#   (a) append one line to a committed N MiB file (default 1024): open to
#       close through the mount vs on the backing filesystem, median of R
#       (default 3), the commit that follows (close -> "ulpfs sync"
#       returns), the chunks it decoded (the store's counter: chunks the
#       cache held already are not counted) and the new version's stored
#       bytes
#   (b) patch 4 KiB in the middle of it: open to close, the commit and the
#       chunks it decoded, the stored bytes of the new version right after
#       it and the store's growth once the older version is coded against
#       it ("ulpfs gc" waits for that flip)
#
# --kind generic (the default): the file is random bytes (incompressible:
# the codec's generic path), so that no figure comes from compression.
# --kind safetensors or torch: a model file of bf16 weights (normal
# random values, one tensor of N MiB) and an fp32 bias, written as
# safetensors or by torch.save: the patch lands inside the weights (the
# file's tensor map unchanged), the append after the file's end (the
# safetensors header unchanged; the zip's end record no longer at the
# end: parsed again, the file generic from then on).  Needs root and FUSE, and about
# 3 x N MiB free under TMPDIR (default /tmp).  ULPFS=path/to/ulpfs
# (default: _build/ulpfs, then ./ulpfs).
# make check may run this with a POSIX sh: it needs bash.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
FS_TEST=copyup_bench
. "$(dirname "${BASH_SOURCE[0]}")/../tests/fs_lib.sh"
. "$FS_SRCDIR/bench/lib.sh"

mib=1024 reps=3 kind=generic
while [ $# -gt 0 ]; do
	case $1 in
	--mib) mib=$2; shift ;;
	--reps) reps=$2; shift ;;
	--kind) kind=$2; shift ;;
	*) die "usage: bench/copyup_bench.sh [--mib N] [--reps R] [--kind generic|safetensors|torch]" ;;
	esac
	shift
done
case $kind in
generic | safetensors | torch) ;;
*) die "--kind: generic, safetensors or torch, not $kind" ;;
esac
fs_init
STORE=$WORK/store
MNT=$WORK/mnt
PLAIN=$WORK/plain
mkdir -p "$PLAIN"
say "machine: $(bench_machine)"
fs_mount "$STORE" "$MNT"
say "write mode: $(fs_write_mode "$MNT")"

say "file: $kind, $mib MiB"
"$PY" - "$MNT" "$PLAIN" "$ULPFS" "$mib" "$reps" "$kind" <<'PY' || bad "the benchmark failed"
import json, os, struct, subprocess, sys, time

mnt, plain, ulpfs, mib, reps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
kind = sys.argv[6]


def run(*args):
    return subprocess.run([ulpfs] + list(args), check=True, capture_output=True,
                          text=True).stdout


def settle():
    run("sync", mnt)
    run("gc", mnt)


def physical():
    return json.loads(run("stats", "--json", mnt))["physical"]


def newest_stored(name):
    out = json.loads(run("log", "--json", os.path.join(mnt, name)))
    vs = out["versions"] if isinstance(out, dict) else out
    return max(vs, key=lambda v: v["seq"])["stored"]


def median(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def timed(path, flags, fn):
    t0 = time.perf_counter()
    fd = os.open(path, flags)
    fn(fd)
    os.close(fd)
    return time.perf_counter() - t0


def weights():
    """bf16 weights of mib MiB (normal values) and an fp32 bias, made in
    pieces of 64 MiB."""
    import torch
    torch.manual_seed(1)
    n = mib << 19
    w = torch.empty(n, dtype=torch.bfloat16)
    for i in range(0, n, 32 << 20):
        w[i:i + (32 << 20)] = torch.randn(min(32 << 20, n - i)) * 0.02
    return {"weight": w, "bias": torch.randn(4096)}


def write_plain(path):
    """The benchmark's file on the backing filesystem."""
    if kind == "generic":
        with open(path, "wb") as g:
            for i in range(mib):
                g.write(os.urandom(1 << 20))
        return
    import torch
    t = weights()
    if kind == "torch":
        torch.save(t, path)
        return
    hdr, pos = {"__metadata__": {"format": "pt"}}, 0
    for k, v in t.items():
        n = v.numel() * v.element_size()
        hdr[k] = {"dtype": "BF16" if v.dtype == torch.bfloat16 else "F32",
                  "shape": list(v.shape), "data_offsets": [pos, pos + n]}
        pos += n
    h = json.dumps(hdr).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as g:
        g.write(struct.pack("<Q", len(h)) + h)
        for v in t.values():
            g.write(v.view(torch.uint8).numpy().tobytes())


t0 = time.perf_counter()
write_plain(os.path.join(plain, "big"))
with open(os.path.join(plain, "big"), "rb") as g, open(os.path.join(mnt, "big"), "wb") as f:
    while True:
        b = g.read(16 << 20)
        if not b:
            break
        f.write(b)
settle()
print("  setup: %d MiB committed in %.1f s" % (mib, time.perf_counter() - t0), flush=True)

def decodes():
    return json.loads(run("stats", "--json", mnt))["cache"]["decodes"]


def commit():
    """ulpfs sync after a close: its seconds and the chunks it decoded."""
    d0 = decodes()
    t0 = time.perf_counter()
    run("sync", mnt)
    return time.perf_counter() - t0, decodes() - d0


def append():
    line = b"step 1000 loss 1.2345\n"
    ra, rp, rc, rd, rs = [], [], [], [], []
    for r in range(reps):
        ra.append(timed(os.path.join(mnt, "big"), os.O_WRONLY | os.O_APPEND, lambda fd: os.write(fd, line)))
        rp.append(timed(os.path.join(plain, "big"), os.O_WRONLY | os.O_APPEND, lambda fd: os.write(fd, line)))
        t, d = commit()
        rc.append(t)
        rd.append(d)
        rs.append(newest_stored("big"))
        run("gc", mnt)
    print("  (a) append one line, open -> close: mount %.2f ms, backing %.3f ms (median of %d; each: %s ms)"
          % (1e3 * median(ra), 1e3 * median(rp), reps, ", ".join("%.2f" % (1e3 * x) for x in ra)))
    print("      commit after the close (ulpfs sync): median %.2f s (each: %s s), %s chunks decoded;"
          " new version stored: median %d bytes"
          % (median(rc), ", ".join("%.2f" % x for x in rc), median(rd), median(rs)), flush=True)


def patch4k():
    patch = os.urandom(4096)
    size = os.stat(os.path.join(plain, "big")).st_size
    pa, pp, pc, pd, ps, pg = [], [], [], [], [], []
    for r in range(reps):
        off = size // 2 + 4096 * r
        before = physical()
        pa.append(timed(os.path.join(mnt, "big"), os.O_RDWR, lambda fd: os.pwrite(fd, patch, off)))
        pp.append(timed(os.path.join(plain, "big"), os.O_RDWR, lambda fd: os.pwrite(fd, patch, off)))
        t, d = commit()
        pc.append(t)
        pd.append(d)
        ps.append(newest_stored("big"))
        run("gc", mnt)
        pg.append(physical() - before)
    print("  (b) patch 4 KiB in the middle, open -> close: mount %.2f ms, backing %.3f ms (median of %d)"
          % (1e3 * median(pa), 1e3 * median(pp), reps))
    print("      commit (ulpfs sync): median %.2f s (each: %s s), %s chunks decoded (each: %s)"
          % (median(pc), ", ".join("%.2f" % x for x in pc), median(pd), ", ".join(str(x) for x in pd)))
    print("      new version stored right after its commit: median %d bytes; store growth once the"
          " previous version is coded against it: median %d bytes (each: %s)"
          % (median(ps), median(pg), ", ".join(str(x) for x in pg)), flush=True)


# A tensor file is patched first: once appended to, it no longer parses
# as its format (bytes after its end), and would be patched as any file.
if kind == "generic":
    append()
    patch4k()
else:
    patch4k()
    append()
a, b = (subprocess.run(["sha256sum", os.path.join(d, "big")], capture_output=True, text=True).stdout.split()[0]
        for d in (mnt, plain))
if a != b:
    print("  FAIL: the file differs from the backing filesystem's copy")
    sys.exit(1)
print("  content: the same bytes as the backing filesystem's copy")
PY
fs_umount "$MNT"
fs_finish
