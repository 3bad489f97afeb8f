#!/usr/bin/python3
"""Generate a real training trajectory of checkpoints for ulpfs benchmarks.

Trains a small byte-level GPT (decoder-only transformer) with AdamW on plain
English text found on the machine and writes a checkpoint directory every
--every steps (and at the last step):

    OUT/step-000020/model-bf16.safetensors   weights cast to bfloat16
    OUT/step-000020/model-f16.safetensors    weights cast to float16
    OUT/step-000020/model-f32.safetensors    weights in float32
    OUT/step-000020/pytorch_model.bin        torch.save(model.state_dict())
    OUT/step-000020/optimizer.pt             torch.save(optimizer.state_dict())

plus OUT/trajectory.json (config, parameter count, corpus hash, loss curve).

Model: token embedding (vocab 256 = bytes) + learned position embedding,
N pre-LayerNorm blocks (causal multi-head self-attention, then a 4x MLP with
GELU, both with residual connections), final LayerNorm, and an UNTIED linear
head (no bias).  The head is untied on purpose: tied weights would appear
twice in the state dict with shared storage, which real safetensors refuses
to serialise; untied keeps every tensor distinct.  All Linear layers have
biases except the head.

Optimizer: torch.optim.AdamW, betas (0.9, 0.95), eps 1e-8, weight decay 0.1
on every tensor with >= 2 dims (matrices and embeddings), 0 on biases and
LayerNorm parameters (two parameter groups).  Learning rate: linear warmup
over the first --warmup steps (default 10% of --steps), then cosine decay to
exactly 0 at the last step.  Gradients are clipped to global norm 1.0.

Precision: by default (--precision bf16-mixed) the forward/backward pass runs
under torch.autocast("cpu", bfloat16) while master weights, gradients and
AdamW state stay fp32 -- the usual LLM recipe, and ~5x faster on CPUs with
AVX512-BF16.  --precision fp32 trains fully in fp32.

No external dependencies beyond torch and numpy; the safetensors files are
written by hand (8-byte little-endian header length, JSON header padded with
spaces to a multiple of 8, tensors contiguous in sorted-name order).

Always run with /usr/bin/python3 (the interpreter that has torch).
"""

import argparse
import glob
import gzip
import hashlib
import json
import math
import os
import shutil
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


# --------------------------------------------------------------------------
# Corpus
# --------------------------------------------------------------------------

def _read_text_file(path, per_file_cap):
    """Return the bytes of a plain-text file (gunzipping *.gz), or None if it
    is unreadable or does not look like text."""
    try:
        if os.path.islink(path) and not os.path.exists(path):
            return None
        if not os.path.isfile(path):
            return None
        if path.endswith(".gz"):
            with gzip.open(path, "rb") as f:
                data = f.read(per_file_cap + 1)
        else:
            with open(path, "rb") as f:
                data = f.read(per_file_cap + 1)
    except (OSError, EOFError, gzip.BadGzipFile):
        return None
    data = data[:per_file_cap]
    if not data or b"\0" in data:
        return None
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        # a cut in the middle of a multibyte char at the cap is fine
        if e.start < len(data) - 4:
            return None
    # reject files with many control characters (other than \t \n \r \f)
    ctrl = sum(data.count(bytes([c])) for c in range(32) if c not in (9, 10, 12, 13))
    if ctrl > len(data) // 100:
        return None
    return data


def default_text_files(top="/usr/share"):
    files = sorted(glob.glob(os.path.join(top, "common-licenses", "*")))
    doc = []
    for root, dirs, names in os.walk(os.path.join(top, "doc")):
        dirs.sort()
        for n in sorted(names):
            if n == "copyright" or n.endswith(".txt"):
                doc.append(os.path.join(root, n))
    chl = []
    for root, dirs, names in os.walk(os.path.join(top, "doc")):
        dirs.sort()
        for n in sorted(names):
            if n.startswith("changelog") and n.endswith(".gz"):
                chl.append(os.path.join(root, n))
    return files + sorted(doc) + sorted(chl)


