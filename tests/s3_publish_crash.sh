#!/usr/bin/env bash
# tests/s3_publish_crash.sh - kill -9 inside a publish (real Swift s3api).
#
# A publish with deferred uploads closes the gate, uploads everything
# pending, snapshots the catalog, uploads the snapshot, PUTs the pointer,
# records the pointer's name in the cache, then deletes what the catalog
# dropped (src/objstore/publish.c); before the flush, each new version is
# coded as a forward delta against the step before for the bucket, whose
# upload is the point "forward" (src/objstore/reps.c).  Each round writes one more step of two
# fp32 checkpoints (their older versions become reverse deltas), then
# `ulpfs sync` with the daemon set to kill itself at a seeded point of that
# publish (ULPFS_TEST_CRASH_PUBLISH, the seed is printed; ULPFS_TEST_SEED
# replays one).  After each kill:
#   - a read-only mount from a fresh cache directory (the bucket alone)
#     sees the published catalog: the step before the kill, or the new one
#     once the pointer was PUT; every version it names is exact and verify
#     passes;
#   - the writer's remount from its own cache keeps its catalog (no move
#     aside, even when the kill came between the pointer PUT and its record
#     in the cache), every closed version is exact, and after gc and sync
#     the bucket holds exactly the objects the catalog names.
#
# FUSE or Swift unavailable is a FAILURE unless ULPFS_ALLOW_SKIP=1.
#
# Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.

