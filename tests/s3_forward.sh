#!/usr/bin/env bash
# tests/s3_forward.sh - forward deltas in the bucket with a sync after
# every checkpoint (real Swift s3api; src/objstore/reps.c).
#
# The local store keeps reverse chains (the newest standalone); each sync
# must upload the newest version, so the bucket holds it as a forward
# delta against the version before (a bucket keyframe every K), and the
# reverse delta its flip makes later is never uploaded.  Checked:
#   - what went up stays within 1.10 times the local store's objects
#     (local objects only: about 1.8 times);
#   - the bucket representations: versions 2.. of each file are forward
#     deltas against the one before, a keyframe every K (keyframe=4), no
#     chain deeper than K - 1; the bucket holds exactly the objects they
#     (and the versions without one) name;
#   - a fresh read-only mount from the bucket alone reads every version
#     exact and verify passes (it decodes the forward chains);
#   - a writer mounting from the bucket alone (a fresh cache) reads every
#     version, writes one more step, syncs: exact from another fresh mount;
#   - prune of versions that bases depend on: the dependants fall back to
#     their own objects; exact from a fresh mount, no orphans;
#   - verify on the writer (which also decodes the bucket-only objects
#     from the bucket) passes after the trajectory and after the prune.
#
# FUSE or Swift unavailable is a FAILURE unless ULPFS_ALLOW_SKIP=1.
#
# Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.

[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/s3_lib.sh"
s3_init

URL=s3://$S3_BUCKET/fwd
CACHE=$WORK/cache
MNT=$WORK/mnt
ROMNT=$WORK/ro
DATA=$WORK/data
STEPS=7
FILES="model.safetensors optim.safetensors"
PY=/usr/bin/python3
UTIL=$(dirname "$0")/fs_util.py
mkdir -p "$DATA" || die "mkdir $DATA"
"$PY" "$UTIL" drift "$DATA" --n $((STEPS + 1)) --elems $((1 << 19)) --dtype f32 \
	--seed 5 --name model.safetensors >/dev/null || die "fs_util drift"
"$PY" "$UTIL" drift "$DATA" --n $((STEPS + 1)) --elems $((1 << 18)) --dtype f32 \
	--seed 6 --name optim.safetensors >/dev/null || die "fs_util drift"
# Publishes at sync only; deferred uploads, as by default.
OPTS=upload_delay=3600,publish_interval=86400,keyframe=4

write_step() {
	local f
	for f in $FILES; do cp "$DATA/v$1/$f" "$MNT/$f" || bad "cp v$1/$f into the mount"; done
	fs_wait_committed "$CACHE"
	"$ULPFS" sync "$MNT" >"$WORK/sync.log" 2>&1 || bad "sync of step $1: $(cat "$WORK/sync.log")"
}

# check_versions ROOT UPTO WHAT [SKIP...]: the files are step UPTO, and
# version n of each is step n (but the SKIPped ones, pruned)
check_versions() {
	local root=$1 upto=$2 what=$3 f n bad_n=0 skip
	shift 3
	skip=" $* "
	for f in $FILES; do
		cmp -s "$DATA/v$upto/$f" "$root/$f" || { bad "$what: $f is not step $upto"; bad_n=1; }
		for n in $(seq 1 "$upto"); do
			case $skip in *" $n "*) continue ;; esac
			cmp -s "$DATA/v$n/$f" "$root/.ulpfs/versions/$f/$n" ||
				{ bad "$what: version $n of $f differs"; bad_n=1; }
		done
	done
	[ "$bad_n" = 0 ] && ok "$what: step $upto, every version of each file exact"
}

fresh_ro() { # UPTO WHAT [SKIP...]
	local upto=$1 what=$2
	shift 2
	rm -rf "$WORK/fresh"
	s3_mount "$URL" "$WORK/fresh" "$ROMNT" ro
	check_versions "$ROMNT" "$upto" "$what" "$@"
	"$ULPFS" verify "$ROMNT" >"$WORK/verify.log" 2>&1 && ok "$what: verify from the bucket alone" ||
		bad "$what: verify from a fresh cache: $(tail -5 "$WORK/verify.log")"
	fs_umount "$ROMNT"
}

