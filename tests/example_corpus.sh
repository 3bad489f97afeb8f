#!/usr/bin/env bash
# tests/example_corpus.sh - examples/train.py --resume reads the corpus its
# checkpoint names, so that a package installed between a save and the
# resume changes nothing, and still refuses a corpus that truly changed.
# The corpus root is a copy of some of /usr/share's text
# (--corpus_root), so the test can "install a package" into it:
#   - the run records the files it trained on in trainer_state.json;
#   - after a new file appears under the root (which a fresh scan now
#     takes in: checked), --resume goes on and writes checkpoints
#     bit-identical to the uninterrupted run's;
#   - a pinned file whose bytes changed: --resume refuses ("another
#     config or corpus"); a pinned file removed: --resume names it;
#   - a checkpoint that records no file list (written before this
#     change) resumes by scanning the root, as before.
# The runs are tiny (4 steps) in plain directories: what is tested is the
# example's resume, not the filesystem (client_torch.sh resumes through a
# mount).
# make check may run this with a POSIX sh: it needs bash.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/fs_lib.sh"
fs_init

TRAIN_PY=$FS_SRCDIR/examples/train.py
[ -r "$TRAIN_PY" ] || die "$TRAIN_PY not found"
ROOT=$WORK/share
TRAIN=("$PY" "$TRAIN_PY" --quick --max_steps 4 --save_steps 2 --seed 3 --threads 1
	--corpus_root "$ROOT")

# The corpus root: the licences of /usr/share/common-licenses that are
# plain text, and one package's documentation.
mkdir -p "$ROOT/common-licenses" "$ROOT/doc/pkg-b" || die "mkdir $ROOT"
n=0
for f in /usr/share/common-licenses/*; do
	[ -f "$f" ] && [ ! -L "$f" ] || continue
	cp "$f" "$ROOT/common-licenses/" || die "cp $f"
	n=$((n + 1))
	[ "$n" -lt 4 ] || break
done
[ "$n" -ge 2 ] || die "too few licences in /usr/share/common-licenses ($n)"
cp "$ROOT/common-licenses/$(ls "$ROOT/common-licenses" | head -n 1)" \
	"$ROOT/doc/pkg-b/copyright.txt" && echo "pkg-b: its own notice" >>"$ROOT/doc/pkg-b/copyright.txt" ||
	die "cannot write $ROOT/doc/pkg-b"

# The sha256 of the corpus a fresh scan of the root gives now.
scan_sha() {
	"$PY" - "$FS_SRCDIR/bench" "$ROOT" <<'PY'
import sys
sys.dont_write_bytecode = True
sys.path.insert(0, sys.argv[1])
import make_trajectory as mt
print(mt.load_training_data(None, 1.0, 66, top=sys.argv[2])[2])
PY
}
# A run expected to be refused: its status, nothing counted.
try_train() {
	local log=$1
	shift
	timeout -k 5 300 "${TRAIN[@]}" "$@" >"$log" 2>&1
}
state_key() { "$PY" -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))[sys.argv[2]]))' "$1" "$2"; }

step "the uninterrupted run and a run preempted after step 2"
train "$WORK/full.log" --output_dir "$WORK/full" || die "the uninterrupted run failed"
train "$WORK/part.log" --output_dir "$WORK/part" --stop_after 2 || die "the preempted run failed"
[ -d "$WORK/full/checkpoint-4" ] && [ -d "$WORK/part/checkpoint-2" ] &&
	[ ! -e "$WORK/part/checkpoint-4" ] || die "unexpected checkpoints: $(ls "$WORK/full" "$WORK/part")"
files=$(state_key "$WORK/part/checkpoint-2/trainer_state.json" corpus_files) ||
	die "checkpoint-2/trainer_state.json records no corpus_files"
nfiles=$("$PY" -c 'import json,sys; print(len(json.loads(sys.argv[1])))' "$files")
[ "$nfiles" -ge 3 ] && ok "the checkpoint records the $nfiles files it trained on" ||
	bad "corpus_files lists $nfiles files: $files"
for d in part part-changed part-gone part-old; do
	[ "$d" = part ] || cp -a "$WORK/part" "$WORK/$d" || die "cp -a part $d"
done
sha_before=$(scan_sha) || die "scanning $ROOT failed"

step "a package installed since the save"
mkdir -p "$ROOT/doc/aaa-new" &&
	printf 'A package installed between the save and the resume.\n%.0s' $(seq 200) \
		>"$ROOT/doc/aaa-new/copyright" || die "cannot install into $ROOT"
sha_after=$(scan_sha) || die "scanning $ROOT failed"
[ "$sha_after" != "$sha_before" ] && ok "a fresh scan now finds another corpus" ||
	bad "the new file did not change the scanned corpus (the test proves nothing)"
train "$WORK/resume.log" --output_dir "$WORK/part" --resume &&
	fs_compare_trees "$WORK/full/checkpoint-4" "$WORK/part/checkpoint-4" \
		"--resume went on: its checkpoint-4 vs the uninterrupted run's"

step "a pinned file changed, then one removed"
pinned=$("$PY" -c 'import json,sys; print(json.loads(sys.argv[1])[0])' "$files")
cp "$pinned" "$WORK/pinned.orig" && echo "one more line" >>"$pinned" || die "cannot change $pinned"
if try_train "$WORK/changed.log" --output_dir "$WORK/part-changed" --resume; then
	bad "--resume accepted a corpus whose file $pinned changed"
elif grep -q "another config or corpus" "$WORK/changed.log"; then
	ok "--resume refuses a changed corpus file: $(grep -m1 error: "$WORK/changed.log")"
else
	bad "--resume failed without saying why: $(tail -n 3 "$WORK/changed.log")"
fi
mv "$pinned" "$WORK/pinned.changed" || die "cannot remove $pinned"
if try_train "$WORK/gone.log" --output_dir "$WORK/part-gone" --resume; then
	bad "--resume accepted a corpus with $pinned removed"
elif grep -q "corpus file $pinned is gone" "$WORK/gone.log"; then
	ok "--resume names the file that is gone"
else
	bad "--resume failed without naming $pinned: $(tail -n 3 "$WORK/gone.log")"
fi
cp "$WORK/pinned.orig" "$pinned" || die "cannot restore $pinned"

step "a checkpoint without a file list resumes from a scan, as before"
rm -r "$ROOT/doc/aaa-new" || die "cannot remove the new package"
"$PY" - "$WORK/part-old/checkpoint-2/trainer_state.json" <<'PY' || die "cannot edit trainer_state.json"
import json, sys
with open(sys.argv[1]) as f:
    s = json.load(f)
del s["corpus_files"]
with open(sys.argv[1], "w") as f:
    f.write(json.dumps(s, indent=2, sort_keys=True) + "\n")
PY
train "$WORK/old.log" --output_dir "$WORK/part-old" --resume &&
	fs_compare_trees "$WORK/full/checkpoint-4" "$WORK/part-old/checkpoint-4" \
		"resumed from an old checkpoint vs the uninterrupted run"

fs_finish
