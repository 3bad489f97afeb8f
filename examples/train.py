#!/usr/bin/python3
"""examples/train.py - a training run that writes Hugging Face Trainer-style
checkpoints, to run with its --output_dir on a ulpfs mount.

Trains the small byte-level GPT of bench/make_trajectory.py (imported from
there, with its corpus loader: plain text found under /usr/share) with
AdamW and a linear-warmup + cosine LambdaLR schedule, and every --save_steps
steps (and at the last one) saves, as recent transformers.Trainer versions
do, OUTPUT_DIR/tmp-checkpoint-N, fsyncs it and renames it to checkpoint-N:

    model.safetensors    the weights in bfloat16 (make_trajectory's writer)
    optimizer.pt         torch.save(optimizer.state_dict()), plus the fp32
                         master weights under "fp32_master_weights" (the
                         weights train in fp32, so the bf16 file alone
                         cannot resume them exactly; DeepSpeed's bf16
                         optimizer keeps its master copy the same way)
    scheduler.pt         torch.save(lr_scheduler.state_dict())
    rng_state.pth        {"python", "numpy", "cpu"} RNG states
    trainer_state.json   global_step, max_steps, log_history (loss and
                         learning rate of every step), the run's config,
                         the corpus's files and its sha256 (--resume reads
                         those files, so that a package installed since
                         changes nothing; a changed file is refused)

--save_total_limit K then deletes the oldest checkpoints (shutil.rmtree),
sorted by directory mtime as Trainer(use_mtime=True) does -- ties broken by
step number -- until K are left (the newest is never deleted).

--sha256_manifest FILE records the SHA-256 of every byte each checkpoint file
was written with, hashed on the way out (the file objects handed to
torch.save and the safetensors writer hash what passes through them), in
`sha256sum` format with paths relative to --output_dir.  The manifest always
lists exactly the checkpoints that exist: rotation drops their lines.  Keep
it outside --output_dir; `cd OUTPUT_DIR && sha256sum -c FILE` then checks
what a filesystem gives back against what training wrote, without trusting
any read of that filesystem.  (Because torch.save is handed a file object
rather than a path, its zip entries are named archive/... instead of
optimizer/...; the pickles and tensor records are the same.)

--resume [CKPT] continues from CKPT (default: the highest checkpoint-N in
--output_dir): model, optimizer, scheduler and RNG states, step count and
log history.  Training is deterministic for a fixed seed, thread count and
precision (the CPU kernels it uses are: two runs write the same bytes), so
a resumed run writes the same bytes as an uninterrupted one.
torch.use_deterministic_algorithms is not set: it changes no byte here and
only costs time (10% on this model, 4-5x reported on another 2-core
machine).  --stop_after N ends the run after step N as if it had been
preempted (the schedule still runs to --max_steps).

Presets (sizes of the default, --quick and --full): the default fits the
main job (examples/quickstart.sh) into a few minutes on 2 cores: 10
checkpoints; --full is the larger run bench/report.sh trains; --quick is
for tests.  --precision auto trains under bf16 autocast only where the CPU
does bf16 in hardware (avx512_bf16 or amx_bf16): elsewhere PyTorch emulates
it, slower than fp32 (one thread, the --full model, one CPU: 1.26 s a step
with oneDNN held to AVX512_CORE, 0.32-0.73 s in fp32, 0.28 s with bf16 in
hardware), so it trains in fp32.

Progress goes to stderr: a line at least every --log_seconds (step, loss,
learning rate, seconds per step, time left), and for every checkpoint the
time its save took.  --commit_cmd CMD (for instance "ulpfs sync") is run
after each save, in the background while training goes on, with
--output_dir as its last argument: it must return once every file closed so
far is stored, and its time is printed as the checkpoint's commit time.

Run with /usr/bin/python3 (the interpreter that has torch).
"""

import argparse
import hashlib
import json
import math
import os
import queue
import random
import re
import shlex
import shutil
import subprocess
import sys
import threading
import time

# Set before torch loads its OpenMP runtime: idle OpenMP threads that spin
# steal the core that OpenBLAS's own threads need (fp32 matmuls), and any
# core a neighbour job holds.  Measured on 2 shared cores: fp32 steps 4.3-5.7
# s spinning, 0.56-0.97 s passive.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

