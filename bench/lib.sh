# bench/lib.sh - helpers shared by the bench scripts (run.sh, fs_bench.sh,
# cli_bench.sh, report.sh).  Source it; do not run it.
# shellcheck shell=bash
#
#   now                   seconds since the epoch, with nanoseconds
#   median                the median of the numbers on stdin (any spacing)
#   drop_caches           sync, then drop the page cache (root only)
#   bench_find_ulpfs TOP  $ULPFS, else TOP/_build/ulpfs, else TOP/ulpfs
#   bench_traj_files DIR  every file of a trajectory in training order:
#                         checkpoint-20 before checkpoint-100 (sort -V), so
#                         that "ulpfs bench" codes each file against the
#                         same file of the previous checkpoint
#   bench_machine         CPU model, cores, RAM and kernel, on one line
#   ptfs_mount BACKING MNT  bench/ptfs ($PTFS) over BACKING at MNT (with
#                         tests/fs_lib.sh: unmounted by its clean-up)
#
# Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.

now() { date +%s.%N; }

median() {
	tr ' ' '\n' | grep -v '^$' | sort -g |
		awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

drop_caches() {
	sync
	[ "$(id -u)" -eq 0 ] && echo 3 >/proc/sys/vm/drop_caches
}

bench_find_ulpfs() {
	local c u=${ULPFS:-}
	for c in "$1/_build/ulpfs" "$1/ulpfs"; do
		[ -n "$u" ] && break
		[ -x "$c" ] && u=$c
	done
	[ -n "$u" ] && [ -x "$u" ] || return 1
	realpath "$u"
}

bench_traj_files() { find "$1" -type f ! -path '*/tmp-*' -print | LC_ALL=C sort -V; }

bench_machine() {
	printf '%s, %s cores, %s GiB RAM, Linux %s' \
		"$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')" "$(nproc)" \
		"$(free -g | awk '/Mem:/ { print $2 }')" "$(uname -r)"
}

# ptfs_mount BACKING MNT: bench/ptfs in the foreground of a background job,
# unmounted (and waited for) by fs_lib's clean-up like our other mounts.
ptfs_mount() {
	mkdir -p "$1" "$2"
	# shellcheck disable=SC2086 # PTFS_OPTS: libfuse options, word-split
	"$PTFS" "$1" "$2" -f ${PTFS_OPTS:-} >"$WORK/ptfs.log" 2>&1 &
	local pid=$! n=200
	FS_MOUNTS+=("$2") FS_DAEMONS+=("$pid") FS_STORES+=("$1")
	until is_fuse_mount "$2"; do
		n=$((n - 1))
		[ $n -le 0 ] && die "bench/ptfs did not mount $2"
		sleep 0.05
	done
	FS_LAST_PID=$pid
}
