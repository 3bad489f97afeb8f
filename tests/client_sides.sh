#!/usr/bin/env bash
# tests/client_sides.sh - contexts from the rest of the checkpoint, through
# real mounts: a PyTorch training run (examples/train.py --quick) writes
# Trainer-style checkpoints whose optimizer.pt holds fp32 master weights
# beside model.safetensors's bf16 copy.
#   - the run reads back bit-exact against the same run in a plain
#     directory, on a mount with side=1 (the default) and one with side=0;
#   - with side=1 every optimizer.pt names its own checkpoint's
#     model.safetensors as its side (after the flips too), with side=0 none
#     does, and the store is smaller by the master weights' saving;
#   - the model of a checkpoint deleted (as rotation does), then gc: the
#     optimizer.pt is coded again without it, reads exactly, and no object
#     is left behind;
#   - after a remount every file and every version (.ulpfs/versions) is
#     bit-exact, and ulpfs verify passes.
# make check may run this with a POSIX sh: it needs bash.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/fs_lib.sh"
fs_init

TRAIN_PY=$FS_SRCDIR/examples/train.py
[ -r "$TRAIN_PY" ] || die "$TRAIN_PY not found"
REF=$WORK/ref
TRAIN=("$PY" "$TRAIN_PY" --quick --seed 11 --threads 1)


# sides MNT: "PATH SIDE" for every live version under MNT/run (SIDE: the
# side's path, or -).
sides() { fs_sides "$1/run" | awk '{ print $1, $3 }'; }

step "reference: the same deterministic run in a plain directory"
train "$WORK/ref.log" --output_dir "$REF" || die "reference run failed"
nck=$(ls -d "$REF"/checkpoint-* | wc -l)
[ "$nck" -ge 3 ] || die "the reference run saved $nck checkpoints"
say "$nck checkpoints, $(fs_file_bytes "$REF") bytes"

step "training into a mount with side=1 and into one with side=0"
fs_mount "$WORK/store" "$WORK/mnt"
fs_mount "$WORK/store0" "$WORK/mnt0" side=0
train "$WORK/mnt.log" --output_dir "$WORK/mnt/run"
train "$WORK/mnt0.log" --output_dir "$WORK/mnt0/run"
for m in mnt mnt0; do
	"$ULPFS" sync "$WORK/$m" || bad "ulpfs sync $m failed"
	"$ULPFS" gc "$WORK/$m" || bad "ulpfs gc $m failed" # the flips done
	fs_compare_trees "$REF" "$WORK/$m/run" "$m: the run read back"
done

step "every optimizer.pt is coded given its own checkpoint's model"
sides "$WORK/mnt" >"$WORK/sides"
n_opt=0 n_good=0
while read -r p s; do
	case $p in
	*/optimizer.pt)
		n_opt=$((n_opt + 1))
		[ "$s" = "${p%/optimizer.pt}/model.safetensors" ] && n_good=$((n_good + 1)) ||
			bad "$p: side $s"
		;;
	*) [ "$s" = - ] || bad "$p has a side: $s" ;;
	esac
done <"$WORK/sides"
[ "$n_opt" -eq "$nck" ] && [ "$n_good" -eq "$nck" ] &&
	ok "$n_good of $nck optimizer.pt versions name their checkpoint's model.safetensors" ||
	bad "$n_good of $n_opt optimizer.pt versions ($nck checkpoints) have the right side"
n0=$(sides "$WORK/mnt0" | awk '$2 != "-"' | wc -l)
[ "$n0" -eq 0 ] && ok "side=0: no version has a side" || bad "side=0: $n0 versions have a side"

step "store sizes, side=1 against side=0"
obj=$(fs_file_bytes "$WORK/store/objects")
obj0=$(fs_file_bytes "$WORK/store0/objects")
# The master weights are a third of each optimizer.pt: about 16 of their
# 22-32 bits go; the whole store must shrink by well over 3%.
say "objects/: side=1 $obj bytes, side=0 $obj0 bytes (ratio $(calc "$obj / $obj0"))"
[ "$obj" -gt 0 ] && [ $((obj * 100)) -lt $((obj0 * 97)) ] &&
	ok "side=1 stores $(calc "100 - 100 * $obj / $obj0" 1)% less" ||
	bad "side=1 ($obj bytes) is not smaller than side=0 ($obj0) by 3%"
fs_umount "$WORK/mnt0"

step "the model of the oldest checkpoint deleted, then gc"
first=$(ls -d "$REF"/checkpoint-* | sort -t- -k2 -n | head -1)
first=$(basename "$first")
rm "$WORK/mnt/run/$first/model.safetensors" || bad "rm failed"
cmp "$REF/$first/optimizer.pt" "$WORK/mnt/run/$first/optimizer.pt" &&
	ok "$first/optimizer.pt reads exactly with its side a ghost" ||
	bad "$first/optimizer.pt differs once its side is deleted"
"$ULPFS" gc "$WORK/mnt" || bad "ulpfs gc failed"
s=$(sides "$WORK/mnt" | awk -v p="run/$first/optimizer.pt" '$1 == p { print $2 }')
[ "$s" = - ] && ok "$first/optimizer.pt coded again without the deleted model" ||
	bad "$first/optimizer.pt: side '$s' after gc"
cmp "$REF/$first/optimizer.pt" "$WORK/mnt/run/$first/optimizer.pt" &&
	ok "$first/optimizer.pt reads exactly after gc" || bad "$first/optimizer.pt differs after gc"
read -r nv no < <(fs_versions_and_objects "$WORK/store" "$WORK/mnt")
[ "$nv" = "$no" ] && ok "$nv live versions, $no objects: the model's object went" ||
	bad "$nv live or ghost versions but $no objects"

step "remount: every file and every version bit-exact"
cp -r "$REF" "$WORK/expect"
rm "$WORK/expect/$first/model.safetensors"
fs_remount "$WORK/store" "$WORK/mnt"
fs_compare_trees "$WORK/expect" "$WORK/mnt/run" "after the remount"
nver=0
while read -r f; do
	f=${f#./}
	for v in "$WORK/mnt/.ulpfs/versions/run/$f"/*; do
		nver=$((nver + 1))
		cmp -s "$WORK/expect/$f" "$v" || bad "version $v differs from $f"
	done
done < <(cd "$WORK/expect" && find . -type f)
[ "$nver" -gt 0 ] && ok "$nver versions compared" || bad "no version found under .ulpfs/versions"
out=$("$ULPFS" verify "$WORK/mnt" 2>&1) && ok "ulpfs verify: ${out##*$'\n'}" ||
	bad "ulpfs verify failed: $out"
fs_umount "$WORK/mnt"
fs_finish
