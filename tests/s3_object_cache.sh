#!/usr/bin/env bash
# tests/s3_object_cache.sh - reads fill the bounded object cache of a
# bucket store (real Swift s3api on loopback):
#   - a fresh read-only mount reads every file from the bucket (ranged
#     GETs, counted in the daemon's log), a second mount of the same cache
#     directory reads them all again exact and fetches nothing;
#   - under a small object_cache the cache stays within the bound (one
#     range, the one just fetched, may go over) and reads stay exact;
#   - a damaged cache file (its checksum fails) is fetched again from the
#     bucket: reads stay exact, the daemon's log says so.
#
# FUSE or Swift unavailable is a FAILURE unless ULPFS_ALLOW_SKIP=1.
#
# Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.

[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/s3_lib.sh"
s3_init

URL=s3://$S3_BUCKET/ocache
MNT=$WORK/mnt
DATA=$WORK/data
mkdir -p "$DATA"
for i in 1 2 3 4; do head -c $((6000000 + i * 1000)) /dev/urandom >"$DATA/f$i.bin"; done

# fetched CACHE: "RANGES BYTES CACHED_RANGES" of the daemon's last close
fetched() {
	grep "read .* ranges" "$1/daemon.log" | tail -n 1 |
		sed -E 's/.*read ([0-9]+) ranges \(([0-9]+) bytes\) from the bucket, ([0-9]+) ranges.*/\1 \2 \3/'
}

step "written through a writer mount"
s3_mount "$URL" "$WORK/cache-w" "$MNT"
cp "$DATA"/* "$MNT/" || bad "cp into the mount"
fs_umount "$MNT"

step "a fresh read-only mount reads from the bucket"
s3_mount "$URL" "$WORK/cache-r" "$MNT" ro,object_cache=1G
fs_compare_trees "$DATA" "$MNT" "first read, from the bucket"
fs_umount "$MNT"
read -r n1 b1 c1 <<<"$(fetched "$WORK/cache-r")"
[ "${n1:-0}" -gt 0 ] && [ "${b1:-0}" -ge 24000000 ] && ok "first read fetched $n1 ranges ($b1 bytes)" ||
	bad "first read fetched ${n1:-?} ranges (${b1:-?} bytes): $(fetched "$WORK/cache-r")"

step "the same cache directory again: nothing fetched"
s3_mount "$URL" "$WORK/cache-r" "$MNT" ro,object_cache=1G
fs_compare_trees "$DATA" "$MNT" "second read, from the object cache"
fs_umount "$MNT"
read -r n2 b2 c2 <<<"$(fetched "$WORK/cache-r")"
[ "$n2" = 0 ] && [ "${c2:-0}" -ge "$n1" ] && ok "second read: 0 ranges from the bucket, $c2 from the cache" ||
	bad "second read fetched ${n2:-?} ranges (${b2:-?} bytes), ${c2:-?} from the cache"

step "a damaged cache file is fetched again from the bucket"
victim=$(find "$WORK/cache-r/fetched" -type f -size +100k | head -n 1)
[ -n "$victim" ] || die "no cached range to damage"
printf 'XXXXXXXX' | dd of="$victim" bs=1 seek=5000 conv=notrunc status=none
s3_mount "$URL" "$WORK/cache-r" "$MNT" ro,object_cache=1G
fs_compare_trees "$DATA" "$MNT" "reads with a damaged cache file"
fs_umount "$MNT"
grep -q "$(basename "$victim"): damaged (checksum), fetched again from the bucket" "$WORK/cache-r/daemon.log" &&
	ok "the daemon's log names the damaged file" || bad "no word of the damaged file in daemon.log"
read -r n3 b3 c3 <<<"$(fetched "$WORK/cache-r")"
[ "$n3" = 1 ] && ok "only the damaged range was fetched again ($b3 bytes)" ||
	bad "fetched ${n3:-?} ranges (${b3:-?} bytes) after damaging one"
[ -f "$victim" ] && [ "$(dd if="$victim" bs=1 skip=5000 count=8 status=none)" != XXXXXXXX ] &&
	ok "the cache file was replaced by a good copy" || bad "the damaged cache file is still there (or gone)"

step "a small object_cache: the bound holds, reads stay exact"
BOUND=3000000
s3_mount "$URL" "$WORK/cache-s" "$MNT" ro,object_cache=$BOUND
fs_compare_trees "$DATA" "$MNT" "reads under object_cache=$BOUND"
fs_compare_trees "$DATA" "$MNT" "reads again under object_cache=$BOUND"
fs_umount "$MNT"
total=$(find "$WORK/cache-s/objects" "$WORK/cache-s/fetched" -type f -printf '%s\n' 2>/dev/null | awk '{ s += $1 } END { print s + 0 }')
largest=$(find "$WORK/cache-s/fetched" -type f -printf '%s\n' 2>/dev/null | sort -n | tail -n 1)
[ "$total" -gt 0 ] && [ "$total" -le $((BOUND + ${largest:-0})) ] &&
	ok "cache holds $total bytes (bound $BOUND, one range of ${largest:-0} may go over)" ||
	bad "cache holds $total bytes, over the bound $BOUND + ${largest:-0}"

fs_finish
