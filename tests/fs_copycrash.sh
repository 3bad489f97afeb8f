#!/usr/bin/env bash
# tests/fs_copycrash.sh - kill -9 of the daemon around a copy_file_range(2)
# of a committed file into a new one (a reference copy, except with a
# passthrough destination: through staging), the whole file in the first
# half of the iterations, whole chunks at the same offsets (zeros before
# them) in the second, at points drawn from a seed:
#   inflight  at a random moment of the 30 ms after copy_file_range was
#             first called (the copy may not have returned: then the
#             destination may also be absent or empty, and through
#             staging a prefix of the copy),
#   open      the copy returned, the destination still open (not committed),
#   closed    closed, at a random moment of the commit window,
#   synced    after ulpfs sync (committed);
# after each kill: unmount, remount (recovery), and check that every
# destination whose copy had returned reads exactly what was copied, the source
# is unchanged, ulpfs verify passes, and, after ulpfs gc, there is one
# object file per live version (no orphan objects).
# ULPFS_COPYCRASH_ITERS (default 8: each point twice, in a seeded order);
# ULPFS_CRASH_SEED picks the order and the moments (printed; rerun with it).
# make check may run this with a POSIX sh: it needs bash.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/fs_lib.sh"
fs_init

STORE=$WORK/store
MNT=$WORK/mnt
SRC=$WORK/src.bin
ITERS=${ULPFS_COPYCRASH_ITERS:-8}
MIB=1048576
SEED=${ULPFS_CRASH_SEED:-$(($(date +%s) % 100000))}
RANDOM=$SEED
say "seed: $SEED (rerun with ULPFS_CRASH_SEED=$SEED), $ITERS kills"
POINTS=(inflight open closed synced)

cat >"$WORK/copy.py" <<'PY'
import json, os, subprocess, sys, time

# copy.py ULPFS MNT NAME DST MARK HOLD OFF N: copy N bytes at OFF of
# MNT/NAME (N -1: to its end) into a new MNT/DST at OFF; once copy_file_range has returned, MARK (on plain disk) says how
# many chunks the copy decoded; HOLD 1 keeps the destination open (until
# killed), else it is closed and MARK.closed written.
ulpfs, mnt, name, dst, mark, hold = sys.argv[1:7]
off, n = int(sys.argv[7]), int(sys.argv[8])


def decodes():
    out = subprocess.run([ulpfs, "stats", "--json", mnt], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)["cache"]["decodes"]


def note(path, text):
    fd = os.open(path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, text.encode())
    os.fsync(fd)
    os.close(fd)
    os.rename(path + ".tmp", path)


