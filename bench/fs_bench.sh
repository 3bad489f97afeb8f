#!/usr/bin/env bash
# bench/fs_bench.sh - the ulpfs filesystem benchmark: the mount against the
# backing filesystem and against the offline codec (ulpfs bench), measured
# in the same run, printed as one table.
#
#   bench/fs_bench.sh [--quick] [--traj-quick] [--traj DIR] [--reps R]
#                     [--write-mib N] [--read-mib N] [--rss-mib N]
#
#   (a) sequential 1 MiB writes (dd bs=1M conv=fsync) through the mount vs
#       straight to the backing filesystem, median of R
#   (b) cold read (remount + drop_caches) of a committed bf16 safetensors
#       file through the mount, standalone and delta-coded versions, vs
#       ulpfs bench's decode speed for the same files; and a warm re-read
#   (c) close -> commit latency (STORE/staging empties) for a series of
#       versions of one file, median and max, minus the encode time that
#       ulpfs bench measures for the same files
#   (d) a real training trajectory (bench/make_trajectory.py, default preset;
#       --traj-quick for --quick) written through the mount and unmounted:
#       du -sb objects catalog.db vs the sum of ulpfs bench object sizes
#   (e) the daemon's peak RSS (VmHWM, and peak RssAnon polled) while
#       ingesting a large bf16 file (4 GiB; then its next version, a delta)
#
# Needs root (drop_caches), FUSE, /usr/bin/python3 with numpy (torch for
# (d)), and about 3 x --rss-mib + 4 GiB free under TMPDIR (default /tmp).
# ULPFS=path/to/ulpfs (default: _build/ulpfs, then ./ulpfs).  Extra mount
# options: FS_MOUNT_OPTS (e.g. encoders=2).  settle is 50 ms unless
# FS_SETTLE says otherwise.
# make check may run this with a POSIX sh: it needs bash.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
FS_TEST=fs_bench
. "$(dirname "${BASH_SOURCE[0]}")/../tests/fs_lib.sh"

quick=0 trajq=0 traj="" reps=3 write_mib=1024 read_mib=256 rss_mib=4096 commit_n=8 commit_mib=32
while [ $# -gt 0 ]; do
	case $1 in
	--quick) quick=1 trajq=1 write_mib=256 read_mib=64 rss_mib=1024 commit_n=6 commit_mib=16 ;;
	--traj-quick) trajq=1 ;;
	--traj) traj=$2; shift ;;
	--reps) reps=$2; shift ;;
	--write-mib) write_mib=$2; shift ;;
	--read-mib) read_mib=$2; shift ;;
	--rss-mib) rss_mib=$2; shift ;;
	-h | --help) sed -n '2,/^$/p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "usage: $0 [--quick] [--traj-quick] [--traj DIR] [--reps R] [--write-mib N] [--read-mib N] [--rss-mib N]" >&2; exit 2 ;;
	esac
	shift
done
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
need=$(((rss_mib * 3 + 4096) * 1048576))
free=$(fs_free_bytes "$WORK")
[ "$free" -ge "$need" ] || die "need $(fs_mib "$need") MiB free under $WORK, have $(fs_mib "$free")"

declare -A R # results
now() { date +%s.%N; }
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
drop_caches() { sync; [ "$(id -u)" -eq 0 ] && echo 3 >/proc/sys/vm/drop_caches; }
mbs() { calc "$1 / 1000000 / $2" 1; } # BYTES SECONDS -> MB/s

echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(free -g | awk '/Mem:/ { print $2 }') GiB RAM, $(date -u +%Y-%m-%d)"
echo "== backing filesystem: $(findmnt -n -o FSTYPE,SOURCE -T "$WORK" | tr -s ' '); mount options: $(fs_opts)"

fs_mount "$STORE" "$MNT"

# ------------------------------------------------------------------ (a)
step "(a) sequential 1 MiB writes: $write_mib MiB, dd bs=1M conv=fsync, median of $reps"
head -c $((write_mib << 20)) /dev/urandom >"$DATA/rand"
cat "$DATA/rand" >/dev/null
wm=() wb=()
for r in $(seq 1 "$reps"); do
	for where in back mnt; do
		dst=$BACK/w
		[ $where = mnt ] && dst=$MNT/w
		rm -f "$dst"
		[ $where = mnt ] && fs_wait_committed "$STORE" 600
		sync
		t0=$(now)
		dd if="$DATA/rand" of="$dst" bs=1M count="$write_mib" conv=fsync status=none || die "dd to $dst failed"
		t=$(calc "$(now) - $t0")
		v=$(mbs $((write_mib << 20)) "$t")
		say "rep $r $where: ${t}s, $v MB/s"
		if [ $where = mnt ]; then wm+=("$v"); else wb+=("$v"); fi
	done
