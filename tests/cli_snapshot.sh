#!/usr/bin/env bash
# tests/cli_snapshot.sh - "ulpfs snapshot create/list/show/delete" and the
# pinning of versions, on a mounted store and on an unmounted one:
#   - create NAME (whole store) and create NAME PATH (a subtree), from
#     --store, from a path in the mount, from a working directory in it
#   - list (text, --json), show NAME; the mount sees a snapshot at once
#     under .ulpfs/snapshots/NAME/PATH, read-only (EROFS)
#   - a pinned version survives a newer version, the deletion of its path
#     (rm, rm -rf of its directory), "ulpfs gc" mounted and unmounted, and
#     a remount; it reads back bit-exact
#   - delete NAME: gone from list and from .ulpfs/snapshots at once; after
#     gc its versions' objects are freed
#   - errors: duplicate name, unknown snapshot (show/delete), bad names,
#     missing name, unknown subtree: exit 1 or 2 with a message
# FUSE unavailable is a FAILURE unless ULPFS_ALLOW_SKIP=1 (then exit 77).
#
# Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/cli_lib.sh"
cli_init snapshot gc sync

STORE=$WORK/store
MNT=$WORK/mnt
SRC=$WORK/src
mkdir -p "$SRC"

step "generating 3 versions of a bf16 safetensors file, and a small file"
"$PY" "$FS_UTIL" drift "$SRC" --n 3 --elems 400000 >/dev/null || die "generator failed"
head -c 100000 /dev/urandom >"$SRC/blob.bin"

snaps_listed() { # snapshot list --json -> names, one a line ("" on failure)
	run snapshot list --json "$@"
	[ "$RC" = 0 ] || return 1
	"$PY" "$CLI_UTIL" names "$OUT_F"
}

fs_mount "$STORE" "$MNT"
mkdir -p "$MNT/a" "$MNT/b"
cp "$SRC/v1/model.safetensors" "$MNT/a/model.safetensors"
cp "$SRC/blob.bin" "$MNT/b/blob.bin"
expect 0 "sync" sync "$MNT"

step "create, mounted"
expect 0 "snapshot create s1 --store STORE (whole store)" snapshot create --store "$STORE" s1
in_dir "$MNT" expect 0 "snapshot create s2 a (subtree, cwd in the mount)" snapshot create s2 a
expect 0 "snapshot create s3 MNT/b (subtree as a mount path)" snapshot create s3 "$MNT/b"
expect_err "1" "s1" "snapshot create s1 again (duplicate)" snapshot create --store "$STORE" s1
expect_err "1|2" "" "snapshot create with no name" snapshot create --store "$STORE"
expect_err "1|2" "" "snapshot create 'x/y' (slash in name)" snapshot create --store "$STORE" x/y
expect_err "1|2" "" "snapshot create '..'" snapshot create --store "$STORE" ..
expect_err "1|2" "" "snapshot create ''" snapshot create --store "$STORE" ""
expect_err "1" "nosuch" "snapshot create s9 nosuch (unknown subtree)" snapshot create --store "$STORE" s9 nosuch
expect_err "1|2" "" "snapshot create s9 ../../etc (escaping the store)" snapshot create --store "$STORE" s9 ../../etc
expect_err "2" "" "snapshot with no subcommand" snapshot
expect_err "2" "" "snapshot frobnicate" snapshot frobnicate

step "list, show, mounted"
expect 0 "snapshot list" snapshot list --store "$STORE"
for s in s1 s2 s3; do grep -qw "$s" "$OUT_F" || bad "snapshot list lacks $s"; done
names=$(snaps_listed --store "$STORE" | sort | tr '\n' ' ')
[ "$names" = "s1 s2 s3 " ] && ok "snapshot list --json: $names" || bad "snapshot list --json names: '$names' (expected s1 s2 s3)"
expect 0 "snapshot show s1" snapshot show --store "$STORE" s1
grep -q 'a/model.safetensors' "$OUT_F" && grep -q 'b/blob.bin' "$OUT_F" && ok "show s1 lists both files" ||
	{ bad "show s1 should list a/model.safetensors and b/blob.bin"; sed 's/^/    | /' "$OUT_F" >&2; }
