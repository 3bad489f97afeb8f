#!/usr/bin/env bash
# tests/cli_data.sh - getting data back: "ulpfs cat", "ulpfs export",
# "ulpfs restore --snapshot", and the control directory, on a mounted store
# and on an unmounted one:
#   - cat PATH[@N] to stdout, bit-exact, newest without @N
#   - export PATH@N DEST and export --snapshot NAME DEST: plain files,
#     bit-exact, mtimes preserved
#   - restore --snapshot NAME: the snapshot's files back in the live tree
#     as new versions (log grows; the hash is the snapshot's)
#   - .ulpfs/versions/PATH/N and .ulpfs/snapshots/NAME/PATH read with python
#     mmap + numpy.frombuffer (safetensors) and torch.load (.pt)
#   - .ulpfs hidden from ls -a, find, du of the mount, reachable by name,
#     read-only (EROFS for create, write, mkdir, rm, rename, chmod)
#   - bad arguments: x@99, x@0, x@abc, unknown path/snapshot, a path
#     escaping the store, an existing DEST
# FUSE unavailable is a FAILURE unless ULPFS_ALLOW_SKIP=1 (then exit 77).
#
# Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/cli_lib.sh"
cli_init cat export restore snapshot log sync

STORE=$WORK/store
MNT=$WORK/mnt
SRC=$WORK/src
TR=$WORK/trainer
mkdir -p "$SRC" "$TR"
M=latest/model.safetensors
O=latest/optimizer.pt

step "generating 2 versions of a safetensors file and of an optimizer.pt"
"$PY" "$FS_UTIL" drift "$SRC" --n 2 --elems 400000 >/dev/null || die "generator failed"
"$PY" "$FS_UTIL" trainer "$TR" --n 2 --elems 200000 >/dev/null || die "trainer generator failed"
cp "$TR/checkpoint-1/optimizer.pt" "$SRC/v1/optimizer.pt"
cp "$TR/checkpoint-2/optimizer.pt" "$SRC/v2/optimizer.pt"
echo "step 1" >"$SRC/v1/notes.txt"
# fixed, distinct mtimes, kept by cp -p into the mount
touch -d '2021-03-04 05:06:07' "$SRC/v1/"*
touch -d '2022-08-09 10:11:12' "$SRC/v2/"*

fs_mount "$STORE" "$MNT"
mkdir -p "$MNT/latest"
cp -p "$SRC/v1/model.safetensors" "$SRC/v1/optimizer.pt" "$SRC/v1/notes.txt" "$MNT/latest/"
expect 0 "sync" sync "$MNT"
expect 0 "snapshot create s1 (the v1 state)" snapshot create --store "$STORE" s1
cp -p "$SRC/v2/model.safetensors" "$SRC/v2/optimizer.pt" "$MNT/latest/"
expect 0 "sync" sync "$MNT"
fs_wait_committed "$STORE" 60

step "cat, mounted"
catcheck() { # WHAT EXPECTED-FILE ARGS...
	local what=$1 exp=$2
	shift 2
	run "$@"
	if [ "$RC" = 0 ] && cmp -s "$OUT_F" "$exp"; then ok "$what: bit-exact"; else
		bad "$what: exit $RC, output $(stat -c %s "$OUT_F") bytes, expected $(stat -c %s "$exp") bytes of $exp"
		head -n3 "$ERR_F" | sed 's/^/    | err: /' >&2
	fi
}
catcheck "cat MNT/$M@1" "$SRC/v1/model.safetensors" cat "$MNT/$M@1"
catcheck "cat MNT/$M@2" "$SRC/v2/model.safetensors" cat "$MNT/$M@2"
catcheck "cat MNT/$M (newest)" "$SRC/v2/model.safetensors" cat "$MNT/$M"
catcheck "cat --store STORE $O@1 (mounted)" "$SRC/v1/optimizer.pt" cat --store "$STORE" "$O@1"
RUN_DIR=$MNT/latest catcheck "cat optimizer.pt@2 (cwd in the mount)" "$SRC/v2/optimizer.pt" cat optimizer.pt@2
RUN_DIR=""
expect_err "1" "99" "cat $M@99 (unknown version)" cat "$MNT/$M@99"
expect_err "1|2" "" "cat $M@0" cat "$MNT/$M@0"
expect_err "1|2" "" "cat $M@abc" cat "$MNT/$M@abc"
expect_err "1" "nosuch" "cat nosuch" cat --store "$STORE" nosuch
expect_err "1|2" "" "cat ../../etc/passwd (escaping the store)" cat --store "$STORE" ../../etc/passwd
expect_err "1|2" "" "cat ../../etc/passwd@1" cat --store "$STORE" ../../etc/passwd@1
expect_err "1|2" "" "cat of a directory" cat "$MNT/latest"
expect_err "2" "" "cat (no path)" cat

