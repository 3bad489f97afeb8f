#!/usr/bin/env bash
# bench/s3_bench.sh - a bucket store against a real Swift s3api on loopback
# (tests/s3_server.sh):
#   1. bytes: the quickstart trajectory (bench/make_trajectory.py --quick)
#      written through a local store and through s3://; objects uploaded
#      vs the local store's objects/, catalog snapshots on top, the raw
#      bytes that were not uploaded, and what the bucket keeps at the end;
#      the same with upload_delay=0 (each object uploaded before its
#      version commits, so also the standalone objects that flips of older
#      versions replace) as the baseline; and with a sync after every
#      checkpoint (what examples/train.py --commit_cmd "ulpfs sync" does:
#      each sync uploads the newest version as a forward delta against
#      the one before, src/objstore/reps.c);
#   2. upload throughput: the local store's encoded objects uploaded by
#      ulpfs's client (bench/s3put -j 4) and by "aws s3 cp --recursive";
#   3. cold read: the newest checkpoint read from a fresh read-only mount
#      (ranged GETs: bytes fetched, and from how many of the objects), and
#      the objects it touched downloaded by "aws s3 cp"; of the deferred
#      store (reverse chains) and of the sync-every-checkpoint one
#      (forward chains in the bucket).
# Throughputs are medians of REPS runs (default 3), each ratio from the
# same run.  Usage: bench/s3_bench.sh [BUILD_DIR]   (default _build)
#
# Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.

set -u -o pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$src/_build}" && pwd)
ULPFS=$build/ulpfs
S3PUT=$build/bench/s3put
REPS=${REPS:-3}
PY=/usr/bin/python3
[ -x "$ULPFS" ] && [ -x "$S3PUT" ] || { echo "build first (make): $ULPFS, $S3PUT" >&2; exit 1; }

. "$src/tests/s3_server.sh"
W=$(mktemp -d "${TMPDIR:-/tmp}/ulpfs-s3bench.XXXXXX")
MOUNTS=()
bench_exit() {
	local m
	for m in "${MOUNTS[@]}"; do fusermount3 -u "$m" 2>/dev/null; done
	s3_server_stop
	rm -rf "$W"
}
trap bench_exit EXIT
trap 'exit 130' INT TERM
s3_server_start "$W/swift" || exit 1

now() { date +%s.%N; }
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
mount_it() { # STORE-or-URL MNT [OPTS]
	mkdir -p "$2"
	"$ULPFS" mount -o "settle=50${3:+,$3}" "$1" "$2" || exit 1
	MOUNTS+=("$2")
}
umount_it() {
	"$ULPFS" umount "$1" || exit 1
	local keep=() m
	for m in "${MOUNTS[@]}"; do [ "$m" = "$1" ] || keep+=("$m"); done
	MOUNTS=("${keep[@]}")
}

echo "== trajectory (make_trajectory.py --quick)"
"$PY" "$src/bench/make_trajectory.py" --quick --out "$W/plain" >/dev/null 2>&1 || exit 1
raw=$(du -sb --exclude=trajectory.json "$W/plain" | cut -f1)
newest=$(cd "$W/plain" && ls -d step-* | sort | tail -n 1)

mount_it "$W/local" "$W/mnt-l"
(cd "$W/plain" && cp -r step-* "$W/mnt-l/")
"$ULPFS" sync "$W/mnt-l"
umount_it "$W/mnt-l"
local_obj=$(du -sb "$W/local/objects" | cut -f1)