# writer_verify WHAT: verify on the writer (mounted at MNT) passes, the
# bucket-only objects decoded from the bucket (tests/s3_verify.sh fails one)
writer_verify() {
	if "$ULPFS" verify "$MNT" >"$WORK/wverify.log" 2>&1; then
		ok "$1: verify on the writer: $(tail -n 1 "$WORK/wverify.log")"
	else
		bad "$1: verify on the writer: $(tail -n 5 "$WORK/wverify.log")"
	fi
}

# uploaded CACHE: object bytes the daemon's close summary counts
uploaded() {
	grep "uploaded .* objects" "$1/daemon.log" | tail -n 1 |
		sed -E 's/.*objects \(([0-9]+) bytes\).*/\1/'
}

sq() { "$PY" -c 'import sqlite3, sys
for r in sqlite3.connect(sys.argv[1]).execute(sys.argv[2]): print(*r)' "$@"; }

step "$STEPS steps, a sync after each"
s3_mount "$URL" "$CACHE" "$MNT" "$OPTS"
for i in $(seq 1 "$STEPS"); do write_step "$i"; done
"$ULPFS" gc "$MNT" >/dev/null 2>&1 || bad "gc"
writer_verify "after the trajectory"
fs_umount "$MNT"
up=$(uploaded "$CACHE")
loc=$(fs_file_bytes "$CACHE/objects")
[ -n "$up" ] && [ "$loc" -gt 0 ] || die "no traffic summary in $CACHE/daemon.log, or no local objects"
ratio=$(calc "$up / $loc" 4)
if awk "BEGIN { exit !($up <= 1.10 * $loc) }"; then
	ok "uploaded $up bytes of objects, $ratio x the local store's $loc"
else
	bad "uploaded $up bytes of objects, $ratio x the local store's $loc (want <= 1.10)"
fi

# Each file's versions: seq, its representation's base's seq, depth.
reps=$(sq "$CACHE/catalog.db" "SELECT v.path, v.seq, coalesce(b.seq, 0), r.depth
	FROM versions AS v JOIN bucket_reps AS r ON r.version = v.id AND r.state = 1
	LEFT JOIN versions AS b ON b.id = r.base ORDER BY v.path, v.seq")
nfwd=$(awk '$3 != 0 && $3 == $2 - 1' <<<"$reps" | wc -l)
deep=$(awk '$4 > 3' <<<"$reps" | wc -l)
nkey=$(awk '$3 == 0' <<<"$reps" | wc -l)
nrep=$(wc -l <<<"$reps")
if [ "$nrep" = $((2 * STEPS)) ] && [ "$nfwd" -ge $((2 * (STEPS - 3))) ] && [ "$deep" = 0 ] &&
	[ "$nkey" -ge 4 ] && [ $((nfwd + nkey)) = "$nrep" ]; then
	ok "bucket representations: $nfwd forward deltas against the version before, $nkey keyframes, none deeper than 3"
else
	bad "bucket representations (path seq base-seq depth): $(tr '\n' ';' <<<"$reps")"
fi
s3_expect_objects "after the trajectory" fwd "$CACHE/catalog.db"
fresh_ro "$STEPS" "a fresh cache from the bucket"

step "a writer mounting from the bucket alone"
W2=$WORK/cache2
s3_mount "$URL" "$W2" "$MNT" "$OPTS"
check_versions "$MNT" "$STEPS" "a writer from a fresh cache"
CACHE_SAVE=$CACHE
CACHE=$W2
write_step $((STEPS + 1))
fs_umount "$MNT"
fresh_ro $((STEPS + 1)) "after the new writer's step"
s3_expect_objects "after the new writer's step" fwd "$W2/catalog.db"

step "prune the versions bases depend on"
s3_mount "$URL" "$W2" "$MNT" "$OPTS"
for f in $FILES; do
	"$ULPFS" prune --keep-last 2 --keep-every 2 "$MNT/$f" >"$WORK/prune.log" 2>&1 ||
		bad "prune $f: $(cat "$WORK/prune.log")"
done
"$ULPFS" gc "$MNT" >"$WORK/gc.log" 2>&1 || bad "gc: $(cat "$WORK/gc.log")"
"$ULPFS" sync "$MNT" >"$WORK/sync.log" 2>&1 || bad "sync after prune: $(cat "$WORK/sync.log")"
writer_verify "after prune"
fs_umount "$MNT"
fresh_ro $((STEPS + 1)) "after prune" 1 3 5
s3_expect_objects "after prune, gc and sync" fwd "$W2/catalog.db"
CACHE=$CACHE_SAVE

fs_finish
