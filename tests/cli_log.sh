#!/usr/bin/env bash
# tests/cli_log.sh - "ulpfs log" and "ulpfs sync", on a mounted store and on
# an unmounted one:
#   - log PATH lists every version, oldest first, numbered from 1, in text
#     and --json (number, time, size, stored size, ratio, reference, depth,
#     keyframe, hash), the store found by --store, by an absolute path in
#     the mount and by a relative path from a working directory inside it
#   - a version committed while mounted shows up in log at once
#   - log --chain follows the reference lineage across paths (reverse
#     deltas: checkpoint-1/ is coded against checkpoint-2/), text and --json
#   - the same versions and hashes unmounted (--store) as mounted
#   - .ulpfs/versions/PATH/N reads back each version bit-exact
#   - bad arguments: unknown path, unknown store, a path escaping the store,
#     no path, unknown option: exit 1 or 2 with a message, never a crash
# FUSE unavailable is a FAILURE unless ULPFS_ALLOW_SKIP=1 (then exit 77).
#
# Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/cli_lib.sh"
cli_init log sync

STORE=$WORK/store
MNT=$WORK/mnt
SRC=$WORK/src
TR=$WORK/trainer
mkdir -p "$SRC" "$TR"
P=a/model.safetensors

step "generating 4 versions of a bf16 safetensors file and 2 trainer checkpoints"
"$PY" "$FS_UTIL" drift "$SRC" --n 4 --elems 300000 >/dev/null || die "generator failed"
"$PY" "$FS_UTIL" trainer "$TR" --n 2 --elems 200000 >/dev/null || die "trainer generator failed"

fs_mount "$STORE" "$MNT"
mkdir -p "$MNT/a"

step "three versions of $P, each committed (ulpfs sync MNT) before the next"
for i in 1 2 3; do
	cp "$SRC/v$i/model.safetensors" "$MNT/$P" || bad "cp v$i failed"
	expect 0 "ulpfs sync $MNT after v$i" sync "$MNT"
	[ "$(fs_staged_count "$STORE")" = 0 ] ||
		bad "ulpfs sync returned with $(fs_staged_count "$STORE") file(s) still staged"
done
fs_wait_committed "$STORE" 60
# the older versions are coded again against their successors in the
# background: gc waits for that
expect 0 "ulpfs gc MNT" gc "$MNT"

step "log, mounted: text and --json, three ways of finding the store"
expect 0 "log MNT/PATH" log "$MNT/$P"
cp "$OUT_F" "$WORK/log-text-mounted"
n=$(grep -cE '^[[:space:]]*[0-9]+[[:space:]]' "$OUT_F")
[ "$n" = 3 ] && ok "log prints 3 version lines" ||
	{ bad "log should print 3 version lines (lines starting with the number), found $n"; sed 's/^/    | /' "$OUT_F" >&2; }
expect 0 "log --json MNT/PATH" log --json "$MNT/$P"
cp "$OUT_F" "$WORK/log-mounted.json"
util versions "$OUT_F" --numbers 1,2,3 && ok "log --json: versions 1,2,3 with every field" || bad "log --json content"
expect 0 "log --store STORE PATH --json (mounted)" log --store "$STORE" "$P" --json
util versions "$OUT_F" --numbers 1,2,3 && ok "log --store --json: versions 1,2,3" || bad "log --store --json content"
in_dir "$MNT/a" expect 0 "log model.safetensors from a working directory inside the mount" log model.safetensors
n=$(grep -cE '^[[:space:]]*[0-9]+[[:space:]]' "$OUT_F")
[ "$n" = 3 ] && ok "relative path inside the mount: 3 versions" || bad "relative path inside the mount: $n version lines"
expect 0 "log --help" log --help

