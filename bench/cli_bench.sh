#!/usr/bin/env bash
# bench/cli_bench.sh - the helper's must-show numbers, measured in one run:
#
#   (a) reading an old version through MNT/.ulpfs/versions/PATH/N against
#       reading the newest version: 17 versions of a ~64 MB bf16 safetensors
#       file with a small ULP drift, mounted with keyframe=32 so that the
#       chain is 16 deep (version 1 a keyframe, version 17 at depth 16);
#       every read cold (remount + drop_caches), median of R; MB/s of each
#       and the ratio old/newest (target: >= 25%)
#   (b) "ulpfs log" of a path with 1,000 versions (small files, settle=1,
#       "ulpfs sync" after each write): wall time of log, log --json, mounted
#       and unmounted, median of R (target: well under 1 s)
#
#   bench/cli_bench.sh [--quick] [--mib N] [--versions N] [--reps R]
#
# --quick: 16 MiB file, 200 versions for (b).  Needs root (drop_caches),
# FUSE, /usr/bin/python3 with numpy.  ULPFS=path/to/ulpfs (default:
# _build/ulpfs, then ./ulpfs).  Extra mount options: FS_MOUNT_OPTS.
#
# Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
FS_TEST=cli_bench
. "$(dirname "${BASH_SOURCE[0]}")/../tests/cli_lib.sh"

mib=64 nver=1000 reps=3
while [ $# -gt 0 ]; do
	case $1 in
	--quick) mib=16 nver=200 ;;
	--mib) mib=$2; shift ;;
	--versions) nver=$2; shift ;;
	--reps) reps=$2; shift ;;
	-h | --help) sed -n '2,/^$/p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "usage: $0 [--quick] [--mib N] [--versions N] [--reps R]" >&2; exit 2 ;;
	esac
	shift
done
cli_init log sync
STORE=$WORK/store
MNT=$WORK/mnt
DATA=$WORK/data
mkdir -p "$DATA"
. "$FS_SRCDIR/bench/lib.sh"
[ "$(id -u)" -eq 0 ] || say "not root: cannot drop the page cache; cold reads use a remount only"

echo "== machine: $(bench_machine), $(date -u +%Y-%m-%d)"
echo "== backing filesystem: $(findmnt -n -o FSTYPE,SOURCE -T "$WORK" | tr -s ' ')"

# ------------------------------------------------------------------ (a)
step "(a) 17 versions of a $mib MiB bf16 safetensors file, keyframe=32 (chain 16 deep)"
OPTS=keyframe=32
fs_opts() { # settle 50 ms, keyframe=32
	local o="settle=50,$OPTS"
	[ -n "${FS_MOUNT_OPTS:-}" ] && o="$o,$FS_MOUNT_OPTS"
	[ -n "${1:-}" ] && o="$o,$1"
	echo "$o"
}
fs_mount "$STORE" "$MNT"
P=model.safetensors
t0=$(now)
for i in $(seq 1 17); do
	# the same weights each time, moved by a drift that grows by 0.002
	# (relative) per version: consecutive versions differ by a few ULPs
	d=$(calc "($i - 1) * 0.002" 4)
	"$PY" "$FS_UTIL" bigsafetensors "$DATA/v$i" --bytes $((mib << 20)) --seed 3 --drift "$d" >"$DATA/v$i.sha" ||
		die "generator failed"
	cp "$DATA/v$i" "$MNT/$P" || die "cp v$i failed"
	run sync "$MNT"
	[ "$RC" = 0 ] || { show_output sync "$MNT"; die "ulpfs sync failed"; }
	[ "$i" -gt 2 ] && rm -f "$DATA/v$((i - 1))" # keep v1, and the newest
done
say "wrote and committed 17 versions in $(calc "$(now) - $t0" 1) s"
expect 0 "log --json" log --json "$MNT/$P"
cp "$OUT_F" "$WORK/log.json"
d17=$("$PY" "$CLI_UTIL" field "$WORK/log.json" 17 depth)
kf1=$("$PY" "$CLI_UTIL" field "$WORK/log.json" 1 keyframe)
st=$(for i in $(seq 1 17); do "$PY" "$CLI_UTIL" field "$WORK/log.json" "$i" stored; done | tr '\n' ' ')
say "version 1 keyframe=$kf1, version 17 depth=$d17; stored bytes per version: $st"
[ "$d17" = 16 ] || bad "version 17 should be at chain depth 16 with keyframe=32 (log says '$d17')"

