#!/usr/bin/python3
"""bench/dtype_variants.py - the same trained weights in other dtypes.

    /usr/bin/python3 bench/dtype_variants.py TRAJ OUT

For every TRAJ/checkpoint-N/optimizer.pt written by examples/train.py, reads
the fp32 master weights it carries ("fp32_master_weights") and writes them
as OUT/checkpoint-N/model-f32.safetensors and model-f16.safetensors (with
bench/make_trajectory.py's writer: tensors in name order, as
model.safetensors).  The bf16 model.safetensors of the run is the same
weights rounded to bf16, so the three files of a checkpoint differ only in
dtype, and bench/report.sh can show the codec on f16 and f32 without a
second training run.

Run with /usr/bin/python3 (the interpreter that has torch).
"""

import glob
import os
import re
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_trajectory as mt  # noqa: E402

import torch  # noqa: E402


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.split("\n\n")[1])
    traj, out = sys.argv[1], sys.argv[2]
    n = 0
    for p in glob.glob(os.path.join(traj, "checkpoint-*", "optimizer.pt")):
        ck = os.path.basename(os.path.dirname(p))
        if not re.fullmatch(r"checkpoint-\d+", ck):
            continue
        # our own file, written by examples/train.py: not an untrusted pickle
        osd = torch.load(p, map_location="cpu", weights_only=False)
        w = osd.get("fp32_master_weights")
        if not w:
            sys.exit("%s: no fp32_master_weights (not written by examples/train.py?)" % p)
        d = os.path.join(out, ck)
        os.makedirs(d, exist_ok=True)
        mt.write_safetensors(os.path.join(d, "model-f32.safetensors"), w, "F32")
        mt.write_safetensors(os.path.join(d, "model-f16.safetensors"), w, "F16")
        n += 1
    if not n:
        sys.exit("no checkpoint-N/optimizer.pt under %s" % traj)
    print("%d checkpoints -> f32 and f16 safetensors under %s" % (n, out))


if __name__ == "__main__":
    main()
