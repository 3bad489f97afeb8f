#!/usr/bin/env bash
# bench/report.sh - every ulpfs benchmark in one run, as one markdown table.
#
#   bench/report.sh [--quick] [--traj DIR] [--out FILE] [--reps R]
#
# 1. The real trajectory: examples/train.py --full --output_dir DIR, the
#    larger preset of the Hugging Face Trainer-style run that the main job
#    writes (10 checkpoint-N/
#    directories: model.safetensors in bf16, optimizer.pt with the AdamW
#    state and the fp32 master weights, scheduler.pt, rng_state.pth,
#    trainer_state.json; 466 MB).  --quick: train.py --quick (6
#    checkpoints, 55 MB).  --traj DIR reuses a trajectory (train.py's or
#    bench/make_trajectory.py's layout).
# 2. The same weights as f16 and f32 safetensors (bench/dtype_variants.py:
#    the fp32 master weights of each checkpoint's optimizer.pt), for the
#    dtype rows.  Skipped when the trajectory has no master weights.
# 3. The codec: "ulpfs bench --threads 2 --cpu-time --reps R" over both,
#    with zstd -3,
#    zstd -19 and the byte-grouped coder on the same files in the same run;
#    and the trajectory again with "--no-side" (no file coded given another
#    of its checkpoint: optimizer.pt's master weights without the bf16
#    copy in model.safetensors), for the rows of that context.
#    The speed rows: each large kind against zstd -3 on the same files,
#    its keyframe (first version) apart from its deltas, 1 and 2 threads.
#    One thread and zstd are timed in CPU seconds: on a shared VM the
#    host's steal moved wall-clock rows of unchanged code by up to 30%
#    from one run to the next (2026-12-04); two threads are wall time.
# 3a. Candidate contexts (bench/contexts.py, when the trajectory has
#    optimizer.pt): bits per bf16 delta element in a model of the codec's
#    coder, with each context that was measured and not built; appended to
#    the output file after the summaries.
# 3b. One large file (bench/bigfile.py: two checkpoints of the middle of
#    the run tiled into 512 MiB, --quick 128 MiB) and its next version, in
#    bf16 and f32: 2 threads against 1 within one file, keyframe and delta.
# 4. The filesystem: bench/fs_bench.sh --traj DIR (--quick with --quick):
#    writes and cold reads through the mount against the backing disk and
#    the offline codec, close -> commit latency, the trajectory copied in
#    and read back, the daemon's peak RSS ingesting a 4 GiB (--quick:
#    1 GiB) bf16 file and its next version.
# 5. The table, with the date, the machine, the load average at the start
#    and end, and the ulpfs commit: printed, and written to --out FILE
#    (default: ${TMPDIR:-/tmp}/ulpfs-report-YYYYmmdd-HHMMSS.md), followed by
#    the raw "ulpfs bench" summaries; everything the steps printed goes to
#    FILE's name with .log instead of .md.
#
# Every ratio divides a figure by a baseline measured in the same run, on
# the same machine, under the same load: on a shared machine the absolute
# speeds move from run to run, the ratios much less.
#
# Takes 10-12 minutes on 2 cores (--quick: 1.5-3).  Needs root
# (drop_caches), FUSE (fusermount3), /usr/bin/python3 with torch and numpy,
# about 20 GiB free under TMPDIR (--quick: 6 GiB).  ULPFS=path/to/ulpfs
# (default: _build/ulpfs, then ./ulpfs).  Every mount is made by
# fs_bench.sh under this script's own temporary directory, and unmounted
# on every exit path (Ctrl-C and kill included).
#
# Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
top=$(cd "$here/.." && pwd)
. "$here/lib.sh"
PY=/usr/bin/python3

quick=0 traj="" out="" reps=3
while [ $# -gt 0 ]; do
	case $1 in
	--quick) quick=1 ;;
	--traj) traj=$(realpath "$2"); shift ;;
	--out) out=$(realpath -m "$2"); shift ;;
	--reps) reps=$2; shift ;;
	-h | --help) sed -n '2,/^$/p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "usage: $0 [--quick] [--traj DIR] [--out FILE] [--reps R]" >&2; exit 2 ;;
	esac
	shift
