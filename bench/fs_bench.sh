#!/usr/bin/env bash
# bench/fs_bench.sh - the ulpfs filesystem benchmark: the mount against the
# backing filesystem and against the offline codec (ulpfs bench), measured
# in the same run, printed as one table.
#
#   bench/fs_bench.sh [--quick] [--traj-quick] [--traj DIR] [--reps R]
#                     [--write-mib N] [--read-mib N] [--rss-mib N]
#                     [--codec-bytes N] [--kv FILE]
#
#   (a) sequential 1 MiB writes through the mount vs straight to the
#       backing filesystem, median of R (rounded up to even), the two in
#       turn (one first, then the other first): dd bs=1M conv=fsync, and
#       plain cp (no fsync; the mount encodes after close, see (c))
#   (b) cold read (remount + drop_caches) of a committed bf16 safetensors
#       file through the mount, standalone and delta-coded versions, vs a
#       cold read of the same file on the backing filesystem and vs ulpfs
#       bench's decode speed for the same files; and a warm re-read
#   (c) close -> commit latency (STORE/staging empties) for a series of
#       versions of one file, median and max, minus the encode time that
#       ulpfs bench measures for the same files
#   (d) a real training trajectory (--traj DIR, else bench/make_trajectory.py,
#       default preset; --traj-quick for --quick) copied (cp -r, in
#       training order) into the mount and onto the backing filesystem:
#       time until cp returns, and until committed (mount) or synced
#       (backing); du -sb objects catalog.db after unmounting vs the sum
#       of ulpfs bench object sizes (--codec-bytes N: that sum, measured
#       by the caller on the same files, e.g. bench/report.sh); a cold
#       read of every file through the mount vs on the backing
#       filesystem; then the store size again with the trajectory written
#       at training's pace ("ulpfs sync" after each checkpoint)
#   (e) the daemon's peak RSS (VmHWM, and peak RssAnon polled) while
#       ingesting a large bf16 file (4 GiB; then its next version, a delta)
#
# --kv FILE also writes every figure as KEY=VALUE lines (bench/report.sh
# reads them).
#
# Needs root (drop_caches), FUSE, /usr/bin/python3 with numpy (torch for
# (d)), and about 3 x --rss-mib + 4 GiB + 2 x the trajectory free under
# TMPDIR (default /tmp).
# ULPFS=path/to/ulpfs (default: _build/ulpfs, then ./ulpfs).  Extra mount
# options: FS_MOUNT_OPTS (e.g. encoders=2).  settle is 50 ms unless
# FS_SETTLE says otherwise.
# make check may run this with a POSIX sh: it needs bash.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
FS_TEST=fs_bench
. "$(dirname "${BASH_SOURCE[0]}")/../tests/fs_lib.sh"
. "$FS_SRCDIR/bench/lib.sh"

quick=0 trajq=0 traj="" reps=3 write_mib=1024 read_mib=256 rss_mib=4096 commit_n=8 commit_mib=32
codec_bytes="" kv=""
while [ $# -gt 0 ]; do
	case $1 in
	--quick) quick=1 trajq=1 write_mib=256 read_mib=64 rss_mib=1024 commit_n=6 commit_mib=16 ;;
	--traj-quick) trajq=1 ;;
	--traj) traj=$2; shift ;;
	--reps) reps=$2; shift ;;
	--write-mib) write_mib=$2; shift ;;
	--read-mib) read_mib=$2; shift ;;
	--rss-mib) rss_mib=$2; shift ;;
	--codec-bytes) codec_bytes=$2; shift ;;
	--kv) kv=$2; shift ;;
	-h | --help) sed -n '2,/^$/p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "usage: $0 [--quick] [--traj-quick] [--traj DIR] [--reps R] [--write-mib N] [--read-mib N] [--rss-mib N] [--codec-bytes N] [--kv FILE]" >&2; exit 2 ;;
	esac
	shift
