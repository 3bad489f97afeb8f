#!/usr/bin/env bash
# tests/s3_crash.sh - a bucket store through failures (real Swift s3api):
#   - kill -9 of the daemon while it uploads (multipart objects in
#     flight); the remount from the same cache takes the lease back,
#     re-encodes what was staged, every closed file is exact, and the
#     bucket then holds exactly the objects the catalog names (the sweep
#     removed what the crash left);
#   - the server stopped during writes: writes go on into staging, sync
#     fails and says so, staged files stay; the server back: uploads resume,
#     nothing lost;
#   - the server stopped for good: umount says what was not uploaded and
#     exits non-zero, so does the daemon's log, the staged files survive
#     for the next mount;
#   - kill -9 while uploads are deferred (-o upload_delay, the default):
#     the versions committed locally, their objects not in the bucket yet;
#     the remount uploads them, every closed file is exact, no orphans;
#   - the next versions from a mount that does not defer uploads, over
#     what the deferring one left: the bucket holds just their objects;
#   - at the end a fresh read-only mount from the bucket alone sees it all.
# The steps before the deferred one upload each object before its version
# commits (upload_delay=0), so that a kill lands inside an upload and a
# failed upload keeps the file staged.
#
# FUSE or Swift unavailable is a FAILURE unless ULPFS_ALLOW_SKIP=1.
#
# Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.

