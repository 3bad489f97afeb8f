#!/usr/bin/env bash
# bench/write_bench.sh - saving a checkpoint through the mount, in each write
# mode, against the same save to the disk under the store and against
# bench/ptfs (a minimal pass-through FUSE filesystem: the FUSE ceiling), all
# in the same run, medians of R rounds (each round goes through every
# target in turn, so that load on a shared machine falls on all alike):
#
#   bench/write_bench.sh [--reps R] [--mib N] [--quick] [--no-ext4]
#                        [--only TESTS] [--modes MODES]
#
#   --only: a comma-separated subset of dd,four,torch,safetensors,ext4,commit
#   (the numbered steps below; default all); --modes: a comma-separated
#   subset of the write modes passthrough,direct,cached (default all).
#
#   (1) one writer: dd bs=1M conv=fsync of N MiB (default 1024) of a real
#       torch.save checkpoint (bf16 weights, fp32 moments)
#   (2) four writers at once, N/4 MiB each (dd conv=fsync, four files)
#   (3) torch.save of the same state dict (N MiB) + fsync
#   (4) the same tensors as a safetensors file, written as its writer does
#       (the header, then one write per tensor) + fsync
#   (5) (1) again with everything on ext4 (TMPDIR's filesystem) instead
#   (6) the daemon's CPU seconds per GB written in (1)-(4), per target
#   (7) close-to-commit (the staging file gone) and the store's size for
#       the checkpoint of (1), per write mode
#   (8) the requests the daemon read during (1), per write mode and per
#       MiB written ("ulpfs stats": WRITE, GETXATTR, all): a passthrough
#       writer sends none per write
#
# The stores and the "disk" directory sit on a tmpfs, standing in for a GPU
# node's NVMe (a slow disk would hide FUSE's cost).  During (1)-(5) the
# mounts use settle=10min: the encoder does not run while writes are
# measured (it would compete for the CPU); (7) uses settle=50ms.
# Needs root, FUSE, /usr/bin/python3 with torch, about 4 x N MiB of RAM
# for the tmpfs and 3 x N MiB free under TMPDIR.  make bench/ptfs first
# (this script does it when the build tree is _build).  PTFS_OPTS: libfuse
# options for bench/ptfs (e.g. "-o no_splice_read").
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
FS_TEST=write_bench
. "$(dirname "${BASH_SOURCE[0]}")/../tests/fs_lib.sh"
. "$FS_SRCDIR/bench/lib.sh"

reps=5 mib=1024 ext4=1 only=dd,four,torch,safetensors,ext4,commit
MODES="passthrough direct cached"
while [ $# -gt 0 ]; do
	case $1 in
	--reps) reps=$2; shift ;;
	--mib) mib=$2; shift ;;
	--quick) reps=3 mib=256 ;;
	--no-ext4) ext4=0 ;;
	--only) only=$2; shift ;;
	--modes) MODES=${2//,/ }; shift ;;
	-h | --help) sed -n '2,/^$/p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "usage: $0 [--reps R] [--mib N] [--quick] [--no-ext4] [--only TESTS] [--modes MODES]" >&2; exit 2 ;;
	esac
	shift
done
[ $((mib % 4)) -eq 0 ] && [ "$mib" -ge 128 ] || { echo "$0: --mib must be a multiple of 4, >= 128" >&2; exit 2; }
fs_init
PTFS=${PTFS:-$(dirname "$ULPFS")/bench/ptfs}
[ -x "$PTFS" ] || make -C "$(dirname "$ULPFS")" bench/ptfs >/dev/null || die "cannot build bench/ptfs (make bench/ptfs)"
[ -x "$PTFS" ] || die "no $PTFS"
WB_PY=$FS_SRCDIR/bench/write_bench.py
# staging_limit: room for four writers of what the last file held (1 GiB
# after (1)), which the default (half the tmpfs's free space) lacks: near
# the limit passthrough writers get direct_io (ulpfs(1), staging_limit).
LONG=settle=600000,staging_limit=$((mib * 4))M
# want TEST: whether --only asked for it
want() { case ",$only," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }
TARGETS="disk ptfs $MODES"

TMP=$WORK/tmpfs
fs_mount_tmpfs "$TMP" "$((mib * 4 + 1024))m" || die "cannot mount a tmpfs"
SRC=$TMP/src.pt
declare -A DIR PID