done
[ -z "$traj" ] || [ -d "$traj" ] || { echo "$0: --traj $traj: not a directory" >&2; exit 2; }
[ -z "$traj" ] || traj=$(realpath "$traj")
[ -z "$kv" ] || kv=$(realpath -m "$kv")
fs_init
SETTLE=${FS_SETTLE:-50}
fs_opts() { # the benchmark's own: settle from FS_SETTLE
	local o="settle=$SETTLE"
	[ -n "${FS_MOUNT_OPTS:-}" ] && o="$o,$FS_MOUNT_OPTS"
	[ -n "${1:-}" ] && o="$o,$1"
	echo "$o"
}
STORE=$WORK/store
MNT=$WORK/mnt
BACK=$WORK/back
DATA=$WORK/data
mkdir -p "$BACK" "$DATA"
[ "$(id -u)" -eq 0 ] || say "not root: cannot drop the page cache; cold reads use a remount only"
traj_bytes=$([ -n "$traj" ] && fs_file_bytes "$traj" || echo $((700 << 20)))
need=$(((rss_mib * 3 + 4096) * 1048576 + 2 * traj_bytes))
free=$(fs_free_bytes "$WORK")
[ "$free" -ge "$need" ] || die "need $(fs_mib "$need") MiB free under $WORK, have $(fs_mib "$free")"

declare -A R # results
mbs() { calc "$1 / 1000000 / $2" 1; } # BYTES SECONDS -> MB/s
read_tree() { find "$1" -type f -print0 | xargs -0r cat >/dev/null; }
# traj_entries SRC: SRC's entries in training order (sort -V), NUL-ended.
# A file's reference is the previous version of its path, or else the
# latest file of the same name, so a plain cp -r (readdir order) would code
# checkpoint-100 against checkpoint-160.
traj_entries() { find "$1" -mindepth 1 -maxdepth 1 -print0 | LC_ALL=C sort -zV; }
copy_traj() { mkdir -p "$2" && traj_entries "$1" | xargs -0r cp -r -t "$2"; } # SRC DST
store_bytes() { du -sb "$1/objects" "$1"/catalog.db* | awk '{ s += $1 } END { printf "%.0f\n", s }'; }

echo "== machine: $(bench_machine), $(date -u +%Y-%m-%d)"
echo "== backing filesystem: $(findmnt -n -o FSTYPE,SOURCE -T "$WORK" | tr -s ' '); mount options: $(fs_opts)"

fs_mount "$STORE" "$MNT"

# ------------------------------------------------------------------ (a)
wreps=$((reps + reps % 2)) # as many reps in each order
step "(a) sequential 1 MiB writes: $write_mib MiB, dd bs=1M conv=fsync and cp, median of $wreps"
head -c $((write_mib << 20)) /dev/urandom >"$DATA/rand"
cat "$DATA/rand" >/dev/null
declare -A W # "dd back", "cp mnt", ...: the MB/s of each rep
for r in $(seq 1 "$wreps"); do
	# The order alternates: on a VM whose disk still drains the last
	# write's gigabyte (sync returned, the host's cache did not), the
	# second of a pair runs slower, whichever it is (a 1 GiB dd with fsync
	# on this 2-vCPU VM: 1071 then 241 MB/s with the mount first, 341
	# then 199 with the disk first).
	order="back mnt"
	[ $((r % 2)) = 0 ] && order="mnt back"
	for how in dd cp; do
		for where in $order; do
			dst=$BACK/w
			[ $where = mnt ] && dst=$MNT/w
			rm -f "$dst"
			fs_wait_committed "$STORE" 600 # no encoding competes with the next rep
			sync
			t0=$(now)
			if [ $how = dd ]; then
				dd if="$DATA/rand" of="$dst" bs=1M count="$write_mib" conv=fsync status=none || die "dd to $dst failed"
			else
				cp "$DATA/rand" "$dst" || die "cp to $dst failed"
			fi
			t=$(calc "$(now) - $t0")
			v=$(mbs $((write_mib << 20)) "$t")
			say "rep $r $how $where: ${t}s, $v MB/s"
			W[$how $where]="${W[$how $where]:-} $v"
		done
	done
done
R[a_mnt]=$(echo "${W[dd mnt]}" | median)
R[a_back]=$(echo "${W[dd back]}" | median)
R[a_cp_mnt]=$(echo "${W[cp mnt]}" | median)
R[a_cp_back]=$(echo "${W[cp back]}" | median)
rm -f "$MNT/w" "$BACK/w" "$DATA/rand"
fs_wait_committed "$STORE" 600

