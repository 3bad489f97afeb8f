#!/usr/bin/env bash
# bench/difftest_long.sh [--ops N] [--seeds "S1 S2"] [--modes "passthrough direct"]
#
# The long run of the differential random-operation tester
# (tests/fs_difftest.py, through tests/fs_difftest.sh): N operations
# (default 100000) per seed and write mode against a plain directory on
# the filesystem under TMPDIR, which must not be tmpfs (the comparison is
# with a local disk filesystem such as ext4), with a remount every 5000
# operations and "ulpfs sync" about every 200.  make check runs 5000
# operations; this is the run for a release note.  Prints one line per
# run (seed, mode, operations, seconds, result) and exits 1 if any run
# diverged.  Run it as root after a build (ULPFS=path/to/ulpfs, default
# _build/ulpfs).
#
# Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
set -u -o pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
. "$TOP/bench/lib.sh"

OPS=100000
SEEDS="13 1313"
MODES="passthrough direct"
while [ $# -gt 0 ]; do
	case $1 in
	--ops) OPS=$2; shift 2 ;;
	--seeds) SEEDS=$2; shift 2 ;;
	--modes) MODES=$2; shift 2 ;;
	-h | --help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "difftest_long.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done
ULPFS=$(bench_find_ulpfs "$TOP") || { echo "difftest_long.sh: no ulpfs binary (build first, or set ULPFS)" >&2; exit 2; }
export ULPFS
fstype=$(df --output=fstype "${TMPDIR:-/tmp}" | tail -n1 | tr -d ' ')
if [ "$fstype" = tmpfs ]; then
	echo "difftest_long.sh: ${TMPDIR:-/tmp} is tmpfs; set TMPDIR to a directory on a disk filesystem (ext4)" >&2
	exit 2
fi
echo "# $(date -u '+%F %T') UTC, $(bench_machine), plain side on $fstype (${TMPDIR:-/tmp})"
echo "# ulpfs $(git -C "$TOP" rev-parse --short HEAD 2>/dev/null || echo '?'), load $(cut -d' ' -f1-3 /proc/loadavg)"
fail=0
for seed in $SEEDS; do
	for mode in $MODES; do
		log=$(mktemp "${TMPDIR:-/tmp}/difftest-$seed-$mode.XXXXXX.log")
		t0=$(now)
		FS_WRITE_MODE=$mode FS_TEST=difftest_long@$mode bash "$TOP/tests/fs_difftest.sh" \
			--seed "$seed" --ops "$OPS" --remount-every 5000 >"$log" 2>&1
		rc=$?
		t1=$(now)
		summary=$(grep -E '^\[difftest\] (PASSED|DIVERGENCE|operations)' "$log" | tr '\n' ' ')
		if [ "$rc" -eq 0 ]; then
			res="no divergence"
			rm -f "$log"
		else
			res="FAILED (exit $rc; log kept: $log)"
			fail=1
		fi
		printf 'seed %s  mode %-11s  ops %s  %.0f s  %s  %s\n' "$seed" "$mode" "$OPS" \
			"$(awk "BEGIN { print $t1 - $t0 }")" "$res" "$summary"
	done
done
exit "$fail"