expect 0 "snapshot show s2" snapshot show --store "$STORE" s2
grep -q 'a/model.safetensors' "$OUT_F" && ! grep -q 'blob.bin' "$OUT_F" && ok "show s2 lists a/ only" ||
	{ bad "show s2 should list a/model.safetensors and not b/blob.bin"; sed 's/^/    | /' "$OUT_F" >&2; }
expect_err "1" "nosuch" "snapshot show nosuch" snapshot show --store "$STORE" nosuch

step "the mount sees the snapshots at once"
for s in s1 s2 s3; do [ -d "$MNT/.ulpfs/snapshots/$s" ] || bad ".ulpfs/snapshots/$s missing"; done
ls "$MNT/.ulpfs/snapshots/" >"$WORK/ls" 2>&1 && [ "$(sort "$WORK/ls" | tr '\n' ' ')" = "s1 s2 s3 " ] &&
	ok "ls .ulpfs/snapshots: s1 s2 s3" || { bad "ls .ulpfs/snapshots: $(tr '\n' ' ' <"$WORK/ls")"; }
cmp -s "$MNT/.ulpfs/snapshots/s1/a/model.safetensors" "$SRC/v1/model.safetensors" && ok "s1/a/model.safetensors = v1" || bad "s1/a/model.safetensors differs"
cmp -s "$MNT/.ulpfs/snapshots/s1/b/blob.bin" "$SRC/blob.bin" && ok "s1/b/blob.bin" || bad "s1/b/blob.bin differs"
cmp -s "$MNT/.ulpfs/snapshots/s2/a/model.safetensors" "$SRC/v1/model.safetensors" && ok "s2/a/model.safetensors = v1" || bad "s2/a/model.safetensors differs"
[ -e "$MNT/.ulpfs/snapshots/s2/b" ] && bad "s2 (subtree a) has b/" || ok "s2 has no b/"
( : >"$MNT/.ulpfs/snapshots/s1/new" ) 2>"$WORK/e"; grep -q 'Read-only file system' "$WORK/e" &&
	ok "creating a file in a snapshot: EROFS" || bad "creating a file in a snapshot: $(cat "$WORK/e") (expected EROFS)"
( echo x >>"$MNT/.ulpfs/snapshots/s1/b/blob.bin" ) 2>"$WORK/e"; grep -q 'Read-only file system' "$WORK/e" &&
	ok "appending to a snapshot file: EROFS" || bad "appending to a snapshot file: $(cat "$WORK/e") (expected EROFS)"
rm -f "$MNT/.ulpfs/snapshots/s1/b/blob.bin" 2>"$WORK/e"; grep -q 'Read-only file system' "$WORK/e" &&
	ok "rm of a snapshot file: EROFS" || bad "rm of a snapshot file: $(cat "$WORK/e") (expected EROFS)"

step "pinning: a newer version, then the path deleted, gc"
cp "$SRC/v2/model.safetensors" "$MNT/a/model.safetensors"
expect 0 "sync" sync "$MNT"
cmp -s "$MNT/.ulpfs/snapshots/s1/a/model.safetensors" "$SRC/v1/model.safetensors" && ok "s1 still v1 after v2 written" || bad "s1 changed after v2 was written"
cp "$SRC/v3/model.safetensors" "$MNT/a/model.safetensors"
expect 0 "sync" sync "$MNT"
rm -f "$MNT/a/model.safetensors" && rm -rf "$MNT/b" || bad "rm failed"
expect 0 "gc (mounted)" gc --store "$STORE"
cmp -s "$MNT/.ulpfs/snapshots/s1/a/model.safetensors" "$SRC/v1/model.safetensors" && ok "s1/a/model.safetensors survives rm + gc" || bad "s1/a/model.safetensors lost after rm + gc"
cmp -s "$MNT/.ulpfs/snapshots/s1/b/blob.bin" "$SRC/blob.bin" && ok "s1/b/blob.bin survives rm -rf b + gc" || bad "s1/b/blob.bin lost after rm -rf + gc"
cmp -s "$MNT/.ulpfs/snapshots/s3/b/blob.bin" "$SRC/blob.bin" && ok "s3/b/blob.bin survives" || bad "s3/b/blob.bin lost"
[ -e "$MNT/a/model.safetensors" ] && bad "live a/model.safetensors still there after rm" || ok "live tree: a/model.safetensors gone"
expect 0 "snapshot show s1 after the deletes" snapshot show --store "$STORE" s1
grep -q 'b/blob.bin' "$OUT_F" && ok "show s1 still lists b/blob.bin" || bad "show s1 lost b/blob.bin"

