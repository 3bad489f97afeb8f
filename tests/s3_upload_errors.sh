#!/usr/bin/env bash
# tests/s3_upload_errors.sh - uploads that cannot succeed, against a real
# Swift s3api server:
#   - the bucket deleted under a writer mount (a permanent error: the
#     server answers NoSuchBucket): the write goes into staging, sync fails,
#     "ulpfs stats" says so (text and --json: upload_errors), "ulpfs umount"
#     says what is not uploaded and exits non-zero, the staged file is
#     kept; the bucket back, the next mount uploads it, stats is clean;
#   - the server stopped for good: the same from umount, with a transient
#     error, for a file whose upload was deferred (-o upload_delay, the
#     default): committed locally, its object kept in the cache directory
#     and uploaded by the next mount (a fresh mount then reads it from the
#     bucket alone).
# The first steps upload each object before its version commits
# (upload_delay=0): a failed upload keeps the file staged.
#
# FUSE or Swift unavailable is a FAILURE unless ULPFS_ALLOW_SKIP=1.
#
# Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.

[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/s3_lib.sh"
s3_init

GONE=ulpfs-gone-$$
URL=s3://$GONE/run
MNT=$WORK/mnt
CACHE=$WORK/cache
head -c 3000000 /dev/urandom >"$WORK/first.bin"
head -c 2000000 /dev/urandom >"$WORK/late.bin"
$S3_AWS s3 mb "s3://$GONE" >/dev/null || die "cannot create bucket $GONE"

# stats_json KEY: upload_errors.KEY of "ulpfs stats --json" on the mount
stats_json() {
	"$ULPFS" stats --json "$MNT" 2>/dev/null | /usr/bin/python3 -c '
import json, sys
u = json.load(sys.stdin)["upload_errors"]
print("null" if u is None else u.get(sys.argv[1]))
' "$1"
}

step "the bucket deleted under a writer mount"
s3_mount "$URL" "$CACHE" "$MNT" publish_interval=3600,upload_delay=0
cp "$WORK/first.bin" "$MNT/first.bin" || bad "cp first.bin"
"$ULPFS" sync "$MNT" >"$WORK/sync.log" 2>&1 || bad "sync: $(cat "$WORK/sync.log")"
[ "$(stats_json failures)" = null ] && ok "stats --json: upload_errors null while uploads succeed" ||
	bad "upload_errors not null before any failure: $(stats_json error)"
$S3_AWS s3 rb --force "s3://$GONE" >/dev/null 2>&1 || die "cannot delete bucket $GONE"
say "bucket $GONE deleted"
cp "$WORK/late.bin" "$MNT/late.bin" && ok "the write goes into staging" || bad "cp late.bin"
if timeout 300 "$ULPFS" sync "$MNT" >"$WORK/sync.log" 2>&1; then
	bad "sync succeeded into a deleted bucket"
else
	ok "sync fails: $(head -c 200 "$WORK/sync.log")"
fi
"$ULPFS" stats "$MNT" >"$WORK/stats.txt" 2>&1 || bad "stats failed: $(cat "$WORK/stats.txt")"
if grep -E '^UPLOADS .*permanent.*(NoSuchBucket|no such bucket)' "$WORK/stats.txt" >/dev/null; then
	ok "stats says so: $(grep '^UPLOADS' "$WORK/stats.txt" | cut -c1-200)"
else
	bad "stats does not report the permanent error: $(cat "$WORK/stats.txt" | head -20)"
fi
[ "$(stats_json permanent)" = True ] && ok "stats --json: upload_errors.permanent" ||
	bad "stats --json: upload_errors.permanent is $(stats_json permanent)"
n=$(stats_json failures)
[ "$n" != null ] && [ "$n" -ge 1 ] && ok "stats --json: $n failed upload(s)" || bad "stats --json failures: $n"
s3_umount_unuploaded "$MNT" "NOT uploaded to $URL (a permanent error"
[ "$(fs_staged_count "$CACHE")" -ge 1 ] && ok "the staged file survived the umount" || bad "the staged file is gone"

step "the bucket back: the next mount uploads what was staged"
$S3_AWS s3 mb "s3://$GONE" >/dev/null || die "cannot recreate bucket $GONE"
s3_mount "$URL" "$CACHE" "$MNT" publish_interval=3600,upload_delay=0
"$ULPFS" sync "$MNT" >"$WORK/sync.log" 2>&1 && ok "sync uploads it" || bad "sync: $(cat "$WORK/sync.log")"
[ "$(stats_json failures)" = null ] && ok "stats --json: upload_errors null again" ||
	bad "upload_errors still set: $(stats_json error)"
"$ULPFS" stats "$MNT" 2>&1 | grep -q '^UPLOADS' && bad "stats still reports failed uploads" || ok "stats text clean"
cmp -s "$WORK/late.bin" "$MNT/late.bin" && ok "late.bin exact" || bad "late.bin differs"
fs_umount "$MNT"
[ "$(fs_staged_count "$CACHE")" = 0 ] && ok "staging empty" || bad "staging not empty"

step "the server stopped for good: umount says what is not uploaded (a deferred upload)"
s3_mount "$URL" "$CACHE" "$MNT" publish_interval=3600
s3_server_halt
cp "$WORK/first.bin" "$MNT/again.bin" || bad "cp with the server down"
s3_umount_unuploaded "$MNT" "and 1 object(s) of closed files NOT uploaded to $URL (a transient error"
[ "$(fs_staged_count "$CACHE")" = 0 ] && grep -qx "pending 1" "$CACHE/upload-errors" &&
	ok "the file was committed locally, its object kept for its upload" ||
	bad "staging has $(fs_staged_count "$CACHE") files, upload-errors: $(cat "$CACHE/upload-errors" 2>&1)"
s3_server_resume || die "the server did not come back"
s3_mount "$URL" "$CACHE" "$MNT" publish_interval=3600
# the daemon says so on the mount's standard error (s3_mount keeps it)
grep -q "1 object(s) of committed versions were not in the bucket" "$WORK/mount-$FS_NMOUNT.log" &&
	ok "the next mount finds the object the bucket lacks" ||
	bad "the next mount did not say it uploads the missing object: $(cat "$WORK/mount-$FS_NMOUNT.log")"
"$ULPFS" sync "$MNT" >"$WORK/sync.log" 2>&1 && ok "the next mount uploads it" || bad "sync: $(cat "$WORK/sync.log")"
cmp -s "$WORK/first.bin" "$MNT/again.bin" && ok "again.bin exact" || bad "again.bin differs"
fs_umount "$MNT"
[ -e "$CACHE/upload-errors" ] && bad "upload-errors still there: $(cat "$CACHE/upload-errors")" || ok "upload-errors cleared"
s3_mount "$URL" "$WORK/cache-fresh" "$MNT" ro
cmp -s "$WORK/first.bin" "$MNT/again.bin" && ok "again.bin exact from the bucket alone" || bad "again.bin differs from the bucket alone"
fs_umount "$MNT"
$S3_AWS s3 rb --force "s3://$GONE" >/dev/null 2>&1 || bad "cannot remove bucket $GONE"

fs_finish