def load_corpus(paths, max_bytes, per_file_cap, verbose=False, strict=False):
    """The corpus made of `paths` and the list of the paths it used (files
    that are not plain text and duplicates left out).  strict: every path
    must be used (a pinned corpus), else exit with an error naming it."""
    seen = set()
    parts, used, total = [], [], 0
    for p in paths:
        data = _read_text_file(p, per_file_cap)
        if data is None and strict:
            sys.exit("error: corpus file %s is gone or no longer plain text" % p)
        if data is None:
            if verbose:
                log("warning: skipping %s (unreadable or not plain text)" % p)
            continue
        h = hashlib.sha1(data).digest()
        if h in seen:            # many copyright files are identical
            continue
        seen.add(h)
        if total + len(data) > max_bytes:
            data = data[: max_bytes - total]
        parts.append(data)
        used.append(p)
        total += len(data)
        if total >= max_bytes:
            break
    corpus = b"\n".join(parts)
    return corpus, used


def load_training_data(paths=None, max_text_mb=4.0, min_bytes=2, top="/usr/share",
                       pinned=None):
    """The training data as used by main() (and examples/train.py): the
    corpus of `paths` (default: default_text_files(top), 256 KiB per file)
    as an int64 tensor of bytes; returns (data, the files used, corpus
    sha256 hex).  pinned: the files a default corpus used before (as
    returned then), read again exactly, whatever else `top` now holds."""
    max_bytes = int(max_text_mb * 1024 * 1024)
    if pinned is not None:
        corpus, used = load_corpus(pinned, max_bytes, 256 * 1024, strict=True)
    else:
        corpus, used = load_corpus(paths if paths else default_text_files(top), max_bytes,
                                   per_file_cap=max_bytes if paths else 256 * 1024,
                                   verbose=bool(paths))
    if len(corpus) < min_bytes:
        sys.exit("error: corpus too small (%d bytes)" % len(corpus))
    data = torch.from_numpy(np.frombuffer(corpus, dtype=np.uint8).astype(np.int64))
    return data, used, hashlib.sha256(corpus).hexdigest()


# --------------------------------------------------------------------------
# Model
# --------------------------------------------------------------------------