step "control directory: mmap + numpy.frombuffer, torch.load of old versions and snapshots"
V=$MNT/.ulpfs/versions
S=$MNT/.ulpfs/snapshots/s1
util mmap-tensors "$V/$M/1" "$SRC/v1/model.safetensors" && ok "mmap+frombuffer of .ulpfs/versions/$M/1" || bad "mmap of .ulpfs/versions/$M/1"
util mmap-tensors "$S/$M" "$SRC/v1/model.safetensors" && ok "mmap+frombuffer of .ulpfs/snapshots/s1/$M" || bad "mmap of the snapshot's $M"
util mmap-bytes "$V/$O/1" "$SRC/v1/optimizer.pt" && ok "mmap of .ulpfs/versions/$O/1" || bad "mmap of .ulpfs/versions/$O/1"
out=$("$PY" "$FS_UTIL" torch-check "$V/$O/1" "$SRC/v1/optimizer.pt" "$S/$O" "$SRC/v1/optimizer.pt" "$V/$O/2" "$SRC/v2/optimizer.pt" 2>&1) &&
	ok "torch.load of .ulpfs/versions/$O/1, /2 and the snapshot's $O" ||
	{ bad "torch.load of old versions:"; printf '%s\n' "$out" | sed 's/^/    | /' >&2; }
[ "$(stat -c %Y "$V/$M/1")" = "$(stat -c %Y "$SRC/v1/model.safetensors")" ] && ok "versions/$M/1 has v1's mtime" ||
	bad "versions/$M/1 mtime $(stat -c %Y "$V/$M/1"), expected $(stat -c %Y "$SRC/v1/model.safetensors")"

step "control directory hidden and read-only"
n=$(ctl_visible "$MNT")
[ "$n" = 0 ] && ok ".ulpfs not in ls -a, find, du of the mount" || { bad ".ulpfs visible ($n lines of ls -a/find/du)"; ls -a "$MNT" | sed 's/^/    | /' >&2; }
if command -v rsync >/dev/null; then
	rsync -a --dry-run --out-format='%n' "$MNT/" "$WORK/rs/" 2>&1 | grep -q '\.ulpfs' && bad "rsync of the mount sees .ulpfs" || ok "rsync of the mount does not see .ulpfs"
