#!/usr/bin/python3
"""bench/write_bench.py - the checkpoint writers of bench/write_bench.sh.

  write_bench.py make OUT MIB          torch.save a state dict of about MIB
                                       MiB (bf16 weights, fp32 moments) to OUT
  write_bench.py save KIND REPS MIB DIR[=PID]...
                                       build that state dict once, then REPS
                                       times save it into each DIR in turn
                                       (KIND torch: torch.save; safetensors:
                                       one header, then one write per tensor,
                                       as safetensors' writer does), fsync,
                                       and print "DIR SECONDS TICKS" per save
                                       (TICKS: CPU clock ticks process PID,
                                       the daemon serving DIR, spent on the
                                       save; 0 without PID); the file is
                                       removed after each save

The state dict is the same for a given MIB (seeded), so every target gets
the same bytes.
"""
import json
import os
import sys
import time

import torch


def state_dict(mib):
    g = torch.Generator().manual_seed(11)
    sd = {}
    # Half the bytes bf16 weights (2 bytes), half fp32 optimizer moments.
    per = 4096 * 4096  # elements of a fp32 tensor of 64 MiB
    n = max(1, mib // 128)
    for i in range(n):
        w = torch.randn(per * 2, generator=g) * 0.02
        sd["layer%d.weight" % i] = w.to(torch.bfloat16).reshape(8192, 4096)
        m = torch.randn(per, generator=g).abs() * 1e-6
        sd["layer%d.exp_avg_sq" % i] = m.reshape(4096, 4096)
    return sd


DT = {torch.bfloat16: "BF16", torch.float32: "F32"}


def save_safetensors(sd, path):
    hdr, off = {}, 0
    for k, t in sd.items():
        n = t.numel() * t.element_size()
        hdr[k] = {"dtype": DT[t.dtype], "shape": list(t.shape),
                  "data_offsets": [off, off + n]}
        off += n
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little"))
        f.write(h)
        for t in sd.values():
            f.write(t.contiguous().view(torch.uint8).numpy().data)
        f.flush()
        os.fsync(f.fileno())


def save_torch(sd, path):
    with open(path, "wb") as f:
        torch.save(sd, f)
        f.flush()
        os.fsync(f.fileno())


def ticks(pid):
    if not pid:
        return 0
    with open("/proc/%s/stat" % pid) as f:
        v = f.read().rsplit(")", 1)[1].split()
    return int(v[11]) + int(v[12])  # utime + stime


def main():
    if sys.argv[1] == "make":
        torch.save(state_dict(int(sys.argv[3])), sys.argv[2])
        return 0
    kind, reps, mib = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    sd = state_dict(mib)
    save = save_torch if kind == "torch" else save_safetensors
    name = "model.pt" if kind == "torch" else "model.safetensors"
    for _ in range(reps):
        for arg in sys.argv[5:]:
            d, _, pid = arg.partition("=")
            p = os.path.join(d, name)
            c0 = ticks(pid)
            t0 = time.perf_counter()
            save(sd, p)
            t = time.perf_counter() - t0
            c = ticks(pid) - c0
            os.unlink(p)  # the daemon's share of it is not counted
            print("%s %.6f %d" % (d, t, c), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