done

die() { echo "bench/report.sh: $*" >&2; exit 1; }
ULPFS=$(bench_find_ulpfs "$top") || die "build ulpfs first (or set ULPFS)"
export ULPFS
[ "$(id -u)" -eq 0 ] || die "needs root (cold reads drop the page cache)"
[ -x "$PY" ] || die "$PY not found"
command -v fusermount3 >/dev/null || die "fusermount3 not found (apt-get install fuse3)"
[ -z "$traj" ] || [ -d "$traj" ] || die "--traj $traj: not a directory"
stamp=$(date -u +%Y%m%d-%H%M%S)
[ -n "$out" ] || out=${TMPDIR:-/tmp}/ulpfs-report-$stamp.md
log=${out%.md}.log
mkdir -p "$(dirname "$out")"
: >"$log"

# ------------------------------------------------------------- clean-up
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ulpfs-report.XXXXXX")
child="" # the one step running now (a PID this script started)
cleanup() {
	local rc=$? mp
	trap - EXIT INT TERM HUP
	set +e
	if [ -n "$child" ] && kill -0 "$child" 2>/dev/null; then
		echo "bench/report.sh: stopping PID $child" >&2
		kill -TERM "$child" 2>/dev/null # fs_bench.sh unmounts what it mounted
		wait "$child" 2>/dev/null
	fi
	# The steps run with TMPDIR=$WORK: whatever is still mounted below it
	# (a step killed with -9) is ours.
	while read -r mp; do
		echo "bench/report.sh: unmounting $mp" >&2
		fusermount3 -u "$mp" 2>/dev/null || fusermount3 -uz "$mp" 2>/dev/null || umount -l "$mp"
	done < <(awk -v w="$WORK/" 'index($5, w) == 1 { print $5 }' /proc/self/mountinfo | sort -r)
	if grep -qF " $WORK/" /proc/self/mountinfo; then
		echo "bench/report.sh: something is still mounted under $WORK; not removing it" >&2
	else
		rm -rf --one-file-system "$WORK"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

T0=$SECONDS
# step TITLE CMD...: run CMD in the background (so that a signal reaches
# the trap at once) with TMPDIR=$WORK, its output appended to the log (and
# left in $STEP_OUT when that is set); fails with its tail.
step() {
	local title=$1 rc=0 t=$SECONDS o=${STEP_OUT:-$WORK/step.out}
	shift
	printf '== %s\n' "$title" >&2
	printf '\n===== %s\n$ %s\n' "$title" "$*" >>"$log"
	TMPDIR=$WORK "$@" >"$o" 2>&1 &
	child=$!
	wait "$child" || rc=$?
	child=""
	cat "$o" >>"$log"
	printf '   %d s\n' $((SECONDS - t)) >&2
	[ "$rc" = 0 ] && return 0
	tail -n 25 "$o" | sed 's/^/   | /' >&2
	echo "bench/report.sh: '$title' failed (exit $rc); the full output is in $log" >&2
	return "$rc"
}

# ---------------------------------------------------------------- header
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
date_start=$(date -u '+%Y-%m-%d %H:%M UTC')
machine=$(bench_machine)
tmpfs=$(findmnt -n -o FSTYPE,SOURCE -T "$WORK" | tr -s ' ' | sed 's/ / on /')
if commit=$(git -C "$top" rev-parse --short HEAD 2>/dev/null); then
	[ -z "$(git -C "$top" status --porcelain --untracked-files=no 2>/dev/null)" ] ||
		commit="$commit with uncommitted changes"
else
	commit="unknown (not a git checkout)"
fi
built=$(date -u -r "$ULPFS" '+%Y-%m-%d %H:%M UTC')
echo "bench/report.sh: $machine; load $load_start; ulpfs $commit ($ULPFS)" >&2
echo "bench/report.sh: log in $log" >&2

# ------------------------------------------------------------ trajectory
if [ -z "$traj" ]; then
	traj=$WORK/traj
	targs=(--output_dir "$traj")
	[ "$quick" = 1 ] && targs+=(--quick) || targs+=(--full)
	step "training the trajectory: examples/train.py ${targs[*]}" "$PY" "$top/examples/train.py" "${targs[@]}" || exit 1
	trajdesc="examples/train.py${targs[2]:+ ${targs[2]}} (Hugging Face Trainer layout)"
else
	trajdesc=$traj
fi
mapfile -t files < <(bench_traj_files "$traj")
[ "${#files[@]}" -gt 0 ] || die "no files under $traj"
nck=$(find "$traj" -mindepth 1 -maxdepth 1 -type d \( -name 'checkpoint-*' -o -name 'step-*' \) ! -name '*.tmp' | wc -l)
raw=$(find "$traj" -type f -printf '%s\n' | awk '{ s += $1 } END { printf "%.0f", s }')

dt=$WORK/dtypes
dtfiles=()
if ! compgen -G "$traj/checkpoint-*/optimizer.pt" >/dev/null; then
	echo "== no dtype rows: no checkpoint-N/optimizer.pt (examples/train.py's layout) under $traj" >&2
elif step "the same weights as f16 and f32 safetensors: bench/dtype_variants.py" "$PY" "$here/dtype_variants.py" "$traj" "$dt"; then
	mapfile -t dtfiles < <(bench_traj_files "$dt")
else
	echo "   (no dtype rows)" >&2
fi

# ----------------------------------------------------------------- codec
STEP_OUT=$WORK/codec.txt step "codec: ulpfs bench --threads 2 --cpu-time --reps $reps over ${#files[@]} files" \
	"$ULPFS" bench --threads 2 --cpu-time --reps "$reps" "${files[@]}" || exit 1
codec_total=$(awk '$1 == "TOTAL" { t = $3 } END { print t }' "$WORK/codec.txt")
[ -n "$codec_total" ] || die "no TOTAL line in the ulpfs bench output"
STEP_OUT=$WORK/codec-noside.txt step "codec without sides: ulpfs bench --no-side --no-baselines --threads 1 --reps 1" \
	"$ULPFS" bench --no-side --no-baselines --threads 1 --reps 1 "${files[@]}" || exit 1
if [ "${#dtfiles[@]}" -gt 0 ]; then
	STEP_OUT=$WORK/codec-dt.txt step "codec: ulpfs bench --threads 2 --cpu-time --reps $reps over ${#dtfiles[@]} dtype variants" \
		"$ULPFS" bench --threads 2 --cpu-time --reps "$reps" "${dtfiles[@]}" || exit 1
fi

# ------------------------------------------- candidate contexts, bf16
# Bits per bf16 delta element under the codec's context and under the
# candidates that are not built (bench/contexts.py): the measurements
# behind not building them.
ctxfile=""
if compgen -G "$traj/checkpoint-*/optimizer.pt" >/dev/null &&
	STEP_OUT=$WORK/contexts.txt step "candidate contexts for bf16 deltas: bench/contexts.py" "$PY" "$here/contexts.py" "$traj"; then
	ctxfile=$WORK/contexts.txt
fi

# ----------------------------------------------- one large file, 2T / 1T
# Two consecutive checkpoints of the middle of the run, tiled into one
# large file and its next version (bench/bigfile.py), in bf16 and in f32:
# the scaling of threads within one file, a keyframe and a delta.
bigmib=512
[ "$quick" = 1 ] && bigmib=128
mapfile -t cks < <(find "$traj" -mindepth 1 -maxdepth 1 -type d \( -name 'checkpoint-*' -o -name 'step-*' \) ! -name '*.tmp' | LC_ALL=C sort -V)
bigs=() # "DTYPE FILE1 FILE2"
if [ "${#cks[@]}" -ge 2 ]; then
	a=${cks[$(((${#cks[@]} - 1) / 2))]} b=${cks[$(((${#cks[@]} + 1) / 2))]}
	ab=$(basename "$a") bb=$(basename "$b")
	for pair in "bf16 $a/model.safetensors $b/model.safetensors" \
		"bf16 $a/model-bf16.safetensors $b/model-bf16.safetensors" \
		"f32 $dt/$ab/model-f32.safetensors $dt/$bb/model-f32.safetensors" \
		"f32 $a/model-f32.safetensors $b/model-f32.safetensors"; do
		read -r d f1 f2 <<<"$pair"
		[ -f "$f1" ] && [ -f "$f2" ] || continue
		case " ${bigs[*]} " in *" $d "*) continue ;; esac
		step "one large $d file and its next version: bench/bigfile.py --mib $bigmib ($ab, $bb)" \
			"$PY" "$here/bigfile.py" --mib "$bigmib" "$f1" "$f2" "$WORK/big-$d" || exit 1
		n=$(basename "$f1")
		STEP_OUT=$WORK/big-$d.txt step "within one file: ulpfs bench --threads 2 --reps $reps --no-baselines, $d" \
			"$ULPFS" bench --threads 2 --reps "$reps" --no-baselines "$WORK/big-$d/v1/$n" "$WORK/big-$d/v2/$n" || exit 1
		# The machine's own ceiling for two threads: two processes of
		# one thread each on the same files at once (a shared or
		# throttled machine gives less than 2 whatever the code).
		step "the same, two 1-thread processes at once, $d" bash -c \
			'trap "kill \$p1 \$p2 2>/dev/null" TERM; "$@" >"$0.1" & p1=$!; "$@" >"$0.2" & p2=$!; wait $p1 && wait $p2' \
			"$WORK/pair-$d" "$ULPFS" bench --threads 1 --reps "$reps" --no-baselines "$WORK/big-$d/v1/$n" "$WORK/big-$d/v2/$n" || exit 1
		rm -rf "$WORK/big-$d"
		bigs+=("$d")
	done
fi

# ------------------------------------------------------------ filesystem
fsargs=(--traj "$traj" --codec-bytes "$codec_total" --kv "$WORK/fs.kv")
[ "$quick" = 1 ] && fsargs+=(--quick)
if ! step "filesystem: bench/fs_bench.sh ${fsargs[*]}" bash "$here/fs_bench.sh" "${fsargs[@]}"; then
	[ -s "$WORK/fs.kv" ] || exit 1
	echo "   (some checks failed; the table says so)" >&2
fi
declare -A F
while IFS='=' read -r k v; do F[$k]=$v; done <"$WORK/fs.kv"
load_end=$(cut -d' ' -f1-3 /proc/loadavg)
took=$((SECONDS - T0))

# ---------------------------------------------------------------- table
set +u # a figure missing from fs.kv prints as empty or n/a
div() { awk -v a="$1" -v b="$2" -v d="${3:-2}" 'BEGIN { if (a == "" || b == "" || b + 0 == 0) print "n/a"; else printf "%.*f\n", d, a / b }'; }
mb() { awk -v a="$1" 'BEGIN { if (a == "") print "n/a"; else if (a < 1e6) printf "%.1f kB\n", a / 1e3; else printf "%.1f MB\n", a / 1e6 }'; }
sec() { awk -v a="$1" 'BEGIN { if (a == "") print "n/a"; else printf "%.3f s\n", a }'; }
rows=()
row() { rows+=("| $1 | $2 | $3 | $4 | ${5:-} |"); }

# kind FILE NAME TAG -> "raw ulpfs z3 z19 bg" of the per-kind line NAME [TAG]
kind() { awk -v n="$2" -v t="[$3]" '/^== per file kind/ { s = 1 } s && $1 == n && $2 == t { print $3, $4, $6, $7, $8; exit }' "$1"; }
# perfile FILE -> per file, in the order of the arguments: "enc1 dec1
# encN decN busy-enc busy-dec [z3enc z3dec]" (the path is the first 44
# columns, which may hold spaces; the N/1 ratios are dropped)
perfile() { awk '/^== speed per file/ { s = 1; next } s && /^file / { h = 1; next } s && h && NF == 0 { exit } s && h { print substr($0, 46) }' "$1" | awk '{ $5 = $6 = ""; $0 = $0; print }'; }
# medcol COL: the median of column COL of stdin
medcol() { awk -v c="$1" '{ print $c }' | median; }
# kinds FILE...: their base names in order, with the number of files of
# each ("ulpfs bench" truncates the paths it prints)
kinds() { printf '%s\n' "$@" | awk -F/ '{ n = $NF; if (!(n in c)) o[++k] = n; c[n]++ } END { for (i = 1; i <= k; i++) print o[i], c[o[i]] }'; }
label() {
	case $1 in
	model.safetensors) echo "model.safetensors (bf16 weights)" ;;
	optimizer.pt) echo "optimizer.pt (AdamW moments + fp32 master weights)" ;;
	model-f16.safetensors) echo "the same weights as f16 safetensors" ;;
	model-f32.safetensors) echo "the same weights as f32 safetensors" ;;
	model-bf16.safetensors) echo "model-bf16.safetensors" ;;
	pytorch_model.bin) echo "pytorch_model.bin (f32, torch.save)" ;;
	*) echo "$1" ;;
	esac
}
# The codec rows of one "ulpfs bench" output: kinds of 1 MB or more get
# their delta versions against zstd -19 and the byte-grouped coder; the
# smaller ones are pooled.
codec_rows() { # BENCH_OUTPUT FILE...
	local f=$1 k n r u z3 z19 bg small=() sr=0 su=0 s3=0 s19=0 sbg=0 sn=0
	while read -r k n; do
		read -r r u z3 z19 bg < <(kind "$f" "$k" all)
		if [ "$((r / n))" -lt 1000000 ]; then
			small+=("$k") sr=$((sr + r)) su=$((su + u)) s3=$((s3 + z3)) s19=$((s19 + z19)) sbg=$((sbg + bg)) sn=$((sn + n))
			continue
		fi
		read -r r u z3 z19 bg < <(kind "$f" "$k" deltas)
		row "size: $(label "$k"), $((n - 1)) delta versions" "$(mb "$u")" "zstd -19: $(mb "$z19")" "$(div "$u" "$z19" 3)" \
			"raw $(mb "$r"); zstd -3 $(mb "$z3") ($(div "$u" "$z3" 3))"
		row "size: same files" "$(mb "$u")" "byte-grouped: $(mb "$bg")" "$(div "$u" "$bg" 3)" ""
		BIG+=("$f $k")
	done < <(shift; kinds "$@")
	[ "$sn" -gt 0 ] || return 0
	row "size: small files (${small[*]}), all $sn versions" "$(mb "$su")" "zstd -19: $(mb "$s19")" "$(div "$su" "$s19" 3)" \
		"raw $(mb "$sr"); zstd -3 $(mb "$s3"), byte-grouped $(mb "$sbg")"
}
# floats FILE DTYPE -> "bits/el model-bits/el elements" of all its
# DTYPE elements
floats() { awk -v d="$2" '/^== floats/ { s = 1 } s && $1 == d { print $3, $4, $2; exit }' "$1"; }
# The rows of the context from the checkpoint's other files (sides): the
# same files coded with "--no-side".  The elements coded given a side had,
# without it, what the f32 total lost beyond them (the other f32 elements
# are coded alike either way).
side_rows() {
	local nu sb se b m n b0 m0 n0 r u r0 u0
	read -r _ _ nu _ < <(awk '$1 == "TOTAL"' "$WORK/codec-noside.txt")
	read -r se sb < <(sed -n 's/^f32 coded given a side file.*: \([0-9]*\) elements, \([0-9.]*\) bits\/el$/\1 \2/p' "$WORK/codec.txt")
	[ -n "${se:-}" ] || return 0
	read -r b m n < <(floats "$WORK/codec.txt" f32)
	read -r b0 m0 n0 < <(floats "$WORK/codec-noside.txt" f32)
	read -r r u _ < <(kind "$WORK/codec.txt" optimizer.pt all)
	read -r r0 u0 _ < <(kind "$WORK/codec-noside.txt" optimizer.pt all)
	local before
	before=$(awk -v b="$b" -v b0="$b0" -v n="$n" -v se="$se" -v sb="$sb" 'BEGIN { printf "%.3f", sb + (b0 - b) * n / se }')
	row "bits/element: the $se fp32 elements coded given model.safetensors (master weights)" "$sb" "without: $before" "$(div "$sb" "$before" 3)" "tables included"
	row "bits/element: every fp32 element ($n)" "$b (model entropy $m)" "without sides: $b0 ($m0)" "$(div "$b" "$b0" 3)" ""
	[ -z "${u:-}" ] || row "size: optimizer.pt, all versions" "$(mb "$u")" "without sides: $(mb "$u0")" "$(div "$u" "$u0" 3)" "raw $(mb "$r")"
	row "size: the whole trajectory, with sides" "$(mb "$tu")" "without: $(mb "$nu")" "$(div "$tu" "$nu" 3)" "zstd -19: $(mb "$t19")"
	row "size: the whole trajectory: without sides (before the context)" "$(mb "$nu")" "zstd -19: $(mb "$t19")" "$(div "$nu" "$t19" 3)" \
		"with sides (after): $(div "$tu" "$t19" 3) of zstd -19"
}
# The bf16 weights with and without the contexts from other files: none
# is built for them (the sign of optimizer.pt's exp_avg is not), so the
# two runs should agree; the row shows the model's entropy beside them.
bf16_rows() {
	local b m n b0 m0
	read -r b m n < <(floats "$WORK/codec.txt" bf16)
	read -r b0 m0 _ < <(floats "$WORK/codec-noside.txt" bf16)
	[ -n "${b:-}" ] || return 0
	row "bits/element: every bf16 element ($n)" "$b (model entropy $m)" "without sides: $b0 ($m0)" "$(div "$b" "$b0" 3)" \
		"tables included; no context from other files is built for bf16"
}
BIG=()
codec_rows "$WORK/codec.txt" "${files[@]}"
read -r _ traw tu _ t3 t19 tbg < <(awk '$1 == "TOTAL"' "$WORK/codec.txt")
row "size: the whole trajectory, all ${#files[@]} files" "$(mb "$tu")" "zstd -3: $(mb "$t3")" "$(div "$tu" "$t3" 3)" "raw $(mb "$traw"); the first version of each file has no reference"
row "size: same" "$(mb "$tu")" "zstd -19: $(mb "$t19")" "$(div "$tu" "$t19" 3)" ""
row "size: same" "$(mb "$tu")" "byte-grouped: $(mb "$tbg")" "$(div "$tu" "$tbg" 3)" ""
side_rows
bf16_rows
[ "${#dtfiles[@]}" -eq 0 ] || codec_rows "$WORK/codec-dt.txt" "${dtfiles[@]}"
# The speeds of each large kind against zstd -3 on the same files, the
# keyframe (its first file, coded standalone) apart from the deltas
# (medians over the files): 1 thread (CPU time), and 2 (wall) in the note.
speed_rows() { # BENCH_OUTPUT KIND FILE...
	local f=$1 k=$2 i=0 x lines key="" del=""
	shift 2
	mapfile -t lines < <(perfile "$f")
	for x in "$@"; do
		if [ "$(basename "$x")" = "$k" ]; then
			if [ -z "$key" ]; then key=${lines[$i]}; else del+="${lines[$i]}"$'\n'; fi
		fi
		i=$((i + 1))
	done
	local what e1 d1 e2 d2 z3e z3d nd
	for what in keyframe deltas; do
		if [ "$what" = keyframe ]; then
			[ -n "$key" ] || continue
			read -r e1 d1 e2 d2 _ _ z3e z3d <<<"$key"
			nd="the first version, standalone"
		else
			[ -n "$del" ] || continue
			e1=$(medcol 1 <<<"$del") d1=$(medcol 2 <<<"$del") e2=$(medcol 3 <<<"$del") d2=$(medcol 4 <<<"$del")
			z3e=$(medcol 7 <<<"$del") z3d=$(medcol 8 <<<"$del")
			nd="median of $(grep -c . <<<"$del") delta versions"
		fi
		row "encode, 1 thread (CPU time): $(label "$k"), $what" "$e1 MB/s" "zstd -3 encode: $z3e MB/s" "$(div "$e1" "$z3e")" \
			"$nd; 2 threads (wall): $e2 MB/s, $(div "$e2" "$z3e") of zstd -3 (1 thread)"
		row "decode, 1 thread (CPU time): same" "$d1 MB/s" "zstd -3 decode: $z3d MB/s" "$(div "$d1" "$z3d")" \
			"2 threads (wall): $d2 MB/s, $(div "$d2" "$z3d") of zstd -3 (1 thread)"
	done
}
for fk in "${BIG[@]}"; do
	if [ "${fk% *}" = "$WORK/codec-dt.txt" ]; then
		speed_rows "${fk% *}" "${fk#* }" "${dtfiles[@]}"
	else
		speed_rows "${fk% *}" "${fk#* }" "${files[@]}"
	fi
