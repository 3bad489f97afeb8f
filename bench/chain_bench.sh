#!/usr/bin/env bash
# bench/chain_bench.sh - reverse-delta chains against the forward chains of
# a baseline binary (ULPFS_BASE, default /work/main/_build/ulpfs: "today"),
# every figure measured in the same run:
#
#   (1) newest read: a run of 12 checkpoints (bf16 model.safetensors, a
#       torch optimizer.pt with fp32 Adam moments; tests/fs_util.py
#       trainer), each copied in and synced; cold reads (remount +
#       drop_caches) of the newest model.safetensors + optimizer.pt, median
#       of R, against the same two files alone in a fresh store
#       (target <= 1.15x), for this binary and the baseline
#   (2) resume: torch.load of the newest optimizer.pt plus the safetensors
#       load of model.safetensors of the same run, cold, against a store
#       holding only that checkpoint (target <= 1.2x)
#   (3) size: objects/ after the run (flips done) against the baseline's
#       (target within 2%)
#   (4) commit cost: close (cp returns) to committed (ulpfs sync returns),
#       per checkpoint, median, against the baseline (target <= 3x); the
#       daemon's CPU seconds (user + system, flips included: measured after
#       "ulpfs gc") per GB copied in, both binaries
#   (5) oldest read: 16 versions of one model.safetensors at keyframe=16,
#       cold read of version 1 (15 links) against the newest (standalone)
#       (target >= 1/16)
#   (6) rotation: 20 checkpoints through the mount with save_total_limit=2
#       (rm -rf the oldest after each save): re-encode counters of the
#       mount (ulpfs stats --json: flips, rebases; target 0 rebases) and
#       objects/ against the two kept checkpoints alone in a fresh store
#
#   (7) with --quickstart: the quickstart's training run (examples/train.py
#       --quick, 12 checkpoints): objects/ against the baseline's and
#       against "ulpfs bench" (forward, offline) of the same files; the
#       resume of (2) on its newest checkpoint
#
#   bench/chain_bench.sh [--quick] [--quickstart] [--elems N] [--reps R]
#
# --elems: model elements per checkpoint (default 8M: 16 MB bf16 model,
# ~100 MB optimizer.pt); --quick: 1M.  Needs root (drop_caches), FUSE,
# /usr/bin/python3 with numpy and torch.  ULPFS=path/to/ulpfs (default:
# _build/ulpfs).  Quote figures with the machine's load: medians and
# same-run ratios only.
#
# Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
FS_TEST=chain_bench
. "$(dirname "${BASH_SOURCE[0]}")/../tests/cli_lib.sh"

elems=$((8 << 20)) reps=3 quickstart=0
while [ $# -gt 0 ]; do
	case $1 in
	--quick) elems=$((1 << 20)) ;;
	--quickstart) quickstart=1 ;;
	--elems) elems=$2; shift ;;
	--reps) reps=$2; shift ;;
	-h | --help) sed -n '2,/^$/p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "usage: $0 [--quick] [--quickstart] [--elems N] [--reps R]" >&2; exit 2 ;;
	esac
	shift
done
cli_init sync gc
. "$FS_SRCDIR/bench/lib.sh"
NEW=$ULPFS
BASE=${ULPFS_BASE:-/work/main/_build/ulpfs}
[ -x "$BASE" ] || die "no baseline binary at $BASE (set ULPFS_BASE)"
[ "$(id -u)" -eq 0 ] || say "not root: cannot drop the page cache; cold reads use a remount only"
echo "== machine: $(bench_machine), $(date -u +%Y-%m-%d); load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== this binary: $NEW; baseline (forward chains): $BASE"

MNT=$WORK/mnt
TR=$WORK/trainer
declare -A R

# with BIN STORE [OPTS]: mount STORE with binary BIN (fs_lib uses $ULPFS).
mount_with() { ULPFS=$1 fs_mount "$2" "$MNT" "${3:-}"; }
umount_with() { ULPFS=$1 fs_umount "$MNT"; }

# cpu_of PID: user + system seconds of a process so far.
cpu_of() { awk -v t="$(getconf CLK_TCK)" '{ printf "%.3f\n", ($14 + $15) / t }' "/proc/$1/stat"; }

