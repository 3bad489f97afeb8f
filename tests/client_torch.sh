#!/usr/bin/env bash
# tests/client_torch.sh - a real PyTorch training run (examples/train.py:
# the byte-level GPT of bench/make_trajectory.py on local text) with its
# --output_dir on the mount, saving Hugging Face Trainer-style
# checkpoint-N/ directories (tmp-checkpoint-N renamed, fsync) rotated with
# save_total_limit=2 (shutil.rmtree of the oldest by mtime):
#   - the kept checkpoints are bit-exact (sha256) against the same
#     deterministic run in a plain directory, before and after a remount;
#   - torch.load of every .pt/.pth through the mount equals the reference,
#     numpy.memmap of every model.safetensors tensor equals the reference
#     file and the run's fp32 master weights rounded to bf16;
#   - a run preempted after step 30, remounted, then --resume'd from the
#     checkpoint read back through the mount continues exactly as the
#     uninterrupted run: same loss at step 31, bit-identical checkpoints;
#   - after ulpfs umount the store holds about what is kept, not all 12
#     checkpoints written.
# make check may run this with a POSIX sh: it needs bash.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/fs_lib.sh"
fs_init

TRAIN_PY=$FS_SRCDIR/examples/train.py
[ -r "$TRAIN_PY" ] || die "$TRAIN_PY not found"
REF=$WORK/ref
STORE=$WORK/store
MNT=$WORK/mnt
TRAIN=("$PY" "$TRAIN_PY" --quick --seed 7 --save_total_limit 2 --threads 1)
KEPT="checkpoint-50 checkpoint-60 "

kept_in() { ls "$1" | tr '\n' ' '; }

cat >"$WORK/check_run.py" <<'PY'
# check_run.py FS_UTIL GOT_DIR REF_DIR WHAT: for every checkpoint-N of
# REF_DIR, in one process (each Python start with torch costs seconds):
#   - torch.load of optimizer.pt and scheduler.pt equals the reference's
#     (tests/fs_util.py torch-check);
#   - every tensor of model.safetensors, numpy.memmap'ed, equals the
#     reference file's (fs_util.py safetensors-check);
#   - rng_state.pth loads and equals the reference; every memmapped
#     model.safetensors tensor equals the fp32 master weights of REF's
#     optimizer.pt rounded to bf16.
# Prints "ok: ..." or "FAIL: ..." per check; exits 1 if any failed.
import contextlib, io, json, os, sys, types
import numpy as np
import torch
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(sys.argv[1]))
import fs_util
got_dir, ref_dir, what = sys.argv[2:5]
fails = 0


def report(ok, msg):
    global fails
    fails += not ok
    print("%s: %s: %s" % ("ok" if ok else "FAIL", what, msg))


def util(fn, c, f):
    a = types.SimpleNamespace(file="%s/%s/%s" % (got_dir, c, f), ref="%s/%s/%s" % (ref_dir, c, f))
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            rc = fn(a)
    except Exception as e:
        return False, "%s/%s: %r" % (c, f, e)
    return rc == 0, out.getvalue().strip().rsplit(": ", 1)[-1]


def rng_and_master(c):
    got, ref = got_dir + "/" + c, ref_dir + "/" + c
    g = torch.load(got + "/rng_state.pth", map_location="cpu")
    r = torch.load(ref + "/rng_state.pth", map_location="cpu")
    assert sorted(g) == sorted(r) == ["cpu", "numpy", "python"], sorted(g)
    assert g["python"] == r["python"], "python RNG state differs"
    assert torch.equal(g["cpu"], r["cpu"]), "torch RNG state differs"
    assert g["numpy"][0] == r["numpy"][0] and np.array_equal(g["numpy"][1], r["numpy"][1]) \
        and tuple(g["numpy"][2:]) == tuple(r["numpy"][2:]), "numpy RNG state differs"
    master = torch.load(ref + "/optimizer.pt", map_location="cpu")["fp32_master_weights"]
    path = got + "/model.safetensors"
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        hdr = json.loads(f.read(n))
    hdr.pop("__metadata__", None)
    assert sorted(hdr) == sorted(master), "tensor names differ"
    for k, info in hdr.items():
        b, e = info["data_offsets"]
        assert info["dtype"] == "BF16", (k, info["dtype"])
        mm = np.memmap(path, dtype="<i2", mode="r", offset=8 + n + b, shape=((e - b) // 2,))
        want = master[k].to(torch.bfloat16).view(torch.int16).reshape(-1).numpy()
        assert list(info["shape"]) == list(master[k].shape), k
        assert np.array_equal(np.asarray(mm), want), "tensor %s differs from the source" % k
        del mm
    return "rng_state.pth equal, %d memmapped bf16 tensors equal to the fp32 source" % len(hdr)


for c in sorted(d for d in os.listdir(ref_dir) if d.startswith("checkpoint-")):
    for f in ("optimizer.pt", "scheduler.pt"):
        ok, msg = util(fs_util.torch_check, c, f)
        report(ok, "torch.load %s/%s: %s" % (c, f, msg))
    ok, msg = util(fs_util.safetensors_check, c, "model.safetensors")
    report(ok, "memmap %s/model.safetensors vs the reference file: %s" % (c, msg))
    try:
        report(True, "%s: %s" % (c, rng_and_master(c)))
    except Exception as e:
        report(False, "%s: %r" % (c, e))
sys.exit(1 if fails else 0)
PY

# check_run DIR REFDIR WHAT: every kept checkpoint bit-exact, loadable, equal
check_run() {
	local dir=$1 refdir=$2 what=$3 line
	kept=$(kept_in "$dir")
	[ "$kept" = "$(kept_in "$refdir")" ] && ok "$what: holds exactly: $kept" ||
		bad "$what: holds '$kept', the plain-directory run kept '$(kept_in "$refdir")'"
	fs_compare_trees "$refdir" "$dir" "$what"
	while IFS= read -r line; do
		case $line in
		"ok: "*) ok "${line#ok: }" ;;
		*) bad "${line#FAIL: }" ;;
		esac
	done < <("$PY" "$WORK/check_run.py" "$FS_UTIL" "$dir" "$refdir" "$what" 2>&1 ||
		echo "FAIL: $what: check_run.py exited $?")
}

