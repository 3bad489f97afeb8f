#!/usr/bin/env bash
# tests/fs_rotation.sh - Hugging Face Trainer checkpoint rotation with
# save_total_limit=2 through the mount: checkpoint-1..8 (bf16
# model.safetensors drifting by a few ULPs per step, an optimizer.pt with
# fp32 Adam moments, trainer_state.json; even steps saved as
# tmp-checkpoint-N and renamed, as recent Trainers do), shutil.rmtree of the
# oldest whenever more than 2 are left.  After "ulpfs umount" (every
# rebase done) the store must track what is kept: objects/ smaller than 3
# raw checkpoints and within 1.5x of what the codec needs for the two kept
# checkpoints -- not proportional to all 8 -- and after a remount every kept
# file must be exact.
# make check may run this with a POSIX sh: it needs bash.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/fs_lib.sh"
fs_init

MNT=$WORK/mnt
REF=$WORK/ref
N=${ROTATION_CHECKPOINTS:-8}
ELEMS=${ROTATION_ELEMS:-2097152} # bf16 model 4 MiB, optimizer.pt 8 MiB
LIMIT=2

step "generating $N reference checkpoints in a plain directory"
"$PY" "$FS_UTIL" trainer "$REF" --n "$N" --elems "$ELEMS" || die "fs_util.py trainer failed"
ckpt_raw=$(fs_file_bytes "$REF/checkpoint-1")
say "one checkpoint: $ckpt_raw bytes; $N checkpoints: $(fs_file_bytes "$REF") bytes"

# what the codec needs offline for the two kept checkpoints, and for all N
"$ULPFS" bench --no-baselines --reps 1 "$REF/checkpoint-$((N - 1))"/* "$REF/checkpoint-$N"/* >"$WORK/bench-kept.txt" 2>&1
kept_codec=$(awk '$1 == "TOTAL" { print $3 }' "$WORK/bench-kept.txt")
"$ULPFS" bench --no-baselines --reps 1 $(for k in $(seq 1 "$N"); do echo "$REF/checkpoint-$k"/*; done) >"$WORK/bench-all.txt" 2>&1
all_codec=$(awk '$1 == "TOTAL" { print $3 }' "$WORK/bench-all.txt")
[ -n "$kept_codec" ] && [ -n "$all_codec" ] || { cat "$WORK"/bench-*.txt >&2; die "ulpfs bench failed"; }

cat >"$WORK/rotate.py" <<'PY'
import os, re, shutil, sys
ref, out, n, limit = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])


def sorted_checkpoints():  # as transformers.Trainer._sorted_checkpoints
    found = []
    for name in os.listdir(out):
        m = re.fullmatch(r"checkpoint-(\d+)", name)
        if m and os.path.isdir(os.path.join(out, name)):
            found.append((int(m.group(1)), os.path.join(out, name)))
    return [p for _, p in sorted(found)]


for step in range(1, n + 1):
    name = "checkpoint-%d" % step
    dst = os.path.join(out, name)
    if step % 2 == 0:  # recent Trainers: write tmp-checkpoint-N, then rename
        tmp = os.path.join(out, "tmp-" + name)
        shutil.copytree(os.path.join(ref, name), tmp)
        os.rename(tmp, dst)
    else:
        os.makedirs(dst)
        for f in sorted(os.listdir(os.path.join(ref, name))):
            shutil.copyfile(os.path.join(ref, name, f), os.path.join(dst, f))
    ckpts = sorted_checkpoints()
    for old in ckpts[: max(0, len(ckpts) - limit)]:
        print("  step %d: saved %s, deleting %s" % (step, name, os.path.basename(old)))
        shutil.rmtree(old)
print("  kept: " + " ".join(sorted(os.listdir(out))))
PY

# run_pass NAME STORE OPTS
run_pass() {
	PASS=$1 STORE=$2 OPTS=$3
	fs_mount "$STORE" "$MNT" "$OPTS"

	step "$PASS: training loop: save checkpoint-N, rotate with save_total_limit=$LIMIT (rmtree of the oldest)"
	"$PY" "$WORK/rotate.py" "$REF" "$MNT" "$N" "$LIMIT" || bad "the rotation loop failed in the mount"
	kept=$(ls "$MNT" | tr '\n' ' ')
	expect_kept="checkpoint-$((N - 1)) checkpoint-$N "
	[ "$kept" = "$expect_kept" ] && ok "the mount holds exactly: $kept" || bad "the mount holds '$kept', expected '$expect_kept'"
	for k in $((N - 1)) "$N"; do
		fs_compare_trees "$REF/checkpoint-$k" "$MNT/checkpoint-$k" "checkpoint-$k before umount"
	done

	step "$PASS: ulpfs umount (drains the queue, finishes rebases), then measure the store"
	fs_umount "$MNT"
	n=$(fs_staged_count "$STORE")
	[ "$n" -eq 0 ] && ok "staging is empty" || bad "$n files left in staging/ after umount"
	obj=$(fs_file_bytes "$STORE/objects")
	nobj=$(find "$STORE/objects" -type f | wc -l)
	say "objects/: $nobj files, $obj bytes ($(fs_mib "$obj") MiB)"
	say "one raw checkpoint: $ckpt_raw; codec for the 2 kept checkpoints: $kept_codec; codec for all $N: $all_codec"
	bound=$((3 * ckpt_raw))
	[ "$all_codec" -gt "$bound" ] || say "note: even keeping all $N would fit under 3 raw checkpoints; the bound below is weak"
	if [ "$obj" -lt "$bound" ]; then
		ok "objects/ ($obj) < 3 raw checkpoints ($bound)"
	else
		bad "objects/ ($obj bytes) >= 3 raw checkpoints ($bound): deleted checkpoints were not reclaimed (all $N would be about $all_codec)"
	fi
	lim=$((kept_codec * 3 / 2 + 1048576))
	if [ "$obj" -le "$lim" ]; then
		ok "objects/ tracks what is kept: $obj <= 1.5 x $kept_codec + 1 MiB"
	else
		bad "objects/ ($obj bytes) > 1.5 x the codec size of the kept checkpoints ($kept_codec): the store does not track what is kept (keeping all $N: $all_codec)"
	fi
	[ "$obj" -gt 0 ] || bad "objects/ is empty"

	step "$PASS: remount: only the kept checkpoints, bit-exact"
	fs_mount "$STORE" "$MNT" "$OPTS"
	kept=$(ls "$MNT" | tr '\n' ' ')
	[ "$kept" = "$expect_kept" ] && ok "after remount the mount holds exactly: $kept" || bad "after remount: '$kept', expected '$expect_kept'"
	for k in $((N - 1)) "$N"; do
		fs_compare_trees "$REF/checkpoint-$k" "$MNT/checkpoint-$k" "checkpoint-$k after remount"
	done
	out=$("$PY" "$FS_UTIL" torch-check "$MNT/checkpoint-$N/optimizer.pt" "$REF/checkpoint-$N/optimizer.pt" 2>&1) &&
		ok "torch.load of checkpoint-$N/optimizer.pt through the mount" || bad "torch.load: $out"
	fs_umount "$MNT"
}

run_pass "pass 1 (defaults)" "$WORK/store1" ""
# bounded chains and a tiny decoded-chunk cache: every read decodes through
# keyframes and rebased versions, one encoder thread
run_pass "pass 2 (keyframe=2,encoders=1,cache=1M)" "$WORK/store2" "keyframe=2,encoders=1,cache=1M"
fs_finish
