#!/usr/bin/python3
"""fs_util.py - data generators and checkers shared by the ulpfs filesystem
tests (tests/fs_*.sh) and bench/fs_bench.sh.  Run with /usr/bin/python3
(numpy; torch only for the subcommands that need it).

Subcommands (each prints what it did or why it failed, exits non-zero on a
failure):

  drift OUT --n N --elems E [--seed S] [--scale X] [--dtype bf16|f16|f32]
      N safetensors files OUT.1 .. OUT.N (or OUT/v1/NAME .. OUT/vN/NAME when
      OUT is a directory; NAME from --name, default model.safetensors): one tensor set whose values drift by a few ULPs per
      version, as consecutive checkpoints do.
  bigsafetensors OUT --bytes B [--seed S] [--drift D]
      one bf16 safetensors file of about B bytes, written in 64 MiB pieces
      (prints its sha256); --drift D: the same weights (same seed) moved by
      about D relative, i.e. the next version of the file.
  trainer OUT --n N --elems E [--seed S]
      OUT/checkpoint-K/{model.safetensors, optimizer.pt, trainer_state.json}
      for K = 1..N (needs torch).
  safetensors-check FILE [REF] | FILE REF FILE REF...
      parse FILE's header, numpy.memmap every tensor, compare with REF's
      (or, for one FILE alone, only check that the offsets are sane).
  torch-check FILE REF [FILE REF]...
      torch.load both and compare every tensor exactly (needs torch).
"""

import argparse
import hashlib
import json
import os
import struct
import sys

import numpy as np

ST_DTYPES = {"BF16": np.uint16, "F16": np.float16, "F32": np.float32,
             "F64": np.float64, "I64": np.int64, "I32": np.int32,
             "U8": np.uint8, "I8": np.int8}