sys.dont_write_bytecode = True    # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
import make_trajectory as mt  # noqa: E402  (model, corpus, safetensors writer)

import numpy as np  # noqa: E402
import torch  # noqa: E402

CKPT_RE = re.compile(r"checkpoint-(\d+)")


def log(msg):
    print("[train] " + msg, file=sys.stderr, flush=True)


# The sizes of each preset; an option given on the command line wins.
PRESETS = {
    "default": dict(max_steps=100, save_steps=10, layers=4, d_model=160, ctx=128, batch=16,
                    lr=1e-3, max_text_mb=4.0),
    "full": dict(max_steps=200, save_steps=20, layers=4, d_model=256, ctx=128, batch=16,
                 lr=1e-3, max_text_mb=4.0),
    "quick": dict(max_steps=60, save_steps=10, layers=3, d_model=128, ctx=64, batch=8,
                  lr=3e-3, max_text_mb=1.0),
}


def cpu_has_bf16():
    """Whether the CPU has bf16 instructions (Linux: /proc/cpuinfo flags)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = line.split(":", 1)[1].split()
                    return "avx512_bf16" in flags or "amx_bf16" in flags
    except OSError:
        pass
    return False


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--output_dir", required=True)
    ap.add_argument("--max_steps", type=int, help="default 100; --quick 60; --full 200")
    ap.add_argument("--save_steps", type=int, help="default 10; --full 20")
    ap.add_argument("--save_total_limit", type=int, default=0,
                    help="keep at most this many checkpoints (0: keep all)")
    ap.add_argument("--resume", nargs="?", const="latest", metavar="CKPT",
                    help="resume from CKPT (default: the latest checkpoint in --output_dir)")
    ap.add_argument("--sha256_manifest", metavar="FILE",
                    help="record the SHA-256 of every checkpoint file as written")
    ap.add_argument("--stop_after", type=int, help="stop after this step (simulated preemption)")
    size = ap.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true",
                      help="small preset that runs in seconds: 3 layers, d_model 128, ctx 64, "
                           "batch 8, 60 steps, save every 10")
    size.add_argument("--full", action="store_true",
                      help="the larger preset of bench/: 4 layers, d_model 256, ctx 128, "
                           "batch 16, 200 steps, save every 20")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--threads", type=int,
                    help="torch threads (default: the CPUs this process may use, at most 4; "
                         "results depend on it)")
    ap.add_argument("--precision", choices=("auto", "bf16-mixed", "fp32"), default="auto",
                    help="bf16-mixed: fp32 weights and optimizer, forward and backward under "
                         "bf16 autocast; auto (default): bf16-mixed where the CPU has "
                         "bf16 instructions, else fp32 (results depend on it)")
    ap.add_argument("--lr", type=float, help="peak learning rate (default 1e-3; quick 3e-3)")
    ap.add_argument("--warmup_steps", type=int, help="default 10%% of --max_steps")
    ap.add_argument("--layers", type=int)
    ap.add_argument("--d_model", type=int)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--ctx", type=int)
    ap.add_argument("--batch", type=int)
    ap.add_argument("--max_text_mb", type=float, help="corpus cap (default 4; quick 1)")
    ap.add_argument("--corpus_root", default="/usr/share", metavar="DIR",
                    help="the corpus is the text under DIR/common-licenses and DIR/doc "
                         "(default /usr/share); a checkpoint records the files it used, "
                         "and --resume reads exactly those")
    ap.add_argument("--log_seconds", type=float, default=10.0,
                    help="print a progress line at least this often (default 10)")
    ap.add_argument("--commit_cmd", metavar="CMD",
                    help="run CMD OUTPUT_DIR after each save and report how long it took "
                         "(e.g. \"ulpfs sync\": the checkpoint's commit time)")
    a = ap.parse_args(argv)
    for k, v in PRESETS["quick" if a.quick else "full" if a.full else "default"].items():
        if getattr(a, k) is None:
            setattr(a, k, v)
    if a.warmup_steps is None:
        a.warmup_steps = max(1, a.max_steps // 10)
    if a.threads is None:
        a.threads = max(1, min(4, len(os.sched_getaffinity(0))))
    if a.precision == "auto":
        a.precision = "bf16-mixed" if cpu_has_bf16() else "fp32"
    if a.max_steps < 1 or a.save_steps < 1 or a.save_total_limit < 0 or a.threads < 1:
        ap.error("need --max_steps >= 1, --save_steps >= 1, --save_total_limit >= 0, "
                 "--threads >= 1")
    if a.d_model % a.heads:
        ap.error("--d_model must be divisible by --heads")
    if a.log_seconds <= 0:
        ap.error("--log_seconds must be positive")
    if a.commit_cmd is not None and not shlex.split(a.commit_cmd):
        ap.error("--commit_cmd: empty command")
    return a


def run_config(a):
    """What must match between a run and its resumption."""
    return {k: getattr(a, k) for k in ("max_steps", "seed", "threads", "precision", "lr",
                                       "warmup_steps", "layers", "d_model", "heads", "ctx",
                                       "batch", "max_text_mb")}


def lr_lambda_for(a):
    # transformers.get_cosine_schedule_with_warmup
    def f(step):
        if step < a.warmup_steps:
            return step / max(1, a.warmup_steps)
        p = (step - a.warmup_steps) / max(1, a.max_steps - a.warmup_steps)
        return max(0.0, 0.5 * (1.0 + math.cos(math.pi * p)))
    return f


def list_checkpoints(out):
    """[(step, path)] of OUTPUT_DIR/checkpoint-N directories."""
    found = []
    for name in os.listdir(out):
        m = CKPT_RE.fullmatch(name)
        if m and os.path.isdir(os.path.join(out, name)):
            found.append((int(m.group(1)), os.path.join(out, name)))
    return found


class HashingWriter:
    """A binary file that hashes every byte written to it.  torch.save and
    write_safetensors accept file objects, so the digest is of exactly the
    bytes training handed to the filesystem."""

    def __init__(self, path):
        self.f = open(path, "wb")
        self.sha = hashlib.sha256()

    def write(self, b):
        self.sha.update(b)
        return self.f.write(b)

    def flush(self):
        self.f.flush()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()


class Manifest:
    """OUTPUT_DIR-relative path -> sha256 of checkpoint files, kept on disk
    (atomically replaced) in sha256sum format."""

    def __init__(self, path, out):
        self.path, self.out, self.sums = path, out, {}
        if path and os.path.exists(path):
            with open(path) as f:
                for line in f:
                    digest, name = line.rstrip("\n").split("  ", 1)
                    self.sums[name] = digest

    def add(self, name, digest):
        self.sums[name] = digest

    def save(self):
        if not self.path:
            return
        live = {n: d for n, d in self.sums.items()
                if os.path.isdir(os.path.join(self.out, n.split("/", 1)[0]))}
        self.sums = live
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            for n in sorted(live):
                f.write("%s  %s\n" % (live[n], n))
        os.replace(tmp, self.path)


def rotate_checkpoints(out, limit, newest):
    """Trainer._rotate_checkpoints with use_mtime=True (ties: step number)."""
    if limit <= 0:
        return
    ckpts = sorted(list_checkpoints(out), key=lambda sp: (os.path.getmtime(sp[1]), sp[0]))
    ckpts = [p for _, p in ckpts if p != newest] + [newest]   # never delete the newest
    for old in ckpts[: max(0, len(ckpts) - limit)]:
        log("deleting older checkpoint %s (save_total_limit %d)" % (os.path.basename(old), limit))
        shutil.rmtree(old)


def fsync_dir(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fmt_secs(s):
    return "%dm%02ds" % divmod(int(round(s)), 60) if s >= 60 else "%ds" % round(s)


class Progress:
    """The progress lines: one after the first step, each save and whenever
    half of --log_seconds has passed since the last line; and, from a thread
    of its own, one whenever a step or a save runs longer than
    --log_seconds, so that a line comes at least that often however slow
    the machine.  The time left assumes what is left costs what the steps
    so far did, saves included."""

    def __init__(self, first, last, every):
        self.first, self.last, self.every = first, last, every
        self.done = first - 1          # the last step finished
        self.loss = None
        self.t_start = self.t_shown = time.time()
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._beat, daemon=True)
        self.thread.start()

    def _left(self, now):
        if self.done < self.first:
            return "time left not known yet"
        per = (now - self.t_start) / (self.done - self.first + 1)
        return "%.2fs/step, %s left" % (per, fmt_secs(per * (self.last - self.done)))

    def step_done(self, step, loss, lr, force):
        with self.lock:
            now = time.time()
            self.done, self.loss = step, loss
            if step == self.first or force or now - self.t_shown >= self.every / 2:
                log("step %d/%d loss %.6f lr %.3e  %s" % (step, self.last, loss, lr,
                                                          self._left(now)))
                self.t_shown = now

    def shown(self):
        """A line (a save's) was just printed."""
        with self.lock:
            self.t_shown = time.time()

    def _beat(self):
        while not self.stopping.wait(min(1.0, self.every / 4)):
            with self.lock:
                now = time.time()
                if now - self.t_shown < self.every or self.done >= self.last:
                    continue
                log("step %d/%d running (%.0fs since the last line)  %s" %
                    (self.done + 1, self.last, now - self.t_shown, self._left(now)))
                self.t_shown = now

    def stop(self):
        self.stopping.set()
        self.thread.join()


class CommitWaiter:
    """Runs --commit_cmd OUTPUT_DIR after each save, one at a time on a
    thread of its own so that training goes on meanwhile, and logs how long
    after the end of the save it returned: an upper bound of the time the
    filesystem took to commit that checkpoint (later saves may be waited
    for too, never earlier ones)."""

    def __init__(self, cmd, out):
        self.argv = shlex.split(cmd) + [out] if cmd else None
        self.jobs = queue.Queue()
        self.failed = None
        self.thread = None
        if self.argv:
            self.thread = threading.Thread(target=self._run, daemon=True)
            self.thread.start()

    def after_save(self, name, saved_at):
        if self.thread:
            self.jobs.put((name, saved_at))

    def _run(self):
        while True:
            job = self.jobs.get()
            if job is None:
                return
            name, saved_at = job
            r = subprocess.run(self.argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            if r.returncode:
                self.failed = "%s: %s exited %d: %s" % (name, " ".join(self.argv),
                                                        r.returncode, r.stderr.decode().strip())
                log("error: " + self.failed)
                return
            log("%s: committed %.1fs after its save (%s)" %
                (name, time.time() - saved_at, " ".join(self.argv[:-1])))

    def finish(self):
        """Wait for the last commit; exit with an error if one failed."""
        if self.thread:
            self.jobs.put(None)
            self.thread.join()
        if self.failed:
            sys.exit("error: --commit_cmd failed: " + self.failed)


def save_checkpoint(a, step, model, opt, sched, state, manifest):
    t0 = time.time()
    name = "checkpoint-%d" % step
    final = os.path.join(a.output_dir, name)
    tmp = os.path.join(a.output_dir, "tmp-" + name)
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    written = {}

    def save(fname, write):
        with HashingWriter(os.path.join(tmp, fname)) as f:
            write(f)
        written[fname] = f.sha.hexdigest()

    sd = model.state_dict()
    save("model.safetensors", lambda f: mt.write_safetensors(f, sd, "BF16"))
    osd = opt.state_dict()
    osd["fp32_master_weights"] = {k: v.detach().clone() for k, v in sd.items()}
    save("optimizer.pt", lambda f: torch.save(osd, f))
    save("scheduler.pt", lambda f: torch.save(sched.state_dict(), f))
    rng = {"python": random.getstate(), "numpy": np.random.get_state(),
           "cpu": torch.get_rng_state()}
    save("rng_state.pth", lambda f: torch.save(rng, f))
    save("trainer_state.json",
         lambda f: f.write((json.dumps(state, indent=2, sort_keys=True) + "\n").encode()))
    if os.path.exists(final):          # a re-run over an old checkpoint
        shutil.rmtree(final)
    os.rename(tmp, final)
    fsync_dir(final)
    fsync_dir(a.output_dir)
    log("step %d: saved %s in %.1fs" % (step, final, time.time() - t0))
    for fname, digest in written.items():
        manifest.add(name + "/" + fname, digest)
    rotate_checkpoints(a.output_dir, a.save_total_limit, final)
    manifest.save()
    return name


def find_resume_checkpoint(a):
    if a.resume != "latest":
        return a.resume
    ckpts = list_checkpoints(a.output_dir) if os.path.isdir(a.output_dir) else []
    if not ckpts:
        sys.exit("error: --resume: no checkpoint-N in %s" % a.output_dir)
    return max(ckpts)[1]


def main(argv=None):
    a = parse_args(argv)
    t0 = time.time()
    torch.set_num_threads(a.threads)
    random.seed(a.seed)
    np.random.seed(a.seed)
    torch.manual_seed(a.seed)
    os.makedirs(a.output_dir, exist_ok=True)
    manifest = Manifest(a.sha256_manifest, a.output_dir)

    ck = resume_state = None
    if a.resume:
        ck = find_resume_checkpoint(a)
        with open(os.path.join(ck, "trainer_state.json")) as f:
            resume_state = json.load(f)
    # A resumed run reads the files its checkpoint names (a package
    # installed since the save changes what a scan would find); the sha256
    # check below still refuses a corpus whose contents changed.
    pinned = resume_state.get("corpus_files") if resume_state else None
    data, used, corpus_sha = mt.load_training_data(None, a.max_text_mb, a.ctx + 2,
                                                   top=a.corpus_root, pinned=pinned)
    mt.Linear.use_conv = False  # matmuls: oneDNN under bf16 autocast, else the BLAS (OpenBLAS)
    model = mt.GPT(256, a.ctx, a.layers, a.d_model, a.heads)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda_for(a))
    state = {"global_step": 0, "max_steps": a.max_steps, "save_steps": a.save_steps,
             "log_history": [], "config": run_config(a), "corpus_sha256": corpus_sha,
             "corpus_files": used}
    log("corpus: %d files, %d bytes; model: %d params, %d layers, d_model %d, ctx %d, "
        "batch %d; %s on %d threads" %
        (len(used), len(data), sum(p.numel() for p in model.parameters()), a.layers, a.d_model,
         a.ctx, a.batch, a.precision, a.threads))

    if a.resume:
        state = resume_state
        if state.get("config") != run_config(a) or state.get("corpus_sha256") != corpus_sha:
            sys.exit("error: %s was written by a run with another config or corpus:\n"
                     "  config %s, corpus sha256 %s\n  config %s, corpus sha256 %s now"
                     % (ck, state.get("config"), state.get("corpus_sha256"), run_config(a),
                        corpus_sha))
        state["corpus_files"] = used   # a checkpoint written before the list was kept
        osd = torch.load(os.path.join(ck, "optimizer.pt"), map_location="cpu")
        master = osd.pop("fp32_master_weights")
        model.load_state_dict(master)
        # the bf16 model file must be the master weights rounded
        _, st = mt.read_safetensors(os.path.join(ck, "model.safetensors"))
        for k, v in master.items():
            if not torch.equal(st[k].view(torch.int16), v.to(torch.bfloat16).view(torch.int16)):
                sys.exit("error: %s: model.safetensors tensor %s does not match the "
                         "optimizer's master weights" % (ck, k))
        opt.load_state_dict(osd)
        sched.load_state_dict(torch.load(os.path.join(ck, "scheduler.pt"), map_location="cpu"))
        rng = torch.load(os.path.join(ck, "rng_state.pth"), map_location="cpu")
        random.setstate(rng["python"])
        np.random.set_state(rng["numpy"])
        torch.set_rng_state(rng["cpu"])
        log("resumed from %s at step %d" % (ck, state["global_step"]))

    offs = torch.arange(a.ctx + 1)
    last = min(a.max_steps, a.stop_after or a.max_steps)
    first = state["global_step"] + 1
    waiter = CommitWaiter(a.commit_cmd, a.output_dir)
    bf16 = a.precision == "bf16-mixed"
    progress = Progress(first, last, a.log_seconds)
    model.train()
    for step in range(first, last + 1):
        ix = torch.randint(len(data) - a.ctx - 1, (a.batch,))   # global RNG: in rng_state
        chunk = data[ix[:, None] + offs[None, :]]
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            _, loss = model(chunk[:, :-1], chunk[:, 1:])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        lr = sched.get_last_lr()[0]
        opt.step()
        sched.step()
        state["global_step"] = step
        state["log_history"].append({"step": step, "loss": loss.item(), "learning_rate": lr})
        saving = step % a.save_steps == 0 or step == a.max_steps
        progress.step_done(step, loss.item(), lr, saving)
        if saving:
            name = save_checkpoint(a, step, model, opt, sched, state, manifest)
            waiter.after_save(name, time.time())
            progress.shown()
    progress.stop()
    waiter.finish()
    log("done at step %d in %.1fs" % (state["global_step"], time.time() - t0))




if __name__ == "__main__":
    main()
