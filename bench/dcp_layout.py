#!/usr/bin/python3
"""Write a checkpoint of real tensors laid out as PyTorch Distributed
Checkpoint (DCP) writes it, for ulpfs tests and benchmarks.

Debian's torch 1.13 cannot run torch.distributed.checkpoint's filesystem
writer, so this reproduces its on-disk layout (FileSystemWriter in
torch/distributed/checkpoint/filesystem.py):

  * every rank writes thread_count files __{rank}_{n}.distcp;
  * a file holds its items back to back: first the BYTE_IO items (objects
    torch.save'd into a buffer by the planner), then the tensors, each one
    torch.save'd straight into the stream (a tensor whose storage is larger
    than itself, a shard view, is cloned first), largest first, each item's
    offset and length recorded for the metadata;
  * items go to the file of the rank with the fewest bytes so far (bytes
    round-robin, tensors by size, descending);
  * .metadata, a pickle of the checkpoint's index, is written to
    .metadata.tmp, fsynced and renamed into place.

The real .metadata pickles torch's dataclasses; this one pickles plain
dicts and tuples with the same content (a fqn's dtype, size and chunks, and
each item's file, offset and length).

The tensors come from a trajectory step of bench/make_trajectory.py
(pytorch_model.bin and optimizer.pt): the model's parameters and AdamW's
moments, each flattened and split across --ranks as FSDP shards them.

    dcp_layout.py --src TRAJ/step-000020 --out CKPT [--ranks 2] [--threads 1]
                  [--tmp-dir]   (write tmp-CKPT/, then rename it to CKPT)
                  [--writers N] (N forked processes write the files at once)
    dcp_layout.py --traj TRAJ --root DIR [--root DIR2] [...]
                  (DIR/checkpoint-N for every TRAJ/step-N, oldest first)
"""

import argparse
import io
import multiprocessing
import os
import pickle
import sys

import torch


def load_state(src):
    model = torch.load(os.path.join(src, "pytorch_model.bin"), map_location="cpu")
    optim = torch.load(os.path.join(src, "optimizer.pt"), map_location="cpu")
    names = list(model.keys())
    state = {}
    for name, t in model.items():
        state["model." + name] = t
    # AdamW's state is keyed by parameter index, in parameter order.
    for idx, st in optim["state"].items():
        fqn = names[idx] if idx < len(names) else "p%d" % idx
        for k, v in st.items():
            state["optim.state.%s.%s" % (fqn, k)] = v
    extra = {"optim.param_groups": optim["param_groups"]}
    return state, extra


def shard(t, rank, ranks):
    """Rank's piece of t as FSDP2 shards: flat dim-0 chunks (a scalar whole)."""
    if t.dim() == 0:
        return t, 0
    flat = t.reshape(-1)
    per = (flat.numel() + ranks - 1) // ranks
    lo = min(rank * per, flat.numel())
    hi = min(lo + per, flat.numel())
    return flat[lo:hi], lo


def plan_rank(state, extra, rank, ranks, threads):
    """The write items of rank, split into thread files as DCP does."""
    byte_items, tensor_items = [], []
    if rank == 0:
        for fqn, obj in extra.items():
            buf = io.BytesIO()
            torch.save(obj, buf)
            byte_items.append((fqn, buf.getvalue()))
    for fqn, t in state.items():
        piece, off = shard(t, rank, ranks)
        if t.dim() == 0 and rank != 0:
            continue
        tensor_items.append((fqn, off, piece))
    bins = [[] for _ in range(threads)]
    sizes = [0] * threads
    for i, item in enumerate(byte_items):
        bins[i % threads].append(("bytes", item))
    tensor_items.sort(key=lambda it: it[2].numel() * it[2].element_size(),
                      reverse=True)
    for item in tensor_items:
        j = sizes.index(min(sizes))
        bins[j].append(("tensor", item))
        sizes[j] += item[2].numel() * item[2].element_size()
    return bins


def write_file(path, items, rel, index):
    with open(path, "wb") as f:
        for kind, item in items:
            offset = f.tell()
            if kind == "bytes":
                fqn, data = item
                f.write(data)
                key = (fqn, None)
            else:
                fqn, chunk_off, t = item
                t = t.detach()
                if t.storage().size() != t.numel():
                    t = t.clone()
                torch.save(t, f)
                key = (fqn, (chunk_off,))
            index[key] = (rel, offset, f.tell() - offset)
        f.flush()
        os.fsync(f.fileno())


def write_metadata(out, state, extra, index, ranks):
    index = dict(sorted(index.items(), key=repr))  # as written, in any order
    md = {"state_dict_metadata": {}, "storage_data": index,
          "planner_data": {k: tuple(k.split(".")) for k in state},
          "world_size": ranks}
    for fqn, t in state.items():
        md["state_dict_metadata"][fqn] = {"dtype": str(t.dtype),
                                          "size": tuple(t.shape)}
    for fqn in extra:
        md["state_dict_metadata"][fqn] = {"bytes": True}
    tmp = os.path.join(out, ".metadata.tmp")
    with open(tmp, "wb") as f:
        pickle.dump(md, f)
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, os.path.join(out, ".metadata"))


_JOBS = []


def _write_job(i):
    path, items, rel = _JOBS[i]
    index = {}
    write_file(path, items, rel, index)
    return index


def write_checkpoint(src, out, ranks, threads, tmp_dir, writers=1):
    state, extra = load_state(src)
    final = out
    if tmp_dir:
        head, tail = os.path.split(out)
        out = os.path.join(head, "tmp-" + tail)
    os.makedirs(out, exist_ok=True)
    _JOBS[:] = []
    for rank in range(ranks):
        bins = plan_rank(state, extra, rank, ranks, threads)
        for n, items in enumerate(bins):
            rel = "__%d_%d.distcp" % (rank, n)
            _JOBS.append((os.path.join(out, rel), items, rel))
    index = {}
    if writers > 1:
        # Forked writer processes, all of a checkpoint's files at once,
        # as DCP's async savers write them.
        ctx = multiprocessing.get_context("fork")
        with ctx.Pool(writers) as pool:
            for part in pool.map(_write_job, range(len(_JOBS)), chunksize=1):
                index.update(part)
    else:
        for i in range(len(_JOBS)):
            index.update(_write_job(i))
    write_metadata(out, state, extra, index, ranks)
    if tmp_dir:
        os.rename(out, final)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--src", help="a make_trajectory.py step dir")
    ap.add_argument("--out", action="append",
                    help="checkpoint directory to write (repeat: each)")
    ap.add_argument("--traj", help="a make_trajectory.py output dir")
    ap.add_argument("--root", action="append",
                    help="with --traj: where checkpoint-N go (repeat: each)")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1, help="files per rank")
    ap.add_argument("--writers", type=int, default=1,
                    help="processes writing a checkpoint's files at once")
    ap.add_argument("--tmp-dir", action="store_true",
                    help="write tmp-NAME/ then rename it to NAME")
    a = ap.parse_args(argv)
    if a.traj and a.root:
        steps = sorted(d for d in os.listdir(a.traj) if d.startswith("step-"))
        for d in steps:
            for root in a.root:
                out = os.path.join(root, "checkpoint-%d" % int(d[5:]))
                write_checkpoint(os.path.join(a.traj, d), out, a.ranks,
                                 a.threads, a.tmp_dir, a.writers)
    elif a.src and a.out:
        for out in a.out:
            write_checkpoint(a.src, out, a.ranks, a.threads, a.tmp_dir,
                             a.writers)
    else:
        ap.error("give --src and --out, or --traj and --root")
    return 0


if __name__ == "__main__":
    sys.exit(main())
