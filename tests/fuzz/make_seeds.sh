#!/usr/bin/env bash
# tests/fuzz/make_seeds.sh - regenerate the seeds of tests/fuzz/corpus
# that are made by programs (see tests/fuzz/README.md; the seeds are
# committed, the tests never run this):
#   object/         small real objects written by `ulpfs pack`: a
#                   safetensors checkpoint (bf16, fp16, fp32 and int64
#                   tensors) alone and as a delta against its previous
#                   version, a torch zip alone and as a delta, in chunks
#                   of 4 KiB
#   safetensors/    the two safetensors versions
#   rans/, float/   blocks and streams from the codec's encoders, and
#   catalog/        a new catalog of the current schema (make_seeds.c,
#                   built by make with the targets; the old schema's
#                   catalog is tests/data/store-v3's)
# The hand-written seeds (s3_xml/, ctl/, catalog_pointer/) and those
# copied from tests/data are left alone.
#
#   tests/fuzz/make_seeds.sh BUILDDIR     (after make check-fuzz-build)
#
# Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=$(cd "$1" && pwd)
corpus=$here/corpus
data=$here/../data
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

/usr/bin/python3 - "$work" <<'PY'
import json, struct, sys
import numpy as np

def save(path, tensors):
    hdr, off, blobs = {}, 0, []
    for name, (dt, arr) in sorted(tensors.items()):
        raw = arr.tobytes()
        hdr[name] = {"dtype": dt, "shape": list(arr.shape),
                     "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(hdr).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))

rng = np.random.default_rng(35)
w = rng.standard_normal(2048).astype(np.float32) * 0.02
def bf16(x):
    return (x.view(np.uint32) >> 16).astype(np.uint16)
v0 = {"a.weight": ("BF16", bf16(w)),
      "b.weight": ("F16", w[:1024].astype(np.float16)),
      "c.weight": ("F32", w[:1024]),
      "step": ("I64", np.arange(4, dtype=np.int64))}
save(sys.argv[1] + "/v0.safetensors", v0)
w1 = w - 1e-4 * rng.standard_normal(2048).astype(np.float32)
v1 = {"a.weight": ("BF16", bf16(w1)),
      "b.weight": ("F16", w1[:1024].astype(np.float16)),
      "c.weight": ("F32", w1[:1024]),
      "step": ("I64", np.arange(4, dtype=np.int64) + 1)}
save(sys.argv[1] + "/v1.safetensors", v1)
PY

ulpfs=$build/ulpfs
pack() { "$ulpfs" pack --threads 1 --chunk-size 4096 "$@"; }
mkdir -p "$corpus"/{object,safetensors,rans,float,catalog}
pack "$work/v0.safetensors" -o "$corpus/object/st-v0.ulp"
pack --ref "$work/v0.safetensors" "$work/v1.safetensors" \
	-o "$corpus/object/st-v1-ref.ulp"
pack "$data/tiny_state.pt" -o "$corpus/object/pt-state.ulp"
pack --ref "$data/tiny_state.pt" "$data/tiny_p5.pt" \
	-o "$corpus/object/pt-p5-ref.ulp"
cp "$work/v0.safetensors" "$work/v1.safetensors" "$corpus/safetensors/"
rm -f "$corpus"/rans/* "$corpus"/float/*
"$build/tests/fuzz/make_seeds" "$data/tiny_optim.pt" "$corpus"
# as small as SQLite makes it (pages of 512 bytes), as a published
# snapshot is (VACUUM INTO: no WAL)
/usr/bin/python3 - "$corpus/catalog/current-schema.db" <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("PRAGMA journal_mode=DELETE")
c.execute("PRAGMA page_size=512")
c.execute("VACUUM")
c.close()
PY