[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/s3_lib.sh"
s3_init

URL=s3://$S3_BUCKET/crash
MNT=$WORK/mnt
DATA=$WORK/data
mkdir -p "$DATA/a" "$DATA/b" "$DATA/c"
for i in 1 2 3 4 5 6; do
	head -c $((40000000 + i * 1000)) /dev/urandom >"$DATA/a/big$i.bin"
done
for i in 1 2 3; do head -c 3000000 /dev/urandom >"$DATA/b/f$i.bin"; done
head -c 2000000 /dev/urandom >"$DATA/c/late.bin"

# no_orphans WHEN: the bucket holds exactly the objects the catalog names
no_orphans() { s3_expect_objects "no orphans $1" crash "$WORK/cache1/catalog.db"; }

step "kill -9 of the daemon during multipart uploads"
pending() {
	$S3_AWS s3api list-multipart-uploads --bucket "$S3_BUCKET" --prefix crash/ \
		--query 'length(Uploads || `[]`)' --output text 2>/dev/null
}
upload_ids() {
	$S3_AWS s3api list-multipart-uploads --bucket "$S3_BUCKET" --prefix crash/ \
		--query 'Uploads[].UploadId' --output text 2>/dev/null | tr '\t' '\n' |
		grep -v '^None$' | sort
}
# An object's upload starts as soon as it is renamed into objects/ and
# takes a fraction of a second on loopback (40 MB, multipart): kill the
# daemon shortly after the first appears.  Whether the kill lands inside
# an upload depends on the machine's speed, so up to four tries, each with
# a fresh copy and another delay; a try that missed is synced cleanly.
copies=()
for delay in 0.3 0.1 0.02 0.6; do
	dir=a; [ ${#copies[@]} -eq 0 ] || dir=a${#copies[@]}
	copies+=("$dir")
	# the expected tree (the end compares the whole mount with it)
	[ "$dir" = a ] || cp -r "$DATA/a" "$DATA/$dir"
	s3_mount "$URL" "$WORK/cache1" "$MNT" upload_delay=0
	before=$(ls "$WORK/cache1/objects" 2>/dev/null | sort)
	cp -r "$DATA/a" "$MNT/$dir" || bad "cp -r into the mount"
	fs_bg "$ULPFS" sync "$MNT"
	sync_pid=$FS_BG_LAST
	for _ in $(seq 1 1200); do
		[ -n "$(comm -13 <(echo "$before") <(ls "$WORK/cache1/objects" 2>/dev/null | sort) | grep '^[0-9a-f]')" ] && break
		sleep 0.01
	done
	sleep "$delay"
	kill -9 "$FS_LAST_PID" && say "killed daemon $FS_LAST_PID ${delay}s after its first new object"
	wait "$sync_pid" 2>/dev/null
	fs_bg_forget "$sync_pid"
	fs_force_umount "$MNT"
	left=$(pending)
	[ -n "$left" ] && [ "$left" != 0 ] && break
	say "no multipart upload was in flight at that kill: syncing, then again"
	s3_mount "$URL" "$WORK/cache1" "$MNT" upload_delay=0
	"$ULPFS" sync "$MNT" >/dev/null 2>&1 || bad "sync after a kill that missed"
	fs_umount "$MNT"
done
[ -n "$left" ] && [ "$left" != 0 ] && ok "the kill interrupted $left multipart upload(s)" ||
	bad "no multipart upload was in flight at any of ${#copies[@]} kills (the kill tests nothing): ${left:-?}"
killed_ids=$(upload_ids)
s3_mount "$URL" "$WORK/cache1" "$MNT" upload_delay=0
# The mount aborts them before it opens the store, saying so on its
# standard error (s3_mount keeps it in mount-N.log).  Its own encoders may
# then begin new multipart uploads of what was staged: only the uploads
# the kill cut off must be gone (Swift's listing may lag by a moment).
aborted=$(grep -c "aborted an unfinished upload" "$WORK/mount-$FS_NMOUNT.log")
[ "$aborted" -ge 1 ] && ok "the remount aborted $aborted unfinished upload(s)" ||
	bad "the remount says it aborted no unfinished upload: $(cat "$WORK/mount-$FS_NMOUNT.log")"
for _ in $(seq 1 20); do
	still=$(comm -12 <(echo "$killed_ids") <(upload_ids))
	[ -z "$still" ] && break
	sleep 0.5
done
[ -n "$killed_ids" ] && [ -z "$still" ] && ok "the server lists none of the uploads the kill left" ||
	bad "multipart uploads the kill left, still there after the remount: ${still:-none were recorded}"
if "$ULPFS" sync "$MNT" >"$WORK/sync.log" 2>&1; then ok "sync after the remount"; else bad "sync after remount: $(cat "$WORK/sync.log")"; fi
for dir in "${copies[@]}"; do
	fs_compare_trees "$DATA/a" "$MNT/$dir" "closed files after kill -9 and remount ($dir)"
done
fs_umount "$MNT"
no_orphans "after kill -9 and remount"

step "the server stopped during writes, then restarted"
s3_mount "$URL" "$WORK/cache1" "$MNT" upload_delay=0
s3_server_halt
say "server stopped"
cp -r "$DATA/b" "$MNT/b" && ok "writes go on into staging while the server is down" || bad "cp with the server down"
if timeout 120 "$ULPFS" sync "$MNT" >"$WORK/sync.log" 2>&1; then
	bad "sync succeeded with the server down"
else
	ok "sync with the server down fails: $(head -c 200 "$WORK/sync.log")"
fi
[ "$(fs_staged_count "$WORK/cache1")" -ge 3 ] && ok "the staged files are kept" || bad "staging has $(fs_staged_count "$WORK/cache1") files"
fs_compare_trees "$DATA/b" "$MNT/b" "reads from staging while the server is down"
s3_server_resume || die "the server did not come back"
say "server restarted"
done_sync=0
for _ in $(seq 1 60); do
	if "$ULPFS" sync "$MNT" >"$WORK/sync.log" 2>&1; then done_sync=1; break; fi
	sleep 2
done
[ "$done_sync" = 1 ] && ok "uploads resumed: sync succeeds" || bad "sync still failing 120 s after the restart: $(cat "$WORK/sync.log")"
[ "$(fs_staged_count "$WORK/cache1")" = 0 ] && ok "staging drained" || bad "staging not drained"
fs_compare_trees "$DATA/b" "$MNT/b" "files written during the outage"

step "the server stopped for good: umount, staged files kept"
s3_server_halt
cp -r "$DATA/c" "$MNT/c" || bad "cp with the server down"
s3_umount_unuploaded "$MNT" "NOT uploaded to $URL"
if grep -q "upload of .* failed" "$WORK/cache1/daemon.log"; then
	ok "the daemon's log says what was not uploaded: $(grep -m1 "upload of .* failed" "$WORK/cache1/daemon.log" | cut -c1-160)"
else
	bad "no upload failure in daemon.log"
fi
[ "$(fs_staged_count "$WORK/cache1")" -ge 1 ] && ok "the staged file survived the umount" || bad "the staged file is gone"
s3_server_resume || die "the server did not come back"
s3_mount "$URL" "$WORK/cache1" "$MNT" upload_delay=0
"$ULPFS" sync "$MNT" >"$WORK/sync.log" 2>&1 && ok "next mount uploads it" || bad "sync: $(cat "$WORK/sync.log")"
fs_compare_trees "$DATA/c" "$MNT/c" "the file staged across the outage"
fs_umount "$MNT"
# also makes the listing that the next step starts from complete (Swift
# updates it after the PUT has answered)
no_orphans "after the outage"

step "kill -9 while uploads are deferred"
mkdir -p "$DATA/d"
for i in 1 2 3; do head -c $((7000000 + i)) /dev/urandom >"$DATA/d/f$i.bin"; done
s3_mount "$URL" "$WORK/cache1" "$MNT" upload_delay=3600
before_set=$(s3_bucket_objects crash)
before=$(wc -l <<<"$before_set")
cp -r "$DATA/d" "$MNT/d" || bad "cp -r d into the mount"
staged_drained() { [ "$(fs_staged_count "$WORK/cache1")" = 0 ]; }
s3_wait_for 120 staged_drained || bad "d/ still staged after 120 s"
live=$(s3_live_objects "$WORK/cache1/catalog.db" | wc -l)
[ "$live" -ge $((before + 3)) ] && ok "d/ committed locally ($live live objects, $before in the bucket)" ||
	bad "the catalog names $live objects, the bucket $before before d/"
kill -9 "$FS_LAST_PID" && say "killed daemon $FS_LAST_PID with its uploads deferred"
fs_force_umount "$MNT"
# each object the catalog names that the bucket did not hold before d/,
# asked for by HEAD (the listing may lag behind a PUT, a HEAD does not)
uploaded=$(comm -13 <(echo "$before_set") <(s3_live_objects "$WORK/cache1/catalog.db") |
	while read -r o; do s3_exists "crash/objects/$o" && echo "$o"; done)
[ -z "$uploaded" ] && ok "nothing of d/ had been uploaded" ||
	bad "objects of d/ were uploaded before their delay: $uploaded"
s3_mount "$URL" "$WORK/cache1" "$MNT" upload_delay=3600
# the daemon says so on the mount's standard error (s3_mount keeps it)
# d/f*.bin take b/f*.bin as their predecessors (the same base names), which
# were re-encoded against them: their new objects are missing too.
missing=$(sed -nE 's/.* ([0-9]+) object\(s\) of committed versions were not in the bucket.*/\1/p' "$WORK/mount-$FS_NMOUNT.log")
[ -n "$missing" ] && [ "$missing" -ge 3 ] && [ "$missing" -le "$live" ] &&
	ok "the remount finds the $missing objects the bucket lacks (d/ and the deltas of b/ against it)" ||
	bad "the remount did not report the missing objects: $(cat "$WORK/mount-$FS_NMOUNT.log")"
"$ULPFS" sync "$MNT" >"$WORK/sync.log" 2>&1 && ok "sync uploads them" || bad "sync: $(cat "$WORK/sync.log")"
fs_compare_trees "$DATA/d" "$MNT/d" "closed files after kill -9 with deferred uploads"
fs_umount "$MNT"
no_orphans "after kill -9 with deferred uploads"

step "uploads not deferred, after deferred ones: the next versions"
# Each object goes up as it is made, a flip's reverse delta before the
# flip commits: the bucket must then hold the local objects, neither the
# representations the deferring mount left (d/) nor keyframes of its own
# (e/) beside them.
s3_mount "$URL" "$WORK/cache1" "$MNT" upload_delay=0
mkdir -p "$DATA/e"
head -c 5000000 /dev/urandom >"$DATA/e/x.bin"
mkdir -p "$MNT/e" && cp "$DATA/e/x.bin" "$MNT/e/x.bin" || bad "cp e/x.bin"
"$ULPFS" sync "$MNT" >"$WORK/sync.log" 2>&1 || bad "sync of e/x.bin: $(cat "$WORK/sync.log")"
for f in d/f1.bin e/x.bin; do
	# the next version: a few bytes changed, so that it is a delta
	printf 'next version' | dd of="$DATA/$f" bs=1 seek=1000 conv=notrunc status=none
	cp "$DATA/$f" "$MNT/$f" || bad "cp $f"
done
"$ULPFS" gc "$MNT" >"$WORK/gc.log" 2>&1 || bad "gc: $(cat "$WORK/gc.log")"
"$ULPFS" sync "$MNT" >"$WORK/sync.log" 2>&1 && ok "sync of the next versions" || bad "sync: $(cat "$WORK/sync.log")"
fs_compare_trees "$DATA/e" "$MNT/e" "e/ after its next version"
fs_compare_trees "$DATA/d" "$MNT/d" "d/ after its next version"
fs_umount "$MNT"
no_orphans "with uploads not deferred"

step "a fresh read-only mount from the bucket alone"
s3_mount "$URL" "$WORK/cache-fresh" "$MNT" ro
fs_compare_trees "$DATA" "$MNT" "everything, from the bucket"
fs_umount "$MNT"
no_orphans "at the end"

fs_finish
