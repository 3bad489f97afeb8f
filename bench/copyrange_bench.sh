#!/usr/bin/env bash
# bench/copyrange_bench.sh - what cp(1) of a large committed file into a
# new file within the mount costs (copy_file_range, issue 14), against the
# backing filesystem in the same run:
#
#   bench/copyrange_bench.sh [--mib N] [--reps R]
#
# For each of R (default 3) copies of a committed N MiB file (default
# 1024) of random bytes: cp's time through the mount and on the backing
# filesystem, the commit that follows (close -> "ulpfs sync" returns), the
# chunks decoded meanwhile (the store's counter) and the copy's stored
# bytes; medians.  Needs root and FUSE, and about 3 x N MiB free under
# TMPDIR (default /tmp).  ULPFS=path/to/ulpfs (default: _build/ulpfs, then
# ./ulpfs); with an ulpfs that does not serve copy_file_range this
# measures the kernel's fallback (reads and writes through the daemon).
# make check may run this with a POSIX sh: it needs bash.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
FS_TEST=copyrange_bench
. "$(dirname "${BASH_SOURCE[0]}")/../tests/fs_lib.sh"
. "$FS_SRCDIR/bench/lib.sh"

mib=1024 reps=3
while [ $# -gt 0 ]; do
	case $1 in
	--mib) mib=$2; shift ;;
	--reps) reps=$2; shift ;;
	*) die "usage: bench/copyrange_bench.sh [--mib N] [--reps R]" ;;
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


def decodes():
    return json.loads(run("stats", "--json", mnt))["cache"]["decodes"]


def newest_stored(name):
    out = json.loads(run("log", "--json", os.path.join(mnt, name)))
    vs = out["versions"] if isinstance(out, dict) else out
    return max(vs, key=lambda v: v["seq"])["stored"]


def median(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def cp(d, dst):
    t0 = time.perf_counter()
    subprocess.run(["cp", os.path.join(d, "big"), os.path.join(d, dst)], check=True)
    return time.perf_counter() - t0


t0 = time.perf_counter()
with open(os.path.join(mnt, "big"), "wb") as f, open(os.path.join(plain, "big"), "wb") as g:
    for i in range(mib):
        b = os.urandom(1 << 20)
        f.write(b)
        g.write(b)
run("sync", mnt)
run("gc", mnt)
print("  setup: %d MiB committed in %.1f s" % (mib, time.perf_counter() - t0), flush=True)

tm, tp, tc, dec, sto = [], [], [], [], []
for r in range(reps):
    d0 = decodes()
    tm.append(cp(mnt, "copy%d" % r))
    tp.append(cp(plain, "copy%d" % r))
    t0 = time.perf_counter()
    run("sync", mnt)
    tc.append(time.perf_counter() - t0)
    dec.append(decodes() - d0)
    sto.append(newest_stored("copy%d" % r))
    run("gc", mnt)
    os.unlink(os.path.join(plain, "copy%d" % r))
print("  cp of the committed file to a new file: mount %.3f s, backing %.3f s (median of %d; each: %s s)"
      % (median(tm), median(tp), reps, ", ".join("%.3f" % x for x in tm)))
print("  commit of the copy (ulpfs sync): median %.3f s (each: %s s)"
      % (median(tc), ", ".join("%.3f" % x for x in tc)))
print("  chunks decoded per copy and commit: median %d (each: %s); the copy stores median %d bytes"
      % (median(dec), ", ".join(str(x) for x in dec), median(sto)))
a, b = (subprocess.run(["sha256sum", os.path.join(d, "big" if d == plain else "copy0")],
                       capture_output=True, text=True).stdout.split()[0] for d in (mnt, plain))
if a != b:
    print("  FAIL: the copy differs from the source")
    sys.exit(1)
print("  content: the copy has the source's bytes")
PY
fs_umount "$MNT"
fs_finish