# ------------------------------------------------------------------ (b)
step "(b) reads of committed bf16 safetensors ($read_mib MiB): mount (cold, warm) vs ulpfs bench decode"
mkdir -p "$DATA/b1" "$DATA/b2"
"$PY" "$FS_UTIL" bigsafetensors "$DATA/b1/model.safetensors" --bytes $((read_mib << 20)) --seed 3 >/dev/null || die "generator failed"
"$PY" "$FS_UTIL" bigsafetensors "$DATA/b2/model.safetensors" --bytes $((read_mib << 20)) --seed 3 --drift 0.004 >/dev/null || die "generator failed"
mkdir -p "$MNT/a" "$MNT/b"
cp "$DATA/b1/model.safetensors" "$MNT/a/model.safetensors"
fs_wait_committed "$STORE" 600
cp "$DATA/b2/model.safetensors" "$MNT/b/model.safetensors"
fs_wait_committed "$STORE" 600
sz=$(stat -c %s "$DATA/b1/model.safetensors")
ra=()
for r in $(seq 1 "$reps"); do
	drop_caches
	t0=$(now)
	dd if="$DATA/b1/model.safetensors" of=/dev/null bs=1M status=none || die "read failed"
	ra+=("$(mbs "$sz" "$(calc "$(now) - $t0")")")
done
R[b_cold_back]=$(echo "${ra[*]}" | median)
say "backing filesystem: cold ${ra[*]} MB/s"
for d in a b; do
	ra=()
	for r in $(seq 1 "$reps"); do
		fs_remount "$STORE" "$MNT" >/dev/null
		drop_caches
		t0=$(now)
		dd if="$MNT/$d/model.safetensors" of=/dev/null bs=1M status=none || die "read failed"
		t=$(calc "$(now) - $t0")
		ra+=("$(mbs "$sz" "$t")")
	done
	R[b_cold_$d]=$(echo "${ra[*]}" | median)
	t0=$(now)
	dd if="$MNT/$d/model.safetensors" of=/dev/null bs=1M status=none
	R[b_warm_$d]=$(mbs "$sz" "$(calc "$(now) - $t0")")
	say "$d: cold ${ra[*]} MB/s, warm ${R[b_warm_$d]} MB/s"
done
cmp -s "$MNT/b/model.safetensors" "$DATA/b2/model.safetensors" || bad "(b) the file read through the mount differs"
"$ULPFS" bench --no-baselines --reps "$reps" --threads 2 "$DATA/b1/model.safetensors" "$DATA/b2/model.safetensors" >"$WORK/bench-b.txt" 2>&1 ||
	{ cat "$WORK/bench-b.txt" >&2; die "ulpfs bench failed"; }
# per-kind speed line: kind enc1T dec1T enc2 dec2 (median over both files)
read -r _ R[b_enc1] R[b_dec1] R[b_enc2] R[b_dec2] < <(awk '/^== speed/ { s = 1; next } s && $1 == "model.safetensors" { print; exit }' "$WORK/bench-b.txt")
# rows 2 and 3: the two files (names are truncated in the table)
R[b_ulp_a]=$(awk 'NR == 2 { print $3 }' "$WORK/bench-b.txt")
R[b_ulp_b]=$(awk 'NR == 3 { print $3 }' "$WORK/bench-b.txt")
rm -rf "$MNT/a" "$MNT/b"

# ------------------------------------------------------------------ (c)
step "(c) close -> commit latency: $commit_n versions of a $commit_mib MiB bf16 file, overwritten in place"
mkdir -p "$DATA/c"
"$PY" "$FS_UTIL" drift "$DATA/c" --n "$commit_n" --elems $((commit_mib << 19)) || die "generator failed"
fs_wait_committed "$STORE" 600
"$PY" - "$MNT/c.safetensors" "$STORE/staging" "$DATA/c" "$commit_n" >"$WORK/commit.txt" <<'PY' || die "latency probe failed"
import os, sys, time
dst, staging, src, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
for i in range(1, n + 1):
    b = open(os.path.join(src, "v%d" % i, "model.safetensors"), "rb").read()
    with open(dst, "wb") as f:
        f.write(b)
    t0 = time.monotonic()  # close() has returned
    while os.listdir(staging):
        time.sleep(0.001)
    print("%.4f" % (time.monotonic() - t0))
PY
lat=$(tr '\n' ' ' <"$WORK/commit.txt")
say "latencies (s): $lat"
R[c_med]=$(echo "$lat" | median)
R[c_max]=$(echo "$lat" | tr ' ' '\n' | sort -g | tail -n1)
"$ULPFS" bench --no-baselines --reps 1 --threads 2 $(for i in $(seq 1 "$commit_n"); do echo "$DATA/c/v$i/model.safetensors"; done) >"$WORK/bench-c.txt" 2>&1 ||
	{ cat "$WORK/bench-c.txt" >&2; die "ulpfs bench failed"; }
