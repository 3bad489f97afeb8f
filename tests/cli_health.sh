#!/usr/bin/env bash
# tests/cli_health.sh - "ulpfs stats", "verify", "gc" and "prune", on a
# mounted store and on an unmounted one:
#   - stats (text, --json): logical/physical bytes, ratio, by file kind,
#     dtype, codec path, chain depth histogram, ghosts; cache hit rate when
#     mounted
#   - stats --zstd19: the zstd -19 bytes of every stored version, overall
#     and by kind, equal the zstd CLI's on the same files (mounted, after
#     rm + gc, unmounted, and for a version only a snapshot keeps); a
#     second run takes every figure from the catalog
#   - gc finishes pending rebases: ghosts left by rm -rf of a referenced
#     checkpoint directory are gone after "ulpfs gc"
#   - prune --keep-last N [--keep-every M] PATH: old versions go (numbers
#     are not reused), the newest and pinned ones stay, then verify passes
#   - verify: 0 on a sound store; a byte flipped in an object under
#     STORE/objects (unmounted) -> exit 1 naming the path; also for a
#     version only a snapshot pins; and mounted, for an object damaged
#     after its chunks were read into the daemon's cache; 0 again once
#     repaired
#   - bad arguments: exit 1 or 2 with a message, never a crash
# FUSE unavailable is a FAILURE unless ULPFS_ALLOW_SKIP=1 (then exit 77).
#
# Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/cli_lib.sh"
cli_init stats verify gc prune log snapshot sync

STORE=$WORK/store
MNT=$WORK/mnt
SRC=$WORK/src
TR=$WORK/trainer
mkdir -p "$SRC" "$TR"

# json_num FILE SUBSTRING: the first number whose key contains SUBSTRING
json_num() {
	"$PY" - "$1" "$2" <<'PY'
import json, sys
want = sys.argv[2].lower()
def walk(x):
    if isinstance(x, dict):
        for k, v in x.items():
            if want in k.lower() and isinstance(v, (int, float)) and not isinstance(v, bool):
                return v
            r = walk(v)
            if r is not None:
                return r
    elif isinstance(x, list):
        for v in x:
            r = walk(v)
            if r is not None:
                return r
    return None
r = walk(json.load(open(sys.argv[1])))
print("" if r is None else r)
PY
}
versions_of() { # ARGS... -> "1,2,3" from log --json
	run log --json "$@"
	[ "$RC" = 0 ] || { echo "log-failed"; return 1; }
	"$PY" "$CLI_UTIL" versions "$OUT_F" 2>/dev/null | sed -n 's/^versions: //p'
}
# z19_of FILE: the bytes "zstd -19 FILE" writes (of the file itself: from
# a pipe the frame would not record the content size), computed once
declare -A Z19
z19_of() {
	[ -n "${Z19[$1]:-}" ] || Z19[$1]=$(zstd -19 -c -q -- "$1" | wc -c)
	echo "${Z19[$1]}"
}
# z19_expect FILE...: the versions stats should count, as "kind bytes"
# lines in $WORK/z19.exp (kinds by name, as the generators write them)
z19_expect() {
	local f k
	for f in "$@"; do
		case $f in *.safetensors) k=safetensors ;; *.pt) k="torch zip" ;; *) k=other ;; esac
		printf '%s\t%s\n' "$k" "$(z19_of "$f")"
	done >"$WORK/z19.exp"
}
# z19_check WHAT: stats --zstd19 --json in $OUT_F against $WORK/z19.exp,
# overall and by kind; $Z19_CACHED gets the count of cached figures
z19_check() {
	local r
	r=$("$PY" - "$OUT_F" "$WORK/z19.exp" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
want, n = {}, {}
for line in open(sys.argv[2]):
    k, b = line.rstrip("\n").split("\t")
    want[k] = want.get(k, 0) + int(b)
    n[k] = n.get(k, 0) + 1
z = d.get("zstd19") or {}
bad = []
if z.get("bytes") != sum(want.values()) or z.get("versions") != sum(n.values()):
    bad.append("overall %s bytes in %s versions, zstd CLI %d in %d"
               % (z.get("bytes"), z.get("versions"), sum(want.values()), sum(n.values())))
for k, v in d.get("by_kind", {}).items():
    got = v.get("zstd19") or {}
    if got.get("bytes") != want.get(k, 0) or got.get("versions") != n.get(k, 0):
        bad.append("%s: %s bytes in %s versions, zstd CLI %d in %d"
                   % (k, got.get("bytes"), got.get("versions"), want.get(k, 0), n.get(k, 0)))
print("; ".join(bad) if bad else "ok %d %d %d" % (z["bytes"], z["versions"], z.get("cached", -1)))
PY
)
	case $r in
	ok\ *)
		local what=$1
		set -- $r
		Z19_CACHED=$4
		ok "$what: zstd -19 $2 bytes over $3 versions, as the zstd CLI, by kind too ($4 cached)" ;;
	*)
		Z19_CACHED=-1
		bad "$1: stats --zstd19 differs from the zstd CLI: $r" ;;
	esac
}
flip_byte() { # FILE OFFSET
	"$PY" - "$1" "$2" <<'PY'
import sys
p, off = sys.argv[1], int(sys.argv[2])
with open(p, "r+b") as f:
    f.seek(off)
    b = f.read(1)
    f.seek(off)
    f.write(bytes([b[0] ^ 0x5A]))
PY
}