# cold_time BIN STORE OPTS CMD...: remount, drop caches, median wall
# seconds of CMD over R runs (CMD sees the mount at $MNT).
cold_time() {
	local bin=$1 store=$2 opts=$3 s="" t0 r
	shift 3
	for r in $(seq "$reps"); do
		mount_with "$bin" "$store" "$opts" >/dev/null
		drop_caches
		t0=$(now)
		"$@" >/dev/null || bad "cold run of '$*' failed"
		s="$s $(calc "$(now) - $t0" 4)"
		umount_with "$bin" >/dev/null
	done
	echo "$s" | median
}

step "generating 20 checkpoints ($elems model elements each)"
"$PY" "$FS_UTIL" trainer "$TR" --n 20 --elems "$elems" >/dev/null || die "fs_util.py trainer failed"
ckpt_bytes=$(fs_file_bytes "$TR/checkpoint-1")
say "one checkpoint: $ckpt_bytes bytes ($(ls "$TR/checkpoint-1" | tr '\n' ' '))"

# ---------------------------------------------------------- (1) (3) (4)
# run_12 BIN NAME: copy checkpoints 1-12 into a new store, sync after each;
# close-to-commit times, daemon CPU, objects/ size.
run_12() {
	local bin=$1 name=$2 store=$WORK/store-$2 s="" i t0 t1 pid cpu
	mount_with "$bin" "$store"
	pid=$FS_LAST_PID
	for i in $(seq 1 12); do
		cp -r "$TR/checkpoint-$i" "$MNT/" || bad "cp checkpoint-$i ($name)"
		t0=$(now)
		ULPFS=$bin run sync "$MNT"
		t1=$(now)
		[ "$RC" = 0 ] || bad "sync ($name)"
		s="$s $(calc "$t1 - $t0" 4)"
	done
	[ "$name" = new ] && { "$bin" gc "$MNT" >/dev/null || bad "gc ($name)"; }
	cpu=$(cpu_of "$pid")
	umount_with "$bin"
	R[commit_$name]=$(echo "$s" | median)
	R[cpu_$name]=$(calc "$cpu / ($(fs_file_bytes "$TR/checkpoint-1") * 12 / 1e9)" 2)
	R[size_$name]=$(fs_file_bytes "$store/objects")
	say "$name: close-to-commit per checkpoint:$s s (median ${R[commit_$name]}); daemon CPU $cpu s (${R[cpu_$name]} s/GB); objects ${R[size_$name]} bytes"
}
step "(1, 3, 4) 12 checkpoints, this binary and the baseline"
run_12 "$NEW" new
run_12 "$BASE" base
mount_with "$NEW" "$WORK/store-alone"
mkdir -p "$MNT/checkpoint-12"
cp "$TR/checkpoint-12/model.safetensors" "$TR/checkpoint-12/optimizer.pt" "$MNT/checkpoint-12/"
umount_with "$NEW"

read2() { cat "$MNT/checkpoint-12/model.safetensors" "$MNT/checkpoint-12/optimizer.pt"; }
R[read_new]=$(cold_time "$NEW" "$WORK/store-new" "" read2)
R[read_base]=$(cold_time "$BASE" "$WORK/store-base" "" read2)
R[read_alone]=$(cold_time "$NEW" "$WORK/store-alone" "" read2)
mount_with "$NEW" "$WORK/store-new"
for f in model.safetensors optimizer.pt; do
	cmp -s "$MNT/checkpoint-12/$f" "$TR/checkpoint-12/$f" || bad "checkpoint-12/$f differs"
	cmp -s "$MNT/checkpoint-1/$f" "$TR/checkpoint-1/$f" || bad "checkpoint-1/$f differs"
done
"$NEW" verify "$MNT" >/dev/null || bad "verify (new store)"
umount_with "$NEW"

# ---------------------------------------------------------------- (2)
step "(2) resume: torch.load of the newest checkpoint"
# what a resume reads: the optimizer state (torch.load) and the model
# weights (safetensors, parsed here: Debian has no python3-safetensors)
cat >"$WORK/resume.py" <<'PY'
import json, struct, sys, time, torch
d = sys.argv[1]
t0 = time.monotonic()
opt = torch.load(d + "/optimizer.pt", map_location="cpu", weights_only=False)
with open(d + "/model.safetensors", "rb") as f:
    buf = f.read()
n = struct.unpack("<Q", buf[:8])[0]
hdr = json.loads(buf[8:8 + n])
model = {k: torch.frombuffer(bytearray(buf[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]]), dtype=torch.uint8)
         for k, v in hdr.items() if k != "__metadata__"}