fi
[ -d "$MNT/.ulpfs" ] && [ -d "$MNT/.ulpfs/versions" ] && [ -d "$MNT/.ulpfs/snapshots" ] && ok ".ulpfs/{versions,snapshots} reachable by name" || bad ".ulpfs/{versions,snapshots} not reachable"
erofs() { # WHAT COMMAND...
	local what=$1
	shift
	if "$@" 2>"$WORK/e"; then bad "$what succeeded (expected EROFS)"
	elif grep -q 'Read-only file system' "$WORK/e"; then ok "$what: EROFS"
	else bad "$what failed, but not with EROFS: $(head -n1 "$WORK/e")"; fi
}
erofs "create .ulpfs/x" touch "$MNT/.ulpfs/x"
erofs "create .ulpfs/versions/x" touch "$MNT/.ulpfs/versions/x"
erofs "write .ulpfs/versions/$M/1" dd if=/dev/zero of="$V/$M/1" bs=1 count=1 conv=notrunc status=none
erofs "truncate .ulpfs/versions/$M/1" truncate -s 0 "$V/$M/1"
erofs "mkdir .ulpfs/snapshots/new" mkdir "$MNT/.ulpfs/snapshots/new"
erofs "rm .ulpfs/versions/$M/1" rm -f "$V/$M/1"
erofs "chmod .ulpfs/versions/$M/1" chmod 600 "$V/$M/1"
erofs "mv .ulpfs/versions/$M/1 out" mv "$V/$M/1" "$MNT/latest/stolen"
if mkdir "$MNT/.ulpfs" 2>/dev/null || touch "$MNT/.ulpfs" 2>/dev/null && [ -f "$MNT/.ulpfs" ]; then bad "could create a live .ulpfs at the root"; else ok "the name .ulpfs is reserved at the root"; fi
rm -rf "$MNT/.ulpfs" 2>/dev/null
[ -d "$V/$M" ] && cmp -s "$V/$M/1" "$SRC/v1/model.safetensors" && ok "rm -rf .ulpfs removed nothing" || bad "rm -rf .ulpfs damaged the control directory"

step "export, mounted: PATH@N and --snapshot, mtimes preserved"
expect 0 "export MNT/$M@1 DEST" export "$MNT/$M@1" "$WORK/ex1.safetensors"
cmp -s "$WORK/ex1.safetensors" "$SRC/v1/model.safetensors" && ok "exported v1 bit-exact" || bad "exported v1 differs"
[ "$(stat -c %Y "$WORK/ex1.safetensors" 2>/dev/null)" = "$(stat -c %Y "$SRC/v1/model.safetensors")" ] && ok "exported v1 keeps its mtime" ||
	bad "exported v1 mtime $(stat -c %y "$WORK/ex1.safetensors" 2>/dev/null), expected $(stat -c %y "$SRC/v1/model.safetensors")"
expect 0 "export --store STORE $O (newest)" export --store "$STORE" "$O" "$WORK/ex2.pt"
cmp -s "$WORK/ex2.pt" "$SRC/v2/optimizer.pt" && ok "exported newest optimizer.pt bit-exact" || bad "exported optimizer.pt differs"
expect 0 "export --snapshot s1 DEST" export --store "$STORE" --snapshot s1 "$WORK/exs1"
mkdir -p "$WORK/exp-s1/latest" && cp -p "$SRC/v1/"{model.safetensors,optimizer.pt,notes.txt} "$WORK/exp-s1/latest/"
fs_compare_trees "$WORK/exp-s1" "$WORK/exs1" "export --snapshot s1"
bad_mt=0
for f in model.safetensors optimizer.pt notes.txt; do
	[ "$(stat -c %Y "$WORK/exs1/latest/$f" 2>/dev/null)" = "$(stat -c %Y "$SRC/v1/$f")" ] || bad_mt=$((bad_mt + 1))
done
[ "$bad_mt" = 0 ] && ok "export --snapshot keeps every mtime" || bad "export --snapshot: $bad_mt file(s) with a wrong mtime"
find "$WORK/exs1" -type l | grep -q . && bad "export wrote symlinks, not plain files" || true
# onto an existing file: refused (1), or replaced as cp(1) would - then bit-exact
run export "$MNT/$M@2" "$WORK/ex1.safetensors"
if rc_ok "0|1" && { [ "$RC" = 1 ] || cmp -s "$WORK/ex1.safetensors" "$SRC/v2/model.safetensors"; }; then
	ok "export onto an existing DEST (exit $RC: $([ "$RC" = 0 ] && echo replaced || head -n1 "$ERR_F"))"
else
	bad "export onto an existing DEST: exit $RC, content neither kept nor replaced correctly"
	show_output export