done
R[a_mnt]=$(echo "${wm[*]}" | median)
R[a_back]=$(echo "${wb[*]}" | median)
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
"$PY" "$FS_UTIL" drift "$DATA/c" --n "$commit_n" --elems $((commit_mib << 19)) ||
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
step "(d) a real trajectory written through the mount: store size vs ulpfs bench"
fs_remount "$STORE" "$MNT" >/dev/null
fs_umount "$MNT"
rm -rf "$STORE"
fs_mount "$STORE" "$MNT"
if [ -n "$traj" ]; then
	say "copying $traj into the mount"
	t0=$(now)
	cp -r "$traj" "$MNT/traj" || die "cp -r failed"
else
	targs=(--out "$MNT/traj")
	[ "$trajq" = 1 ] && targs+=(--quick)
	say "make_trajectory.py ${targs[*]}"
	t0=$(now)
	"$PY" "$FS_SRCDIR/bench/make_trajectory.py" "${targs[@]}" >"$WORK/traj.log" 2>&1 ||
		{ tail "$WORK/traj.log" >&2; die "make_trajectory.py failed in the mount"; }
fi
R[d_write_s]=$(calc "$(now) - $t0")
fs_umount "$MNT"
R[d_umount_s]=$FS_UMOUNT_SECS
R[d_store]=$(du -sb "$STORE/objects" "$STORE"/catalog.db* | awk '{ s += $1 } END { printf "%.0f\n", s }')
R[d_objects]=$(fs_file_bytes "$STORE/objects")
fs_mount "$STORE" "$MNT"
R[d_raw]=$(fs_file_bytes "$MNT/traj")
"$ULPFS" bench --no-baselines --reps 1 --threads 2 $(ls -d "$MNT"/traj/step-*/* | sort) "$MNT/traj/trajectory.json" >"$WORK/bench-d.txt" 2>&1 ||
	{ tail "$WORK/bench-d.txt" >&2; die "ulpfs bench over the trajectory (read through the mount) failed"; }
R[d_bench]=$(awk '$1 == "TOTAL" { print $3 }' "$WORK/bench-d.txt")
fs_umount "$MNT"

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
printf '%-62s %s\n' "(b) cold read bf16 $read_mib MiB via mount, standalone version" "${R[b_cold_a]} MB/s"
printf '%-62s %s\n' "(b)   cold read, delta version (decodes its reference too)" "${R[b_cold_b]} MB/s"
printf '%-62s %s\n' "(b)   warm re-read (page cache), standalone / delta" "${R[b_warm_a]} / ${R[b_warm_b]} MB/s"
printf '%-62s %s\n' "(b)   ulpfs bench decode 1 thread / 2 threads (median of both)" "${R[b_dec1]} / ${R[b_dec2]} MB/s"
printf '%-62s %s\n' "(b)   object sizes standalone / delta" "${R[b_ulp_a]} / ${R[b_ulp_b]} bytes"
printf '%-62s %s\n' "(c) close->commit, $commit_n x $commit_mib MiB bf16 versions: median / max" "${R[c_med]} / ${R[c_max]} s"
printf '%-62s %s\n' "(c)   encode time per file (ulpfs bench 1 thread / 2 threads)" "${R[c_enc1_s]} / ${R[c_enc2_s]} s"
printf '%-62s %s\n' "(c)   latency minus 2-thread encode time: median / max" "${R[c_over_med]} / ${R[c_over_max]} s"
printf '%-62s %s\n' "(d) trajectory ($([ -n "$traj" ] && echo "$traj" || { [ "$trajq" = 1 ] && echo quick || echo default; })): raw bytes" "${R[d_raw]}"
printf '%-62s %s\n' "(d)   written in / ulpfs umount (drain) took" "${R[d_write_s]} / ${R[d_umount_s]} s"
printf '%-62s %s\n' "(d)   du -sb objects catalog.db" "${R[d_store]} ($(calc "${R[d_store]} / ${R[d_raw]}" 3) of raw)"
printf '%-62s %s\n' "(d)   ulpfs bench objects, same files" "${R[d_bench]} ($(calc "${R[d_bench]} / ${R[d_raw]}" 3) of raw)"
printf '%-62s %s\n' "(d)   store / bench" "$(calc "${R[d_store]} / ${R[d_bench]}" 3)"
printf '%-62s %s\n' "(e) daemon VmHWM after ingesting $rss_mib MiB, v1 / v2 (delta)" "${R[e_hwm1]} / ${R[e_hwm2]} MiB"
printf '%-62s %s\n' "(e)   peak VmRSS polled, v1 / v2" "${R[e_rss1]} / ${R[e_rss2]} MiB"
printf '%-62s %s\n' "(e)   peak RssAnon polled, v1 / v2" "${R[e_anon1]} / ${R[e_anon2]} MiB"
printf '%-62s %s\n' "(e)   write / commit seconds, v1 ; v2" "${R[e_t1]} ; ${R[e_t2]}"
printf '%-62s %s\n' "(e)   objects/ after both versions" "${R[e_obj]} bytes"
echo "=================================================================================="
fs_finish