print("%.4f" % (time.monotonic() - t0))
PY
resume_time() { # BIN STORE -> median seconds of the loads, cold
	local s="" r
	for r in $(seq "$reps"); do
		mount_with "$1" "$2" >/dev/null
		drop_caches
		s="$s $("$PY" "$WORK/resume.py" "$MNT/${CK:-checkpoint-12}")"
		umount_with "$1" >/dev/null
	done
	echo "$s" | median
}
R[resume_new]=$(resume_time "$NEW" "$WORK/store-new")
R[resume_base]=$(resume_time "$BASE" "$WORK/store-base")
R[resume_alone]=$(resume_time "$NEW" "$WORK/store-alone")

# ---------------------------------------------------------------- (5)
step "(5) oldest read of a full chain: 16 versions of one file, keyframe=16"
mount_with "$NEW" "$WORK/store-k16" keyframe=16
for i in $(seq 1 16); do
	cp "$TR/checkpoint-$i/model.safetensors" "$MNT/model.safetensors" || bad "cp v$i"
	"$NEW" sync "$MNT" || bad "sync v$i"
done
"$NEW" gc "$MNT" >/dev/null || bad "gc"
d1=$("$NEW" log --json "$MNT/model.safetensors" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)[0]["depth"])')
say "version 1 at depth $d1"
[ "$d1" = 15 ] || bad "version 1 should be 15 links deep (log says $d1)"
umount_with "$NEW"
rd_v1() { cat "$MNT/.ulpfs/versions/model.safetensors/1"; }
rd_new() { cat "$MNT/model.safetensors"; }
R[old_v1]=$(cold_time "$NEW" "$WORK/store-k16" keyframe=16 rd_v1)
R[old_new]=$(cold_time "$NEW" "$WORK/store-k16" keyframe=16 rd_new)
rm -rf "$WORK/store-k16"

# ---------------------------------------------------------------- (6)
step "(6) rotation: 20 checkpoints, save_total_limit=2"
mount_with "$NEW" "$WORK/store-rot"
for i in $(seq 1 20); do
	cp -r "$TR/checkpoint-$i" "$MNT/" || bad "cp checkpoint-$i"
	[ "$i" -gt 2 ] && rm -rf "$MNT/checkpoint-$((i - 2))"
done
"$NEW" sync "$MNT" >/dev/null && "$NEW" gc "$MNT" >/dev/null || bad "sync/gc"
"$NEW" stats --json "$MNT" >"$WORK/rot.json" || bad "stats --json"
read -r flips rebases < <("$PY" -c 'import json,sys; r=json.load(open(sys.argv[1]))["reencodes"]; print(r["flips"], r["rebases"])' "$WORK/rot.json")
umount_with "$NEW"
R[rot_size]=$(fs_file_bytes "$WORK/store-rot/objects")
mount_with "$NEW" "$WORK/store-kept"
cp -r "$TR/checkpoint-19" "$TR/checkpoint-20" "$MNT/"
umount_with "$NEW"
R[kept_size]=$(fs_file_bytes "$WORK/store-kept/objects")
[ "$rebases" = 0 ] && ok "rotation: $flips flips, 0 rebases" || bad "rotation: $rebases rebases"

# ---------------------------------------------------------------- (7)
if [ "$quickstart" = 1 ]; then
	step "(7) the quickstart's training run (examples/train.py --quick --max_steps 120)"
	QS=$WORK/qs
	"$PY" "$FS_SRCDIR/examples/train.py" --quick --max_steps 120 --output_dir "$QS" >"$WORK/qs.log" 2>&1 ||
		{ tail "$WORK/qs.log" >&2; die "train.py failed"; }
	CK=$(ls "$QS" | grep '^checkpoint-' | sort -V | tail -n1)
	for b in new base; do
		bin=$NEW
		[ "$b" = base ] && bin=$BASE
		mount_with "$bin" "$WORK/qs-$b"
		for c in $(ls "$QS" | grep '^checkpoint-' | sort -V); do
			cp -r "$QS/$c" "$MNT/" && "$bin" sync "$MNT" >/dev/null || bad "copy $c ($b)"
		done
		[ "$b" = new ] && { "$bin" gc "$MNT" >/dev/null || bad "gc"; }
		umount_with "$bin"
		R[qs_$b]=$(fs_file_bytes "$WORK/qs-$b/objects")
	done
	mount_with "$NEW" "$WORK/qs-alone"
	cp -r "$QS/$CK" "$MNT/"
	umount_with "$NEW"
	"$NEW" bench --no-baselines --reps 1 $(bench_traj_files "$QS") >"$WORK/qs-bench.txt" 2>&1 || bad "ulpfs bench"
	R[qs_bench]=$(awk '$1 == "TOTAL" { print $3 }' "$WORK/qs-bench.txt")
	R[qs_resume_new]=$(CK=$CK resume_time "$NEW" "$WORK/qs-new")
	R[qs_resume_alone]=$(CK=$CK resume_time "$NEW" "$WORK/qs-alone")
	R[qs_resume_base]=$(CK=$CK resume_time "$BASE" "$WORK/qs-base")
	say "quickstart: $(ls "$QS" | grep -c '^checkpoint-') checkpoints, newest $CK, raw $(fs_file_bytes "$QS") bytes"