read -r _ c_enc1 _ c_enc2 _ < <(awk '/^== speed/ { s = 1; next } s && $1 == "model.safetensors" { print; exit }' "$WORK/bench-c.txt")
csz=$(stat -c %s "$DATA/c/v1/model.safetensors")
R[c_enc1_s]=$(calc "$csz / 1000000 / $c_enc1" 4)
R[c_enc2_s]=$(calc "$csz / 1000000 / $c_enc2" 4)
R[c_over_med]=$(calc "${R[c_med]} - ${R[c_enc2_s]}" 4)
R[c_over_max]=$(calc "${R[c_max]} - ${R[c_enc2_s]}" 4)
rm -f "$MNT/c.safetensors"
rm -rf "$DATA/c"

# ------------------------------------------------------------------ (d)
step "(d) a real trajectory copied into the mount and onto the backing filesystem"
src=$traj
if [ -z "$src" ]; then
	src=$DATA/traj
	targs=(--out "$src")
	[ "$trajq" = 1 ] && targs+=(--quick)
	say "make_trajectory.py ${targs[*]}"
	"$PY" "$FS_SRCDIR/bench/make_trajectory.py" "${targs[@]}" >"$WORK/traj.log" 2>&1 ||
		{ tail "$WORK/traj.log" >&2; die "make_trajectory.py failed"; }
fi
R[d_raw]=$(fs_file_bytes "$src")
R[d_files]=$(find "$src" -type f | wc -l)
read_tree "$src" # both copies read their source from the page cache
fs_remount "$STORE" "$MNT" >/dev/null
fs_umount "$MNT"
rm -rf "$STORE"
fs_mount "$STORE" "$MNT"
sync
t0=$(now)
copy_traj "$src" "$BACK/traj" || die "cp -r to the backing filesystem failed"
R[d_back_cp_s]=$(calc "$(now) - $t0")
sync
R[d_back_sync_s]=$(calc "$(now) - $t0")
t0=$(now)
copy_traj "$src" "$MNT/traj" || die "cp -r into the mount failed"
R[d_mnt_cp_s]=$(calc "$(now) - $t0")
fs_wait_committed "$STORE" 1800
R[d_mnt_commit_s]=$(calc "$(now) - $t0")
for k in back_cp back_sync mnt_cp mnt_commit; do R[d_${k}_mbs]=$(mbs "${R[d_raw]}" "${R[d_${k}_s]}"); done
say "backing: cp -r ${R[d_back_cp_s]} s, + sync ${R[d_back_sync_s]} s; mount: cp -r ${R[d_mnt_cp_s]} s, committed after ${R[d_mnt_commit_s]} s"
fs_umount "$MNT"
R[d_umount_s]=$FS_UMOUNT_SECS
R[d_store]=$(store_bytes "$STORE")
R[d_objects]=$(fs_file_bytes "$STORE/objects")
fs_mount "$STORE" "$MNT"
drop_caches
t0=$(now)
read_tree "$MNT/traj" || die "reading the trajectory through the mount failed"
R[d_read_mnt]=$(mbs "${R[d_raw]}" "$(calc "$(now) - $t0")")
drop_caches
t0=$(now)
read_tree "$BACK/traj" || die "reading the trajectory on the backing filesystem failed"
R[d_read_back]=$(mbs "${R[d_raw]}" "$(calc "$(now) - $t0")")
say "cold read of every file: mount ${R[d_read_mnt]} MB/s, backing ${R[d_read_back]} MB/s"
R[d_exact]=0
fs_compare_trees "$src" "$MNT/traj" "(d) the trajectory read back through the mount" && R[d_exact]=1
if [ -n "$codec_bytes" ]; then
	R[d_bench]=$codec_bytes
else
	mapfile -t tfiles < <(bench_traj_files "$MNT/traj")
	"$ULPFS" bench --no-baselines --reps 1 --threads 2 "${tfiles[@]}" >"$WORK/bench-d.txt" 2>&1 ||
		{ tail "$WORK/bench-d.txt" >&2; die "ulpfs bench over the trajectory (read through the mount) failed"; }
	R[d_bench]=$(awk '$1 == "TOTAL" { print $3 }' "$WORK/bench-d.txt")
fi
fs_umount "$MNT"
# The copy above outruns the encoder, so a file may be coded against an
# older version than the previous one.  Training writes a checkpoint every
# few seconds: write it again at that pace (ulpfs sync after each entry).
rm -rf "$STORE" "$BACK/traj"
fs_mount "$STORE" "$MNT"
mkdir -p "$MNT/traj"
while IFS= read -r -d '' e; do
	cp -r "$e" "$MNT/traj/" || die "cp -r into the mount failed"
	"$ULPFS" sync "$MNT" >/dev/null || die "ulpfs sync $MNT failed"