cold_read() { # FILE -> MB/s in $MBS (remount + drop caches first)
	local f=$1 t
	fs_remount "$STORE" "$MNT" >/dev/null
	drop_caches
	t0=$(now)
	cat "$f" >/dev/null || { MBS=0; bad "reading $f failed"; return 1; }
	t=$(calc "$(now) - $t0" 4)
	MBS=$(calc "$(stat -c %s "$f") / 1000000 / $t" 1)
}
declare -A R
for what in newest v17 v9 v1; do
	case $what in
	newest) f=$MNT/$P ;;
	v17) f=$MNT/.ulpfs/versions/$P/17 ;;
	v9) f=$MNT/.ulpfs/versions/$P/9 ;;
	v1) f=$MNT/.ulpfs/versions/$P/1 ;;
	esac
	s=""
	for r in $(seq "$reps"); do
		cold_read "$f"
		s="$s $MBS"
	done
	R[$what]=$(echo "$s" | median)
	say "cold read $what ($f): $s MB/s -> median ${R[$what]}"
done
cmp -s "$MNT/.ulpfs/versions/$P/1" "$DATA/v1" && ok "versions/$P/1 bit-exact" || bad "versions/$P/1 differs"
cmp -s "$MNT/.ulpfs/versions/$P/17" "$DATA/v17" && ok "versions/$P/17 bit-exact" || bad "versions/$P/17 differs"
fs_umount "$MNT"
rm -rf "$DATA" "$STORE"

# ------------------------------------------------------------------ (b)
step "(b) ulpfs log of a path with $nver versions"
STORE=$WORK/store2
fs_opts() { local o="settle=1"; [ -n "${FS_MOUNT_OPTS:-}" ] && o="$o,$FS_MOUNT_OPTS"; echo "$o"; }
fs_mount "$STORE" "$MNT"
t0=$(now)
for i in $(seq 1 "$nver"); do
	echo "version $i" >"$MNT/small.txt"
	"$ULPFS" sync "$MNT" || die "ulpfs sync failed at version $i"
done
say "created $nver versions in $(calc "$(now) - $t0" 1) s"
expect 0 "log" log "$MNT/small.txt"
n=$(grep -cE '^[[:space:]]*[0-9]+[[:space:]]' "$OUT_F")
[ "$n" = "$nver" ] && ok "log lists $nver versions" || bad "log lists $n versions, expected $nver"
time_log() { # ARGS... -> median wall seconds of "ulpfs log ARGS"
	local s="" t
	for r in $(seq 5); do
		t0=$(now)
		"$ULPFS" log "$@" >/dev/null 2>&1 || { echo "fail"; return 1; }
		s="$s $(calc "$(now) - $t0" 4)"
	done
	echo "$s" | median
}
R[log_m]=$(time_log "$MNT/small.txt")
R[logj_m]=$(time_log --json "$MNT/small.txt")
fs_umount "$MNT"
R[log_u]=$(time_log --store "$STORE" small.txt)
R[logj_u]=$(time_log --json --store "$STORE" small.txt)

# ------------------------------------------------------------------ table
echo
echo "================================================================== cli_bench"
printf '(a) cold reads of a %d MiB bf16 safetensors file, 17 versions, keyframe=32 (median of %d)\n' "$mib" "$reps"
printf '    %-44s %10s\n' "what" "MB/s"
printf '    %-44s %10s\n' "newest (live path, = version 17)" "${R[newest]}"
printf '    %-44s %10s\n' ".ulpfs/versions/$P/17 (depth ${d17:-?})" "${R[v17]}"
printf '    %-44s %10s\n' ".ulpfs/versions/$P/9  (depth 8)" "${R[v9]}"
printf '    %-44s %10s\n' ".ulpfs/versions/$P/1  (keyframe)" "${R[v1]}"
ra=$(calc "100 * ${R[v17]} / ${R[newest]}" 0)
rb=$(calc "100 * ${R[v1]} / ${R[newest]}" 0)
rc=$(calc "100 * ${R[v17]} / ${R[v1]}" 0)
echo "    16-deep version via .ulpfs/versions / newest via the live path: $ra% (target >= 25%)"
echo "    keyframe version via .ulpfs/versions / newest:                  $rb%"
echo "    16-deep version / keyframe version:                             $rc%"
awk "BEGIN { exit !($ra >= 25) }" || bad "reading the 16-deep version runs at $ra% of the newest (target >= 25%)"
awk "BEGIN { exit !($rc >= 25) }" || bad "reading the 16-deep version runs at $rc% of the keyframe (target >= 25%)"
printf '(b) ulpfs log of a path with %d versions, median of 5 (seconds)\n' "$nver"
printf '    %-30s %8s\n' "log (mounted)" "${R[log_m]}" "log --json (mounted)" "${R[logj_m]}" \
	"log --store (unmounted)" "${R[log_u]}" "log --json (unmounted)" "${R[logj_u]}"
for k in log_m logj_m log_u logj_u; do
	awk "BEGIN { exit !(\"${R[$k]}\" + 0 < 1.0 && \"${R[$k]}\" != \"fail\") }" || bad "ulpfs log ($k) took ${R[$k]} s (target < 1 s)"
done
fs_finish