# v3 is the newest version: standalone (a keyframe), depth 0; v1 and v2 are
# reverse deltas, v1 two links from v3.
kf=$("$PY" "$CLI_UTIL" field "$WORK/log-mounted.json" 3 keyframe)
dp=$("$PY" "$CLI_UTIL" field "$WORK/log-mounted.json" 3 depth)
d1=$("$PY" "$CLI_UTIL" field "$WORK/log-mounted.json" 1 depth)
sz=$("$PY" "$CLI_UTIL" field "$WORK/log-mounted.json" 2 size)
case $kf in true | 1 | '"yes"' | yes) ok "version 3 is a keyframe ($kf)" ;; *) bad "version 3 should be a keyframe, log says keyframe=$kf" ;; esac
[ "$dp" = 0 ] && ok "version 3 has chain depth 0" || bad "version 3 chain depth: '$dp' (expected 0)"
[ "$d1" = 2 ] && ok "version 1 has chain depth 2" || bad "version 1 chain depth: '$d1' (expected 2 with the default keyframe=16)"
[ "$sz" = "$(stat -c %s "$SRC/v2/model.safetensors")" ] && ok "version 2 logical size $sz" ||
	bad "version 2 logical size '$sz', expected $(stat -c %s "$SRC/v2/model.safetensors")"

step "a version committed while mounted appears in log at once"
cp "$SRC/v4/model.safetensors" "$MNT/$P" || bad "cp v4 failed"
in_dir "$MNT" expect 0 "ulpfs sync (no argument) with cwd in the mount" sync
fs_wait_committed "$STORE" 60
expect 0 "log --json after v4" log --json "$MNT/$P"
util versions "$OUT_F" --numbers 1,2,3,4 && ok "log shows v4 at once" || bad "log after v4"
cp "$OUT_F" "$WORK/log-mounted.json"

step ".ulpfs/versions/PATH/N: every version bit-exact"
for i in 1 2 3 4; do
	cmp -s "$MNT/.ulpfs/versions/$P/$i" "$SRC/v$i/model.safetensors" && ok ".ulpfs/versions/$P/$i equals v$i" ||
		bad ".ulpfs/versions/$P/$i differs from v$i (or is missing)"
done

step "log --chain across trainer checkpoint directories"
cp -r "$TR/checkpoint-1" "$MNT/" || bad "cp checkpoint-1 failed"
expect 0 "sync" sync "$MNT"
cp -r "$TR/checkpoint-2" "$MNT/" || bad "cp checkpoint-2 failed"
expect 0 "sync" sync "$MNT"
fs_wait_committed "$STORE" 60
expect 0 "gc (the flips)" gc "$MNT"
expect 0 "log --chain checkpoint-1/model.safetensors" log --chain "$MNT/checkpoint-1/model.safetensors"
grep -q 'checkpoint-2/model.safetensors' "$OUT_F" && ok "--chain names checkpoint-2/model.safetensors (the reference's path)" ||
	{ bad "--chain does not name checkpoint-2/model.safetensors"; sed 's/^/    | /' "$OUT_F" | head >&2; }
expect 0 "log --chain --json" log --chain --json "$MNT/checkpoint-1/model.safetensors"
if util paths "$OUT_F"; then
	printf '%s\n' "$UTIL_OUT" | grep -q 'checkpoint-2/model.safetensors' && ok "--chain --json has checkpoint-2's path" ||
		bad "--chain --json lacks checkpoint-2/model.safetensors (paths: $(echo $UTIL_OUT))"
else
	bad "--chain --json does not parse"