done < <(traj_entries "$src")
fs_umount "$MNT"
R[d_store_paced]=$(store_bytes "$STORE")
rm -rf "$DATA/traj"

# ------------------------------------------------------------------ (e)
step "(e) daemon peak RSS while ingesting a $rss_mib MiB bf16 file, then its next version"
rm -rf "$STORE"
fs_mount "$STORE" "$MNT"
dpid=$FS_LAST_PID
rss_poll() { # PID FILE: peak VmRSS and RssAnon (kB) until FILE exists
	local pid=$1 stop=$2 pr=0 pa=0 r a
	while [ ! -e "$stop" ] && [ -r "/proc/$pid/status" ]; do
		read -r r a < <(awk '/^VmRSS:/ { r = $2 } /^RssAnon:/ { a = $2 } END { print r + 0, a + 0 }' "/proc/$pid/status" 2>/dev/null)
		[ "${r:-0}" -gt "$pr" ] && pr=$r
		[ "${a:-0}" -gt "$pa" ] && pa=$a
		sleep 0.05
	done
	echo "$pr $pa"
}
for v in 1 2; do
	rm -f "$WORK/stop"
	rss_poll "$dpid" "$WORK/stop" >"$WORK/rss$v" &
	poller=$!
	FS_BG+=("$poller")
	hwm0=$(awk '/^VmHWM:/ { print $2 }' "/proc/$dpid/status")
	t0=$(now)
	if [ $v = 1 ]; then
		"$PY" "$FS_UTIL" bigsafetensors "$MNT/big.safetensors" --bytes $((rss_mib << 20)) --seed 5 >"$WORK/sha$v" || die "ingest failed"
	else
		"$PY" "$FS_UTIL" bigsafetensors "$MNT/big.safetensors" --bytes $((rss_mib << 20)) --seed 5 --drift 0.004 >"$WORK/sha$v" || die "ingest failed"
	fi
	tw=$(calc "$(now) - $t0")
	fs_wait_committed "$STORE" 1800
	tc=$(calc "$(now) - $t0")
	touch "$WORK/stop"
	wait "$poller"
	fs_bg_forget "$poller"
	read -r pr pa <"$WORK/rss$v"
	hwm=$(awk '/^VmHWM:/ { print $2 }' "/proc/$dpid/status")
	R[e_hwm$v]=$((hwm / 1024))
	R[e_rss$v]=$((pr / 1024))
	R[e_anon$v]=$((pa / 1024))
	R[e_t$v]="$tw/$tc"
	R[e_tw$v]=$tw
	R[e_tc$v]=$tc
	say "version $v: written in ${tw}s, committed after ${tc}s; VmHWM $((hwm0 / 1024)) -> $((hwm / 1024)) MiB, peak VmRSS $((pr / 1024)) MiB, peak RssAnon $((pa / 1024)) MiB"
done
got=$(sha256sum <"$MNT/big.safetensors" | cut -d' ' -f1)
[ "$got" = "$(cat "$WORK/sha2")" ] && ok "(e) the ingested file reads back exact" || bad "(e) the ingested file differs"
R[e_obj]=$(fs_file_bytes "$STORE/objects")
fs_umount "$MNT"

