#!/usr/bin/env bash
# bench/run.sh - the codec benchmark on a real training trajectory.
#
#   bench/run.sh [--quick] [--traj DIR] [--threads N] [--reps R] [--cpu-time]
#
# Trains the small GPT of bench/make_trajectory.py (unless --traj points at
# an existing trajectory: make_trajectory.py's step-N/ or examples/train.py's
# checkpoint-N/ directories), then runs `ulpfs bench` over every file with
# zstd -3, zstd -19 and the byte-grouped baseline measured in the same run,
# and finally measures the peak anonymous memory of `ulpfs pack` on a 1 GiB
# file (memory beyond the mmapped input).  --cpu-time passes bench's
# --cpu-time on: one-thread speeds from CPU time, for a shared machine.
#
# ULPFS=path/to/ulpfs selects the binary (default: _build/ulpfs, then ./ulpfs).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(cd "$here/.." && pwd)
quick=0 traj="" threads=2 reps=3 mem=1 cpu=()
while [ $# -gt 0 ]; do
	case $1 in
	--quick) quick=1 ;;
	--traj) traj=$2; shift ;;
	--threads) threads=$2; shift ;;
	--reps) reps=$2; shift ;;
	--no-memory) mem=0 ;;
	--cpu-time) cpu=(--cpu-time) ;;
	*) echo "usage: $0 [--quick] [--traj DIR] [--threads N] [--reps R] [--no-memory] [--cpu-time]" >&2; exit 2 ;;
	esac
	shift
done

. "$here/lib.sh"
ulpfs=$(bench_find_ulpfs "$top") || { echo "bench/run.sh: build ulpfs first (or set ULPFS)" >&2; exit 1; }

work=$(mktemp -d /tmp/ulpfs-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT

if [ -z "$traj" ]; then
	traj=$work/traj
	args=(--out "$traj")
	[ "$quick" = 1 ] && args+=(--quick)
	echo "== training the trajectory (bench/make_trajectory.py ${args[*]})"
	/usr/bin/python3 "$here/make_trajectory.py" "${args[@]}" >&2
fi

echo "== machine: $(bench_machine), $(date -u +%Y-%m-%d)"
mapfile -t files < <(bench_traj_files "$traj")
[ "${#files[@]}" -gt 0 ] || { echo "bench/run.sh: no files under $traj" >&2; exit 1; }
echo "== ulpfs bench --threads $threads --reps $reps ${cpu[*]} (${#files[@]} files)"
"$ulpfs" bench --threads "$threads" --reps "$reps" "${cpu[@]}" "${files[@]}"

[ "$mem" = 1 ] || exit 0
echo
echo "== memory: ulpfs pack of a 1 GiB bf16 safetensors file against its previous version"
/usr/bin/python3 - "$work" <<'PY'
import json, struct, sys
import numpy as np
out = sys.argv[1]
n = 512 << 20  # bf16 elements: 1 GiB
rng = np.random.default_rng(1)
w = (rng.standard_normal(n, dtype=np.float32) * 0.02)
def bf16(a):
    return (a.view(np.uint32) >> 16).astype(np.uint16)
for name, arr in (("v1", w), ("v2", w + rng.standard_normal(n, dtype=np.float32) * 1e-4)):
    hdr = json.dumps({"w": {"dtype": "BF16", "shape": [n], "data_offsets": [0, 2 * n]}}).encode()
    hdr += b" " * (-len(hdr) % 8)
    with open(f"{out}/{name}.safetensors", "wb") as f:
        f.write(struct.pack("<Q", len(hdr)) + hdr)
        bf16(arr).tofile(f)
PY
peak_anon() { # pid -> prints peak RssAnon (kB) while it runs
	local pid=$1 peak=0 v
	while kill -0 "$pid" 2>/dev/null; do
		v=$(awk '/^RssAnon:/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
		[ -n "$v" ] && [ "$v" -gt "$peak" ] && peak=$v
		sleep 0.02
	done
	echo "$peak"
}
for t in 1 "$threads"; do
	"$ulpfs" pack --threads "$t" --ref "$work/v1.safetensors" "$work/v2.safetensors" -o "$work/v2.ulp" &
	pid=$!
	peak=$(peak_anon $pid)
	wait $pid
	printf 'threads %-3s peak RssAnon %7.1f MiB   object %s bytes (input %s bytes)\n' "$t" \
		"$(echo "$peak / 1024" | bc -l)" "$(stat -c %s "$work/v2.ulp")" "$(stat -c %s "$work/v2.safetensors")"
done
"$ulpfs" unpack --ref "$work/v1.safetensors" "$work/v2.ulp" -o "$work/v2.back"
cmp "$work/v2.safetensors" "$work/v2.back" && echo "1 GiB round trip verified"