# mount_all ROOT: every target with its directory under ROOT.
mount_all() {
	local root=$1 m
	DIR[disk]=$root/disk
	mkdir -p "${DIR[disk]}"
	PID[disk]=""
	ptfs_mount "$root/ptfs-back" "$root/ptfs"
	DIR[ptfs]=$root/ptfs PID[ptfs]=$FS_LAST_PID
	for m in $MODES; do
		fs_mount "$root/store-$m" "$root/mnt-$m" "write_mode=$m,$LONG"
		fs_check_write_mode "$root/mnt-$m" "$m"
		DIR[$m]=$root/mnt-$m PID[$m]=$FS_LAST_PID
	done
}

umount_all() {
	local m
	for m in $MODES; do fs_umount "${DIR[$m]}"; done
	fs_force_umount "${DIR[ptfs]}"
}

# The daemon's CPU time is counted around each write only: removing the
# file afterwards (freeing its pages, in the daemon's context on a mount)
# is not part of saving.
ticks() { if [ -n "$1" ]; then awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; else echo 0; fi; }
declare -A CPU BYTES
cpu_add() { # TARGET TICKS BYTES
	CPU[$1]=$((${CPU[$1]:-0} + $2))
	BYTES[$1]=$((${BYTES[$1]:-0} + $3))
}

declare -A S # "test target" -> MB/s of each round
mbs() { calc "$1 / 1000000 / $2" 1; }
record() { S[$1 $2]="${S[$1 $2]:-} $(mbs "$3" "$4")"; } # TEST TARGET BYTES SECONDS

# (1) and (5): dd of the whole checkpoint.
one_writer() { # TEST
	local r t t0 s
	for r in $(seq 1 "$reps"); do
		for t in $TARGETS; do
			sync
			c0=$(ticks "${PID[$t]}")
			t0=$(now)
			dd if="$SRC" of="${DIR[$t]}/ckpt.pt" bs=1M conv=fsync status=none || die "dd to ${DIR[$t]} failed"
			s=$(calc "$(now) - $t0")
			[ "$1" = dd ] && cpu_add "$t" $(($(ticks "${PID[$t]}") - c0)) "$size"
			rm -f "${DIR[$t]}/ckpt.pt"
			record "$1" "$t" "$size" "$s"
		done
		say "$1: round $r done"
	done
}

echo "== machine: $(bench_machine); load $(cut -d' ' -f1-3 /proc/loadavg); $(date -u '+%Y-%m-%d %H:%M UTC')"
step "a real checkpoint: torch.save of a $mib MiB state dict"
"$PY" "$WB_PY" make "$SRC" "$mib" || die "cannot make the checkpoint"
size=$(stat -c %s "$SRC")
say "$SRC: $size bytes"

mount_all "$TMP"
# reqs MNT: "WRITE GETXATTR total" requests its daemon has read so far.
reqs() {
	"$ULPFS" stats --json "$1" | "$PY" -c '
import json, sys
r = json.load(sys.stdin).get("requests") or {}
print(r.get("WRITE", 0), r.get("GETXATTR", 0), r.get("total", 0))'
}
declare -A REQ0 REQ1
if want dd; then
	step "(1) one writer, dd bs=1M conv=fsync, tmpfs"
	for m in $MODES; do REQ0[$m]=$(reqs "${DIR[$m]}"); done
	one_writer dd
	for m in $MODES; do REQ1[$m]=$(reqs "${DIR[$m]}"); done
fi

if want four; then
	step "(2) four writers at once, $((mib / 4)) MiB each"
	q=$((mib / 4))
	for r in $(seq 1 "$reps"); do
		for t in $TARGETS; do
			sync
			c0=$(ticks "${PID[$t]}")
			t0=$(now)
			pids=()
			for k in 0 1 2 3; do
				dd if="$SRC" of="${DIR[$t]}/rank$k" bs=1M skip=$((k * q)) count=$q conv=fsync status=none &
				pids+=($!)
			done
			okw=1
			for p in "${pids[@]}"; do wait "$p" || okw=0; done
			[ $okw = 1 ] || die "a writer to ${DIR[$t]} failed"
			s=$(calc "$(now) - $t0")
			cpu_add "$t" $(($(ticks "${PID[$t]}") - c0)) $((mib << 20))
			rm -f "${DIR[$t]}"/rank?
			record four "$t" $((mib << 20)) "$s"
		done
		say "four: round $r done"
	done