[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/s3_lib.sh"
s3_init

SEED=${ULPFS_TEST_SEED:-$(((RANDOM << 15) | RANDOM))}
RANDOM=$SEED
say "seed $SEED (ULPFS_TEST_SEED=$SEED replays it)"

URL=s3://$S3_BUCKET/pubcrash
CACHE=$WORK/cache
MNT=$WORK/mnt
ROMNT=$WORK/ro
DATA=$WORK/data
ROUNDS=6
FILES="model.safetensors optim.safetensors"
PY=/usr/bin/python3
UTIL=$(dirname "$0")/fs_util.py
# Tensors of about 2 MiB and 1 MiB, fp32: the float codec, reverse deltas.
mkdir -p "$DATA" || die "mkdir $DATA"
"$PY" "$UTIL" drift "$DATA" --n $((ROUNDS + 1)) --elems $((1 << 19)) --dtype f32 \
	--seed 3 --name model.safetensors >/dev/null || die "fs_util drift"
"$PY" "$UTIL" drift "$DATA" --n $((ROUNDS + 1)) --elems $((1 << 18)) --dtype f32 \
	--seed 4 --name optim.safetensors >/dev/null || die "fs_util drift"
for f in $FILES; do
	[ -s "$DATA/v$((ROUNDS + 1))/$f" ] || die "fs_util drift wrote no $DATA/v$((ROUNDS + 1))/$f"
done
# Publishes happen at sync only: the periodic one would race the kill.
OPTS=upload_delay=3600,publish_interval=86400

# write_step I: step I's files into the mount, committed locally
write_step() {
	local f
	for f in $FILES; do cp "$DATA/v$1/$f" "$MNT/$f" || bad "cp v$1/$f into the mount"; done
	rm -f "$MNT/scratch-$(($1 - 1))"
	head -c 100000 /dev/urandom >"$MNT/scratch-$1" || bad "write scratch-$1"
	fs_wait_committed "$CACHE"
}

# check_versions ROOT UPTO WHAT: the files are step UPTO, and version n of
# each is step n
check_versions() {
	local root=$1 upto=$2 what=$3 f n bad_n=0
	for f in $FILES; do
		cmp -s "$DATA/v$upto/$f" "$root/$f" || { bad "$what: $f is not step $upto (seed $SEED)"; bad_n=1; }
		for n in $(seq 1 "$upto"); do
			cmp -s "$DATA/v$n/$f" "$root/.ulpfs/versions/$f/$n" ||
				{ bad "$what: version $n of $f differs (seed $SEED)"; bad_n=1; }
		done
		[ -e "$root/.ulpfs/versions/$f/$((upto + 1))" ] &&
			{ bad "$what: $f has a version $((upto + 1))"; bad_n=1; }
	done
	[ "$bad_n" = 0 ] && ok "$what: step $upto, all ${upto} versions of each file exact"
}

no_orphans() { s3_expect_objects "$1" pubcrash "$CACHE/catalog.db"; }

step "step 1, published cleanly"
s3_mount "$URL" "$CACHE" "$MNT" "$OPTS"
write_step 1
"$ULPFS" sync "$MNT" >"$WORK/sync.log" 2>&1 || bad "sync of step 1: $(cat "$WORK/sync.log")"
fs_umount "$MNT"

# The deletes come after a publish that dropped objects: a version that
# is a bucket keyframe keeps its object when it flips (src/objstore/reps.c),
# so each step also deletes the scratch file of the step before (a bucket
# keyframe: dropped by the publish, deleted after it), and every point is
# reached in every round.
POINTS=(flush flush flush snapshot pointer record deletes forward forward)
for i in $(seq 2 $((ROUNDS + 1))); do
	point=${POINTS[RANDOM % ${#POINTS[@]}]}
	[ "$point" = flush ] && point=flush:$((1 + RANDOM % 4))
	step "step $i: kill -9 at publish point $point (seed $SEED)"
	ULPFS_TEST_CRASH_PUBLISH=$point s3_mount "$URL" "$CACHE" "$MNT" "$OPTS"
	pid=$FS_LAST_PID
	write_step "$i"
	if "$ULPFS" sync "$MNT" >"$WORK/sync.log" 2>&1; then
		bad "step $i: sync succeeded though the daemon was to die at $point"
	fi
	if wait_pid_gone "$pid" 60; then
		ok "step $i: the daemon killed itself at $point"
	else
		bad "step $i: the daemon is alive after the sync (never reached $point)"
		kill -9 "$pid"
	fi
	fs_force_umount "$MNT" 30
	is_mounted "$MNT" && die "cannot unmount $MNT after the kill"

	# The pointer names the new snapshot from its PUT on.
	case $point in record | deletes) pub=$i ;; *) pub=$((i - 1)) ;; esac
	rm -rf "$WORK/fresh"
	s3_mount "$URL" "$WORK/fresh" "$ROMNT" ro
	check_versions "$ROMNT" "$pub" "step $i, $point: a fresh cache from the bucket"
	"$ULPFS" verify "$ROMNT" >"$WORK/verify.log" 2>&1 && ok "step $i: verify of the bucket's catalog" ||
		bad "step $i, $point: verify from a fresh cache: $(tail -5 "$WORK/verify.log") (seed $SEED)"
	fs_umount "$ROMNT"

	s3_mount "$URL" "$CACHE" "$MNT" "$OPTS"
	log=$WORK/mount-$FS_NMOUNT.log
	if grep -q "written elsewhere" "$log" || compgen -G "$CACHE/stale-*" >/dev/null; then
		bad "step $i, $point: the remount moved its own catalog aside: $(cat "$log")"
	else
		ok "step $i: the remount kept its catalog"
	fi
	check_versions "$MNT" "$i" "step $i, $point: remount from the cache"
	"$ULPFS" gc "$MNT" >"$WORK/gc.log" 2>&1 || bad "step $i: gc: $(cat "$WORK/gc.log")"
	"$ULPFS" sync "$MNT" >"$WORK/sync.log" 2>&1 || bad "step $i: sync after the remount: $(cat "$WORK/sync.log")"
	fs_umount "$MNT"
	no_orphans "step $i, $point: after the remount, gc and sync"
done

step "a fresh read-only mount from the bucket alone, at the end"
rm -rf "$WORK/fresh"
s3_mount "$URL" "$WORK/fresh" "$ROMNT" ro
check_versions "$ROMNT" $((ROUNDS + 1)) "the end, from the bucket"
fs_umount "$ROMNT"

fs_finish
