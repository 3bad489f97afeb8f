#!/usr/bin/env bash
# tests/fs_enospc.sh - a store on a 64 MiB tmpfs:
#   - writing far more than fits fails with ENOSPC at write() or close()
#     (never silently, never a hang, never only at release),
#   - the mount stays healthy: earlier files intact, the failed file can be
#     deleted, new files can be written, umount works,
#   - a file that fits in staging but whose object does not fit either fails
#     at close() or stays readable and exact,
#   - a staging_limit smaller than the data makes writers wait, not fail,
#     and staging never holds more than the limit (in every write mode:
#     passthrough writers are admitted only while there is room), except
#     for a single file bigger than the limit, which is written whole.
# Needs root (mount -t tmpfs).
# make check may run this with a POSIX sh: it needs bash.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/fs_lib.sh"
fs_init

[ "$(id -u)" -eq 0 ] || fs_skip_or_fail "mount -t tmpfs needs root"
SMALL=$WORK/small
STORE=$SMALL/store
MNT=$WORK/mnt
SRC=$WORK/src
mkdir -p "$SRC"

step "64 MiB tmpfs for the store"
fs_mount_tmpfs "$SMALL" 64m || die "mount -t tmpfs -o size=64m failed"
ok "tmpfs mounted on $SMALL"
head -c $((8 << 20)) /dev/urandom >"$SRC/A"
head -c $((8 << 20)) /dev/urandom >"$SRC/C"

cat >"$WORK/fill.py" <<'PY'
import errno, os, sys
path, total, chunk = sys.argv[1], int(sys.argv[2]), 1 << 20
data = os.urandom(chunk)
where, done = None, 0
try:
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
except OSError as e:
    print("open: %s" % errno.errorcode.get(e.errno))
    sys.exit(3)
try:
    while done < total:
        done += os.write(fd, data)
except OSError as e:
    where = ("write", e.errno)
try:
    os.close(fd)
except OSError as e:
    where = where or ("close", e.errno)
if where is None:
    print("no error: %d bytes written and closed" % done)
    sys.exit(0)
print("%s failed with %s after %d bytes" % (where[0], errno.errorcode.get(where[1], where[1]), done))
sys.exit(2 if where[1] == errno.ENOSPC else 1)
PY

fs_mount "$STORE" "$MNT"

step "an 8 MiB file that fits"
cp "$SRC/A" "$MNT/A" || bad "writing 8 MiB into an empty 64 MiB store failed"
fs_wait_committed "$STORE" 20 && ok "committed"
cmp -s "$SRC/A" "$MNT/A" && ok "A exact" || bad "A differs"

step "writing 200 MiB into the 64 MiB store: ENOSPC expected at write() or close()"
out=$(timeout -k 5 120 "$PY" "$WORK/fill.py" "$MNT/B" $((200 << 20)) 2>&1)
rc=$?
say "writer: $out"
case $rc in
2) ok "ENOSPC reached the writer ($out)" ;;
0) bad "200 MiB of random data 'fit' into a 64 MiB store without an error" ;;
124 | 137) bad "the writer hung for 120 s instead of getting ENOSPC (staging_limit wait that can never end?)" ;;
*) bad "the writer failed with something other than ENOSPC: $out" ;;
esac

step "the mount stays healthy"
ls "$MNT" >/dev/null && ok "readdir works" || bad "readdir fails after ENOSPC"
df "$MNT" >/dev/null && ok "statfs works" || bad "statfs fails after ENOSPC"
cmp -s "$SRC/A" "$MNT/A" && ok "A still exact" || bad "A damaged after ENOSPC"
if rm -f "$MNT/B"; then
	ok "the failed file can be deleted"
else
	bad "rm of the failed file fails on the full store (deleting must always be possible: it is the only way to free space)"
	# go on with the other checks: emptying the file first may free space
	truncate -s 0 "$MNT/B" && rm -f "$MNT/B" && say "(workaround: truncate -s 0, then rm, worked)"
fi
[ -e "$MNT/B" ] && bad "B still exists after rm"
fs_wait_committed "$STORE" 20
sleep 0.5
say "tmpfs use after the delete: $(df -B1 --output=used "$SMALL" | tail -n1 | tr -d ' ') bytes"
cp "$SRC/C" "$MNT/C" && ok "a new 8 MiB file can be written after the delete" || bad "writing C after freeing space fails"
fs_wait_committed "$STORE" 20
cmp -s "$SRC/C" "$MNT/C" && ok "C exact" || bad "C differs"