fi
expect_err "1" "nosuch" "export --snapshot nosuch" export --store "$STORE" --snapshot nosuch "$WORK/exno"
expect_err "1" "99" "export $M@99" export "$MNT/$M@99" "$WORK/ex99"
expect_err "2" "" "export with no DEST" export "$MNT/$M@1"
expect_err "1|2" "" "export ../../etc/passwd" export --store "$STORE" ../../etc/passwd "$WORK/expw"

step "restore --snapshot, mounted: the files come back as new versions"
rm -f "$MNT/latest/notes.txt"
expect 0 "restore --snapshot s1" restore --store "$STORE" --snapshot s1
expect 0 "sync" sync "$MNT"
fs_wait_committed "$STORE" 60
for f in model.safetensors optimizer.pt notes.txt; do
	cmp -s "$MNT/latest/$f" "$SRC/v1/$f" && ok "restored latest/$f = v1" || bad "latest/$f after restore differs from v1 (or is missing)"
done
expect 0 "log --json $M after restore" log --json --store "$STORE" "$M"
if util versions "$OUT_F" --numbers 1,2,3; then
	h1=$("$PY" "$CLI_UTIL" field "$OUT_F" 1 hash)
	h3=$("$PY" "$CLI_UTIL" field "$OUT_F" 3 hash)
	[ "$h1" = "$h3" ] && ok "restore made version 3 with version 1's hash" || bad "version 3 hash $h3 != version 1 hash $h1"
else bad "after restore the log should show versions 1,2,3"; fi
expect_err "1" "nosuch" "restore --snapshot nosuch" restore --store "$STORE" --snapshot nosuch
expect_err "2" "" "restore without --snapshot" restore --store "$STORE"

fs_umount "$MNT"

step "unmounted: cat, export, restore"
catcheck "cat --store $M@1 (unmounted)" "$SRC/v1/model.safetensors" cat --store "$STORE" "$M@1"
catcheck "cat --store $M@2 (unmounted)" "$SRC/v2/model.safetensors" cat --store "$STORE" "$M@2"
catcheck "cat --store $O@2 (unmounted)" "$SRC/v2/optimizer.pt" cat --store "$STORE" "$O@2"
expect_err "1" "99" "cat $M@99 (unmounted)" cat --store "$STORE" "$M@99"
expect_err "1|2" "" "cat ../../etc/passwd (unmounted)" cat --store "$STORE" ../../etc/passwd
expect 0 "export --snapshot s1 (unmounted)" export --store "$STORE" --snapshot s1 "$WORK/exs1b"
fs_compare_trees "$WORK/exp-s1" "$WORK/exs1b" "export --snapshot s1 (unmounted)"
[ "$(stat -c %Y "$WORK/exs1b/latest/notes.txt" 2>/dev/null)" = "$(stat -c %Y "$SRC/v1/notes.txt")" ] && ok "unmounted export keeps mtimes" || bad "unmounted export mtime"
expect 0 "export $M@2 (unmounted)" export --store "$STORE" "$M@2" "$WORK/ex2u.safetensors"
cmp -s "$WORK/ex2u.safetensors" "$SRC/v2/model.safetensors" && ok "unmounted export v2 bit-exact" || bad "unmounted export v2 differs"
rm -rf "$WORK/exs1b"
expect 0 "restore --snapshot s1 (unmounted)" restore --store "$STORE" --snapshot s1
fs_mount "$STORE" "$MNT"
for f in model.safetensors optimizer.pt notes.txt; do
	cmp -s "$MNT/latest/$f" "$SRC/v1/$f" && ok "after unmounted restore: latest/$f = v1" || bad "after unmounted restore: latest/$f differs"
done
util mmap-tensors "$MNT/.ulpfs/versions/$M/2" "$SRC/v2/model.safetensors" && ok "after remount: mmap of versions/$M/2" || bad "after remount: versions/$M/2"
fs_umount "$MNT"
fs_finish
