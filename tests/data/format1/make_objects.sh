#!/usr/bin/env bash
# Regenerate the format-1 objects of tests/test_container.c (old_format_*).
#
#   tests/data/format1/make_objects.sh ULPFS_OF_FORMAT_1 [OUTDIR]
#
# (OUTDIR, default this directory: tests/data/format2 makes its objects
# from the same inputs with this script.)
#
# Run once with a binary that writes object format 1 (the codec before the
# 32-lane rANS of format 2); the objects are committed and the tests never
# run this script.  The inputs are deterministic (numpy, seed 7), so the
# expected XXH3-128 of every decoded file is fixed in the test.
set -euo pipefail
ulpfs=$1
here=${2:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 - "$work" <<'PY'
import json, struct, sys
import numpy as np

def bf16(x):
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7fff + ((u >> 16) & 1)) >> 16).astype(np.uint16)

def save(path, tensors):
    hdr, off, blobs = {}, 0, []
    for name, (dt, shape, raw) in sorted(tensors.items()):
        hdr[name] = {"dtype": dt, "shape": shape,
                     "data_offsets": [off, off + len(raw)]}
        off += len(raw)
        blobs.append(raw)
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))

rng = np.random.default_rng(7)
w = rng.standard_normal(65536).astype(np.float32) * 0.02
master = rng.standard_normal(8192).astype(np.float32) * 0.05
half = rng.standard_normal(4096).astype(np.float32) * 0.1
for v in range(2):
    if v:
        # an Adam-sized step: most bf16 elements move by a few ULPs or not
        w = w - 2e-4 * np.clip(rng.standard_normal(w.size), -3, 3).astype(np.float32)
        master = master * np.float32(1 - 1e-4) - np.float32(3e-5) * rng.standard_normal(master.size).astype(np.float32)
        half = half + np.float32(1e-3) * rng.standard_normal(half.size).astype(np.float32)
    m = rng.standard_normal(4096).astype(np.float32) * 1e-3  # decorrelates: standalone
    save(f"{sys.argv[1]}/v{v}.safetensors", {
        "w": ("BF16", [256, 256], bf16(w).tobytes()),
        "master": ("F32", [8192], master.tobytes()),
        "half": ("F16", [4096], half.astype(np.float16).tobytes()),
        "m": ("F32", [4096], m.tobytes()),
        "step": ("I64", [1], np.array([v], dtype=np.int64).tobytes()),
    })
PY
"$ulpfs" pack --threads 1 "$work/v0.safetensors" -o "$here/v0.ulp"
"$ulpfs" pack --threads 1 --ref "$work/v0.safetensors" "$work/v1.safetensors" -o "$here/v1.ulp"
"$ulpfs" pack --threads 1 --chunk-size 16K --ref "$work/v0.safetensors" "$work/v1.safetensors" -o "$here/v1-16k.ulp"
