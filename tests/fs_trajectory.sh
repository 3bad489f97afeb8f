#!/usr/bin/env bash
# tests/fs_trajectory.sh - a real training trajectory written through the
# mount: generated in place by bench/make_trajectory.py --quick (its
# step-N.tmp/ + rename saves) and cp -r'd from a plain directory; read back
# bit-exact before and after a remount; torch.load of every .bin/.pt and a
# numpy.memmap parse of every safetensors through the mount; the store's
# objects/ must be smaller than the raw bytes and close to what the codec
# achieves offline (ulpfs bench on the same files).
# make check may run this with a POSIX sh: it needs bash.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/fs_lib.sh"
fs_init

STORE=$WORK/store
MNT=$WORK/mnt
PLAIN=$WORK/plain

step "generating the reference trajectory in a plain directory (make_trajectory.py --quick)"
"$PY" "$FS_SRCDIR/bench/make_trajectory.py" --quick --out "$PLAIN" >"$WORK/traj-plain.log" 2>&1 ||
	{ tail -20 "$WORK/traj-plain.log" >&2; die "make_trajectory.py failed on a plain directory"; }
raw=$(fs_bytes "$PLAIN")
say "plain trajectory: $(find "$PLAIN" -type f | wc -l) files, $raw bytes"

step "mounting an empty store"
fs_mount "$STORE" "$MNT"
for d in objects staging; do
	[ -d "$STORE/$d" ] || bad "the store has no $d/ after mount"
done
[ -f "$STORE/catalog.db" ] || bad "the store has no catalog.db after mount"

step "make_trajectory.py --quick --out MNT/gen (written in place: step-N.tmp/ then rename)"
if "$PY" "$FS_SRCDIR/bench/make_trajectory.py" --quick --out "$MNT/gen" >"$WORK/traj-mnt.log" 2>&1; then
	ok "make_trajectory.py ran to completion inside the mount"
else
	tail -20 "$WORK/traj-mnt.log" | sed 's/^/    | /' >&2
	bad "make_trajectory.py failed inside the mount"
fi
# the generator is deterministic: same seed, threads and corpus
fs_compare_trees "$PLAIN" "$MNT/gen" "generated in the mount vs plain run (read back before commit)"
leftover=$(find "$MNT/gen" -maxdepth 1 -name '*.tmp' | wc -l)
[ "$leftover" -eq 0 ] || bad "step-N.tmp directories left after the renames: $(ls "$MNT/gen")"

step "cp -r of the plain trajectory into MNT/copy"
cp -r "$PLAIN" "$MNT/copy" || bad "cp -r into the mount failed"
fs_compare_trees "$PLAIN" "$MNT/copy" "cp -r copy (read back before commit)"

step "waiting for every closed file to be committed (STORE/staging empties)"
fs_wait_committed "$STORE" 120 && ok "staging drained"
fs_compare_trees "$PLAIN" "$MNT/gen" "gen after commit (same mount)"
fs_compare_trees "$PLAIN" "$MNT/copy" "copy after commit (same mount)"

step "ulpfs umount + remount, read back again"
fs_umount "$MNT"
n=$(fs_staged_count "$STORE")
[ "$n" -eq 0 ] && ok "staging is empty after umount" || bad "$n files left in staging/ after umount (umount must drain the encode queue)"
fs_mount "$STORE" "$MNT"
fs_compare_trees "$PLAIN" "$MNT/gen" "gen after remount"
fs_compare_trees "$PLAIN" "$MNT/copy" "copy after remount"
a=$(fs_list_tree "$PLAIN")
for t in gen copy; do
	b=$(fs_list_tree "$MNT/$t")
	[ "$a" = "$b" ] && ok "$t: same directory structure, no stray entries" ||
		{ bad "$t: directory structure differs"; diff <(echo "$a") <(echo "$b") | head | sed 's/^/    | /' >&2; }
done

step "remount with a small decoded-chunk cache (cache=4M): reads decode their chains again"
fs_remount "$STORE" "$MNT" "cache=4M"
fs_compare_trees "$PLAIN" "$MNT/gen" "gen with cache=4M"
fs_compare_trees "$PLAIN" "$MNT/copy" "copy with cache=4M"

