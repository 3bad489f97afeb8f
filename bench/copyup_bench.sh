#!/usr/bin/env bash
# bench/copyup_bench.sh - what an append or an in-place patch of a large
# committed file costs through the mount (issue 14), against the backing
# filesystem in the same run:
#
#   bench/copyup_bench.sh [--mib N] [--reps R]
#
#   (a) append one line to a committed N MiB file (default 1024): open to
#       close through the mount vs on the backing filesystem, median of R
#       (default 3), and the commit that follows (close -> "ulpfs sync"
#       returns)
#   (b) patch 4 KiB in the middle of it: open to close, the commit, the
#       stored bytes of the new version right after it and the store's
#       growth once the older version is coded against it ("ulpfs gc"
#       waits for that flip)
#
# The file is random bytes (incompressible: the codec's generic path), so
# that no figure comes from compression.  Needs root and FUSE, and about
# 3 x N MiB free under TMPDIR (default /tmp).  ULPFS=path/to/ulpfs
# (default: _build/ulpfs, then ./ulpfs).
# make check may run this with a POSIX sh: it needs bash.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
FS_TEST=copyup_bench
. "$(dirname "${BASH_SOURCE[0]}")/../tests/fs_lib.sh"
. "$FS_SRCDIR/bench/lib.sh"

mib=1024 reps=3
while [ $# -gt 0 ]; do
	case $1 in
	--mib) mib=$2; shift ;;
	--reps) reps=$2; shift ;;
	*) die "usage: bench/copyup_bench.sh [--mib N] [--reps R]" ;;
	esac
	shift
done
fs_init
STORE=$WORK/store
MNT=$WORK/mnt
PLAIN=$WORK/plain
mkdir -p "$PLAIN"
say "machine: $(bench_machine)"
fs_mount "$STORE" "$MNT"
say "write mode: $(fs_write_mode "$MNT")"

"$PY" - "$MNT" "$PLAIN" "$ULPFS" "$mib" "$reps" <<'PY' || bad "the benchmark failed"
import json, os, subprocess, sys, time

mnt, plain, ulpfs, mib, reps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])


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


t0 = time.perf_counter()
with open(os.path.join(mnt, "big"), "wb") as f, open(os.path.join(plain, "big"), "wb") as g:
    for i in range(mib):
        b = os.urandom(1 << 20)
        f.write(b)
        g.write(b)
settle()
print("  setup: %d MiB committed in %.1f s" % (mib, time.perf_counter() - t0), flush=True)

line = b"step 1000 loss 1.2345\n"
ra, rp, rc = [], [], []
for r in range(reps):
    ra.append(timed(os.path.join(mnt, "big"), os.O_WRONLY | os.O_APPEND, lambda fd: os.write(fd, line)))
    rp.append(timed(os.path.join(plain, "big"), os.O_WRONLY | os.O_APPEND, lambda fd: os.write(fd, line)))
    t0 = time.perf_counter()
    run("sync", mnt)
    rc.append(time.perf_counter() - t0)
    run("gc", mnt)
print("  (a) append one line, open -> close: mount %.2f ms, backing %.3f ms (median of %d; each: %s ms)"
      % (1e3 * median(ra), 1e3 * median(rp), reps, ", ".join("%.2f" % (1e3 * x) for x in ra)))
print("      commit after the close (ulpfs sync): median %.2f s (each: %s s)"
      % (median(rc), ", ".join("%.2f" % x for x in rc)), flush=True)

patch = os.urandom(4096)
size = os.stat(os.path.join(plain, "big")).st_size
pa, pp, pc, ps, pg = [], [], [], [], []
for r in range(reps):
    off = size // 2 + 4096 * r
    before = physical()
    pa.append(timed(os.path.join(mnt, "big"), os.O_RDWR, lambda fd: os.pwrite(fd, patch, off)))
    pp.append(timed(os.path.join(plain, "big"), os.O_RDWR, lambda fd: os.pwrite(fd, patch, off)))
    t0 = time.perf_counter()
    run("sync", mnt)
    pc.append(time.perf_counter() - t0)
    ps.append(newest_stored("big"))
    run("gc", mnt)
    pg.append(physical() - before)
print("  (b) patch 4 KiB in the middle, open -> close: mount %.2f ms, backing %.3f ms (median of %d)"
      % (1e3 * median(pa), 1e3 * median(pp), reps))
print("      commit (ulpfs sync): median %.2f s (each: %s s)" % (median(pc), ", ".join("%.2f" % x for x in pc)))
print("      new version stored right after its commit: median %d bytes; store growth once the"
      " previous version is coded against it: median %d bytes (each: %s)"
      % (median(ps), median(pg), ", ".join(str(x) for x in pg)))
a, b = (subprocess.run(["sha256sum", os.path.join(d, "big")], capture_output=True, text=True).stdout.split()[0]
        for d in (mnt, plain))
if a != b:
    print("  FAIL: the file differs from the backing filesystem's copy")
    sys.exit(1)
print("  content: the same bytes as the backing filesystem's copy")
PY
fs_umount "$MNT"
fs_finish