# ---------------------------------------------------------------- table
echo
echo "=================================================================================="
printf '%-62s %s\n' "ulpfs filesystem benchmark ($(nproc) cores, settle=$SETTLE ms${FS_MOUNT_OPTS:+, $FS_MOUNT_OPTS})" "value"
echo "----------------------------------------------------------------------------------"
printf '%-62s %s\n' "(a) seq write 1 MiB + fsync, $write_mib MiB: ulpfs mount" "${R[a_mnt]} MB/s"
printf '%-62s %s\n' "(a)   same, backing filesystem" "${R[a_back]} MB/s"
printf '%-62s %s\n' "(a)   mount / backing" "$(calc "${R[a_mnt]} / ${R[a_back]}" 2)"
printf '%-62s %s\n' "(a) cp (no fsync), $write_mib MiB: mount / backing" "${R[a_cp_mnt]} / ${R[a_cp_back]} MB/s ($(calc "${R[a_cp_mnt]} / ${R[a_cp_back]}" 2))"
printf '%-62s %s\n' "(b) cold read bf16 $read_mib MiB via mount, standalone version" "${R[b_cold_a]} MB/s"
printf '%-62s %s\n' "(b)   cold read, delta version (decodes its reference too)" "${R[b_cold_b]} MB/s"
printf '%-62s %s\n' "(b)   cold read on the backing filesystem" "${R[b_cold_back]} MB/s"
printf '%-62s %s\n' "(b)   warm re-read (page cache), standalone / delta" "${R[b_warm_a]} / ${R[b_warm_b]} MB/s"
printf '%-62s %s\n' "(b)   ulpfs bench decode 1 thread / 2 threads (median of both)" "${R[b_dec1]} / ${R[b_dec2]} MB/s"
printf '%-62s %s\n' "(b)   object sizes standalone / delta" "${R[b_ulp_a]} / ${R[b_ulp_b]} bytes"
printf '%-62s %s\n' "(c) close->commit, $commit_n x $commit_mib MiB bf16 versions: median / max" "${R[c_med]} / ${R[c_max]} s"
printf '%-62s %s\n' "(c)   encode time per file (ulpfs bench 1 thread / 2 threads)" "${R[c_enc1_s]} / ${R[c_enc2_s]} s"
printf '%-62s %s\n' "(c)   latency minus 2-thread encode time: median / max" "${R[c_over_med]} / ${R[c_over_max]} s"
R[d_desc]=$([ -n "$traj" ] && echo "$traj" || { [ "$trajq" = 1 ] && echo quick || echo default; })
printf '%-62s %s\n' "(d) trajectory (${R[d_desc]}): raw bytes, files" "${R[d_raw]}, ${R[d_files]}"
printf '%-62s %s\n' "(d)   cp -r into the mount: returned / committed" "${R[d_mnt_cp_mbs]} / ${R[d_mnt_commit_mbs]} MB/s"
printf '%-62s %s\n' "(d)   cp -r to the backing filesystem: returned / synced" "${R[d_back_cp_mbs]} / ${R[d_back_sync_mbs]} MB/s"
printf '%-62s %s\n' "(d)   ulpfs umount afterwards (nothing left to drain) took" "${R[d_umount_s]} s"
printf '%-62s %s\n' "(d)   cold read of every file: mount / backing" "${R[d_read_mnt]} / ${R[d_read_back]} MB/s"
printf '%-62s %s\n' "(d)   du -sb objects catalog.db" "${R[d_store]} ($(calc "${R[d_store]} / ${R[d_raw]}" 3) of raw)"
printf '%-62s %s\n' "(d)   ulpfs bench objects, same files${codec_bytes:+ (--codec-bytes)}" "${R[d_bench]} ($(calc "${R[d_bench]} / ${R[d_raw]}" 3) of raw)"
printf '%-62s %s\n' "(d)   store / bench" "$(calc "${R[d_store]} / ${R[d_bench]}" 3)"
printf '%-62s %s\n' "(d)   written at training's pace (sync per checkpoint): store" "${R[d_store_paced]} ($(calc "${R[d_store_paced]} / ${R[d_bench]}" 3) of bench)"
printf '%-62s %s\n' "(e) daemon VmHWM after ingesting $rss_mib MiB, v1 / v2 (delta)" "${R[e_hwm1]} / ${R[e_hwm2]} MiB"
printf '%-62s %s\n' "(e)   peak VmRSS polled, v1 / v2" "${R[e_rss1]} / ${R[e_rss2]} MiB"
printf '%-62s %s\n' "(e)   peak RssAnon polled, v1 / v2" "${R[e_anon1]} / ${R[e_anon2]} MiB"
printf '%-62s %s\n' "(e)   write / commit seconds, v1 ; v2" "${R[e_t1]} ; ${R[e_t2]}"
printf '%-62s %s\n' "(e)   objects/ after both versions" "${R[e_obj]} bytes"
echo "=================================================================================="
if [ -n "$kv" ]; then
	R[p_write_mib]=$write_mib R[p_read_mib]=$read_mib R[p_rss_mib]=$rss_mib R[p_reps]=$reps R[p_wreps]=$wreps
	R[p_commit_n]=$commit_n R[p_commit_mib]=$commit_mib R[p_settle]=$SETTLE R[p_opts]=$(fs_opts)
	R[fails]=$FS_FAILS
	for k in "${!R[@]}"; do printf '%s=%s\n' "$k" "${R[$k]}"; done | LC_ALL=C sort >"$kv"
fi
fs_finish