# damaged_verify STORE MIN WHAT PATTERN [HOOK]: flip the middle byte of the
# largest object of STORE (at least MIN bytes), run HOOK, expect verify to
# fail naming PATTERN or the object, and to pass once the byte is back.
damaged_verify() {
	local store=$1 min=$2 what=$3 pat=$4 obj sz
	obj=$(find "$store/objects" -type f -printf '%s %p\n' | sort -n | tail -n1 | cut -d' ' -f2-)
	[ -n "$obj" ] || die "no object under $store/objects"
	sz=$(stat -c %s "$obj")
	[ "$sz" -ge "$min" ] || bad "$what: the largest object has $sz bytes, not $min or more"
	flip_byte "$obj" $((sz / 2)) || die "cannot flip a byte of $obj"
	say "flipped the byte at $((sz / 2)) of $obj ($sz bytes)"
	[ -z "${5:-}" ] || "$5"
	expect_err "1" "" "verify, $what" verify --store "$store"
	grep -qE "$pat|$(basename "$obj")" "$OUT_F" "$ERR_F" && ok "verify names $pat (or the object)" ||
		{ bad "verify's message names neither $pat nor the object $(basename "$obj")"; show_output verify; }
	flip_byte "$obj" $((sz / 2))
	expect 0 "verify after the repair, $what" verify --store "$store"
}

step "generating data: 6 and 8 versions of two safetensors files, trainer checkpoints"
mkdir -p "$SRC/a" && "$PY" "$FS_UTIL" drift "$SRC/a" --n 6 --elems 200000 >/dev/null || die "generator failed"
mkdir -p "$SRC/b" && "$PY" "$FS_UTIL" drift "$SRC/b" --n 8 --elems 100000 --seed 5 >/dev/null || die "generator failed"
"$PY" "$FS_UTIL" trainer "$TR" --n 2 --elems 200000 >/dev/null || die "trainer generator failed"

fs_mount "$STORE" "$MNT"
mkdir -p "$MNT/a" "$MNT/b"
for i in 1 2 3 4 5 6 7 8; do
	[ "$i" -le 6 ] && cp "$SRC/a/v$i/model.safetensors" "$MNT/a/m.safetensors"
	cp "$SRC/b/v$i/model.safetensors" "$MNT/b/m.safetensors"
	run sync "$MNT"
	[ "$RC" = 0 ] || { bad "sync after version $i: exit $RC"; show_output sync "$MNT"; }
	[ "$i" = 2 ] && expect 0 "snapshot create keep (pins a/ v2, b/ v2)" snapshot create --store "$STORE" keep
done
cp -r "$TR/checkpoint-1" "$MNT/"
expect 0 "sync" sync "$MNT"
cp -r "$TR/checkpoint-2" "$MNT/"
expect 0 "sync" sync "$MNT"
fs_wait_committed "$STORE" 60
v=$(versions_of "$MNT/a/m.safetensors")
[ "$v" = 1,2,3,4,5,6 ] && ok "a/m.safetensors has versions 1..6" || bad "a/m.safetensors versions: '$v'"

