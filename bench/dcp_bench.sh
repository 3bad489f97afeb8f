#!/usr/bin/env bash
# bench/dcp_bench.sh - store size of PyTorch DCP checkpoints (issue 33).
#
# The checkpoints of a make_trajectory.py run (10 by default) written twice,
# each into its own fresh store through a mount:
#   dcp: as DCP lays them out (bench/dcp_layout.py: RANKS ranks x THREADS
#        files of torch.save archives back to back, plus .metadata);
#   st:  the same tensors as checkpoint-N/model.safetensors (the fp32
#        weights) + checkpoint-N/optimizer.pt (AdamW's moments and steps).
# Reported: the stored bytes of the .distcp versions against those of the
# model.safetensors + optimizer.pt versions, and against zstd -19 and
# zstd -3 of the same .distcp files, all from the same run.  Each
# model.safetensors is committed before its optimizer.pt is written, so that
# the optimizer is coded given it every time (without, whether it is
# depends on timing: the baseline moved by 2% between runs).
# ULPFS_BEFORE=path/to/ulpfs adds the dcp row for another build (e.g. the
# one before DCP awareness) in the same run.
#
#   bash bench/dcp_bench.sh [--traj DIR] [--ranks N] [--threads N]
#
# Needs root, FUSE, /usr/bin/python3 with torch, zstd.
# Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
set -euo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
. "$TOP/bench/lib.sh"
PY=/usr/bin/python3
TRAJ= RANKS=2 THREADS=2
while [ $# -gt 0 ]; do
	case $1 in
	--traj) TRAJ=$2; shift 2 ;;
	--ranks) RANKS=$2; shift 2 ;;
	--threads) THREADS=$2; shift 2 ;;
	*) echo "usage: $0 [--traj DIR] [--ranks N] [--threads N]" >&2; exit 2 ;;
	esac
done
ULPFS=$(bench_find_ulpfs "$TOP") || { echo "build ulpfs first (or set ULPFS)" >&2; exit 1; }
W=$(mktemp -d "${TMPDIR:-/tmp}/dcp_bench.XXXXXX")
MOUNTS=()
cleanup() {
	local m
	for m in "${MOUNTS[@]}"; do
		findmnt -n -M "$m" >/dev/null 2>&1 && "$ULPFS" umount "$m" >/dev/null 2>&1
	done
	rm -rf "$W"
}
trap cleanup EXIT

if [ -z "$TRAJ" ]; then
	TRAJ=$W/traj
	echo "training: make_trajectory.py --quick --steps 100 --every 10" >&2
	"$PY" "$TOP/bench/make_trajectory.py" --out "$TRAJ" --quick --steps 100 \
		--every 10 --threads 2 >"$W/traj.log" 2>&1
fi
nck=$(find "$TRAJ" -maxdepth 1 -name 'step-*' -type d | wc -l)

# mount BIN STORE MNT
mount_store() {
	"$1" mount "$2" "$3" >/dev/null
	MOUNTS+=("$3")
}

# stored bytes of the live versions under MNT/run whose path matches RE
stored() {
	"$2" log --json "$1/run" | "$PY" -c 'import json, re, sys
print(sum(v["stored"] for v in json.load(sys.stdin)
          if v["state"] == "live" and re.search(sys.argv[1], v["path"])))' "$3"
}

# dcp BIN NAME: write the DCP checkpoints through a mount of BIN; prints
# the stored bytes of the .distcp versions
dcp_run() {
	mkdir -p "$W/$2.mnt"
	mount_store "$1" "$W/$2.store" "$W/$2.mnt"
	"$PY" "$TOP/bench/dcp_layout.py" --traj "$TRAJ" --root "$W/$2.mnt/run" \
		--ranks "$RANKS" --threads "$THREADS"
	"$1" sync "$W/$2.mnt" && "$1" gc "$W/$2.mnt" >/dev/null
	stored "$W/$2.mnt" "$1" '\.distcp$'
	"$1" umount "$W/$2.mnt" >/dev/null
}

echo "writing $nck DCP checkpoints ($RANKS ranks x $THREADS files)" >&2
dcp=$(dcp_run "$ULPFS" dcp)
before=
[ -n "${ULPFS_BEFORE:-}" ] && before=$(dcp_run "$ULPFS_BEFORE" before)

echo "writing the same tensors as model.safetensors + optimizer.pt" >&2
mkdir -p "$W/st.mnt"
mount_store "$ULPFS" "$W/st.store" "$W/st.mnt"
for d in $(ls "$TRAJ" | grep '^step-' | sort); do
	c=$W/st.mnt/run/checkpoint-$((10#${d#step-}))
	mkdir -p "$c"
	cp "$TRAJ/$d/model-f32.safetensors" "$c/model.safetensors"
	# committed before the optimizer is: its side, every time
	"$ULPFS" sync "$W/st.mnt"
	cp "$TRAJ/$d/optimizer.pt" "$c/optimizer.pt"
done
"$ULPFS" sync "$W/st.mnt" && "$ULPFS" gc "$W/st.mnt" >/dev/null
st=$(stored "$W/st.mnt" "$ULPFS" '/(model\.safetensors|optimizer\.pt)$')
"$ULPFS" umount "$W/st.mnt" >/dev/null

echo "zstd -19 and -3 of the .distcp files" >&2
"$PY" "$TOP/bench/dcp_layout.py" --traj "$TRAJ" --root "$W/plain" \
	--ranks "$RANKS" --threads "$THREADS"
logical=0 z19=0 z3=0
while read -r f; do
	logical=$((logical + $(stat -c %s "$f")))
	z19=$((z19 + $(zstd -19 -q -c "$f" | wc -c)))
	z3=$((z3 + $(zstd -3 -q -c "$f" | wc -c)))
done < <(find "$W/plain" -name '*.distcp')

r() { awk "BEGIN { printf \"%.3f\", $1 / $2 }"; }
echo
echo "## DCP checkpoints: $nck, $RANKS ranks x $THREADS files ($(bench_machine))"
echo
echo "| stored | bytes | vs safetensors+optimizer.pt | vs zstd -19 | vs zstd -3 |"
echo "| --- | ---: | ---: | ---: | ---: |"
echo "| .distcp files, logical | $logical | | | |"
echo "| .distcp in ulpfs | $dcp | $(r "$dcp" "$st") | $(r "$dcp" "$z19") | $(r "$dcp" "$z3") |"
[ -n "$before" ] &&
	echo "| .distcp in ulpfs (ULPFS_BEFORE) | $before | $(r "$before" "$st") | $(r "$before" "$z19") | $(r "$before" "$z3") |"
echo "| model.safetensors + optimizer.pt in ulpfs | $st | 1.000 | | |"
echo "| zstd -19 of the .distcp files | $z19 | $(r "$z19" "$st") | 1.000 | |"
echo "| zstd -3 of the .distcp files | $z3 | $(r "$z3" "$st") | | 1.000 |"