done
# Within one large file: 2 threads against 1 on the same file in the
# same run; "busy" (CPU seconds per wall second of the 2-thread runs)
# below 2 is a part that ran alone.
for d in "${bigs[@]}"; do
	mapfile -t lines < <(perfile "$WORK/big-$d.txt")
	for i in 0 1; do
		[ -n "${lines[$i]:-}" ] || continue
		read -r e1 d1 e2 d2 be bd <<<"${lines[$i]}"
		what="keyframe"
		[ "$i" = 1 ] && what="delta against the keyframe"
		# two processes' speeds, each against the 1-thread figure
		read -r pe pd < <(for k in 1 2; do perfile "$WORK/pair-$d.$k" | sed -n "$((i + 1))p"; done |
			awk -v e="$e1" -v d="$d1" '{ se += $1; sd += $2 } END { if (e > 0 && d > 0) printf "%.2f %.2f\n", se / e, sd / d; else print "n/a n/a" }')
		row "within one $bigmib MiB $d file, $what: encode, 2 threads" "$e2 MB/s" "1 thread: $e1 MB/s" "$(div "$e2" "$e1")" \
			"busy threads $be; two 1-thread processes at once: $pe x one alone (the machine's ceiling); goal 1.8"
		row "same: decode, 2 threads" "$d2 MB/s" "1 thread: $d1 MB/s" "$(div "$d2" "$d1")" \
			"busy threads $bd; two 1-thread processes at once: $pd x"
	done
