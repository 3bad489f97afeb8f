#!/usr/bin/env bash
# examples/quickstart.sh - the main job, end to end, on a fresh Debian 12
# machine as root: install the dependencies, build ulpfs, mount a store,
# train a small GPT writing its checkpoint trajectory into the mount, show
# `ulpfs log` and `ulpfs stats`, read every checkpoint back (torch.load,
# safetensors through numpy, sha256sum after a remount), and compare the
# codec with zstd -3, zstd -19 and a byte-grouped coder on the same files.
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
ulpfs=$top/_build/ulpfs

work=$(mktemp -d /tmp/ulpfs-quickstart.XXXXXX)
store=$work/store mnt=$work/mnt plain=$work/plain
mkdir -p "$mnt" "$plain"
cleanup() {
	if mountpoint -q "$mnt" 2>/dev/null; then
		"$ulpfs" umount "$mnt" || fusermount3 -uz "$mnt" || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT

echo "==> mounting a new store: $store on $mnt"
"$ulpfs" mount "$store" "$mnt"

echo "==> training a small byte-level GPT with AdamW, writing checkpoints into the mount"
# --check reads every checkpoint back through the mount right after
# writing it and compares it bit for bit with the live model and optimizer
/usr/bin/python3 bench/make_trajectory.py "${quick[@]}" --check --out "$mnt/run"

echo "==> copying the trajectory out of the mount (a plain reference copy)"
cp -a "$mnt/run" "$plain/"

last=$(cd "$mnt/run" && ls -d step-* | tail -n 1)
echo "==> ulpfs log --chain: the last bf16 checkpoint's reference lineage"
"$ulpfs" sync "$mnt"
"$ulpfs" log --chain "$mnt/run/$last/model-bf16.safetensors"
echo "==> ulpfs stats"
"$ulpfs" stats "$mnt"

echo "==> unmounting (waits until every checkpoint is encoded and committed)"
"$ulpfs" umount "$mnt"
raw=$(du -sb "$plain/run" | cut -f1)
stored=$(du -scb "$store/objects" "$store/catalog.db" | tail -n 1 | cut -f1)
printf 'raw checkpoints: %s bytes; store (objects + catalog): %s bytes (%.1f%%)\n' \
	"$raw" "$stored" "$(echo "100 * $stored / $raw" | bc -l)"
echo "(the store also keeps a 4 MiB reserve file so deletions succeed on a full disk)"

echo "==> remounting and reading every checkpoint back"
"$ulpfs" mount "$store" "$mnt"
(cd "$plain/run" && find . -type f -print0 | sort -z | xargs -0 sha256sum) >"$work/sums"
(cd "$mnt/run" && sha256sum --quiet -c "$work/sums")
echo "sha256sum: every file identical to what training wrote"
/usr/bin/python3 - "$mnt/run" <<'PY'
import glob, json, os, struct, sys
import numpy as np, torch
root = sys.argv[1]
n = 0
for p in sorted(glob.glob(os.path.join(root, "step-*", "*"))):
    if p.endswith((".pt", ".bin")):
        torch.load(p)
        n += 1
    elif p.endswith(".safetensors"):
        # the mmap path a safetensors loader takes
        m = np.memmap(p, dtype=np.uint8, mode="r")
        hlen = struct.unpack("<Q", m[:8].tobytes())[0]
        hdr = json.loads(m[8:8 + hlen].tobytes())
        for k, v in hdr.items():
            if k != "__metadata__":
                b, e = v["data_offsets"]
                assert e - b == np.prod(v["shape"], dtype=np.int64) * {"BF16": 2, "F16": 2, "F32": 4}[v["dtype"]]
                m[8 + hlen + b:8 + hlen + e].sum()
        n += 1
print(f"torch.load / safetensors mmap: {n} files loaded through the mount")
PY
"$ulpfs" umount "$mnt"

echo "==> the codec on the same files, against zstd and byte grouping (same run)"
ULPFS=$ulpfs bash bench/run.sh --traj "$plain/run" --reps 1 --no-memory
echo "==> done: every checkpoint was verified byte for byte"