def bf16(a):
    """float32 array -> bfloat16 bit patterns (round to nearest even)."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    r = (u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    return r.astype(np.uint16)


def as_dtype(a, dt):
    if dt == "BF16":
        return bf16(a)
    if dt == "F16":
        return a.astype(np.float16)
    return a.astype(np.float32)


def st_header(tensors):
    """tensors: list of (name, dtype, shape, nbytes) in file order."""
    header, off = {"__metadata__": {"format": "pt"}}, 0
    for name, dt, shape, nb in tensors:
        header[name] = {"dtype": dt, "shape": list(shape),
                        "data_offsets": [off, off + nb]}
        off += nb
    hj = json.dumps(header, separators=(",", ":")).encode()
    hj += b" " * ((-len(hj)) % 8)
    return struct.pack("<Q", len(hj)) + hj


def write_safetensors(path, arrays):
    """arrays: {name: (dtype_str, ndarray of the stored representation)}."""
    names = sorted(arrays)
    hdr = st_header([(n, arrays[n][0], arrays[n][1].shape,
                      arrays[n][1].nbytes) for n in names])
    with open(path, "wb") as f:
        f.write(hdr)
        for n in names:
            f.write(np.ascontiguousarray(arrays[n][1]).tobytes())


def parse_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        hdr = json.loads(f.read(n))
    hdr.pop("__metadata__", None)
    return hdr, 8 + n


class Drift:
    """A set of weight tensors that moves a little at every step (Adam-like
    steps of about `scale` relative size, on a random subset)."""

    def __init__(self, elems, seed=1, scale=2e-3):
        self.rng = np.random.default_rng(seed)
        # a few tensors of different sizes, like a small model
        sizes = [elems // 2, elems // 4, elems // 8]
        sizes.append(elems - sum(sizes))
        self.w = {"layer.%d.weight" % i: (self.rng.standard_normal(s, dtype=np.float32) * 0.02)
                  for i, s in enumerate(sizes)}
        self.scale = scale

    def step(self):
        for k, w in self.w.items():
            upd = self.rng.standard_normal(w.size, dtype=np.float32) * np.float32(self.scale)
            mask = self.rng.random(w.size, dtype=np.float32) < 0.7
            w += np.where(mask, upd * np.abs(w), np.float32(0))

    def arrays(self, dt):
        return {k: (dt, as_dtype(w, dt)) for k, w in self.w.items()}


def cmd_drift(a):
    d = Drift(a.elems, a.seed, a.scale)
    dt = a.dtype.upper()
    for i in range(1, a.n + 1):
        if i > 1:
            d.step()
        if os.path.isdir(a.out):
            os.makedirs(os.path.join(a.out, "v%d" % i), exist_ok=True)
            p = os.path.join(a.out, "v%d" % i, a.name)
        else:
            p = "%s.%d" % (a.out, i)
        write_safetensors(p, d.arrays(dt))
    return 0


def cmd_bigsafetensors(a):
    n = a.bytes // 2
    piece = 32 << 20  # elements per 64 MiB piece
    rng = np.random.default_rng(a.seed)
    rng2 = np.random.default_rng(a.seed + 7777)
    hdr = st_header([("w", "BF16", [n], 2 * n)])
    h = hashlib.sha256()
    with open(a.out, "wb") as f:
        f.write(hdr)
        h.update(hdr)
        done = 0
        while done < n:
            k = min(piece, n - done)
            w = rng.standard_normal(k, dtype=np.float32) * np.float32(0.02)
            if a.drift:  # the same weights, moved by about drift (relative)
                w += rng2.standard_normal(k, dtype=np.float32) * np.float32(a.drift) * np.abs(w)
            b = bf16(w).tobytes()
            f.write(b)
            h.update(b)
            done += k
    print(h.hexdigest())
    return 0


def cmd_trainer(a):
    import torch
    d = Drift(a.elems, a.seed)
    rng = np.random.default_rng(a.seed + 1000)
    m = np.zeros(a.elems // 2, dtype=np.float32)
    v = np.zeros(a.elems // 2, dtype=np.float32)
    for k in range(1, a.n + 1):
        d.step()
        g = rng.standard_normal(m.size, dtype=np.float32) * np.float32(1e-3)
        m = 0.9 * m + 0.1 * g
        v = 0.95 * v + 0.05 * g * g
        out = os.path.join(a.out, "checkpoint-%d" % k)
        os.makedirs(out)
        write_safetensors(os.path.join(out, "model.safetensors"), d.arrays("BF16"))
        torch.save({"state": {0: {"step": torch.tensor(float(k)),
                                  "exp_avg": torch.from_numpy(m.copy()),
                                  "exp_avg_sq": torch.from_numpy(v.copy())}},
                    "param_groups": [{"lr": 1e-4, "betas": (0.9, 0.999),
                                      "eps": 1e-8, "weight_decay": 0.0,
                                      "params": [0]}]},
                   os.path.join(out, "optimizer.pt"))
        with open(os.path.join(out, "trainer_state.json"), "w") as f:
            json.dump({"global_step": k, "epoch": k / 8.0,
                       "log_history": [{"step": i, "loss": 3.0 / i}
                                       for i in range(1, k + 1)]}, f, indent=2)
    return 0


def pairs(a):
    if len(a.files) == 1:
        return [(a.files[0], None)]
    if len(a.files) % 2:
        raise SystemExit("give FILE REF pairs")
    return list(zip(a.files[0::2], a.files[1::2]))


def cmd_safetensors_check(a):
    rc = 0
    for f, r in pairs(a):
        a.file, a.ref = f, r
        try:
            rc |= safetensors_check(a)
        except Exception as e:
            print("%s: parse/read failed: %r" % (f, e))
            rc = 1
    return rc


def safetensors_check(a):
    hdr, start = parse_safetensors(a.file)
    size = os.path.getsize(a.file)
    ref = None
    if a.ref:
        rhdr, rstart = parse_safetensors(a.ref)
        if rhdr != hdr:
            print("%s: header differs from %s" % (a.file, a.ref))
            return 1
    ntens = 0
    for name, info in hdr.items():
        b, e = info["data_offsets"]
        dt = ST_DTYPES.get(info["dtype"], np.uint8)
        cnt = (e - b) // np.dtype(dt).itemsize
        if start + e > size:
            print("%s: tensor %s past the end of the file" % (a.file, name))
            return 1
        if cnt == 0:
            continue
        mm = np.memmap(a.file, dtype=dt, mode="r", offset=start + b, shape=(cnt,))
        if a.ref:
            rm = np.memmap(a.ref, dtype=dt, mode="r", offset=rstart + b, shape=(cnt,))
            if not np.array_equal(mm.view(np.uint8), rm.view(np.uint8)):
                print("%s: tensor %s differs from %s" % (a.file, name, a.ref))
                return 1
            del rm
        else:
            np.asarray(mm).sum()  # touch every page
        del mm
        ntens += 1
    print("%s: %d tensors ok" % (a.file, ntens))
    return 0


def cmd_torch_check(a):
    rc = 0
    for f, r in pairs(a):
        a.file, a.ref = f, r
        try:
            rc |= torch_check(a)
        except Exception as e:  # a load failure is a check failure
            print("%s: torch.load failed: %r" % (f, e))
            rc = 1
    return rc


def torch_check(a):
    import torch

    def flat(x, pre=""):
        if isinstance(x, torch.Tensor):
            yield pre, x
        elif isinstance(x, dict):
            for k in x:
                yield from flat(x[k], "%s/%s" % (pre, k))
        elif isinstance(x, (list, tuple)):
            for i, v in enumerate(x):
                yield from flat(v, "%s/%d" % (pre, i))
        else:
            yield pre, x

    def tbytes(t):
        t = t.detach().contiguous()
        if t.dtype == torch.bfloat16:
            t = t.view(torch.int16)
        return t.numpy().tobytes()

    got = dict(flat(torch.load(a.file, map_location="cpu")))
    exp = dict(flat(torch.load(a.ref, map_location="cpu")))
    if got.keys() != exp.keys():
        print("%s: keys differ from %s" % (a.file, a.ref))
        return 1
    nt = 0
    for k, e in exp.items():
        g = got[k]
        if isinstance(e, torch.Tensor):
            if (not isinstance(g, torch.Tensor) or g.dtype != e.dtype or g.shape != e.shape
                    or tbytes(g) != tbytes(e)):
                print("%s: tensor %s differs" % (a.file, k))
                return 1
            nt += 1
        elif g != e:
            print("%s: %s differs: %r != %r" % (a.file, k, g, e))
            return 1
    print("%s: torch.load ok, %d tensors equal" % (a.file, nt))
    return 0


def main():
    p = argparse.ArgumentParser()
    sp = p.add_subparsers(dest="cmd", required=True)
    s = sp.add_parser("drift")
    s.add_argument("out")
    s.add_argument("--n", type=int, default=2)
    s.add_argument("--elems", type=int, default=1 << 20)
    s.add_argument("--seed", type=int, default=1)
    s.add_argument("--scale", type=float, default=2e-3)
    s.add_argument("--dtype", default="bf16")
    s.add_argument("--name", default="model.safetensors")
    s = sp.add_parser("bigsafetensors")
    s.add_argument("out")
    s.add_argument("--bytes", type=int, required=True)
    s.add_argument("--seed", type=int, default=1)
    s.add_argument("--drift", type=float, default=0.0)
    s = sp.add_parser("trainer")
    s.add_argument("out")
    s.add_argument("--n", type=int, default=8)
    s.add_argument("--elems", type=int, default=1 << 21)
    s.add_argument("--seed", type=int, default=1)
    s = sp.add_parser("safetensors-check")
    s.add_argument("files", nargs="+")
    s = sp.add_parser("torch-check")
    s.add_argument("files", nargs="+")
    a = p.parse_args()
    f = {"drift": cmd_drift, "bigsafetensors": cmd_bigsafetensors,
         "trainer": cmd_trainer, "safetensors-check": cmd_safetensors_check,
         "torch-check": cmd_torch_check}[a.cmd]
    try:
        return f(a)
    except OSError as e:
        print("fs_util %s: %s" % (a.cmd, e))
        return 1


if __name__ == "__main__":
    sys.exit(main())
