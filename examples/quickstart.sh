#!/usr/bin/env bash
# examples/quickstart.sh - the main job, end to end, on a fresh Debian 12
# machine as root: install the dependencies, build ulpfs, train a small GPT
# for a few minutes writing a real checkpoint trajectory, and run the codec
# over it with every round trip verified, against zstd -3, zstd -19 and a
# byte-grouped (ZipNN-like) coder measured in the same run.
#
#   bash examples/quickstart.sh [--quick]
#
# --quick trains a smaller model (seconds instead of about a minute).
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$top"
quick=()
[ "${1:-}" = --quick ] && quick=(--quick)

if [ "${ULPFS_NO_APT:-0}" != 1 ]; then
	echo "==> installing build and runtime dependencies (apt-get)"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq autoconf automake pkg-config make gcc libc6-dev \
		libfuse3-dev fuse3 libzstd-dev zstd libsqlite3-dev libxxhash-dev \
		libjansson-dev libcriterion-dev python3-torch python3-numpy bc >/dev/null
fi

echo "==> building ulpfs"
autoreconf -fi >/dev/null
mkdir -p _build
(cd _build && { [ -f Makefile ] || ../configure -q; } && make -j"$(nproc)" -s ulpfs)

work=$(mktemp -d /tmp/ulpfs-quickstart.XXXXXX)
trap 'rm -rf "$work"' EXIT
echo "==> training a small byte-level GPT with AdamW, a checkpoint every 20 steps"
/usr/bin/python3 bench/make_trajectory.py "${quick[@]}" --out "$work/run"

echo "==> ulpfs bench: each file coded against the previous checkpoint's"
ULPFS=_build/ulpfs bash bench/run.sh --traj "$work/run" --reps 1 --no-memory

echo "==> pack/unpack round trip of the last checkpoint's optimizer state"
last=$(ls -d "$work"/run/step-* | tail -n 1)
prev=$(ls -d "$work"/run/step-* | tail -n 2 | head -n 1)
_build/ulpfs pack --ref "$prev/optimizer.pt" "$last/optimizer.pt" -o "$work/optimizer.ulp"
_build/ulpfs unpack --ref "$prev/optimizer.pt" "$work/optimizer.ulp" -o "$work/optimizer.back"
cmp "$last/optimizer.pt" "$work/optimizer.back"
/usr/bin/python3 -c "import torch,sys; s=torch.load(sys.argv[1]); print('torch.load of the unpacked optimizer.pt:', len(s['state']), 'parameter states')" "$work/optimizer.back"
printf '%s -> %s bytes\n' "$(stat -c %s "$last/optimizer.pt")" "$(stat -c %s "$work/optimizer.ulp")"
echo "==> done: every round trip above was verified byte for byte"
