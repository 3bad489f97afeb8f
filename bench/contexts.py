#!/usr/bin/python3
"""bench/contexts.py - what more context would save on bf16 deltas.

    /usr/bin/python3 bench/contexts.py TRAJ

TRAJ holds checkpoint-N/ directories of examples/train.py (model.safetensors
in bf16, optimizer.pt with the AdamW moments and the fp32 master weights).
For each pair of consecutive checkpoints, the bf16 weights of the later one
are modelled as the codec codes them given the earlier one: a symbol per
element (the difference on the ordered 16-bit axis, as its length k, sign
and top bit below the leading one) coded under the reference's exponent,
and k - 2 raw bits.  The cost is the empirical conditional entropy of the
symbols plus the raw bits plus 12 bits per (context, symbol) cell that
occurs in a tensor (the codec's tables), summed over every tensor.  The
same is then measured with each candidate context added, and once with all
of those from other versions and files and no table cost (an optimistic
bound: with that many contexts the empirical entropy overfits).

Every row is in bits per element, beside the baseline over the same tensors
(a row that needs the version two back covers one delta fewer).  The
baseline row's entropy column is the model's entropy (symbols + raw bits, no
tables).
"""

import os
import re
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bigfile  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

CELL_BITS = 12.0


def load_bf16(path):
    """The bf16 tensors of a safetensors file, as uint16, and their shapes."""
    tensors = bigfile.read(path)
    data = {k: np.frombuffer(b, dtype=np.uint16) for k, (dt, _, b) in tensors.items() if dt == "BF16"}
    return data, {k: shape for k, (_, shape, _) in tensors.items()}


def ordered(u):
    """bf16 bit patterns on an axis where consecutive values differ by 1."""
    u = u.astype(np.int64)
    return np.where(u & 0x8000, (~u) & 0xFFFF, u | 0x8000)


def symbols(cur, ref):
    d = (ordered(cur) - ordered(ref)) & 0xFFFF
    neg = (d >> 15) & 1
    mag = np.abs(np.where(neg == 1, d - 0x10000, d))
    k = np.zeros_like(mag)
    nz = mag > 0
    k[nz] = np.floor(np.log2(mag[nz])).astype(np.int64) + 1
    b1 = np.where(k >= 2, (mag >> np.maximum(k - 2, 0)) & 1, 0)
    b2 = np.where(k >= 3, (mag >> np.maximum(k - 3, 0)) & 1, 0)
    return {"k": k, "neg": neg, "b1": b1, "b2": b2}


def code(k, neg, b1):
    return np.where(k == 0, 0, np.where(k == 1, 1 + neg, 4 * k - 5 + 2 * neg + b1))


def cost(ctx, sym):
    """(entropy bits, table bits) of sym under ctx."""
    # contexts renumbered densely first: the combined ones are sparse
    _, ctx, cc = np.unique(ctx, return_inverse=True, return_counts=True)
    cells = np.bincount(ctx.astype(np.int64) * 256 + sym)
    cells = cells[cells > 0]
    h = -(cells * np.log2(cells)).sum() + (cc * np.log2(cc)).sum()
    return h, len(cells) * CELL_BITS


def moments(path, names):
    """AdamW moments by parameter name: the state is indexed by parameter
    order, so it is matched by order and shape against the master weights'
    names (which are in the model's order)."""
    sd = torch.load(path, map_location="cpu", weights_only=False)
    master = sd.get("fp32_master_weights", {})
    state = sd.get("state", {})
    free = sorted(state)
    out = {}
    for name in master:
        shape = tuple(master[name].shape)
        j = next((j for j in free if tuple(state[j]["exp_avg"].shape) == shape), None)
        if j is None:
            continue
        free.remove(j)
        if name in names:
            out[name] = (
                state[j]["exp_avg"].float().numpy().ravel(),
                state[j]["exp_avg_sq"].float().numpy().ravel(),
                master[name].float().numpy().ravel().view(np.uint32).astype(np.int64),
            )
    return out


def kbucket(k):
    return np.select([k == 0, k <= 2, k <= 4, k <= 6, k <= 8], [0, 1, 2, 3, 4], 5)


def adam_direction(mom):
    """(AdamW's step direction as 0/1, its |exp_avg|/sqrt(exp_avg_sq) in 5
    log2 buckets) of one tensor's moments."""
    m, v, _ = mom
    up_dir = (m > 0).astype(np.int64)  # AdamW moves against exp_avg
    q = np.log2(np.abs(m) / (np.sqrt(v) + 1e-8) + 1e-30)
    return up_dir, np.clip(np.round(q), -4, 0).astype(np.int64) + 4