done

w=${F[p_write_mib]} rd=${F[p_read_mib]} rss=${F[p_rss_mib]}
row "write through the mount: dd bs=1M conv=fsync, $w MiB" "${F[a_mnt]} MB/s" "same dd to the backing disk: ${F[a_back]} MB/s" "$(div "${F[a_mnt]}" "${F[a_back]}")" "median of ${F[p_wreps]:-${F[p_reps]}}, each first in half of them"
row "write through the mount: cp, $w MiB" "${F[a_cp_mnt]} MB/s" "same cp to the backing disk: ${F[a_cp_back]} MB/s" "$(div "${F[a_cp_mnt]}" "${F[a_cp_back]}")" "no fsync; encoding starts after close"
row "the trajectory copied into the mount (cp -r in training order), until committed" "${F[d_mnt_commit_mbs]} MB/s" "cp -r + sync on the backing disk: ${F[d_back_sync_mbs]} MB/s" "$(div "${F[d_mnt_commit_mbs]}" "${F[d_back_sync_mbs]}")" "every file encoded, fsynced and in the catalog"
row "the same copy, until cp returns" "${F[d_mnt_cp_mbs]} MB/s" "cp -r to the backing disk: ${F[d_back_cp_mbs]} MB/s" "$(div "${F[d_mnt_cp_mbs]}" "${F[d_back_cp_mbs]}")" ""
row "cold read through the mount: bf16 $rd MiB, keyframe" "${F[b_cold_a]} MB/s" "cold read on the backing disk: ${F[b_cold_back]} MB/s" "$(div "${F[b_cold_a]}" "${F[b_cold_back]}")" "remount + drop_caches; median of ${F[p_reps]}"
row "cold read through the mount: same" "${F[b_cold_a]} MB/s" "codec decode, 1 thread: ${F[b_dec1]} MB/s" "$(div "${F[b_cold_a]}" "${F[b_dec1]}")" "2 threads: ${F[b_dec2]} MB/s"
dd2=$(awk -v d="${F[b_dec1]}" 'BEGIN { printf "%.1f", d / 2 }')
row "cold read through the mount: its next version (a delta)" "${F[b_cold_b]} MB/s" "the two decodes offline, 1 thread: $dd2 MB/s" "$(div "${F[b_cold_b]}" "$dd2")" "$(div "${F[b_cold_b]}" "${F[b_cold_back]}") of the backing disk's cold read"
row "cold read of the whole trajectory through the mount" "${F[d_read_mnt]} MB/s" "cold read on the backing disk: ${F[d_read_back]} MB/s" "$(div "${F[d_read_mnt]}" "${F[d_read_back]}")" \
	"${F[d_files]} files, $([ "${F[d_exact]}" = 1 ] && echo "read back bit-exact" || echo "**NOT bit-exact**")"