step "a 28 MiB file: fits in staging, the object may not fit"
out=$(timeout -k 5 120 "$PY" "$WORK/fill.py" "$MNT/D" $((28 << 20)) 2>&1)
rc=$?
say "writer: $out"
case $rc in
0)
	sleep 2 # let the encoder try
	if [ -e "$MNT/D" ] && [ "$(stat -c %s "$MNT/D")" -eq $((28 << 20)) ] && cat "$MNT/D" >/dev/null; then
		ok "close succeeded and the file stays readable with its full size"
	else
		bad "close of D succeeded, but D is now missing, short or unreadable (data lost after a successful close)"
	fi
	;;
2) ok "ENOSPC at write/close for D ($out)" ;;
124 | 137) bad "the writer of D hung for 120 s" ;;
*) bad "D: unexpected failure: $out" ;;
esac
rm -f "$MNT/D" || bad "rm D failed (on a store with free space?)"
fs_wait_committed "$STORE" 20

step "umount and remount: A and C intact, B and D gone"
fs_remount "$STORE" "$MNT"
cmp -s "$SRC/A" "$MNT/A" && ok "A exact after remount" || bad "A differs after remount"
cmp -s "$SRC/C" "$MNT/C" && ok "C exact after remount" || bad "C differs after remount"
[ ! -e "$MNT/B" ] && [ ! -e "$MNT/D" ] && ok "B and D are gone" || bad "deleted files came back: $(ls "$MNT")"
fs_umount "$MNT"

# In every write mode: passthrough writers, whose writes the daemon never
# sees, are admitted only while the staging limit has room for what the
# last closed file held; the others are served by the daemon and wait.
step "staging_limit=16M, settle=1s: one 20 MiB file (bigger than the limit) is written whole"
fs_mount "$STORE" "$MNT" "staging_limit=16M,settle=1000"
rm -f "$MNT/A" "$MNT/C" || bad "rm A C failed"
fs_wait_committed "$STORE" 20
head -c $((20 << 20)) /dev/urandom >"$SRC/BIG"
timeout -k 5 120 cp "$SRC/BIG" "$MNT/BIG" && cmp -s "$SRC/BIG" "$MNT/BIG" && ok "BIG written and exact" || bad "BIG (20 MiB, alone) failed, hung or differs"
rm -f "$MNT/BIG"
fs_wait_committed "$STORE" 60

step "staging_limit=16M, settle=1s: four 12 MiB files in a row wait for the encoder; staging never holds more than the limit"
for i in 1 2 3 4; do
	head -c $((12 << 20)) /dev/urandom >"$SRC/S$i"
done
# The staging files' allocated bytes (not .held-*: committed), sampled
# every 5 ms until the writes are done: a bound, however fast the machine.
cat >"$WORK/peak.py" <<'PY'
import os, sys, time
stg, stop, out = sys.argv[1:4]
peak = 0
while not os.path.exists(stop):
    tot = 0
    for n in os.listdir(stg):
        if n.startswith(".held-"):
            continue
        try:
            tot += os.stat(os.path.join(stg, n)).st_blocks * 512
        except FileNotFoundError:
            pass
    peak = max(peak, tot)
    time.sleep(0.005)
open(out, "w").write("%d\n" % peak)
PY
fs_bg "$PY" "$WORK/peak.py" "$STORE/staging" "$WORK/peak.stop" "$WORK/peak.out"
peak_pid=$FS_BG_LAST
okn=0
for i in 1 2 3 4; do
	if timeout -k 5 120 cp "$SRC/S$i" "$MNT/S$i"; then okn=$((okn + 1)); else bad "writing S$i (12 MiB) with staging_limit=16M failed or hung"; fi
	rm -f "$MNT/S$((i - 1))" 2>/dev/null # keep the store within the tmpfs
done
touch "$WORK/peak.stop"
wait "$peak_pid" || bad "the staging sampler failed"
[ "$okn" -eq 4 ] && ok "all four written"
cmp -s "$SRC/S4" "$MNT/S4" && ok "S4 exact" || bad "S4 differs"
peak=$(cat "$WORK/peak.out" 2>/dev/null || echo 0)
if [ "$peak" -gt 0 ] && [ "$peak" -le $(((16 + 1) << 20)) ]; then
	ok "staging peaked at $(fs_mib "$peak") MiB (limit 16 MiB)"
else
	bad "staging peaked at $(fs_mib "$peak") MiB, over the 16 MiB limit (or not sampled)"
fi
fs_umount "$MNT"
fs_finish