step "stats, mounted"
in_dir "$MNT" expect 0 "stats (cwd in the mount)" stats
[ -s "$OUT_F" ] && ok "stats printed $(wc -l <"$OUT_F") lines" || bad "stats printed nothing"
expect 0 "stats --json (mounted)" stats --json --store "$STORE"
cp "$OUT_F" "$WORK/stats-mounted.json"
util keys "$OUT_F" 'logical|logical_bytes|logical_size' 'physical|physical_bytes|stored|stored_bytes' 'ratio' \
	'kind|kinds|by_kind|file_kind|file_kinds' 'dtype|dtypes|by_dtype' 'codec|codecs|by_codec|codec_path|codec_paths|chunks_by_path|by_path' \
	'depth|depths|chain_depth|depth_histogram|chain_depths' 'ghost|ghosts' &&
	ok "stats --json has logical/physical bytes, ratio, kinds, dtypes, codec paths, depths, ghosts" || bad "stats --json lacks fields"
util keys "$OUT_F" 'cache|cache_hit_rate|hit_rate|cache_hits|hits' && ok "stats --json (mounted) has the cache hit rate" || bad "stats --json (mounted) lacks the cache hit rate"
r=$(json_num "$OUT_F" ratio)
awk "BEGIN { exit !(\"$r\" + 0 > 1.0) }" && ok "ratio $r > 1 for a drifting bf16 trajectory" || bad "stats ratio '$r' (expected > 1)"

