#!/usr/bin/env bash
# bench/stress_bench.sh - a filesystem stress mix (bench/stress_mix.py, in
# the manner of xfstests' fsstress: 4 processes x 2000 operations, sparse
# writes up to 1 GiB, O_DIRECT, copy_file_range, fallocate, links,
# renames, fsyncs) on the backing filesystem and through the mount, in the
# same run:
#
#   bench/stress_bench.sh [--procs N] [--ops N] [--seed N]
#
# Prints the time of each run, the time until the mount has committed
# everything ("ulpfs sync"), the staging and store sizes, then remounts,
# compares the trees (stress_mix.py compare) and runs "ulpfs verify".
# Needs root and FUSE.  ULPFS=path/to/ulpfs (default: _build/ulpfs).
# make check may run this with a POSIX sh: it needs bash.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
FS_TEST=stress_bench
. "$(dirname "${BASH_SOURCE[0]}")/../tests/fs_lib.sh"
. "$FS_SRCDIR/bench/lib.sh"

args=()
while [ $# -gt 0 ]; do
	case $1 in
	--procs | --ops | --seed) args+=("$1" "$2"); shift ;;
	*) die "usage: bench/stress_bench.sh [--procs N] [--ops N] [--seed N]" ;;
	esac
	shift
done
fs_init
STORE=$WORK/store
MNT=$WORK/mnt
PLAIN=$WORK/plain
MIX=$FS_SRCDIR/bench/stress_mix.py
mkdir -p "$PLAIN"
say "machine: $(bench_machine)"
fs_mount "$STORE" "$MNT"
say "write mode: $(fs_write_mode "$MNT")"

step "backing filesystem: $PY $MIX run $PLAIN ${args[*]}"
t0=$(now)
"$PY" "$MIX" run "$PLAIN" "${args[@]}" || bad "the stress mix failed on the backing filesystem"
say "backing filesystem: $(calc "$(now) - $t0" 2) s"

step "the mount: $PY $MIX run $MNT ${args[*]}"
t0=$(now)
timeout -k 5 900 "$PY" "$MIX" run "$MNT" "${args[@]}" || bad "the stress mix failed (or ran past 900 s) on the mount"
t1=$(now)
say "mount: $(calc "$t1 - $t0" 2) s; staging then: $(fs_mib "$(du -sB1 "$STORE/staging" | cut -f1)") MiB of blocks"
"$ULPFS" sync "$MNT" || bad "ulpfs sync failed"
say "mount: everything committed $(calc "$(now) - $t1" 2) s after the mix returned"
"$PY" "$MIX" compare "$MNT" "$PLAIN" || bad "the mount differs from the backing filesystem"
say "plain tree: $(fs_mib "$(du -sB1 "$PLAIN" | cut -f1)") MiB of blocks; store objects: $(fs_mib "$(du -sB1 "$STORE/objects" | cut -f1)") MiB"

step "remount, compare, ulpfs verify"
fs_remount "$STORE" "$MNT"
"$PY" "$MIX" compare "$MNT" "$PLAIN" || bad "the mount differs from the backing filesystem after a remount"
t0=$(now)
"$ULPFS" verify "$MNT" >"$WORK/verify.log" 2>&1 && ok "ulpfs verify passes ($(calc "$(now) - $t0" 1) s)" || {
	tail -5 "$WORK/verify.log" | sed 's/^/    | /' >&2
	bad "ulpfs verify failed"
}
fs_umount "$MNT"
fs_finish
