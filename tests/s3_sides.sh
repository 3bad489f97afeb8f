#!/usr/bin/env bash
# tests/s3_sides.sh - contexts from the rest of the checkpoint (sides,
# src/store/side.h) in a bucket with forward deltas (src/objstore/reps.c),
# real Swift s3api.  The checkpoints of a PyTorch training run
# (examples/train.py --quick) are written into a bucket-backed mount with
# a sync after each, as the quickstart's --commit_cmd does.  Checked:
#   - the bucket's forward deltas of optimizer.pt are coded given their
#     checkpoint's model.safetensors, as the local objects are (else the
#     bucket would hold the master weights at their fp32-delta cost);
#   - a fresh read-only mount from the bucket alone reads every file and
#     every version exact, names the same sides, and verify passes;
#   - the model of the oldest checkpoint deleted, gc (its optimizer.pt is
#     coded again without it, the model's row goes), sync: the bucket's
#     copies that read that model are dropped for the versions' own
#     objects, so a fresh mount still reads every version exact, and the
#     bucket holds exactly the objects the catalog names.
#
# FUSE or Swift unavailable is a FAILURE unless ULPFS_ALLOW_SKIP=1.
#
# Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.

[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/s3_lib.sh"
s3_init

TRAIN_PY=$FS_SRCDIR/examples/train.py
[ -r "$TRAIN_PY" ] || die "$TRAIN_PY not found"
URL=s3://$S3_BUCKET/sides
CACHE=$WORK/cache
MNT=$WORK/mnt
ROMNT=$WORK/ro
REF=$WORK/ref
TRAIN=("$PY" "$TRAIN_PY" --quick --seed 11 --threads 1)
# Publishes at sync only; deferred uploads, as by default.
OPTS=upload_delay=3600,publish_interval=86400

sq() { "$PY" -c 'import sqlite3, sys
for r in sqlite3.connect(sys.argv[1]).execute(sys.argv[2]): print(*r)' "$@"; }

# every_version EXPECT ROOT WHAT: every file of EXPECT reads exact under
# ROOT/run, and so does its one version (each checkpoint file is written
# once)
every_version() {
	local expect=$1 root=$2 what=$3 f v n=0
	fs_compare_trees "$expect" "$root/run" "$what"
	while read -r f; do
		f=${f#./}
		for v in "$root/.ulpfs/versions/run/$f"/*; do
			n=$((n + 1))
			cmp -s "$expect/$f" "$v" || bad "$what: version $v differs from $f"
		done
	done < <(cd "$expect" && find . -type f)
	[ "$n" -gt 0 ] && ok "$what: $n versions compared" || bad "$what: no version under .ulpfs/versions"
}

fresh_ro() { # EXPECT WHAT
	rm -rf "$WORK/fresh"
	s3_mount "$URL" "$WORK/fresh" "$ROMNT" ro
	every_version "$1" "$ROMNT" "$2"
	fs_sides "$ROMNT/run" >"$WORK/ro.sides"
	cmp -s "$WORK/ro.sides" "$WORK/w.sides" && ok "$2: the same sides as the writer's" ||
		bad "$2: sides differ: $(diff "$WORK/w.sides" "$WORK/ro.sides" | head -4 | tr '\n' ' ')"
	"$ULPFS" verify "$ROMNT" >"$WORK/verify.log" 2>&1 && ok "$2: verify from the bucket alone" ||
		bad "$2: verify from a fresh cache: $(tail -5 "$WORK/verify.log")"
	fs_umount "$ROMNT"
}

step "reference: the same deterministic run in a plain directory"
train "$WORK/ref.log" --output_dir "$REF" || die "reference run failed"
nck=$(ls -d "$REF"/checkpoint-* | wc -l)
[ "$nck" -ge 3 ] || die "the reference run saved $nck checkpoints"

# The checkpoints go in one at a time, each committed and synced before
# the next, so that every optimizer.pt after the first two has a forward
# delta (a sync overlapping the next save, as the quickstart's background
# ones may, finds that version flipped already and uploads its own object).
step "the run's checkpoints into a bucket-backed mount, a sync after each"
s3_mount "$URL" "$CACHE" "$MNT" "$OPTS"
mkdir -p "$MNT/run" || die "mkdir $MNT/run"
for ck in $(ls -d "$REF"/checkpoint-* | sort -t- -k2 -n); do
	cp -r "$ck" "$MNT/run/" || bad "cp $(basename "$ck") into the mount"
	fs_wait_committed "$CACHE"
	"$ULPFS" sync "$MNT" >"$WORK/sync.log" 2>&1 || bad "sync after $(basename "$ck"): $(cat "$WORK/sync.log")"
done
(cd "$REF" && find . -maxdepth 1 -type f) | while read -r f; do
	cp "$REF/$f" "$MNT/run/$f" || bad "cp $f into the mount"
done
"$ULPFS" sync "$MNT" >/dev/null 2>&1 || bad "sync"
"$ULPFS" gc "$MNT" >/dev/null 2>&1 || bad "gc" # the flips done
"$ULPFS" sync "$MNT" >/dev/null 2>&1 || bad "sync after gc"
every_version "$REF" "$MNT" "the writer"
fs_sides "$MNT/run" >"$WORK/w.sides"
nside=$(awk '$1 ~ /optimizer.pt$/ && $3 != "-"' "$WORK/w.sides" | wc -l)
[ "$nside" -eq "$nck" ] && ok "$nside of $nck optimizer.pt versions have a side" ||
	bad "$nside of $nck optimizer.pt versions have a side: $(tr '\n' ';' <"$WORK/w.sides")"
# optimizer.pt's bucket copies: forward deltas given the model
fwd=$(sq "$CACHE/catalog.db" "SELECT count(*) FROM bucket_reps AS r
	JOIN versions AS v ON v.id = r.version WHERE r.state = 1
	AND v.path LIKE '%/optimizer.pt' AND r.base IS NOT NULL AND r.side IS NOT NULL")
[ "$fwd" -ge $((nck - 2)) ] && ok "$fwd optimizer.pt forward deltas in the bucket read their model" ||
	bad "$fwd optimizer.pt forward deltas in the bucket read their model (want >= $((nck - 2)))"
s3_expect_objects "after the run" sides "$CACHE/catalog.db"
out=$("$ULPFS" verify "$MNT" 2>&1) && ok "verify on the writer: ${out##*$'\n'}" ||
	bad "verify on the writer: $out"
fresh_ro "$REF" "a fresh cache from the bucket"

step "the model of the oldest checkpoint deleted, gc, sync"
first=$(basename "$(ls -d "$REF"/checkpoint-* | sort -t- -k2 -n | head -1)")
rm "$MNT/run/$first/model.safetensors" || bad "rm failed"
"$ULPFS" gc "$MNT" >"$WORK/gc.log" 2>&1 || bad "gc: $(cat "$WORK/gc.log")"
"$ULPFS" sync "$MNT" >"$WORK/sync.log" 2>&1 || bad "sync: $(cat "$WORK/sync.log")"
s=$(awk -v p="run/$first/optimizer.pt" '$1 == p { print $3 }' < <(fs_sides "$MNT/run"))
[ "$s" = - ] && ok "$first/optimizer.pt coded again without the deleted model" ||
	bad "$first/optimizer.pt: side '$s' after gc"
left=$(sq "$CACHE/catalog.db" "SELECT count(*) FROM bucket_reps AS r
	WHERE r.side IS NOT NULL AND r.side NOT IN (SELECT id FROM versions WHERE state <> 2)")
[ "$left" = 0 ] && ok "no bucket copy reads a model that is gone" ||
	bad "$left bucket copies read a model that is gone"
fs_sides "$MNT/run" >"$WORK/w.sides"
fs_umount "$MNT"
cp -r "$REF" "$WORK/expect"
rm "$WORK/expect/$first/model.safetensors"
s3_expect_objects "after the model's deletion" sides "$CACHE/catalog.db"
fresh_ro "$WORK/expect" "after the model's deletion, a fresh cache"

fs_finish