def candidates(cur, ref, ref2, mom_ref, mom_new, ncol):
    """(name, context, symbol, raw bits) for each model of one tensor."""
    s = symbols(cur, ref)
    k, neg, b1 = s["k"], s["neg"], s["b1"]
    e = (ref.astype(np.int64) >> 7) & 0xFF
    raw = np.where(k >= 2, k - 2, 0)
    base = code(k, neg, b1)
    raw_b2 = np.where(k >= 3, raw - 1, raw)  # the second bit moved into the symbol
    rows = [("baseline: the reference's exponent", e, base, raw)]
    rows.append(("+ the second bit below the leading one in the symbol", e, base * 2 + s["b2"], raw_b2))
    left = np.concatenate(([6], kbucket(k)[:-1]))
    rows.append(("x k of the element before (in the stream)", e * 7 + left, base, raw))
    if ncol < len(k):
        up = np.concatenate((np.full(ncol, 6), kbucket(k)[:-ncol]))
        rows.append(("x k of the element above (previous row)", e * 7 + up, base, raw))
    allc = e
    if ref2 is not None:
        p = symbols(ref, ref2)
        rows.append(("x k of the reference's own delta (2 versions back)", e * 6 + kbucket(p["k"]), base, raw))
        rows.append(("sign relative to the reference's own delta", e, code(k, neg ^ p["neg"], b1), raw))
        allc = (allc * 6 + kbucket(p["k"])) * 2 + p["neg"]
    for which, mom in (("reference", mom_ref), ("new", mom_new)):
        if mom is None:
            continue
        up_dir, qb = adam_direction(mom)
        rows.append((f"sign relative to exp_avg of the {which} checkpoint", e, code(k, neg ^ up_dir, b1), raw))
        rows.append(
            (f"same, x abs(exp_avg)/sqrt(exp_avg_sq) of the {which} checkpoint", e * 5 + qb, code(k, neg ^ up_dir, b1), raw)
        )
        allc = (allc * 2 + up_dir) * 5 + qb
    if mom_ref is not None:
        mw = mom_ref[2]
        om = np.where(mw & 0x80000000, (~mw) & 0xFFFFFFFF, mw | 0x80000000)  # ordered(), 32 bits
        below = ((om - (ordered(ref) << 16)) < 0).astype(np.int64)
        rows.append(("sign relative to the reference's fp32 master within its bf16 step", e, code(k, neg ^ below, b1), raw))
        allc = allc * 2 + below
        up_dir, qb = adam_direction(mom_ref)
        rows.append(
            (
                "the reference's exp_avg sign and ratio, its master's side, the second bit: together, with tables",
                (e * 5 + qb) * 2 + (up_dir ^ below),
                code(k, neg ^ up_dir, b1) * 2 + s["b2"],
                raw_b2,
            )
        )
    rows.append(
        (
            "the exponent, the reference's own delta, both exp_avg, the master's side: at once, no table cost (optimistic)",
            allc,
            base,
            raw,
        )
    )
    return rows


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__.split("\n\n")[1])
    traj = sys.argv[1]
    cks = sorted(
        (int(m.group(1)), os.path.join(traj, d))
        for d in os.listdir(traj)
        if (m := re.fullmatch(r"checkpoint-(\d+)", d)) and os.path.isfile(os.path.join(traj, d, "model.safetensors"))
    )
    if len(cks) < 2:
        sys.exit(f"contexts.py: fewer than two checkpoint-N/model.safetensors under {traj}")
    loaded = [load_bf16(os.path.join(d, "model.safetensors")) for _, d in cks]
    models = [data for data, _ in loaded]
    shapes = loaded[-1][1]
    moms = []
    for _, d in cks:
        p = os.path.join(d, "optimizer.pt")
        moms.append(moments(p, set(models[-1])) if os.path.isfile(p) else {})
    tot = {}
    order = []
    nel = 0
    for i in range(1, len(cks)):
        for name, cur in models[i].items():
            ref = models[i - 1].get(name)
            if ref is None or ref.size != cur.size:
                continue
            ref2 = models[i - 2].get(name) if i >= 2 else None
            if ref2 is not None and ref2.size != cur.size:
                ref2 = None
            mr, mn = moms[i - 1].get(name), moms[i].get(name)
            mr = mr if mr is not None and mr[0].size == cur.size else None
            mn = mn if mn is not None and mn[0].size == cur.size else None
            shp = shapes.get(name, [cur.size])
            ncol = shp[-1] if len(shp) > 1 else cur.size
            rows = [(label, *cost(ctx, sym), raw) for label, ctx, sym, raw in candidates(cur, ref, ref2, mr, mn, ncol)]
            bcost = rows[0][1] + rows[0][2] + rows[0][3].sum()  # row 0 is the baseline
            for label, h, t, raw in rows:
                if "no table cost" in label:
                    t = 0.0
                a = tot.setdefault(label, [0.0, 0.0, 0.0, 0])
                if a[3] == 0:
                    order.append(label)
                a[0] += h + raw.sum()
                a[1] += t
                a[2] += bcost  # the baseline over the same tensors
                a[3] += cur.size
            nel += cur.size
    print(f"bf16 deltas of {len(cks) - 1} consecutive checkpoint pairs, {nel} elements")
    print()
    # a candidate that needs a version 2 back or an optimizer.pt covers
    # fewer deltas: it is compared with the baseline over the same tensors
    print("| model | elements | entropy, bits/el | + tables, bits/el | baseline on the same, bits/el | ratio |")
    print("|---|---:|---:|---:|---:|---:|")
    for label in order:
        h, t, b, n = tot[label]
        print(f"| {label} | {n} | {h / n:.3f} | {(h + t) / n:.3f} | {b / n:.3f} | {(h + t) / b:.4f} |")


if __name__ == "__main__":
    main()