d0 = decodes()
fi = os.open(os.path.join(mnt, name), os.O_RDONLY)
fo = os.open(os.path.join(mnt, dst), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
size = os.fstat(fi).st_size - off if n < 0 else n
note(mark + ".started", "started\n")
done = 0
while done < size:
    k = os.copy_file_range(fi, fo, size - done, off + done, off + done)
    if k == 0:
        break
    done += k
note(mark, "%d %d\n" % (done, decodes() - d0))
if hold == "1":
    while True:
        time.sleep(1)
os.close(fo)
os.close(fi)
note(mark + ".closed", "closed\n")
PY

# wait_file PATH SECONDS: 0 once PATH exists.
wait_file() {
	local n=$(($2 * 50))
	while [ ! -e "$1" ]; do
		n=$((n - 1))
		[ "$n" -le 0 ] && return 1
		sleep 0.02
	done
}

step "first mount, a committed 12 MiB source"
head -c $((12 * 1048576 + 4321)) /dev/urandom >"$SRC"
fs_mount "$STORE" "$MNT"
MODE=$(fs_write_mode "$MNT")
cp "$SRC" "$MNT/src.bin" || die "cannot write the source"
"$ULPFS" sync "$MNT" >/dev/null || die "ulpfs sync failed"
"$ULPFS" gc "$MNT" >/dev/null || die "ulpfs gc failed"

returned=()     # destinations whose copy had returned before their kill
declare -A wants # destination -> what it must read
for it in $(seq 1 "$ITERS"); do
	point=${POINTS[$(((it - 1 + SEED) % ${#POINTS[@]}))]}
	dst=copy-$it.bin
	mark=$WORK/mark-$it
	# what the copy makes: the source, or zeros then the chunks copied
	off=0 n=-1
	[ "$it" -gt $((ITERS / 2)) ] && off=$((2 * MIB)) n=$((8 * MIB))
	want=$WORK/want-$it
	if [ "$n" -lt 0 ]; then
		cp "$SRC" "$want"
	else
		{ head -c "$off" /dev/zero; tail -c +$((off + 1)) "$SRC" | head -c "$n"; } >"$want"
	fi
	wants[$dst]=$want
	what="the whole file"
	[ "$n" -lt 0 ] || what="$n bytes at $off"
	step "iteration $it/$ITERS: kill -9 at point '$point', a copy of $what ($MODE, seed $SEED)"
	pid=$FS_LAST_PID
	[ "$(cat "$STORE/daemon.pid" 2>/dev/null)" = "$pid" ] || pid_argv_mentions "$pid" "$STORE" ||
		die "refusing to kill PID $pid: not our daemon"
	hold=0
	[ "$point" = open ] && hold=1
	# In a group of its own (setsid keeps the PID: the child of "&" leads
	# no group): its "ulpfs stats" would outlive a kill of the copy alone,
	# and with the daemon gone open the store itself, holding it against
	# the remount.
	fs_bg setsid "$PY" "$WORK/copy.py" "$ULPFS" "$MNT" src.bin "$dst" "$mark" "$hold" "$off" "$n"
	cpid=$FS_BG_LAST
	case $point in
	inflight)
		wait_file "$mark.started" 60 || bad "iteration $it: the copy did not start within 60 s"
		delay=$(calc "$((RANDOM % 1000)) / 1000 * 0.03")
		sleep "$delay"
		how="${delay}s after the copy started"
		;;
	open)
		wait_file "$mark" 60 || bad "iteration $it: the copy did not return within 60 s"
		how="the copy returned, the destination open"
		;;
	closed)
		wait_file "$mark.closed" 60 || bad "iteration $it: the copy did not close within 60 s"
		delay=$(calc "$((RANDOM % 1000)) / 1000 * 0.2")
		sleep "$delay"
		how="${delay}s after the destination was closed"
		;;
	synced)
		wait_file "$mark.closed" 60 || bad "iteration $it: the copy did not close within 60 s"
		"$ULPFS" sync "$MNT" >/dev/null || bad "iteration $it: ulpfs sync failed"
		how="after ulpfs sync"
		;;
	esac
	# The copy's own view: its mark is written only after the call
	# returned, so without it the copy may or may not have happened.
	if [ -e "$mark" ]; then
		read -r ncopied ndecoded <"$mark"
		[ "$ncopied" = $(($(stat -c %s "$want") - off)) ] || bad "iteration $it: the copy returned $ncopied bytes"
		if [ "$MODE" != passthrough ] && [ "$ndecoded" != 0 ]; then
			bad "iteration $it: a copy by reference decoded $ndecoded chunks"
		fi
		returned+=("$dst")
	fi
	say "kill -9 $pid $how (copy returned: $([ -e "$mark" ] && echo yes || echo no))"
	kill -9 "$pid" || bad "kill -9 $pid failed"
	wait_pid_gone "$pid" 10 || bad "daemon $pid still alive 10 s after kill -9"
	kill -9 -- "-$cpid" 2>/dev/null
	wait "$cpid" 2>/dev/null
	wait_pgrp_gone "$cpid" 10 || bad "iteration $it: the copy's processes still alive 10 s after kill -9"
	fs_bg_forget "$cpid"
	fs_force_umount "$MNT" 30
	is_mounted "$MNT" && die "cannot unmount $MNT after the kill"

	step "iteration $it: remount (recovery) and check"
	fs_mount "$STORE" "$MNT"
	cmp -s "$MNT/src.bin" "$SRC" && ok "the source is unchanged" ||
		bad "iteration $it: the source differs after the kill (seed $SEED)"
	for d in "${returned[@]}"; do
		cmp -s "$MNT/$d" "${wants[$d]}" || bad "iteration $it: $d (its copy had returned) differs from what was copied (seed $SEED)"
	done
	# A copy in flight: by reference it is one step, so the destination
	# is absent, empty or whole; through staging (a passthrough
	# destination) it is written a piece at a time, in order, so what
	# the kill left is a prefix of what was being copied, as after a
	# write(2) in flight.
	if [ ! -e "$mark" ] && [ -e "$MNT/$dst" ] && [ -s "$MNT/$dst" ]; then
		got=$(stat -c %s "$MNT/$dst")
		if cmp -s "$MNT/$dst" "$want"; then
			ok "$dst (copy in flight at the kill): whole, $got bytes"
		elif [ "$MODE" = passthrough ] && [ "$got" -le "$(stat -c %s "$want")" ] &&
			cmp -s -n "$got" "$MNT/$dst" "$want"; then
			ok "$dst (copy in flight at the kill, through staging): a prefix of $got bytes"
		else
			say "  $dst: $got bytes, want $(stat -c %s "$want"); $(cmp "$MNT/$dst" "$want" 2>&1 | head -1)"
			bad "iteration $it: $dst (copy in flight) is neither absent, empty, whole nor (through staging) a prefix of the copy (seed $SEED)"
		fi
	elif [ ! -e "$mark" ]; then
		ok "$dst (copy in flight at the kill): $([ -e "$MNT/$dst" ] && echo empty || echo absent)"
	fi
	ok "${#returned[@]} copies that had returned read what was copied"
	# The recovered copy is queued again: until it commits, its object
	# may sit in objects/ ahead of its catalog row.  sync waits for the
	# queue, gc for the flips its commit starts.
	"$ULPFS" sync "$MNT" >/dev/null || bad "iteration $it: ulpfs sync failed"
	"$ULPFS" gc "$MNT" >/dev/null || bad "iteration $it: ulpfs gc failed"
	"$ULPFS" verify "$MNT" >"$WORK/verify.txt" 2>&1 && ok "ulpfs verify passes" || {
		sed 's/^/    | /' "$WORK/verify.txt" >&2
		bad "iteration $it: ulpfs verify failed (seed $SEED)"
	}
	read -r nv no < <(fs_versions_and_objects "$STORE" "$MNT")
	[ "$nv" = "$no" ] && ok "$no object files for $nv live versions" ||
		bad "iteration $it: $no object files for $nv live versions (seed $SEED)"
done

step "sync, gc, remount: every copy exact and no orphan objects"
"$ULPFS" sync "$MNT" >/dev/null || bad "ulpfs sync failed"
"$ULPFS" gc "$MNT" >/dev/null || bad "ulpfs gc failed"
fs_remount "$STORE" "$MNT"
for d in "${returned[@]}"; do
	cmp -s "$MNT/$d" "${wants[$d]}" || bad "$d differs from what was copied after a clean remount (seed $SEED)"
done
read -r nv no < <(fs_versions_and_objects "$STORE" "$MNT")
[ "$nv" = "$no" ] && ok "$no object files for $nv live versions" ||
	bad "$no object files for $nv live versions: orphan or missing objects (seed $SEED)"
"$ULPFS" verify "$MNT" >"$WORK/verify.txt" 2>&1 && ok "ulpfs verify passes" || {
	sed 's/^/    | /' "$WORK/verify.txt" >&2
	bad "ulpfs verify failed (seed $SEED)"
}
fs_umount "$MNT"
fs_finish
