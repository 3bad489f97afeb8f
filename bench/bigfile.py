#!/usr/bin/python3
"""bench/bigfile.py - one large safetensors file and its next version.

    /usr/bin/python3 bench/bigfile.py [--mib N] A B OUT

A and B are two consecutive checkpoints of the same model, as safetensors
(model.safetensors of examples/train.py, model-bf16/-f32 of
bench/make_trajectory.py, model-f32/-f16 of bench/dtype_variants.py).
Writes OUT/v1/NAME and OUT/v2/NAME (NAME: A's base name), each holding the
tensors of A (of B for v2) repeated under the names "kNNNN.<name>" until
the file has at least N MiB (default 512) of tensor data.  v2 is then a
real next version of v1, tensor for tensor, in the same layout, and
"ulpfs bench OUT/v1/NAME OUT/v2/NAME" codes v1 standalone (a keyframe)
and v2 as a delta against it: what "within one large file, 2 threads
against 1" is measured on (bench/report.sh's scaling rows).

Needs only the standard library: the tensors' bytes are copied as they
are, never converted.
"""

import argparse
import json
import os
import sys


def read(path):
    with open(path, "rb") as f:
        raw = f.read()
    n = int.from_bytes(raw[:8], "little")
    if n > len(raw) - 8:
        sys.exit("%s: not a safetensors file" % path)
    head = json.loads(raw[8:8 + n])
    head.pop("__metadata__", None)
    base = 8 + n
    return {k: (v["dtype"], v["shape"], raw[base + v["data_offsets"][0]:base + v["data_offsets"][1]])
            for k, v in head.items()}


def write(path, tensors, copies):
    header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for c in range(copies):
        for name in sorted(tensors):
            dt, shape, b = tensors[name]
            header["k%04d.%s" % (c, name)] = {"dtype": dt, "shape": shape,
                                             "data_offsets": [off, off + len(b)]}
            off += len(b)
            blobs.append(b)
    hj = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hj += b" " * ((-len(hj)) % 8)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(len(hj).to_bytes(8, "little"))
        f.write(hj)
        for b in blobs:
            f.write(b)
    return off


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mib", type=int, default=512, help="tensor data per file (default 512)")
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("out")
    a = ap.parse_args()
    ta, tb = read(a.a), read(a.b)
    if {k: v[:2] for k, v in ta.items()} != {k: v[:2] for k, v in tb.items()}:
        sys.exit("%s and %s do not have the same tensors" % (a.a, a.b))
    per = sum(len(v[2]) for v in ta.values())
    if not per:
        sys.exit("%s: no tensor data" % a.a)
    copies = max(1, -(-a.mib * 2**20 // per))
    name = os.path.basename(a.a)
    for v, t in (("v1", ta), ("v2", tb)):
        n = write(os.path.join(a.out, v, name), t, copies)
    print("%s: %d copies of %d tensors, %.1f MiB of tensor data per version"
          % (os.path.join(a.out, "v{1,2}", name), copies, len(ta), n / 2**20))


if __name__ == "__main__":
    main()