row "close to commit: ${F[p_commit_n]} versions of a ${F[p_commit_mib]} MiB bf16 file, median" "$(sec "${F[c_med]}")" "codec encode of one version, 2 threads: $(sec "${F[c_enc2_s]}")" "$(div "${F[c_med]}" "${F[c_enc2_s]}")" "max $(sec "${F[c_max]}"); includes settle=${F[p_settle]} ms"
row "store after the trajectory (ulpfs sync after each checkpoint): objects + catalog" "$(mb "${F[d_store_paced]}")" "ulpfs bench of the same files: $(mb "${F[d_bench]}")" "$(div "${F[d_store_paced]}" "${F[d_bench]}" 3)" \
	"raw $(mb "${F[d_raw]}"); after the one-burst copy above: $(mb "${F[d_store]}") ($(div "${F[d_store]}" "${F[d_bench]}" 3)), writes outran the encoder"
row "daemon peak RSS (VmHWM): ingesting a $rss MiB bf16 file, then its next version" "${F[e_hwm2]} MiB" "the file: $rss MiB" "$(div "${F[e_hwm2]}" "$rss" 3)" "after the first version alone: ${F[e_hwm1]} MiB"
row "daemon peak RssAnon (polled), same" "${F[e_anon2]} MiB" "the file: $rss MiB" "$(div "${F[e_anon2]}" "$rss" 3)" "first version alone: ${F[e_anon1]} MiB"