step "reference: the same deterministic runs in plain directories"
train "$WORK/ref-full.log" --output_dir "$REF/full" || die "reference run failed"
train "$WORK/ref-part.log" --output_dir "$REF/part" --stop_after 30 || die "reference run failed"
[ "$(kept_in "$REF/full")" = "$KEPT" ] || die "plain run kept '$(kept_in "$REF/full")', expected '$KEPT'"
[ "$(kept_in "$REF/part")" = "checkpoint-20 checkpoint-30 " ] || die "plain preempted run kept '$(kept_in "$REF/part")'"
ckpt_raw=$(fs_file_bytes "$REF/full/checkpoint-60")
say "one checkpoint: $ckpt_raw bytes ($(ls "$REF/full/checkpoint-60" | tr '\n' ' '))"

fs_mount "$STORE" "$MNT"

step "training into the mount: 60 steps, save every 10, save_total_limit 2"
train "$WORK/mnt-full.log" --output_dir "$MNT/full"
grep -q "deleting older checkpoint checkpoint-40" "$WORK/mnt-full.log" && ok "rotation ran (rmtree of checkpoint-10..40)" ||
	bad "no rotation in the log"
check_run "$MNT/full" "$REF/full" "full run, before remount"

step "a run preempted after step 30 (kept: checkpoint-20, checkpoint-30)"
train "$WORK/mnt-part.log" --output_dir "$MNT/resume" --stop_after 30
check_run "$MNT/resume" "$REF/part" "preempted run, before remount"

step "remount: kept checkpoints read back from the store"
fs_remount "$STORE" "$MNT"
check_run "$MNT/full" "$REF/full" "full run, after remount"
check_run "$MNT/resume" "$REF/part" "preempted run, after remount"

step "--resume from checkpoint-30 read through the mount, to step 60"
train "$WORK/mnt-resume.log" --output_dir "$MNT/resume" --resume
grep -q "resumed from $MNT/resume/checkpoint-30 at step 30" "$WORK/mnt-resume.log" &&
	ok "resumed from $MNT/resume/checkpoint-30 at step 30" ||
	{ bad "the run did not resume from checkpoint-30 in the mount"; sed 's/^/    | /' "$WORK/mnt-resume.log" >&2; }
want=$("$PY" -c 'import json,sys; h=json.load(open(sys.argv[1]))["log_history"]; print(repr([e["loss"] for e in h if e["step"]==31][0]))' "$REF/full/checkpoint-60/trainer_state.json")
got=$("$PY" -c 'import json,sys; h=json.load(open(sys.argv[1]))["log_history"]; print(repr([e["loss"] for e in h if e["step"]==31][0]))' "$MNT/resume/checkpoint-60/trainer_state.json")
got_log=$(sed -n 's/.*step 31\/[0-9]* loss \([0-9.]*\).*/\1/p' "$WORK/mnt-resume.log")
if [ -n "$want" ] && [ "$want" = "$got" ]; then
	ok "loss at step 31 after resume = uninterrupted run's: $got (log: $got_log)"
else
	bad "loss at step 31: resumed '$got', uninterrupted '$want'"
fi
check_run "$MNT/resume" "$REF/full" "resumed run vs the uninterrupted run (weights, optimizer, losses)"

step "ulpfs umount, then the store size under rotation"
fs_umount "$MNT"
n=$(fs_staged_count "$STORE")
[ "$n" -eq 0 ] && ok "staging is empty" || bad "$n files left in staging/ after umount"
obj=$(fs_file_bytes "$STORE/objects")
kept_raw=$((2 * $(fs_file_bytes "$REF/full")))
written=$((12 * ckpt_raw))
say "objects/: $obj bytes ($(fs_mib "$obj") MiB); kept (4 checkpoints): $kept_raw raw; written (12 checkpoints): about $written"
[ "$obj" -gt 0 ] || bad "objects/ is empty"
if [ "$obj" -le $((kept_raw * 5 / 4)) ]; then
	ok "objects/ ($obj) <= 1.25 x the raw size of the kept checkpoints ($kept_raw)"
else
	bad "objects/ ($obj bytes) > 1.25 x the raw kept checkpoints ($kept_raw): deleted checkpoints were not reclaimed (written: $written)"
fi

step "final remount: both runs bit-exact"
fs_mount "$STORE" "$MNT"
fs_compare_trees "$REF/full" "$MNT/full" "full run after the final remount"
fs_compare_trees "$REF/full" "$MNT/resume" "resumed run after the final remount"
fs_umount "$MNT"
fs_finish