# uploaded BYTES-VAR CATALOG-BYTES-VAR NCAT-VAR CACHE: from the daemon's
# traffic summary at its close
uploaded() {
	local line
	line=$(grep "uploaded .* objects" "$4/daemon.log" | tail -n 1)
	printf -v "$1" '%s' "$(sed -E 's/.*objects \(([0-9]+) bytes\).*/\1/' <<<"$line")"
	printf -v "$2" '%s' "$(sed -E 's/.*snapshots \(([0-9]+) bytes\).*/\1/' <<<"$line")"
	printf -v "$3" '%s' "$(sed -E 's/.* and ([0-9]+) catalog.*/\1/' <<<"$line")"
}
# write_s3 PREFIX CACHE OPTS TIMES-VAR: the trajectory through a bucket
# mount, one sync, umount; "cp .. s, sync .. s, umount .. s" into TIMES-VAR
write_s3() {
	local mnt=$W/mnt-$1 t0 t1 t2 t3
	mount_it "s3://$S3_BUCKET/$1" "$mnt" "cache_dir=$2${3:+,$3}"
	t0=$(now)
	(cd "$W/plain" && cp -r step-* "$mnt/")
	t1=$(now)
	"$ULPFS" sync "$mnt"
	t2=$(now)
	umount_it "$mnt"
	t3=$(now)
	printf -v "$4" 'cp %.2f s, sync %.2f s, umount %.2f s' "$(echo "$t1 - $t0" | bc -l)" \
		"$(echo "$t2 - $t1" | bc -l)" "$(echo "$t3 - $t2" | bc -l)"
}
# write_s3_each PREFIX CACHE: the trajectory through a bucket mount with a
# sync after every checkpoint, umount
write_s3_each() {
	local mnt=$W/mnt-$1 s
	mount_it "s3://$S3_BUCKET/$1" "$mnt" "cache_dir=$2"
	for s in $(cd "$W/plain" && ls -d step-* | sort); do
		cp -r "$W/plain/$s" "$mnt/" && "$ULPFS" sync "$mnt" >/dev/null || exit 1
	done
	umount_it "$mnt"
}
# The same trajectory with each object uploaded before its version commits
# (upload_delay=0): the baseline of the deferred uploads below.
write_s3 bench-now "$W/cache-now" upload_delay=0 times_now
uploaded up_now cat_now ncat_now "$W/cache-now"
write_s3 bench "$W/cache" "" times_def
uploaded up_obj up_cat ncat "$W/cache"
write_s3_each bench-each "$W/cache-each"
uploaded up_each cat_each ncat_each "$W/cache-each"
printf 'raw files              %12d bytes\n' "$raw"
printf 'local store objects/   %12d bytes\n' "$local_obj"
printf 'uploaded objects       %12d bytes  (%.4f x the local objects; deferred uploads, the default)\n' "$up_obj" "$(echo "$up_obj / $local_obj" | bc -l)"
printf 'uploaded catalogs      %12d bytes  (%d snapshots)\n' "$up_cat" "$ncat"
printf 'upload_delay=0         %12d bytes  (%.4f x the local objects; each object before its commit) + %d bytes of %d catalogs\n' \
	"$up_now" "$(echo "$up_now / $local_obj" | bc -l)" "$cat_now" "$ncat_now"
printf 'sync every checkpoint  %12d bytes  (%.4f x the local objects; deferred) + %d bytes of %d catalogs\n' \
	"$up_each" "$(echo "$up_each / $local_obj" | bc -l)" "$cat_each" "$ncat_each"
printf 'write, sync, umount    deferred: %s; upload_delay=0: %s\n' "$times_def" "$times_now"
# Reverse chains re-encode an older version against its successor (a new
# object; the one it replaces deleted): uploaded at once (upload_delay=0),
# both go up; deferred, the replaced one mostly never does.
rest=$($S3_AWS s3 ls --recursive --summarize "s3://$S3_BUCKET/bench/objects/" | awk '/Total Size/ { print $3 }')
printf 'bucket objects at rest %12d bytes  (%.4f x the local objects, %.1f%% of the raw bytes saved)\n' \
	"$rest" "$(echo "$rest / $local_obj" | bc -l)" "$(echo "100 * ($raw - $rest) / $raw" | bc -l)"
printf 'not uploaded vs raw    %12d bytes  (%.1f%% of the raw bytes saved)\n' \
	"$((raw - up_obj - up_cat))" "$(echo "100 * ($raw - $up_obj - $up_cat) / $raw" | bc -l)"