fi

# ---------------------------------------------------------------- table
echo
echo "== chain_bench: medians of $reps cold runs; machine shared (load $(cut -d' ' -f1-3 /proc/loadavg))"
ratio() { calc "$1 / $2" 3; }
mb=$(calc "($(stat -c %s "$TR/checkpoint-12/model.safetensors") + $(stat -c %s "$TR/checkpoint-12/optimizer.pt")) / 1e6" 1)
printf '%-48s %12s %12s %12s\n' measure "this" baseline ratio
printf '%-48s %11ss %11ss %12s\n' "(1) newest read, $mb MB, vs alone" "${R[read_new]}" "${R[read_alone]}" "$(ratio "${R[read_new]}" "${R[read_alone]}")"
printf '%-48s %11ss %11ss %12s\n' "(1) newest read, today (forward) vs alone" "${R[read_base]}" "${R[read_alone]}" "$(ratio "${R[read_base]}" "${R[read_alone]}")"
printf '%-48s %11ss %11ss %12s\n' "(2) resume (torch.load) vs alone" "${R[resume_new]}" "${R[resume_alone]}" "$(ratio "${R[resume_new]}" "${R[resume_alone]}")"
printf '%-48s %11ss %11ss %12s\n' "(2) resume, today (forward) vs alone" "${R[resume_base]}" "${R[resume_alone]}" "$(ratio "${R[resume_base]}" "${R[resume_alone]}")"
printf '%-48s %12s %12s %12s\n' "(3) objects/ after 12 checkpoints, vs today" "${R[size_new]}" "${R[size_base]}" "$(ratio "${R[size_new]}" "${R[size_base]}")"
printf '%-48s %11ss %11ss %12s\n' "(4) close to commit per checkpoint, vs today" "${R[commit_new]}" "${R[commit_base]}" "$(ratio "${R[commit_new]}" "${R[commit_base]}")"
printf '%-48s %12s %12s %12s\n' "(4) daemon CPU s/GB copied in, vs today" "${R[cpu_new]}" "${R[cpu_base]}" "$(ratio "${R[cpu_new]}" "${R[cpu_base]}")"
printf '%-48s %11ss %11ss %12s\n' "(5) oldest of 16 (k=16) vs newest, read time" "${R[old_v1]}" "${R[old_new]}" "$(ratio "${R[old_new]}" "${R[old_v1]}") speed"
printf '%-48s %12s %12s %12s\n' "(6) rotation objects/ vs 2 kept alone" "${R[rot_size]}" "${R[kept_size]}" "$(ratio "${R[rot_size]}" "${R[kept_size]}")"
printf '%-48s %12s\n' "(6) rotation flips / rebases" "$flips / $rebases"
if [ "$quickstart" = 1 ]; then
	printf '%-48s %12s %12s %12s\n' "(7) quickstart objects/ vs today" "${R[qs_new]}" "${R[qs_base]}" "$(ratio "${R[qs_new]}" "${R[qs_base]}")"
	printf '%-48s %12s %12s %12s\n' "(7) quickstart objects/ vs ulpfs bench" "${R[qs_new]}" "${R[qs_bench]}" "$(ratio "${R[qs_new]}" "${R[qs_bench]}")"
	printf '%-48s %11ss %11ss %12s\n' "(7) quickstart resume vs alone" "${R[qs_resume_new]}" "${R[qs_resume_alone]}" "$(ratio "${R[qs_resume_new]}" "${R[qs_resume_alone]}")"
	printf '%-48s %11ss %11ss %12s\n' "(7) quickstart resume, today vs alone" "${R[qs_resume_base]}" "${R[qs_resume_alone]}" "$(ratio "${R[qs_resume_base]}" "${R[qs_resume_alone]}")"
fi
fs_finish