fi

for kind in torch safetensors; do
	want $kind || continue
	step "($([ $kind = torch ] && echo 3 || echo 4)) $kind save of the state dict + fsync"
	dirs=()
	for t in $TARGETS; do dirs+=("${DIR[$t]}=${PID[$t]}"); done
	"$PY" "$WB_PY" save "$kind" "$reps" "$mib" "${dirs[@]}" >"$WORK/$kind.out" || die "$kind saves failed"
	for t in $TARGETS; do
		while read -r s c; do
			record "$kind" "$t" "$size" "$s"
			cpu_add "$t" "$c" "$size"
		done < <(awk -v d="${DIR[$t]}" '$1 == d { print $2, $3 }' "$WORK/$kind.out")
	done
done
umount_all

if [ $ext4 = 1 ] && want ext4; then
	step "(5) one writer, dd bs=1M conv=fsync, everything on $(findmnt -n -o FSTYPE -T "$WORK")"
	mount_all "$WORK/e"
	one_writer ext4
	umount_all
	rm -rf "$WORK/e"
fi

declare -A COMMIT STORESZ
if want commit; then
	step "(7) close-to-commit and store size, settle=50ms"
	for m in $MODES; do
		st=$TMP/c-$m
		fs_mount "$st" "$TMP/cm-$m" "write_mode=$m"
		dd if="$SRC" of="$TMP/cm-$m/ckpt.pt" bs=1M conv=fsync status=none || die "dd failed"
		t0=$(now)
		fs_wait_committed "$st" 600 || die "no commit"
		COMMIT[$m]=$(calc "$(now) - $t0" 2)
		cmp -s "$SRC" "$TMP/cm-$m/ckpt.pt" || bad "$m: the committed file differs from the source"
		fs_umount "$TMP/cm-$m"
		STORESZ[$m]=$(du -sb "$st/objects" "$st"/catalog.db* | awk '{ s += $1 } END { printf "%.0f\n", s }')
		rm -rf "$st"
	done
fi

# ---------------------------------------------------------------- table
med() { echo "${S[$1 $2]}" | median; }
ratio() { calc "$1 / $2" 2; }
echo
echo "## write_bench: $(bench_machine)"
echo "$(date -u '+%Y-%m-%d %H:%M UTC'), load at the end $(cut -d' ' -f1-3 /proc/loadavg), commit $(git -C "$FS_SRCDIR" rev-parse --short HEAD 2>/dev/null || echo '?'), $reps rounds, medians"
echo
echo "| test | target | MB/s | / disk | / ptfs |"
echo "|---|---|---|---|---|"
for test in dd four torch safetensors ext4; do
	[ -n "${S[$test disk]:-}" ] || continue
	d=$(med "$test" disk) p=$(med "$test" ptfs)
	for t in $TARGETS; do
		v=$(med "$test" "$t")
		echo "| $test | $t | $v | $(ratio "$v" "$d") | $(ratio "$v" "$p") |"
	done
done
echo
echo "| target | daemon CPU s per GB written (1)-(4) |"
echo "|---|---|"
for t in ptfs $MODES; do
	[ -n "${BYTES[$t]:-}" ] || continue
	echo "| $t | $(calc "${CPU[$t]} / $(getconf CLK_TCK) / (${BYTES[$t]} / 1000000000)" 3) |"
done
if want dd; then
	echo
	echo "| write mode | requests per MiB in (1): WRITE | GETXATTR | all |"
	echo "|---|---|---|---|"
	for m in $MODES; do
		read -r w0 x0 a0 <<<"${REQ0[$m]}"
		read -r w1 x1 a1 <<<"${REQ1[$m]}"
		n=$((reps * size / 1048576))
		[ "$a1" = 0 ] && { echo "| $m | not counted | | |"; continue; }
		echo "| $m | $(calc "($w1 - $w0) / $n" 3) | $(calc "($x1 - $x0) / $n" 3) | $(calc "($a1 - $a0) / $n" 3) |"
	done
fi
echo
echo "| write mode | close-to-commit s | store bytes |"
echo "|---|---|---|"
for m in $MODES; do [ -n "${COMMIT[$m]:-}" ] && echo "| $m | ${COMMIT[$m]} | ${STORESZ[$m]} |"; done
fs_finish
