#!/usr/bin/env bash
# bench/baseline_lane_bench.sh - what `ulpfs stats --zstd19` costs a
# commit on a mounted store (the baselines run in the low lane of the
# mount's pool, issue 10):
#
#   bench/baseline_lane_bench.sh [--mib N] [--reps R] [--encoders E]
#
# Stores N MiB (default 96) of float32 noise in 4 files for the zstd -19
# baselines to compress, then times R (default 5) commits of a 16 MiB file
# (its close -> "ulpfs sync" returns) with the daemon idle, and R more
# while `stats --zstd19` runs in the daemon; medians, same run, same
# mount with encoders=E (default 1).  Needs root and FUSE, and about
# 2 x N MiB free under TMPDIR (default /tmp).  ULPFS=path/to/ulpfs
# (default: _build/ulpfs, then ./ulpfs).
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
FS_TEST=baseline_lane_bench
. "$(dirname "${BASH_SOURCE[0]}")/../tests/fs_lib.sh"
. "$FS_SRCDIR/bench/lib.sh"

mib=96 reps=5 enc=1
while [ $# -gt 0 ]; do
	case $1 in
	--mib) mib=$2; shift ;;
	--reps) reps=$2; shift ;;
	--encoders) enc=$2; shift ;;
	*) die "usage: bench/baseline_lane_bench.sh [--mib N] [--reps R] [--encoders E]" ;;
	esac
	shift
done
fs_init
STORE=$WORK/store
MNT=$WORK/mnt
say "machine: $(bench_machine)"
fs_mount "$STORE" "$MNT" "encoders=$enc"

"$PY" - "$MNT" "$STORE" "$ULPFS" "$mib" "$reps" <<'PY' || bad "the benchmark failed"
import os, random, subprocess, sys, time

mnt, store, ulpfs, mib, reps = sys.argv[1:4] + [int(x) for x in sys.argv[4:6]]


def run(*args):
    return subprocess.run([ulpfs] + list(args), check=True, capture_output=True,
                          text=True).stdout


def median(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def noise(nbytes, seed):
    # float32 near 1.0 with 16 random low bits: zstd -19 halves it, slowly
    r = random.Random(seed)
    b = r.randbytes(nbytes // 2)
    out = bytearray(nbytes)
    out[0::4] = b[0::2]
    out[1::4] = b[1::2]
    out[2::4] = b"\x80" * (nbytes // 4)
    out[3::4] = b"\x3f" * (nbytes // 4)
    return bytes(out)


for i in range(4):
    with open(os.path.join(mnt, "base%d.bin" % i), "wb") as f:
        f.write(noise(mib << 18, i))
run("sync", mnt)
run("gc", mnt)
probe = noise(16 << 20, 99)


def commit(k):
    t0 = time.perf_counter()
    with open(os.path.join(mnt, "probe.bin"), "wb") as f:
        f.write(probe[k:] + probe[:k])
    run("sync", mnt)
    return time.perf_counter() - t0


idle = [commit(k) for k in range(reps)]
t0 = time.perf_counter()
z = subprocess.Popen([ulpfs, "stats", "--zstd19", "--store", store],
                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
time.sleep(1)  # let the baselines start: this measures commits beside them
busy = []
for k in range(reps):
    busy.append(commit(100 + k))
    if z.poll() is not None:
        break
running = z.poll() is None
err = z.communicate()[1]
if z.returncode != 0:
    print("  FAIL: stats --zstd19 exited %d: %s" % (z.returncode, err))
    sys.exit(1)
print("  commit of 16 MiB, idle: median %.3f s (each: %s)"
      % (median(idle), ", ".join("%.3f" % x for x in idle)))
print("  commit of 16 MiB, during stats --zstd19: median %.3f s (each: %s)%s"
      % (median(busy), ", ".join("%.3f" % x for x in busy),
         "" if running else " (stats ended before the last)"))
print("  ratio busy/idle: %.2f; stats --zstd19 of %d MiB took %.1f s"
      % (median(busy) / median(idle), mib, time.perf_counter() - t0))
PY
fs_umount "$MNT"
fs_finish