class Linear(nn.Linear):
    """nn.Linear (same parameters, names, shapes and math) whose fp32 forward
    can be routed through oneDNN's 1x1 convolution.

    The Debian torch build on the reference machine links the netlib
    *reference* BLAS, so fp32 matmul runs at ~6 GFLOP/s; oneDNN convolution
    reaches ~100-300 GFLOP/s.  Only used with --precision fp32 (under bf16
    autocast, matmuls already go to oneDNN)."""
    use_conv = False

    def forward(self, x):
        if not Linear.use_conv or torch.is_autocast_cpu_enabled():
            return F.linear(x, self.weight, self.bias)
        K, N = self.in_features, self.out_features
        x2 = x.reshape(-1, K)
        M = x2.shape[0]
        y = F.conv2d(x2.t().reshape(1, K, M, 1), self.weight.view(N, K, 1, 1), self.bias)
        return y.reshape(N, M).t().reshape(*x.shape[:-1], N)


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model, n_heads, ctx):
        super().__init__()
        assert d_model % n_heads == 0
        self.n_heads = n_heads
        self.qkv = Linear(d_model, 3 * d_model)
        self.proj = Linear(d_model, d_model)
        mask = torch.tril(torch.ones(ctx, ctx, dtype=torch.bool))
        self.register_buffer("mask", mask.view(1, 1, ctx, ctx), persistent=False)

    def forward(self, x):
        B, T, C = x.shape
        H = self.n_heads
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(B, T, H, C // H).transpose(1, 2)
        k = k.view(B, T, H, C // H).transpose(1, 2)
        v = v.view(B, T, H, C // H).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // H))
        att = att.masked_fill(~self.mask[:, :, :T, :T], float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(y)


class MLP(nn.Module):
    def __init__(self, d_model):
        super().__init__()
        self.fc = Linear(d_model, 4 * d_model)
        self.proj = Linear(4 * d_model, d_model)

    def forward(self, x):
        return self.proj(F.gelu(self.fc(x)))


class Block(nn.Module):
    def __init__(self, d_model, n_heads, ctx):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, n_heads, ctx)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = MLP(d_model)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        x = x + self.mlp(self.ln2(x))
        return x


class GPT(nn.Module):
    def __init__(self, vocab, ctx, n_layers, d_model, n_heads):
        super().__init__()
        self.ctx = ctx
        self.tok_emb = nn.Embedding(vocab, d_model)
        self.pos_emb = nn.Embedding(ctx, d_model)
        self.blocks = nn.ModuleList(Block(d_model, n_heads, ctx) for _ in range(n_layers))
        self.ln_f = nn.LayerNorm(d_model)
        self.head = Linear(d_model, vocab, bias=False)   # untied
        self.apply(self._init)
        # GPT-2 style scaled init of residual projections
        for name, p in self.named_parameters():
            if name.endswith("proj.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * n_layers))

    @staticmethod
    def _init(m):
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, 0.0, 0.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, 0.0, 0.02)

    def forward(self, idx, targets=None):
        B, T = idx.shape
        pos = torch.arange(T, device=idx.device)
        x = self.tok_emb(idx) + self.pos_emb(pos)[None]
        for b in self.blocks:
            x = b(x)
        logits = self.head(self.ln_f(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))
        return logits, loss


# --------------------------------------------------------------------------
# safetensors (hand-written writer and reader)
# --------------------------------------------------------------------------

_ST_DTYPES = {
    # name: (torch dtype, numpy dtype of the raw little-endian bytes)
    "BF16": (torch.bfloat16, np.dtype("<i2")),
    "F16": (torch.float16, np.dtype("<f2")),
    "F32": (torch.float32, np.dtype("<f4")),
}


def _tensor_bytes(t, st_dtype):
    tdt, npdt = _ST_DTYPES[st_dtype]
    t = t.detach().to(tdt).contiguous().cpu()
    if tdt == torch.bfloat16:
        a = t.view(torch.int16).numpy()      # numpy has no bf16
    else:
        a = t.numpy()
    return a.astype(npdt, copy=False).tobytes()


def write_safetensors(path, state, st_dtype):
    """Write STATE as safetensors to PATH (a file name or a binary file object)."""
    names = sorted(state)          # safetensors orders tensors by name
    blobs, header, off = [], {"__metadata__": {"format": "pt"}}, 0
    for n in names:
        b = _tensor_bytes(state[n], st_dtype)
        header[n] = {"dtype": st_dtype, "shape": list(state[n].shape),
                     "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    hj = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hj += b" " * ((-len(hj)) % 8)
    if not isinstance(path, (str, bytes, os.PathLike)):
        _write_parts(path, len(hj).to_bytes(8, "little"), hj, blobs)
        return
    with open(path, "wb") as f:
        _write_parts(f, len(hj).to_bytes(8, "little"), hj, blobs)


def _write_parts(f, length, header, blobs):
    f.write(length)
    f.write(header)
    for b in blobs:
        f.write(b)


def read_safetensors(path):
    """Parse a safetensors file; returns (metadata, {name: torch.Tensor})."""
    with open(path, "rb") as f:
        raw = f.read()
    n = int.from_bytes(raw[:8], "little")
    if n % 8 != 0 or 8 + n > len(raw):
        raise ValueError("%s: bad header length %d" % (path, n))
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", None)
    data = memoryview(raw)[8 + n:]
    out, expect = {}, 0
    for name, info in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        b, e = info["data_offsets"]
        if b != expect:
            raise ValueError("%s: %s not contiguous (%d != %d)" % (path, name, b, expect))
        expect = e
        tdt, npdt = _ST_DTYPES[info["dtype"]]
        shape = info["shape"]
        if (e - b) != int(np.prod(shape, dtype=np.int64)) * npdt.itemsize:
            raise ValueError("%s: %s size mismatch" % (path, name))
        a = np.frombuffer(data[b:e], dtype=npdt).astype(npdt.newbyteorder("="))
        t = torch.from_numpy(a.copy()).reshape(shape)
        if tdt == torch.bfloat16:
            t = t.view(torch.bfloat16)
        out[name] = t
    if expect != len(data):
        raise ValueError("%s: %d trailing bytes" % (path, len(data) - expect))
    return meta, out


def check_checkpoint(d, model, optimizer):
    """Verify that every file in checkpoint dir d round-trips exactly."""
    sd = model.state_dict()
    for st_dtype in ("BF16", "F16", "F32"):
        path = os.path.join(d, "model-%s.safetensors" % st_dtype.lower())
        meta, tens = read_safetensors(path)
        assert meta == {"format": "pt"}, meta
        assert sorted(tens) == sorted(sd), path
        with open(path, "rb") as f:
            hlen = int.from_bytes(f.read(8), "little")
            hdr = json.loads(f.read(hlen))   # dict keeps file order
        order = [k for k in hdr if k != "__metadata__"]
        offs = [hdr[k]["data_offsets"][0] for k in order]
        assert order == sorted(order) and offs == sorted(offs), "%s: not in name order" % path
        tdt = _ST_DTYPES[st_dtype][0]
        for k, v in sd.items():
            ref = v.detach().to(tdt)
            got = tens[k]
            assert got.dtype == tdt and got.shape == ref.shape, (path, k)
            ity = torch.int32 if tdt == torch.float32 else torch.int16
            same = torch.equal(got.view(ity), ref.view(ity))   # bit-exact
            assert same, "%s: tensor %s differs" % (path, k)
    bin_sd = torch.load(os.path.join(d, "pytorch_model.bin"), map_location="cpu")
    assert sorted(bin_sd) == sorted(sd)
    for k, v in sd.items():
        assert bin_sd[k].dtype == torch.float32 and torch.equal(bin_sd[k], v), k
    osd = torch.load(os.path.join(d, "optimizer.pt"), map_location="cpu")
    cur = optimizer.state_dict()
    assert sorted(osd["state"]) == sorted(cur["state"])
    for i, st in cur["state"].items():
        for k, v in st.items():
            assert torch.equal(osd["state"][i][k], v), (i, k)
            if k in ("exp_avg", "exp_avg_sq"):
                assert osd["state"][i][k].dtype == torch.float32
    assert [g["lr"] for g in osd["param_groups"]] == [g["lr"] for g in cur["param_groups"]]


# --------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------

def parse_args(argv=None):
    ap = argparse.ArgumentParser(
        description="Train a small byte-level GPT and write a checkpoint trajectory.")
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--quick", action="store_true",
                    help="small preset for CI/quickstart: 3 layers, d_model 128, "
                         "ctx 64, batch 8, 80 steps, checkpoint every 20")
    ap.add_argument("--steps", type=int, help="training steps (default 200; quick 80)")
    ap.add_argument("--every", type=int, help="checkpoint interval (default 20)")
    ap.add_argument("--layers", type=int, help="transformer blocks (default 4; quick 3)")
    ap.add_argument("--d-model", type=int, help="model width (default 256; quick 128)")
    ap.add_argument("--heads", type=int, help="attention heads (default 4; quick 4)")
    ap.add_argument("--ctx", type=int, help="context length in bytes (default 128; quick 64)")
    ap.add_argument("--batch", type=int, help="sequences per batch (default 16; quick 8)")
    ap.add_argument("--lr", type=float, help="peak learning rate (default 1e-3; quick 2e-3)")
    ap.add_argument("--warmup", type=int, help="warmup steps (default 10%% of --steps)")
    ap.add_argument("--precision", choices=("bf16-mixed", "fp32"), default="bf16-mixed",
                    help="bf16-mixed (default): fp32 master weights and optimizer "
                         "state, forward/backward under torch.autocast(bfloat16) as in "
                         "real LLM training (~5x faster here); fp32: everything fp32")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--text", nargs="+", metavar="FILE",
                    help="training text files (.gz is gunzipped); default: "
                         "/usr/share/common-licenses/* + text under /usr/share/doc")
    ap.add_argument("--max-text-mb", type=float, default=4.0,
                    help="cap on corpus size in MB (default 4)")
    ap.add_argument("--check", action="store_true",
                    help="re-read every checkpoint after writing it and verify that "
                         "all files round-trip exactly")
    ap.add_argument("--force", action="store_true",
                    help="allow OUT to already contain step-* directories (they are replaced)")
    a = ap.parse_args(argv)
    full = dict(steps=200, every=20, layers=4, d_model=256, heads=4, ctx=128, batch=16, lr=1e-3)
    quick = dict(steps=80, every=20, layers=3, d_model=128, heads=4, ctx=64, batch=8, lr=2e-3)
    preset = quick if a.quick else full
    for k, v in preset.items():
        if getattr(a, k) is None:
            setattr(a, k, v)
    if a.warmup is None:
        a.warmup = min(max(1, a.steps // 10), a.steps - 1)
    if a.steps < 1 or a.every < 1 or not 0 <= a.warmup < a.steps:
        ap.error("need steps >= 1, every >= 1, 0 <= warmup < steps")
    if a.d_model % a.heads:
        ap.error("--d-model must be divisible by --heads")
    return a


def lr_at(step, a):
    """LR used for optimizer step `step` (1-based): linear warmup, then cosine
    decay reaching exactly 0 at step == a.steps."""
    if step <= a.warmup:
        return a.lr * step / a.warmup
    p = (step - a.warmup) / (a.steps - a.warmup)
    return a.lr * 0.5 * (1.0 + math.cos(math.pi * p))


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def main(argv=None):
    a = parse_args(argv)
    t_start = time.time()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    np.random.seed(a.seed)
    torch.use_deterministic_algorithms(True)

    os.makedirs(a.out, exist_ok=True)
    stale = sorted(glob.glob(os.path.join(a.out, "step-*")))
    if stale and not a.force:
        sys.exit("error: %s already contains %s ...; use --force to replace" % (a.out, stale[0]))
    for d in stale:            # --force: never mix two trajectories
        shutil.rmtree(d)

    # ---- data
    data, used, corpus_sha = load_training_data(a.text, a.max_text_mb, a.ctx + 2)
    log("corpus: %d files, %d bytes, sha256 %s" % (len(used), len(data), corpus_sha[:16]))

    # ---- model / optimizer
    amp = a.precision == "bf16-mixed"
    Linear.use_conv = not amp
    model = GPT(256, a.ctx, a.layers, a.d_model, a.heads)
    nparams = sum(p.numel() for p in model.parameters())
    log("model: %d layers, d_model %d, %d heads, ctx %d, batch %d, untied head, %s: "
        "%d params (%.2fM)" % (a.layers, a.d_model, a.heads, a.ctx, a.batch, a.precision,
                               nparams, nparams / 1e6))
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8)

    gen = torch.Generator().manual_seed(a.seed)
    offs = torch.arange(a.ctx + 1)

    def batch():
        ix = torch.randint(len(data) - a.ctx - 1, (a.batch,), generator=gen)
        chunk = data[ix[:, None] + offs[None, :]]
        return chunk[:, :-1], chunk[:, 1:]

    ckpts, losses, window, total_bytes = [], [], [], 0
    t_last = time.time()
    model.train()
    for step in range(1, a.steps + 1):
        lr = lr_at(step, a)
        for g in opt.param_groups:
            g["lr"] = lr
        x, y = batch()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
            _, loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        window.append(loss.item())
        if step == 1:
            log("step %6d  loss %.4f (initial)" % (step, window[0]))

        if step % a.every == 0 or step == a.steps:
            d = os.path.join(a.out, "step-%06d" % step)
            tmp = d + ".tmp"
            shutil.rmtree(tmp, ignore_errors=True)
            os.makedirs(tmp)
            sd = model.state_dict()
            for st_dtype in ("BF16", "F16", "F32"):
                write_safetensors(os.path.join(tmp, "model-%s.safetensors" % st_dtype.lower()),
                                  sd, st_dtype)
            torch.save(sd, os.path.join(tmp, "pytorch_model.bin"))
            torch.save(opt.state_dict(), os.path.join(tmp, "optimizer.pt"))
            shutil.rmtree(d, ignore_errors=True)
            os.rename(tmp, d)
            if a.check:
                check_checkpoint(d, model, opt)
            nbytes = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
            total_bytes += nbytes
            mean_loss = sum(window) / len(window)
            losses.append({"step": step, "loss": mean_loss, "last_loss": window[-1], "lr": lr})
            window = []
            now = time.time()
            log("step %6d  loss %.4f  lr %.2e  %6.1fs (+%.1fs)  %s%s"
                % (step, mean_loss, lr, now - t_start, now - t_last, d,
                   "  [checked]" if a.check else ""))
            t_last = now
            ckpts.append(d)

    meta = {
        "steps": a.steps, "every": a.every, "layers": a.layers, "d_model": a.d_model,
        "heads": a.heads, "ctx": a.ctx, "batch": a.batch, "lr": a.lr, "warmup": a.warmup,
        "seed": a.seed, "threads": a.threads, "precision": a.precision, "params": nparams, "tied_head": False,
        "optimizer": {"type": "AdamW", "betas": [0.9, 0.95], "eps": 1e-8,
                      "weight_decay": 0.1, "no_decay": "1-D tensors (biases, LayerNorm)"},
        "schedule": "linear warmup, cosine to 0 at last step",
        "corpus_bytes": len(data), "corpus_files": len(used), "corpus_sha256": corpus_sha,
        "torch": torch.__version__, "losses": losses,
        "checkpoints": [os.path.basename(c) for c in ckpts],
    }
    with open(os.path.join(a.out, "trajectory.json"), "w") as f:
        json.dump(meta, f, indent=1)

    log("done in %.1fs: %d checkpoints, %d bytes total (%.1f MB)"
        % (time.time() - t_start, len(ckpts), total_bytes, total_bytes / 1e6))
    for c in ckpts:
        print(c)
    print("total_bytes %d" % total_bytes)


if __name__ == "__main__":
    main()
