#!/usr/bin/env bash
# tests/s3_commands.sh - ulpfs commands on an unmounted bucket store, given
# its cache directory (--store CACHE_DIR), against a real Swift s3api:
#   - with the cache's objects gone (evicted), log, cat, export, verify and
#     stats read through the bucket, exact;
#   - the lease rules of a mount: while a writer holds the store elsewhere,
#     read-only commands work and gc refuses;
#   - snapshot create, prune and gc change the store and publish it: a
#     fresh read-only mount from the bucket alone sees the change, the
#     pruned version's object is gone from the bucket, the lease released;
#   - --store s3://BUCKET/PREFIX: the same commands from a cache directory
#     of their own (seeded from the bucket), clear errors for a prefix
#     with nothing published and a malformed URL;
#   - the cache directory is private (0700, files 0600) under umask 022.
#
# FUSE or Swift unavailable is a FAILURE unless ULPFS_ALLOW_SKIP=1.
#
# Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.

[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/s3_lib.sh"
s3_init
umask 022

URL=s3://$S3_BUCKET/cmds
C1=$WORK/cache1
MNT=$WORK/mnt
mkdir -p "$WORK/v"
for i in 1 2; do head -c 3000000 /dev/urandom >"$WORK/v/f.$i"; done
mkdir -p "$WORK/d"
for i in 1 2 3; do head -c 1500000 /dev/urandom >"$WORK/d/g$i.bin"; done
run() { # WHAT CMD...: the command must succeed; its stdout in $WORK/out
	local what=$1
	shift
	if "$ULPFS" "$@" >"$WORK/out" 2>"$WORK/err"; then
		ok "$what"
	else
		bad "$what: ulpfs $* failed: $(head -c 300 "$WORK/err")"
	fi
}

step "a store written through a mount, then its local objects evicted"
s3_mount "$URL" "$C1" "$MNT"
cp "$WORK/v/f.1" "$MNT/f" && "$ULPFS" sync "$MNT" >/dev/null || bad "write f v1"
cp "$WORK/v/f.2" "$MNT/f" && cp -r "$WORK/d" "$MNT/d" || bad "write f v2, d/"
"$ULPFS" snapshot create s1 "$MNT" >/dev/null || bad "snapshot create s1"
fs_umount "$MNT"
[ -f "$C1/bucket-url" ] && ok "the cache names its bucket: $(cat "$C1/bucket-url")" || bad "no $C1/bucket-url"
# A bucket store's cache directory is private to root like a local store
# (issue 36), made under this test's umask 022.
loose=$(find "$C1" \( -type d -o -type f \) -printf '%m %P\n' | awk '($1 != 700 && $1 != 600)')
check "the cache directory is 0700, everything in it 0700/0600" test -z "$loose"
[ -z "$loose" ] || printf '%s\n' "$loose" | head -5 | sed 's/^/    | /' >&2
# Evicted as the object cache would: what the bucket holds goes; a reverse
# delta whose version the bucket holds otherwise (src/objstore/reps.c) is
# the only copy of itself and stays (the cache uploads it before evicting).
inbucket=$(s3_bucket_objects cmds)
kept=0
for o in "$C1/objects"/*; do
	[ -e "$o" ] || continue
	if grep -qx "$(basename "$o")" <<<"$inbucket"; then rm -f "$o"; else kept=$((kept + 1)); fi
done
superseded=$(/usr/bin/python3 -c 'import os, sqlite3, sys
c = sqlite3.connect(sys.argv[1])
n = 0
for (o,) in c.execute("SELECT v.object FROM versions AS v JOIN bucket_reps AS r ON r.version = v.id"
                      " AND r.state = 1 AND r.object <> v.object WHERE v.state <> 2"):
    n += os.path.exists(os.path.join(sys.argv[2], o))
print(n)' "$C1/catalog.db" "$C1/objects")
[ "$kept" = "$superseded" ] && ok "evicted what the bucket holds; kept $kept superseded reverse delta(s)" ||
	bad "kept $kept local objects the bucket lacks, $superseded of them superseded"
rm -rf "$C1/fetched"

step "read-only commands through the bucket"
run "log --store" log --store "$C1" f
[ "$(grep -c '^ *[0-9]' "$WORK/out")" -ge 2 ] && ok "log shows both versions of f" || bad "log: $(cat "$WORK/out")"
run "cat --store f" cat --store "$C1" f
cmp -s "$WORK/out" "$WORK/v/f.2" && ok "cat f: the newest, exact" || bad "cat f differs"
run "cat --store f@1" cat --store "$C1" f@1
cmp -s "$WORK/out" "$WORK/v/f.1" && ok "cat f@1: exact" || bad "cat f@1 differs"
run "export --store --snapshot s1" export --store "$C1" --snapshot s1 "$WORK/exp"
fs_compare_trees "$WORK/d" "$WORK/exp/d" "export of snapshot s1"
run "verify --store" verify --store "$C1"
run "stats --store --json" stats --store "$C1" --json
/usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["versions"]["live"] >= 5, d["versions"]' "$WORK/out" &&
	ok "stats counts the versions" || bad "stats: $(head -c 300 "$WORK/out")"
[ -n "$(ls "$C1/fetched" 2>/dev/null)" ] && ok "the reads fetched ranges from the bucket" ||
	bad "nothing fetched from the bucket (did the reads use it?)"

step "the lease: a writer elsewhere"
s3_mount "$URL" "$WORK/cache2" "$WORK/mnt2"
run "log --store while another machine writes (no lease needed)" log --store "$C1" f
if "$ULPFS" gc --store "$C1" >"$WORK/out" 2>&1; then
	bad "gc --store ran while another writer held the lease"
else
	grep -qi "elsewhere\|lease" "$WORK/out" && ok "gc --store refused: $(head -c 200 "$WORK/out")" ||
		bad "gc refused, but not for the lease: $(cat "$WORK/out")"
fi
fs_umount "$WORK/mnt2"

step "commands that change the store publish it"
run "snapshot create --store" snapshot create --store "$C1" s2 f
run "prune --store" prune --store "$C1" --keep-last 1 f
run "gc --store" gc --store "$C1"
run "log --store after prune" log --store "$C1" f
[ "$(grep '^ *[0-9]' "$WORK/out" | grep -vc '(deleted)')" = 1 ] && ok "prune kept one version of f" || bad "log after prune: $(cat "$WORK/out")"
s3_exists cmds/LEASE && bad "a command left the lease behind" || ok "no lease left behind"
s3_expect_objects "after the commands" cmds "$C1/catalog.db"
s3_mount "$URL" "$WORK/cache3" "$MNT" ro
[ -d "$MNT/.ulpfs/snapshots/s2" ] && ok "a fresh mount sees snapshot s2" || bad "snapshot s2 not published"
cmp -s "$MNT/f" "$WORK/v/f.2" && ok "f exact from the fresh mount" || bad "f differs from the fresh mount"
[ "$("$ULPFS" log "$MNT/f" 2>/dev/null | grep '^ *[0-9]' | grep -vc '(deleted)')" = 1 ] && ok "the fresh mount sees the prune" ||
	bad "the prune was not published"
fs_umount "$MNT"

step "--store s3://BUCKET/PREFIX: commands from the bucket alone"
# its default cache directory, under ULPFS_CACHE_ROOT (not /var/cache)
export ULPFS_CACHE_ROOT=$WORK/croot
run "log --store $URL" log --store "$URL" f
[ "$(grep '^ *[0-9]' "$WORK/out" | grep -vc '(deleted)')" = 1 ] && ok "log from the URL sees the published prune" ||
	bad "log from the URL: $(cat "$WORK/out")"
[ -f "$WORK/croot/$S3_BUCKET/cmds/catalog.db" ] && ok "the catalog seeded into \$ULPFS_CACHE_ROOT/$S3_BUCKET/cmds" ||
	bad "no catalog under $WORK/croot: $(find "$WORK/croot" | head -5 | tr '\n' ' ')"
run "cat --store $URL f" cat --store "$URL" f
cmp -s "$WORK/out" "$WORK/v/f.2" && ok "cat f from the URL: exact" || bad "cat f from the URL differs"
run "snapshot create --store $URL" snapshot create --store "$URL" s3 f
s3_mount "$URL" "$WORK/cache4" "$MNT" ro
[ -d "$MNT/.ulpfs/snapshots/s3" ] && ok "a fresh mount sees the snapshot made through the URL" || bad "snapshot s3 not published"
fs_umount "$MNT"
if "$ULPFS" log --store "s3://$S3_BUCKET/nothing-here" f >"$WORK/out" 2>&1; then
	bad "log --store of a prefix with nothing published succeeded"
else
	grep -q "no catalog published there" "$WORK/out" && ok "a prefix with nothing published: $(head -c 200 "$WORK/out")" ||
		bad "unexpected error for an empty prefix: $(cat "$WORK/out")"
fi
if "$ULPFS" log --store "s3:///x" f >"$WORK/out" 2>&1; then
	bad "log --store s3:///x succeeded"
else
	grep -q "s3://BUCKET" "$WORK/out" && ok "a malformed URL: $(head -c 200 "$WORK/out")" || bad "malformed URL: $(cat "$WORK/out")"
fi
unset ULPFS_CACHE_ROOT

fs_finish