fs_umount "$MNT"

step "unmounted: gc, list, show, create, delete"
expect 0 "gc (unmounted)" gc --store "$STORE"
names=$(snaps_listed --store "$STORE" | sort | tr '\n' ' ')
[ "$names" = "s1 s2 s3 " ] && ok "unmounted list --json: $names" || bad "unmounted list --json: '$names'"
expect 0 "snapshot show s1 (unmounted)" snapshot show --store "$STORE" s1
grep -q 'a/model.safetensors' "$OUT_F" || bad "unmounted show s1 lacks a/model.safetensors"
expect 0 "snapshot create s4 (unmounted; an empty live tree but for a/)" snapshot create --store "$STORE" s4
expect_err "1" "s4" "duplicate (unmounted)" snapshot create --store "$STORE" s4
expect 0 "snapshot delete s2 (unmounted)" snapshot delete --store "$STORE" s2
expect_err "1" "s2" "delete s2 again (unmounted)" snapshot delete --store "$STORE" s2
expect_err "1" "nosuch" "show nosuch (unmounted)" snapshot show --store "$STORE" nosuch
expect_err "1" "" "a store that does not exist" snapshot list --store "$WORK/nostore"

step "remount: pinned versions still there"
fs_mount "$STORE" "$MNT"
cmp -s "$MNT/.ulpfs/snapshots/s1/a/model.safetensors" "$SRC/v1/model.safetensors" && ok "s1/a after remount" || bad "s1/a after remount"
cmp -s "$MNT/.ulpfs/snapshots/s1/b/blob.bin" "$SRC/blob.bin" && ok "s1/b after remount" || bad "s1/b after remount"
[ -e "$MNT/.ulpfs/snapshots/s2" ] && bad "deleted s2 still under .ulpfs/snapshots" || ok "s2 gone"
[ -d "$MNT/.ulpfs/snapshots/s4" ] && ok "s4 (made unmounted) is there" || bad "s4 (made unmounted) missing"

step "delete, mounted: gone at once; gc frees the pinned objects"
before=$(fs_file_bytes "$STORE/objects")
expect 0 "snapshot delete s1" snapshot delete --store "$STORE" s1
[ -e "$MNT/.ulpfs/snapshots/s1" ] && bad ".ulpfs/snapshots/s1 still there after delete" || ok ".ulpfs/snapshots/s1 gone at once"
in_dir "$MNT" expect 0 "snapshot delete s3 (cwd in the mount)" snapshot delete s3
expect 0 "snapshot delete s4 (--store, mounted)" snapshot delete --store "$STORE" s4
expect 0 "gc (mounted)" gc --store "$STORE"
expect 0 "sync" sync "$MNT"
after=$(fs_file_bytes "$STORE/objects")
say "objects: $before bytes before deleting the snapshots, $after after gc"
[ "$after" -lt "$before" ] && ok "gc freed the versions only the snapshots kept ($before -> $after bytes)" ||
	bad "objects did not shrink after deleting every snapshot and gc ($before -> $after bytes)"
names=$(snaps_listed --store "$STORE" | tr '\n' ' ')
[ -z "$names" ] && ok "no snapshots left" || bad "snapshots left: $names"
fs_umount "$MNT"
fs_finish