step "stats --zstd19, mounted: the same bytes as the zstd CLI on the source files"
command -v zstd >/dev/null || die "the zstd CLI is missing (Debian: apt-get install zstd)"
z19_expect "$SRC"/a/v[1-6]/model.safetensors "$SRC"/b/v[1-8]/model.safetensors "$TR"/checkpoint-[12]/*
expect 0 "stats --zstd19 --json (mounted, computes every figure)" stats --zstd19 --json --store "$STORE"
z19_check "mounted, first run"
[ "$Z19_CACHED" = 0 ] || bad "first stats --zstd19 found $Z19_CACHED figures in the catalog (expected 0)"
expect 0 "stats --zstd19 --json again" stats --zstd19 --json --store "$STORE"
z19_check "mounted, second run"
n=$(wc -l <"$WORK/z19.exp")
[ "$Z19_CACHED" = "$n" ] && ok "the second run took all $n figures from the catalog" || bad "second stats --zstd19: $Z19_CACHED of $n figures cached"
in_dir "$MNT" expect 0 "stats --zstd19 --threads 1 (text)" stats --zstd19 --threads 1
if grep -q '^zstd -19 .*versions' "$OUT_F" && grep -q '^saved vs raw' "$OUT_F" && grep -q 'ZSTD-19' "$OUT_F"; then
	ok "text stats has the zstd -19 line, the saving against raw and the ZSTD-19 column"
else bad "text stats --zstd19 lacks the zstd -19 line, 'saved vs raw' or the ZSTD-19 column"; show_output stats --zstd19; fi

step "gc finishes rebases: rm -rf checkpoint-1 (checkpoint-2 is coded against it)"
rm -rf "$MNT/checkpoint-1"
expect 0 "gc (mounted)" gc --store "$STORE"
expect 0 "stats --json after gc" stats --json --store "$STORE"
g=$(json_num "$OUT_F" ghost)
[ "$g" = 0 ] && ok "no ghosts left after gc" || bad "ghosts after gc: '$g' (expected 0)"
cmp -s "$MNT/checkpoint-2/model.safetensors" "$TR/checkpoint-2/model.safetensors" && ok "checkpoint-2 intact after its reference was rebased away" || bad "checkpoint-2 damaged after gc"
expect 0 "verify (mounted)" verify --store "$STORE"
z19_expect "$SRC"/a/v[1-6]/model.safetensors "$SRC"/b/v[1-8]/model.safetensors "$TR"/checkpoint-2/*
expect 0 "stats --zstd19 --json after rm -rf + gc" stats --zstd19 --json --store "$STORE"
z19_check "after rm -rf checkpoint-1 + gc"
n=$(wc -l <"$WORK/z19.exp")
[ "$Z19_CACHED" = "$n" ] && ok "rebased versions keep their figures ($n cached)" || bad "after gc: $Z19_CACHED of $n figures cached"

step "prune --keep-last 2, mounted"
before=$(find "$STORE/objects" -type f | wc -l)
expect 0 "prune --keep-last 2 a/m.safetensors" prune --keep-last 2 "$MNT/a/m.safetensors"
expect 0 "gc (finish the rebases prune started)" gc "$MNT"
v=$(versions_of --store "$STORE" a/m.safetensors)
case $v in 5,6 | 2,5,6) ok "after prune: versions $v (newest two, and the pinned v2 if listed)" ;; *) bad "after prune --keep-last 2: versions '$v' (expected 5,6 or 2,5,6)" ;; esac
for i in 5 6; do cmp -s "$MNT/.ulpfs/versions/a/m.safetensors/$i" "$SRC/a/v$i/model.safetensors" || bad "versions/a/m.safetensors/$i differs after prune"; done
[ -e "$MNT/.ulpfs/versions/a/m.safetensors/3" ] && bad "version 3 still under .ulpfs/versions after prune" || ok "version 3 gone from .ulpfs/versions"
cmp -s "$MNT/a/m.safetensors" "$SRC/a/v6/model.safetensors" && ok "live file intact" || bad "live file differs after prune"
cmp -s "$MNT/.ulpfs/snapshots/keep/a/m.safetensors" "$SRC/a/v2/model.safetensors" && ok "pinned v2 survives prune" || bad "pinned v2 lost by prune"
expect 0 "gc" gc --store "$STORE"
after=$(find "$STORE/objects" -type f | wc -l)
# (bytes may even grow: the kept versions are rebased, deltas become keyframes)
[ "$after" -le $((before - 3)) ] && ok "prune + gc removed the objects of versions 1, 3, 4 ($before -> $after objects)" ||
	bad "prune + gc: $before -> $after objects (versions 1, 3, 4 dropped: expected at least 3 fewer)"
expect 0 "verify after prune (mounted)" verify --store "$STORE"
expect 0 "stats --json after prune + gc" stats --json --store "$STORE"
g=$(json_num "$OUT_F" ghost)
expect 0 "log (text) after prune + gc" log --store "$STORE" a/m.safetensors
if [ "$g" = 0 ] && grep -qi ghost "$OUT_F"; then
	bad "log labels versions 'ghost' while stats counts 0 ghosts (pruned versions are deleted, not ghosts):"
	sed 's/^/    | /' "$OUT_F" >&2
else ok "log's labels agree with stats ($g ghosts)"; fi

step "prune --keep-last 1 --keep-every 4, mounted"
expect 0 "prune --keep-last 1 --keep-every 4 b/m.safetensors" prune --store "$STORE" --keep-last 1 --keep-every 4 b/m.safetensors
expect 0 "gc" gc --store "$STORE"
v=$(versions_of --store "$STORE" b/m.safetensors)
case $v in 4,8 | 2,4,8) ok "keep-every 4 + keep-last 1: versions $v" ;; *) bad "after --keep-last 1 --keep-every 4 of versions 1..8: '$v' (expected 4,8, or 2,4,8 with the pinned v2)" ;; esac
cmp -s "$MNT/.ulpfs/versions/b/m.safetensors/4" "$SRC/b/v4/model.safetensors" && ok "version 4 reads back" || bad "version 4 after prune"
expect 0 "verify after the second prune" verify --store "$STORE"

step "bad arguments"
expect_err "2" "" "prune without --keep-last" prune --store "$STORE" a/m.safetensors
expect_err "2" "" "prune --keep-last abc" prune --store "$STORE" --keep-last abc a/m.safetensors
expect_err "2" "" "prune --keep-last 2 with no path" prune --store "$STORE" --keep-last 2
expect "0|1|2" "prune --keep-last 0 (refused, or keeps only the current version)" prune --store "$STORE" --keep-last 0 a/m.safetensors
v=$(versions_of --store "$STORE" a/m.safetensors)
case $v in *6) ok "the live version survived --keep-last 0" ;; *) bad "--keep-last 0 removed the live version: '$v'" ;; esac
expect_err "1" "nosuch" "prune of an unknown path" prune --store "$STORE" --keep-last 2 nosuch
expect_err "1|2" "" "prune ../../etc/passwd" prune --store "$STORE" --keep-last 2 ../../etc/passwd
expect_err "2" "" "verify --bogus" verify --bogus
expect_err "2" "" "stats --bogus" stats --bogus
expect_err "2" "" "stats --zstd19 --threads 0" stats --zstd19 --threads 0 --store "$STORE"
expect_err "2" "" "stats --zstd19 --threads abc" stats --zstd19 --threads abc --store "$STORE"
expect_err "1" "" "stats of a store that does not exist" stats --store "$WORK/nostore"
in_dir / expect_err "1|2" "" "stats with cwd outside any mount and no --store" stats
in_dir / expect_err "1|2" "" "gc with cwd outside any mount and no --store" gc

fs_umount "$MNT"

step "unmounted: stats, gc, prune, verify"
expect 0 "stats (unmounted)" stats --store "$STORE"
files=("$TR"/checkpoint-2/*)
for i in $(versions_of --store "$STORE" a/m.safetensors | tr , ' '); do files+=("$SRC/a/v$i/model.safetensors"); done
for i in $(versions_of --store "$STORE" b/m.safetensors | tr , ' '); do files+=("$SRC/b/v$i/model.safetensors"); done
z19_expect "${files[@]}"
expect 0 "stats --zstd19 --json (unmounted, after the prunes)" stats --zstd19 --json --store "$STORE"
z19_check "unmounted, after prune + gc"
n=$(wc -l <"$WORK/z19.exp")
[ "$Z19_CACHED" = "$n" ] && ok "unmounted: all $n figures from the catalog" || bad "unmounted: $Z19_CACHED of $n figures cached"
expect 0 "stats --json (unmounted)" stats --json --store "$STORE"
util keys "$OUT_F" 'logical|logical_bytes|logical_size' 'physical|physical_bytes|stored|stored_bytes' 'ratio' &&
	ok "unmounted stats --json has logical/physical/ratio" || bad "unmounted stats --json lacks fields"
expect 0 "gc (unmounted)" gc --store "$STORE"
expect 0 "verify (unmounted)" verify --store "$STORE"
expect 0 "prune --keep-last 1 (unmounted)" prune --store "$STORE" --keep-last 1 a/m.safetensors
expect 0 "gc (unmounted)" gc --store "$STORE"
v=$(versions_of --store "$STORE" a/m.safetensors)
case $v in 6 | 2,6) ok "unmounted prune: versions $v" ;; *) bad "unmounted prune --keep-last 1: '$v' (expected 6 or 2,6)" ;; esac
expect 0 "verify after unmounted prune" verify --store "$STORE"

step "verify detects a corrupted object (unmounted)"
damaged_verify "$STORE" 1 "a corrupted store" 'm\.safetensors|model\.safetensors|optimizer\.pt'

step "verify checks versions only a snapshot pins"
S2=$WORK/store2
fs_mount "$S2" "$MNT"
mkdir -p "$MNT/ghost"
head -c 1500000 /dev/urandom >"$WORK/blob.bin"
cp "$WORK/blob.bin" "$MNT/ghost/blob.bin"
echo small >"$MNT/x.txt"
expect 0 "sync" sync "$MNT"
expect 0 "snapshot create pin" snapshot create --store "$S2" pin
rm -rf "$MNT/ghost"
expect 0 "gc" gc --store "$S2"
expect 0 "verify (mounted, pinned-only version)" verify --store "$S2"
fs_umount "$MNT"
echo small >"$WORK/x.txt"
z19_expect "$WORK/blob.bin" "$WORK/x.txt"
expect 0 "stats --zstd19 --json --threads 1 (unmounted, nothing cached)" stats --zstd19 --json --threads 1 --store "$S2"
z19_check "unmounted, with a version only a snapshot keeps"
[ "$Z19_CACHED" = 0 ] || bad "unmounted first stats --zstd19 found $Z19_CACHED figures cached (expected 0)"
damaged_verify "$S2" 1000000 "the pinned-only object corrupted" 'blob\.bin|pin'

step "verify through the mount, an object damaged after its chunks were cached"
fs_mount "$S2" "$MNT"
head -c 3000000 /dev/urandom >"$WORK/c.bin"
cp "$WORK/c.bin" "$MNT/c.bin"
expect 0 "sync" sync "$MNT"
cmp -s "$MNT/c.bin" "$WORK/c.bin" || bad "c.bin reads back different"
# The daemon decoded every chunk of c.bin for the read above: a decode
# would notice nothing now, only the stored bytes' own checksums.
served_from_cache() {
	cmp -s "$MNT/c.bin" "$WORK/c.bin" && ok "the mount serves c.bin from its cache" ||
		say "c.bin was not all in the cache (read again)"
}
damaged_verify "$S2" 2500000 "mounted, c.bin's object damaged" 'c\.bin' served_from_cache
fs_umount "$MNT"
fs_finish
