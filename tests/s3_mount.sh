#!/usr/bin/env bash
# tests/s3_mount.sh - a store in a bucket (real Swift s3api on loopback):
#   - the quickstart trajectory (bench/make_trajectory.py --quick) written
#     through "ulpfs mount s3://BUCKET/PREFIX" step by step: checkpoint
#     directories plus latest/ overwritten each step, a snapshot and an
#     "ulpfs sync" per step, a small object_cache so that reads of evicted
#     objects go to the bucket;
#   - awscli and s3cmd list and fetch what ulpfs wrote;
#   - the whole cache directory deleted, a read-only mount on a fresh one:
#     every checkpoint, every version of latest/* and every snapshot exact,
#     writes refused (EROFS);
#   - clear errors: wrong credentials, a missing bucket, a second writer
#     while the lease is held;
#   - catalog snapshots a crash left behind are deleted by the next
#     writer's mount.
#
# FUSE or Swift unavailable is a FAILURE unless ULPFS_ALLOW_SKIP=1.
# Environment: ULPFS (the binary; make check sets it).
#
# Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.

[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/s3_lib.sh"
s3_init

URL=s3://$S3_BUCKET/runs/node-0
PLAIN=$WORK/plain
MNT=$WORK/mnt

step "the reference trajectory in a plain directory (make_trajectory.py --quick)"
"$PY" "$FS_SRCDIR/bench/make_trajectory.py" --quick --out "$PLAIN" >"$WORK/traj.log" 2>&1 ||
	{ tail -20 "$WORK/traj.log" >&2; die "make_trajectory.py failed"; }
mapfile -t STEPS < <(cd "$PLAIN" && ls -d step-* | sort)
[ "${#STEPS[@]}" -ge 3 ] || die "expected at least 3 steps, got ${#STEPS[*]}"
say "${#STEPS[@]} steps, $(fs_bytes "$PLAIN") bytes"

step "writing it through a bucket mount, one sync and snapshot per step"
s3_mount "$URL" "$WORK/cache1" "$MNT" object_cache=4M
mkdir -p "$MNT/latest"
for s in "${STEPS[@]}"; do
	cp -r "$PLAIN/$s" "$MNT/$s" || bad "cp -r $s into the mount"
	cp "$PLAIN/$s"/* "$MNT/latest/" || bad "cp $s/* over latest/"
	"$ULPFS" sync "$MNT" >"$WORK/sync.log" 2>&1 ||
		bad "ulpfs sync after $s: $(cat "$WORK/sync.log")"
	"$ULPFS" snapshot create "snap-$s" "$MNT" >/dev/null 2>&1 ||
		bad "snapshot create snap-$s"
done
fs_compare_trees "$PLAIN/${STEPS[-1]}" "$MNT/latest" "latest/ through the writer's mount"
objs=$(find "$WORK/cache1/objects" -type f | wc -l)
say "objects kept locally under object_cache=4M: $objs"
fs_umount "$MNT"
[ -z "$(ls -A "$WORK/cache1/staging")" ] || bad "staging not empty after umount"

step "what is in the bucket, seen by awscli and s3cmd"
# umount returned after the daemon had uploaded, published and deleted
# all it would: only the listing may still lag (s3_wait_for).
P=runs/node-0
s3_exists "$P/CATALOG" && ok "CATALOG pointer present" || bad "no CATALOG pointer"
s3_exists "$P/LEASE" && bad "the lease outlived the umount" || ok "lease released at umount"
ptr=$($S3_AWS s3 cp "s3://$S3_BUCKET/$P/CATALOG" - 2>/dev/null)
[ -n "$ptr" ] && s3_exists "$P/$ptr" && ok "the pointer names a snapshot that exists ($ptr)" || bad "pointer '$ptr' names no object"
few_snapshots() { [ "$(s3_keys "$P/catalog/" | wc -l)" -le 2 ]; }
if s3_wait_for 60 few_snapshots; then
	ok "$(s3_keys "$P/catalog/" | wc -l) catalog snapshot(s) kept"
else
	bad "$(s3_keys "$P/catalog/" | wc -l) catalog snapshots kept (old ones not deleted)"
fi
s3_expect_objects "after the umount" "$P" "$WORK/cache1/catalog.db"
mapfile -t KEYS < <(s3_keys "$P/objects/")
one=${KEYS[0]:-none}
if $S3_S3CMD --quiet get "s3://$S3_BUCKET/$one" "$WORK/obj.s3cmd" &&
	$S3_AWS s3 cp --quiet "s3://$S3_BUCKET/$one" "$WORK/obj.aws" &&
	cmp -s "$WORK/obj.s3cmd" "$WORK/obj.aws"; then
	ok "s3cmd and awscli fetch the same object ($(stat -c %s "$WORK/obj.aws") bytes)"
else
	bad "s3cmd/awscli could not fetch $one identically"
fi

step "the local cache deleted: a fresh read-only mount from the bucket alone"
if grep -q "failed" "$WORK/cache1/daemon.log"; then
	say "the writer's daemon.log reported failures:"
	grep "failed" "$WORK/cache1/daemon.log" | head -n 20 | sed 's/^/    | /'
fi
# An object the object cache evicted before its upload made the upload (so
# the encode, and a sync waiting for it) fail with ENOENT.
grep -q "failed: No such file or directory" "$WORK/cache1/daemon.log" &&
	bad "an object vanished from the cache before its upload (see above)" ||
	ok "no object left the cache before its upload"
rm -rf "$WORK/cache1"
s3_mount "$URL" "$WORK/cache2" "$MNT" ro
for s in "${STEPS[@]}"; do
	fs_compare_trees "$PLAIN/$s" "$MNT/$s" "$s from the bucket"
	fs_compare_trees "$PLAIN/$s" "$MNT/.ulpfs/snapshots/snap-$s/latest" "snapshot snap-$s from the bucket"
done
for f in "$PLAIN/${STEPS[0]}"/*; do
	b=$(basename "$f")
	i=0
	for s in "${STEPS[@]}"; do
		i=$((i + 1))
		v="$MNT/.ulpfs/versions/latest/$b/$i"
		if cmp -s "$PLAIN/$s/$b" "$v"; then :; else bad "version $i of latest/$b differs from $s"; fi
	done
done
ok "every version of latest/* checked against its step"
if echo x 2>"$WORK/ro.err" >"$MNT/new-file"; then
	bad "a write into the read-only mount succeeded"
else
	grep -qi "read-only" "$WORK/ro.err" && ok "write into the ro mount: $(cat "$WORK/ro.err")" ||
		bad "ro write failed with an unexpected error: $(cat "$WORK/ro.err")"
fi
[ -z "$(find "$WORK/cache2/objects" -type f)" ] && ok "read with ranged GETs: no object copied into the fresh cache" ||
	bad "objects appeared in the read-only cache"
fs_umount "$MNT"

step "clear errors"
good_secret=$AWS_SECRET_ACCESS_KEY
export AWS_SECRET_ACCESS_KEY=wrong-secret
s3_mount_fails "wrong credentials" "403|SignatureDoesNotMatch" \
	"$URL" "$WORK/cache-bad" "$WORK/mnt-bad"
export AWS_SECRET_ACCESS_KEY=$good_secret
s3_mount_fails "missing bucket" "no such bucket" \
	"s3://no-such-bucket-$RANDOM/x" "$WORK/cache-nb" "$WORK/mnt-nb"
s3_mount_fails "malformed URL" "s3://BUCKET" "s3:///x" "$WORK/cache-u" "$WORK/mnt-u"
# Catalog snapshots a crash left behind (older than the pointer's, and one
# uploaded without its pointer): the next writer's mount deletes them.
echo stale >"$WORK/stale.db"
STALE=(20000101T000000Z-00000001 20000101T000000Z-00000002 29991231T235959Z-00000003)
for n in "${STALE[@]}"; do
	$S3_AWS s3 cp --quiet "$WORK/stale.db" "s3://$S3_BUCKET/$P/catalog/$n.db" || die "cannot upload a stale snapshot"
done
s3_mount "$URL" "$WORK/cache3" "$MNT"
s3_mount_fails "a second writer while the lease is held" "mounted for writing elsewhere" \
	"$URL" "$WORK/cache4" "$WORK/mnt4"
s3_mount "$URL" "$WORK/cache5" "$WORK/mnt5" ro
fs_compare_trees "$PLAIN/${STEPS[-1]}" "$WORK/mnt5/latest" "a read-only mount next to the writer"
fs_umount "$WORK/mnt5"
fs_umount "$MNT"
left=0
for n in "${STALE[@]}"; do s3_exists "$P/catalog/$n.db" && left=$((left + 1)); done
[ "$left" = 0 ] && ok "the writer's mount deleted the ${#STALE[@]} stale catalog snapshots" ||
	bad "$left of ${#STALE[@]} stale catalog snapshots left"
ptr=$($S3_AWS s3 cp "s3://$S3_BUCKET/$P/CATALOG" - 2>/dev/null)
[ -n "$ptr" ] && s3_exists "$P/$ptr" && ok "the pointer's snapshot is there ($ptr)" || bad "pointer '$ptr' names no object"

fs_finish