step "remount with cache=1M: the file with the longest chain must still read in reasonable time"
fs_remount "$STORE" "$MNT" "cache=1M"
f=copy/$(basename "$(ls -d "$PLAIN"/step-* | tail -n1)")/optimizer.pt
t0=$(date +%s.%N)
got=$(timeout 30 sha256sum <"$MNT/$f" | cut -d' ' -f1)
t=$(calc "$(date +%s.%N) - $t0" 1)
if [ "$got" = "$(sha256sum <"$PLAIN/${f#copy/}" | cut -d' ' -f1)" ]; then
	ok "$f read exactly with cache=1M in ${t}s"
	fs_umount "$MNT"
else
	bad "$f with cache=1M: no exact read within 30 s (${t}s): a cache smaller than a chunk makes every small reference read decode whole chunks again, recursively"
	# the daemon goes on decoding the abandoned read; do not wait for it
	pid=$(fs_mount_pid "$MNT")
	say "kill -9 of the busy daemon $pid, lazy unmount"
	kill -9 "$pid"
	fs_force_umount "$MNT" 10
fi
fs_mount "$STORE" "$MNT"

step "torch.load of every .bin/.pt through the mount (equal to the plain copy)"
# one interpreter for all of them (importing torch takes seconds)
check_through_mount() { # KIND FIND-ARGS...
	local kind=$1 f rel args=() n=0 out
	shift
	while IFS= read -r -d '' f; do
		rel=${f#"$MNT"/}
		args+=("$f" "$PLAIN/${rel#*/}")
		n=$((n + 1))
	done < <(find "$MNT/gen" "$MNT/copy" "$@" -print0)
	[ "$n" -gt 0 ] || { bad "$kind: no file found"; return; }
	if out=$("$PY" "$FS_UTIL" "$kind" "${args[@]}" 2>&1); then
		ok "$kind: $n files through the mount, every tensor equal"
	else
		bad "$kind through the mount:"
		printf '%s\n' "$out" | grep -v ' ok' | head -20 | sed 's/^/    | /' >&2
	fi
}
check_through_mount torch-check \( -name '*.bin' -o -name '*.pt' \)

step "parse every safetensors through the mount (header + numpy.memmap of every tensor)"
check_through_mount safetensors-check -name '*.safetensors'

step "store size: objects/ vs raw bytes and vs ulpfs bench on the same files"
fs_umount "$MNT"
obj=$(fs_file_bytes "$STORE/objects")
cat_b=$(fs_bytes "$STORE"/catalog.db*)
raw2=$((2 * raw))
# what the codec achieves offline for gen (each file against the same name
# in the previous step), counted twice for the copy
"$ULPFS" bench --no-baselines --reps 1 --threads 2 $(ls -d "$PLAIN"/step-*/* | sort) "$PLAIN/trajectory.json" \
	>"$WORK/bench.txt" 2>&1 || { sed 's/^/    | /' "$WORK/bench.txt" >&2; bad "ulpfs bench failed"; }
bench1=$(awk '$1 == "TOTAL" { print $3 }' "$WORK/bench.txt")
say "raw written: $raw2 bytes; objects/: $obj bytes ($(calc "$obj / $raw2")); catalog: $cat_b bytes"
say "ulpfs bench, one trajectory: ${bench1:-?} bytes; x2 = $((2 * ${bench1:-0}))"
[ "$obj" -gt 0 ] || bad "objects/ is empty after umount"
if [ "$obj" -lt $((raw2 * 85 / 100)) ]; then
	ok "objects/ is $((100 * obj / raw2))% of the raw bytes (< 85%)"
else
	bad "objects/ is $((100 * obj / raw2))% of the raw bytes: the deltas are not effective (expected < 85%; offline codec: $((100 * ${bench1:-0} / raw))%)"
fi
if [ -n "$bench1" ] && [ "$obj" -le $((2 * bench1 * 125 / 100)) ]; then
	ok "objects/ within 125% of 2 x ulpfs bench ($obj <= $((2 * bench1 * 125 / 100)))"
else
	bad "objects/ ($obj bytes) is more than 125% of what ulpfs bench codes the same files to (2 x ${bench1:-?})"
fi

fs_finish
