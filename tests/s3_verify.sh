#!/usr/bin/env bash
# tests/s3_verify.sh - ulpfs verify on a bucket store's writer also checks
# the bucket-only representations (src/objstore/verify.c): the forward
# deltas that only the bucket holds, which a fresh machine reads and the
# writer never does (real Swift s3api).  Checked:
#   - after a sync per step, verify on the writer passes and says how many
#     bucket-only objects it decoded from the bucket;
#   - one forward delta damaged in the bucket (a PUT through awscli):
#     verify fails, naming the version and the object's key, and the
#     versions coded against it (their bucket chains pass through it);
#   - the check leaves the writer's cache alone (objects/ and fetched/
#     unchanged, no temporary directory left), and its reads stay exact;
#   - the object deleted from the bucket: verify fails naming it;
#   - the object put back: verify passes again.
#
# FUSE or Swift unavailable is a FAILURE unless ULPFS_ALLOW_SKIP=1.
#
# Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.

[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/s3_lib.sh"
s3_init

URL=s3://$S3_BUCKET/vfy
CACHE=$WORK/cache
MNT=$WORK/mnt
DATA=$WORK/data
STEPS=4
F=model.safetensors
PY=/usr/bin/python3
UTIL=$(dirname "$0")/fs_util.py
# The daemon's temporary directory: the view must leave nothing there.
export TMPDIR=$WORK/tmp
mkdir -p "$DATA" "$TMPDIR" || die "mkdir"
"$PY" "$UTIL" drift "$DATA" --n "$STEPS" --elems $((1 << 18)) --dtype f32 \
	--seed 7 --name "$F" >/dev/null || die "fs_util drift"
OPTS=upload_delay=3600,publish_interval=86400,keyframe=4

sq() { "$PY" -c 'import sqlite3, sys
for r in sqlite3.connect(sys.argv[1]).execute(sys.argv[2]): print(*r)' "$@"; }

# cache_state: every file of the writer's objects/ and fetched/ with its
# checksum (what the check must not change)
cache_state() {
	(cd "$CACHE" && find objects fetched -type f -exec md5sum {} + 2>/dev/null | sort)
}

step "$STEPS steps, a sync after each"
s3_mount "$URL" "$CACHE" "$MNT" "$OPTS"
for i in $(seq 1 "$STEPS"); do
	cp "$DATA/v$i/$F" "$MNT/$F" || bad "cp v$i"
	fs_wait_committed "$CACHE"
	"$ULPFS" sync "$MNT" >"$WORK/sync.log" 2>&1 || bad "sync $i: $(cat "$WORK/sync.log")"
done
"$ULPFS" gc "$MNT" >/dev/null 2>&1 || bad "gc"

step "verify on the writer"
"$ULPFS" verify "$MNT" >"$WORK/v1.log" 2>&1 && ok "verify passes: $(tail -n 1 "$WORK/v1.log")" ||
	bad "verify after the syncs: $(tail -n 5 "$WORK/v1.log")"
nb=$(sed -nE 's/.* ([0-9]+) bucket-only objects checked.*/\1/p' "$WORK/v1.log")
# Versions 2.. are forward deltas against the one before (keyframe=4).
[ "${nb:-0}" -ge $((STEPS - 1)) ] && ok "$nb bucket-only objects decoded from the bucket" ||
	bad "bucket-only objects checked: '${nb}' (want >= $((STEPS - 1))): $(cat "$WORK/v1.log")"

# Version 2's forward delta: versions 3 and 4 are coded along it.
obj=$(sq "$CACHE/catalog.db" "SELECT r.object FROM bucket_reps AS r
	JOIN versions AS v ON v.id = r.version WHERE r.state = 1
	AND r.base IS NOT NULL AND r.object <> v.object AND v.seq = 2")
[ -n "$obj" ] || die "no forward delta for version 2 in bucket_reps"
KEY=vfy/objects/$obj
$S3_AWS s3 cp --quiet "s3://$S3_BUCKET/$KEY" "$WORK/good" || die "fetch $KEY"
[ -e "$CACHE/objects/$obj" ] && bad "the forward delta $obj is also a local object"

step "one forward delta damaged in the bucket"
cp "$WORK/good" "$WORK/damaged" || die "cp"
size=$(stat -c %s "$WORK/damaged")
printf 'XXXXXXXX' | dd of="$WORK/damaged" bs=1 seek=$((size / 2)) conv=notrunc status=none
$S3_AWS s3 cp --quiet "$WORK/damaged" "s3://$S3_BUCKET/$KEY" || die "put the damaged $KEY"
before=$(cache_state)
if "$ULPFS" verify "$MNT" >"$WORK/v2.log" 2>&1; then
	bad "verify passed with $KEY damaged: $(cat "$WORK/v2.log")"
else
	ok "verify fails with $KEY damaged"
fi
grep -q "$F@2: bucket object $KEY: " "$WORK/v2.log" && ok "the message names $F@2 and $KEY" ||
	bad "no message naming $F@2 and $KEY: $(cat "$WORK/v2.log")"
grep -q "$F@3: bucket object .*(coded along $F@2, bad)" "$WORK/v2.log" &&
	ok "version 3, coded along it, fails naming version 2" ||
	bad "version 3's failure does not name version 2: $(cat "$WORK/v2.log")"
[ "$before" = "$(cache_state)" ] && ok "objects/ and fetched/ unchanged by verify" ||
	bad "verify changed the writer's cache"
[ -z "$(ls -A "$TMPDIR")" ] && ok "no temporary directory left" || bad "left in TMPDIR: $(ls "$TMPDIR")"
for i in $(seq 1 "$STEPS"); do
	cmp -s "$DATA/v$i/$F" "$MNT/.ulpfs/versions/$F/$i" || bad "the writer's version $i differs"
done
ok "the writer's own reads stay exact"

step "the object missing from the bucket"
$S3_AWS s3 rm --quiet "s3://$S3_BUCKET/$KEY" || die "delete $KEY"
gone() { ! s3_exists "$KEY"; }
s3_wait_for 30 gone || die "$KEY still answers after its delete"
if "$ULPFS" verify "$MNT" >"$WORK/v4.log" 2>&1; then
	bad "verify passed with $KEY missing: $(cat "$WORK/v4.log")"
elif grep -q "$F@2: bucket object $KEY: cannot decode" "$WORK/v4.log"; then
	ok "verify fails with $KEY missing, naming it"
else
	bad "no message naming $F@2 and $KEY missing: $(cat "$WORK/v4.log")"
fi

step "the object put back"
$S3_AWS s3 cp --quiet "$WORK/good" "s3://$S3_BUCKET/$KEY" || die "put $KEY back"
"$ULPFS" verify "$MNT" >"$WORK/v3.log" 2>&1 && ok "verify passes again" ||
	bad "verify with $KEY restored: $(tail -n 5 "$WORK/v3.log")"
fs_umount "$MNT"

fs_finish
