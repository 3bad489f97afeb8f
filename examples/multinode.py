#!/usr/bin/python3
"""examples/multinode.py - a multi-rank job that checkpoints like DeepSpeed
into one ulpfs mount per node.

    multinode.py --mounts NODE0_MNT,NODE1_MNT --steps 40 --save-every 10 \
        --losses run.json
    multinode.py --mounts RO0,RO1 --resume 20 --steps 40 --losses resumed.json

torch.distributed with the gloo backend on CPU, WORLD ranks (default 4) in
processes, RANKS_PER_NODE (default 2) per node: rank r is on node
r // RANKS_PER_NODE and writes into that node's mount, as
"ulpfs mount s3://bucket/run/node-$NODE_RANK" gives each node its own store.

Training is ZeRO-1-like: gradients are all-reduced, each rank keeps Adam's
state for its own partition of the flattened fp32 parameters, updates it,
and the partitions are all-gathered back.  Every --save-every steps each
rank writes global_stepN/zero_pp_rank_R_mp_rank_00_optim_states.pt (its
flattened fp32 partition with exp_avg and exp_avg_sq, one long tensor each)
and rank 0 writes global_stepN/mp_rank_00_model_states.pt (bf16 module
weights) and the "latest" tag file.  Debian's PyTorch 1.13 has no working
torch.distributed.checkpoint, so this is plain torch.save, as DeepSpeed does.

--resume N loads every rank's partition from the mounts (read-only mounts
of the node stores on another machine will do), trains on, and --losses
records each step's loss as float.hex(): a resumed run must continue the
original's losses bit for bit.
"""

import argparse
import json
import os
import socket
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

DIM = 64
HIDDEN = 384


def build_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(DIM, HIDDEN),
        torch.nn.GELU(),
        torch.nn.Linear(HIDDEN, HIDDEN),
        torch.nn.GELU(),
        torch.nn.Linear(HIDDEN, DIM),
    )


def batch(step, rank):
    g = torch.Generator().manual_seed(1000003 * step + rank)
    x = torch.randn(64, DIM, generator=g)
    return x, torch.sin(x) * 0.5 + x.roll(1, dims=1) * 0.25


def flat_of(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def load_flat(model, flat):
    off = 0
    with torch.no_grad():
        for p in model.parameters():
            n = p.numel()
            p.copy_(flat[off:off + n].view_as(p))
            off += n


def shard_path(args, step, rank):
    node = rank // args.ranks_per_node
    return os.path.join(args.mounts[node], "global_step%d" % step,
                        "zero_pp_rank_%d_mp_rank_00_optim_states.pt" % rank)


def worker(rank, args):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(args.port)
    dist.init_process_group("gloo", rank=rank, world_size=args.world)
    torch.set_num_threads(1)
    world = args.world
    model = build_model()
    flat = flat_of(model)
    n = flat.numel()
    part = (n + world - 1) // world
    padded = torch.zeros(part * world)
    padded[:n] = flat
    lo, hi = rank * part, (rank + 1) * part
    master = padded[lo:hi].clone()
    exp_avg = torch.zeros(part)
    exp_avg_sq = torch.zeros(part)
    start = 0
    if args.resume:
        sd = torch.load(shard_path(args, args.resume, rank))
        osd = sd["optimizer_state_dict"]
        master = osd["fp32_flat_groups"][0].clone()
        exp_avg = osd["state"]["exp_avg"].clone()
        exp_avg_sq = osd["state"]["exp_avg_sq"].clone()
        start = osd["state"]["step"]
        gathered = [torch.zeros(part) for _ in range(world)]
        dist.all_gather(gathered, master)
        load_flat(model, torch.cat(gathered)[:n])
    lr, b1, b2, eps, wd = 2e-3, 0.9, 0.999, 1e-8, 0.01
    losses = {}
    for step in range(start + 1, args.steps + 1):
        x, y = batch(step, rank)
        model.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        grad = torch.zeros(part * world)
        grad[:n] = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
        dist.all_reduce(grad)
        grad /= world
        g = grad[lo:hi]
        # AdamW on this rank's partition only (ZeRO stage 1)
        exp_avg.mul_(b1).add_(g, alpha=1 - b1)
        exp_avg_sq.mul_(b2).addcmul_(g, g, value=1 - b2)
        bc1, bc2 = 1 - b1 ** step, 1 - b2 ** step
        step_lr = lr * (1 - step / (args.steps + 1))  # linear decay
        master.mul_(1 - step_lr * wd)
        master.addcdiv_(exp_avg / bc1, (exp_avg_sq / bc2).sqrt_().add_(eps),
                        value=-step_lr)
        gathered = [torch.zeros(part) for _ in range(world)]
        dist.all_gather(gathered, master)
        load_flat(model, torch.cat(gathered)[:n])
        lsum = loss.detach().clone()
        dist.all_reduce(lsum)
        losses[step] = float.hex(float(lsum) / world)
        if not args.resume and args.save_every and step % args.save_every == 0:
            path = shard_path(args, step, rank)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            torch.save({"optimizer_state_dict": {
                "fp32_flat_groups": [master.clone()],
                "state": {"exp_avg": exp_avg.clone(),
                          "exp_avg_sq": exp_avg_sq.clone(), "step": step},
                "partition_count": world}, "ds_version": "0.x-like"}, path)
            if rank == 0:
                d = os.path.dirname(path)
                torch.save({"module": {k: v.to(torch.bfloat16) for k, v in
                                       model.state_dict().items()},
                            "global_steps": step,
                            "dp_world_size": world},
                           os.path.join(d, "mp_rank_00_model_states.pt"))
                with open(os.path.join(args.mounts[0], "latest"), "w") as f:
                    f.write("global_step%d" % step)
            dist.barrier()
    if rank == 0 and args.losses:
        with open(args.losses, "w") as f:
            json.dump(losses, f, indent=0, sort_keys=True)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mounts", required=True,
                    help="comma-separated: one directory per node")
    ap.add_argument("--world", type=int, default=4)
    ap.add_argument("--ranks-per-node", type=int, default=2)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--save-every", type=int, default=10)
    ap.add_argument("--resume", type=int, default=0)
    ap.add_argument("--losses")
    args = ap.parse_args()
    args.mounts = args.mounts.split(",")
    nodes = (args.world + args.ranks_per_node - 1) // args.ranks_per_node
    if len(args.mounts) != nodes:
        sys.exit("multinode.py: %d ranks at %d per node need %d mounts" %
                 (args.world, args.ranks_per_node, nodes))
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    args.port = s.getsockname()[1]
    s.close()
    mp.spawn(worker, args=(args,), nprocs=args.world, join=True)


if __name__ == "__main__":
    main()