echo "== upload throughput: the same $(find "$W/local/objects" -type f | wc -l) encoded objects ($local_obj bytes)"
ours=() theirs=()
for r in $(seq 1 "$REPS"); do
	t0=$(now)
	"$S3PUT" -j 4 "s3://$S3_BUCKET/up-ours-$r" "$W/local/objects"/* || exit 1
	t1=$(now)
	$S3_AWS s3 cp --quiet --recursive "$W/local/objects" "s3://$S3_BUCKET/up-aws-$r/" || exit 1
	t2=$(now)
	a=$(echo "$local_obj / ($t1 - $t0) / 1048576" | bc -l)
	b=$(echo "$local_obj / ($t2 - $t1) / 1048576" | bc -l)
	printf '  run %d: ulpfs client %.1f MiB/s, aws s3 cp %.1f MiB/s, ratio %.2f\n' "$r" "$a" "$b" "$(echo "$a / $b" | bc -l)"
	ours+=("$a") theirs+=("$b")
done
mo=$(printf '%s\n' "${ours[@]}" | median)
mt=$(printf '%s\n' "${theirs[@]}" | median)
printf 'upload median: ulpfs client %.1f MiB/s, aws s3 cp %.1f MiB/s, ratio %.2f\n' "$mo" "$mt" "$(echo "$mo / $mt" | bc -l)"

# cold_read PREFIX WHAT: the newest checkpoint read from a fresh read-only
# mount of PREFIX against aws s3 cp of the objects that read touched
cold_read() {
	local pfx=$1 logical nobj ours=() theirs=() r t0 t1 t2 t3 got all a b mo mt o
	echo "== cold read of the newest checkpoint ($newest) from a fresh read-only mount: $2"
	logical=$(du -sb "$W/plain/$newest" | cut -f1)
	nobj=$($S3_AWS s3 ls --recursive "s3://$S3_BUCKET/$pfx/objects/" | wc -l)
	for r in $(seq 1 "$REPS"); do
		rm -rf "$W/cold"
		mount_it "s3://$S3_BUCKET/$pfx" "$W/mnt-c" "cache_dir=$W/cold,ro"
		t0=$(now)
		cat "$W/mnt-c/$newest"/* >/dev/null || exit 1
		t1=$(now)
		umount_it "$W/mnt-c"
		got=$(grep "read .* ranges" "$W/cold/daemon.log" | tail -n 1 | sed -E 's/.*read [0-9]+ ranges \(([0-9]+) bytes\).*/\1/')
		# The objects the read touched (the object cache keeps each
		# fetched range as NAME.OFFSET.LENGTH): aws s3 cp downloads
		# the same ones.
		mapfile -t used < <(ls "$W/cold/fetched" | sed 's/\..*//' | sort -u)
		inc=()
		for o in "${used[@]}"; do inc+=(--include "$o"); done
		rm -rf "$W/dl"
		t2=$(now)
		$S3_AWS s3 cp --quiet --recursive --exclude '*' "${inc[@]}" \
			"s3://$S3_BUCKET/$pfx/objects/" "$W/dl/" || exit 1
		t3=$(now)
		all=$(du -sb "$W/dl" | cut -f1)
		a=$(echo "$logical / ($t1 - $t0) / 1048576" | bc -l)
		b=$(echo "$all / ($t3 - $t2) / 1048576" | bc -l)
		printf '  run %d: ulpfs %.2f s for %d logical bytes (%d bytes fetched from %d of %d objects, %.1f MiB/s logical); aws s3 cp of those %d objects %.2f s for %d bytes (%.1f MiB/s)\n' \
			"$r" "$(echo "$t1 - $t0" | bc -l)" "$logical" "$got" "${#used[@]}" "$nobj" "$a" "${#used[@]}" "$(echo "$t3 - $t2" | bc -l)" "$all" "$b"
		ours+=("$(echo "$t1 - $t0" | bc -l)") theirs+=("$(echo "$t3 - $t2" | bc -l)")
	done
	mo=$(printf '%s\n' "${ours[@]}" | median)
	mt=$(printf '%s\n' "${theirs[@]}" | median)
	printf 'cold read median (%s): ulpfs %.2f s, aws s3 cp of the same objects %.2f s (ulpfs time / aws time %.2f)\n' "$2" "$mo" "$mt" "$(echo "$mo / $mt" | bc -l)"
}
cold_read bench "deferred uploads, one sync"
# With a sync after every checkpoint the bucket holds forward deltas
# (src/objstore/reps.c): the newest decodes a chain of bucket objects.
cold_read bench-each "a sync after every checkpoint"
