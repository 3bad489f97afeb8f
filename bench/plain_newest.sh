#!/usr/bin/env bash
# bench/plain_newest.sh TRAJ [ROUNDS] - the plain newest version (issue 30).
#
# Writes every checkpoint of the trajectory TRAJ (bench/make_trajectory.py)
# through two mounts, -o plain_newest=auto ("on") and -o plain_newest=off
# ("off"), on this VM's disk and on a tmpfs, then reads the newest
# checkpoint cold (remount, drop_caches) ROUNDS times (default 5):
#   cat   every file (read(2), as torch.load reads),
#   mmap  every page of every file (as safetensors' safe_open reads),
# through each mount, from the same files stored plain on the same
# filesystem ("plain"), and through bench/ptfs over those plain files
# (FUSE's ceiling without kernel passthrough).  Prints the medians in MB/s
# and each against plain; then, once per filesystem, the daemon's CPU
# seconds per GB written (the commits and flips, until gc is done) and the
# store size (objects and catalog) of on and off.
# BENCH_FS: the filesystems (default "disk tmpfs").
# make bench/ptfs first (or PTFS=path).  Needs root (drop_caches, FUSE).
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "${BASH_SOURCE[0]}")/../tests/fs_lib.sh"
. "$FS_SRCDIR/bench/lib.sh"
TRAJ=${1:?usage: $0 TRAJ [ROUNDS]}
ROUNDS=${2:-5}
fs_init
PTFS=${PTFS:-$(dirname "$ULPFS")/bench/ptfs}
[ -x "$PTFS" ] || make -C "$(dirname "$ULPFS")" bench/ptfs >/dev/null || die "cannot build bench/ptfs"
mapfile -t CKPTS < <(find "$TRAJ" -mindepth 1 -maxdepth 1 -type d | LC_ALL=C sort -V)
[ "${#CKPTS[@]}" -ge 2 ] || die "$TRAJ: fewer than two checkpoints"
NEWEST=$(basename "${CKPTS[-1]}")
BYTES=$(fs_bytes "${CKPTS[-1]}")
say "$(bench_machine 2>/dev/null)"
say "${#CKPTS[@]} checkpoints, the newest ($NEWEST) $BYTES bytes, $ROUNDS rounds"

# cpu PID: the process's user + system CPU seconds
cpu() { awk -v t="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / t }' "/proc/$1/stat"; }

# cold_read DIR how: seconds to read every file of DIR cold (the mmap walk
# timed inside the interpreter, without its start)
cold_read() {
	drop_caches
	if [ "$2" = cat ]; then
		local t0 t1
		t0=$(now)
		find "$1" -type f -exec cat {} + >/dev/null
		t1=$(now)
		calc "$t1 - $t0" 4
		return
	fi
	"$PY" - "$1" <<'PY'
import mmap, os, sys, time
t0 = time.monotonic()
s = 0
for d, _, fs in os.walk(sys.argv[1]):
    for f in fs:
        with open(os.path.join(d, f), "rb") as h:
            n = os.fstat(h.fileno()).st_size
            if n:
                m = mmap.mmap(h.fileno(), 0, prot=mmap.PROT_READ)
                s += sum(m[i] for i in range(0, n, 4096))
                m.close()
print("%.4f" % (time.monotonic() - t0))
PY
}

declare -A RES
run_fs() { # NAME ROOT
	local name=$1 root=$2 mode ck pid t0 gb
	mkdir -p "$root/plain"
	cp -r "${CKPTS[-1]}" "$root/plain/"
	for mode in on off; do
		fs_mount "$root/store-$mode" "$root/mnt-$mode" "plain_newest=$([ $mode = on ] && echo auto || echo off)"
		pid=$FS_LAST_PID
		t0=$(cpu "$pid")
		for ck in "${CKPTS[@]}"; do
			cp -r "$ck" "$root/mnt-$mode/"
			"$ULPFS" sync "$root/mnt-$mode" >/dev/null || die "sync failed"
		done
		"$ULPFS" gc "$root/mnt-$mode" >/dev/null || die "gc failed"
		gb=$(calc "$(fs_bytes "${CKPTS[@]}") / 1e9" 4)
		RES[$name,cpu,$mode]=$(calc "($(cpu "$pid") - $t0) / $gb" 2)
		RES[$name,size,$mode]=$(fs_bytes "$root/store-$mode/objects" "$root/store-$mode/catalog.db")
		"$ULPFS" stats "$root/mnt-$mode" | sed "s/^/[$name $mode] /"
		fs_umount "$root/mnt-$mode"
	done
	ptfs_mount "$root/plain" "$root/ptfs"
	for r in $(seq 1 "$ROUNDS"); do
		for how in cat mmap; do
			RES[$name,$how,plain]+=" $(cold_read "$root/plain/$NEWEST" $how)"
			RES[$name,$how,ptfs]+=" $(cold_read "$root/ptfs/$NEWEST" $how)"
			for mode in on off; do
				fs_mount "$root/store-$mode" "$root/mnt-$mode" "plain_newest=$([ $mode = on ] && echo auto || echo off)"
				RES[$name,$how,$mode]+=" $(cold_read "$root/mnt-$mode/$NEWEST" $how)"
				fs_umount "$root/mnt-$mode"
			done
		done
		say "$name round $r done"
	done
	fs_umount_ptfs "$root/ptfs"
}
fs_umount_ptfs() { fusermount3 -u "$1" || fusermount3 -uz "$1"; }

FSS=${BENCH_FS:-disk tmpfs}
for name in $FSS; do
	if [ "$name" = tmpfs ]; then
		fs_mount_tmpfs "$WORK/tmpfs" "$(($(fs_bytes "$TRAJ") * 3 / 1048576 + 512))m" || die "cannot mount a tmpfs"
	fi
	run_fs "$name" "$WORK/$name"
done

printf '\n%-6s %-5s %9s %9s %9s %9s   %s\n' fs read plain ptfs on off "on/plain off/plain ptfs/plain (MB/s, medians of $ROUNDS cold reads of $BYTES bytes)"
for name in $FSS; do
	for how in cat mmap; do
		declare -A mb=()
		for t in plain ptfs on off; do
			mb[$t]=$(calc "$BYTES / 1e6 / $(echo "${RES[$name,$how,$t]}" | median)" 0)
		done
		printf '%-6s %-5s %9s %9s %9s %9s   %s %s %s\n' "$name" "$how" "${mb[plain]}" "${mb[ptfs]}" "${mb[on]}" "${mb[off]}" \
			"$(calc "${mb[on]} / ${mb[plain]}" 2)" "$(calc "${mb[off]} / ${mb[plain]}" 2)" "$(calc "${mb[ptfs]} / ${mb[plain]}" 2)"
	done
done
printf '\n%-6s %14s %14s %12s %12s %8s\n' fs "cpu s/GB on" "cpu s/GB off" "store on" "store off" "on/off"
for name in $FSS; do
	printf '%-6s %14s %14s %12s %12s %8s\n' "$name" "${RES[$name,cpu,on]}" "${RES[$name,cpu,off]}" \
		"${RES[$name,size,on]}" "${RES[$name,size,off]}" "$(calc "${RES[$name,size,on]} / ${RES[$name,size,off]}" 3)"
done
fs_finish