dtnote=""
[ "${#dtfiles[@]}" -eq 0 ] || dtnote="; f16/f32 rows: its fp32 master weights re-saved by bench/dtype_variants.py"
{
	echo "## ulpfs benchmarks, $date_start"
	echo
	echo "- machine: $machine; TMPDIR on $tmpfs"
	echo "- load average (1, 5, 15 min): $load_start at the start, $load_end at the end"
	echo "- ulpfs: source tree at commit $commit; binary ${ULPFS#"$top"/} built $built"
	echo "- trajectory: $trajdesc, $nck checkpoints, ${#files[@]} files, $(mb "$raw")$dtnote"
	echo "- \`bash bench/report.sh$([ "$quick" = 1 ] && echo " --quick")\` took $took s; codec: \`ulpfs bench --threads 2 --cpu-time --reps $reps\`; mount options ${F[p_opts]}"
	echo "- every baseline was measured in the same run; ratio = ulpfs / baseline (sizes and times: lower is better; speeds: higher)"
	[ "${F[fails]:-0}" = 0 ] || echo "- **fs_bench.sh reported ${F[fails]} failed check(s): see the log**"
	echo
	echo "| measure | ulpfs | baseline | ratio | note |"
	echo "|---|---:|---:|---:|---|"
	printf '%s\n' "${rows[@]}"
} >"$WORK/table.md"
{
	cat "$WORK/table.md"
	echo
	echo "### ulpfs bench summaries"
	echo
	echo '```'
	sed -n '/^TOTAL/p; /^== per file kind/,$p' "$WORK/codec.txt"
	if [ "${#dtfiles[@]}" -gt 0 ]; then
		echo
		sed -n '/^TOTAL/p; /^== per file kind/,$p' "$WORK/codec-dt.txt"
	fi
	echo '```'
	if [ -n "$ctxfile" ]; then
		echo
		echo "### candidate contexts for bf16 deltas (bench/contexts.py, a model of the codec's coder)"
		echo
		cat "$ctxfile"
	fi
} >"$out"
echo
cat "$WORK/table.md"
echo
echo "bench/report.sh: written to $out (log: $log)" >&2
[ "${F[fails]:-0}" = 0 ]