fi
expect 0 "log --json checkpoint-1/trainer_state.json" log --json "$MNT/checkpoint-1/trainer_state.json"
ref=$("$PY" -c 'import json, sys
v = json.load(open(sys.argv[1]))[-1]
print(v["ref"]["path"] if v["ref"] else "-")' "$OUT_F")
[ "$ref" = checkpoint-2/trainer_state.json ] &&
	ok "a file with no tensor layout is coded against the same name in the next checkpoint" ||
	bad "checkpoint-1/trainer_state.json's reference is $ref, want checkpoint-2/trainer_state.json"
expect 0 "log (no --chain) checkpoint-2/model.safetensors" log --json "$MNT/checkpoint-2/model.safetensors"
util versions "$OUT_F" --count 1 && ok "without --chain only the path's own version" || bad "log without --chain"

step "a checkpoint saved to tmp-checkpoint-3/ and renamed: log finds it under its new name"
mkdir -p "$MNT/tmp-checkpoint-3"
cp "$MNT/checkpoint-2/model.safetensors" "$MNT/tmp-checkpoint-3/model.safetensors"
expect 0 "sync" sync "$MNT"
mv "$MNT/tmp-checkpoint-3" "$MNT/checkpoint-3"
expect 0 "log checkpoint-3/model.safetensors" log --json "$MNT/checkpoint-3/model.safetensors"
util versions "$OUT_F" --count 1 && ok "renamed checkpoint: its version is listed" ||
	bad "renamed checkpoint: log does not list its one version"
cmp -s "$MNT/.ulpfs/versions/checkpoint-3/model.safetensors/1" "$MNT/checkpoint-2/model.safetensors" &&
	ok ".ulpfs/versions under the new name" || bad ".ulpfs/versions/checkpoint-3/model.safetensors/1 differs"

step "log of a directory: the versions of every file under it, with paths"
expect 0 "log --json MNT/checkpoint-2" log --json "$MNT/checkpoint-2"
want=$(cd "$TR/checkpoint-2" && find . -type f | sed 's|^\./|checkpoint-2/|' | LC_ALL=C sort | tr '\n' ' ')
got=$("$PY" -c 'import json, sys
print(" ".join(sorted({v["path"] for v in json.load(open(sys.argv[1]))})), end=" ")' "$OUT_F") ||
	bad "log --json DIR does not parse"
[ "$got" = "$want" ] && ok "log DIR lists exactly the files under it ($got)" ||
	bad "log DIR lists [$got], want [$want]"
expect 0 "log MNT (the whole store, text)" log "$MNT"
for f in "$P" checkpoint-1/model.safetensors checkpoint-3/model.safetensors; do
	grep -q " $f " "$OUT_F" && ok "log MNT names $f" || { bad "log MNT does not name $f"; sed 's/^/    | /' "$OUT_F" | head >&2; }
done
expect 0 "log --store STORE checkpoint-1 (a directory, through --store)" log --store "$STORE" checkpoint-1
grep -q 'checkpoint-2/model.safetensors@1' "$OUT_F" && ok "log DIR shows each version's reference on another path" ||
	bad "log DIR lacks the reference checkpoint-2/model.safetensors@1"

step "bad arguments, mounted"
expect_err "1" "nosuch" "unknown path (in the mount)" log "$MNT/nosuch"
expect_err "1" "nosuch" "unknown path (--store)" log --store "$STORE" nosuch/file
expect_err "1|2" "" "a path escaping the store" log --store "$STORE" ../../etc/passwd
expect_err "1|2" "" "a path outside any mount, no --store" log /etc/passwd
expect_err "2" "" "no path" log
expect_err "2" "" "unknown option" log --bogus "$MNT/$P"
expect_err "1" "" "a store that does not exist" log --store "$WORK/nostore" "$P"
mkdir -p "$MNT/empty"
expect_err "1" "no versions" "a directory with no files" log "$MNT/empty"

fs_umount "$MNT"

step "log, unmounted (--store): the same versions"
expect 0 "log --store (unmounted)" log --store "$STORE" "$P"
n=$(grep -cE '^[[:space:]]*[0-9]+[[:space:]]' "$OUT_F")
[ "$n" = 4 ] && ok "unmounted log: 4 version lines" || bad "unmounted log: $n version lines, expected 4"
expect 0 "log --store --json (unmounted)" log --store "$STORE" --json "$P"
util versions "$OUT_F" --numbers 1,2,3,4 && ok "unmounted --json: 1..4" || bad "unmounted --json"
for i in 1 2 3 4; do
	a=$("$PY" "$CLI_UTIL" field "$WORK/log-mounted.json" "$i" hash)
	b=$("$PY" "$CLI_UTIL" field "$OUT_F" "$i" hash)
	[ -n "$a" ] && [ "$a" = "$b" ] || bad "version $i: hash mounted '$a' != unmounted '$b'"
done
ok "hashes agree mounted / unmounted"
expect 0 "log --chain (unmounted)" log --store "$STORE" --chain checkpoint-1/model.safetensors
grep -q 'checkpoint-2/model.safetensors' "$OUT_F" && ok "unmounted --chain names checkpoint-2" || bad "unmounted --chain lacks checkpoint-2"
expect 0 "sync --store (unmounted: nothing to do)" sync --store "$STORE"
expect_err "1" "nosuch" "unknown path (unmounted)" log --store "$STORE" nosuch
expect_err "1|2" "" "a path escaping the store (unmounted)" log --store "$STORE" ../../etc/passwd
expect_err "1|2" "" "sync of a directory that is not a mount" sync "$WORK"

fs_finish
