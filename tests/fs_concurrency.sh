#!/usr/bin/env bash
# tests/fs_concurrency.sh - concurrent access through the mount:
#   4 writer processes at once (DDP ranks, each its own shard, writes of
#   random sizes, each also creating small files in one shared directory and
#   saving through tmp + rename), then 6 concurrent readers of one committed
#   file (read() with two buffer sizes, random pread, mmap MAP_SHARED
#   read-only (ACCESS_READ), mmap MAP_PRIVATE (ACCESS_COPY, written to
#   privately), cat), and readers racing the commit of a file that was just
#   closed (staging -> object while they read).  Every byte is compared with
#   the plain source; everything again after a remount.  Then, with a cold
#   cache, 5 readers of a delta-coded version of that file (its chunks
#   decoded once for all of them, ahead of sequential readers) and one of
#   the version before it; and an unmount right after a reader of the delta
#   is killed mid-file (read-ahead cancelled, no hang).
# make check may run this with a POSIX sh: it needs bash.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/fs_lib.sh"
fs_init

STORE=$WORK/store
MNT=$WORK/mnt
SRC=$WORK/src
RANKS=4
mkdir -p "$SRC"

step "generating $RANKS shards (bf16 safetensors, 16 MB each) and two versions of a 48 MB file for the readers"
for r in $(seq 0 $((RANKS - 1))); do
	"$PY" "$FS_UTIL" drift "$SRC/shard-$r.safetensors" --n 1 --elems 8000000 --seed $((r + 10)) || die "generator failed"
	mv "$SRC/shard-$r.safetensors.1" "$SRC/shard-$r.safetensors"
done
"$PY" "$FS_UTIL" drift "$SRC/big" --n 2 --elems 24000000 --seed 99 && mv "$SRC/big.1" "$SRC/big.safetensors" &&
	mv "$SRC/big.2" "$SRC/big2.safetensors" || die "generator failed"
head -c 40000000 /dev/urandom >"$SRC/fresh.bin"

cat >"$WORK/worker.py" <<'PY'
import hashlib, json, mmap, os, random, sys, time

mode, a, b = sys.argv[1], sys.argv[2], sys.argv[3]
seed = int(sys.argv[4]) if len(sys.argv) > 4 else 0
rng = random.Random(seed)


def fail(msg):
    print("  %s[%s] FAIL: %s" % (mode, seed, msg))
    sys.exit(1)


def wait_start(path):  # crude barrier: all workers start together
    while not os.path.exists(path):
        time.sleep(0.002)


def first_diff(x, y):
    n = min(len(x), len(y))
    for i in range(0, n, 4096):
        if x[i:i + 4096] != y[i:i + 4096]:
            return i + next(j for j in range(4096) if i + j >= n or x[i + j] != y[i + j])
    return n


if mode == "write":  # a = source shard, b = mount dir
    src = open(a, "rb").read()
    rank = seed
    wait_start(os.path.join(b, "..", "GO"))
    os.makedirs(os.path.join(b, "shared", "logs"), exist_ok=True)  # races with the others
    dst = os.path.join(b, "rank%d" % rank, "shard.safetensors")
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    fd = os.open(dst, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    pos = 0
    while pos < len(src):
        n = rng.choice([4096, 65536, 131072, 1 << 20, 4 << 20, rng.randint(1, 3 << 20)])
        k = os.write(fd, src[pos:pos + n])
        pos += k
        if rng.random() < 0.05:  # small files in the shared directory meanwhile
            p = os.path.join(b, "shared", "logs", "r%d-%d.json" % (rank, pos))
            with open(p + ".tmp", "w") as f:
                json.dump({"rank": rank, "pos": pos}, f)
            os.rename(p + ".tmp", p)
    os.close(fd)
    for i in range(30):
        p = os.path.join(b, "shared", "r%d-%02d.txt" % (rank, i))
        with open(p, "w") as f:
            f.write(("rank %d file %d\n" % (rank, i)) * (i + 1))
    got = open(dst, "rb").read()
    if got != src:
        fail("rank %d: shard read back differs at %d (len %d vs %d)" % (rank, first_diff(got, src), len(got), len(src)))
    print("  write[%d] ok: %d bytes, 30 small files, read back exact" % (rank, len(src)))

else:  # readers: a = file in the mount, b = plain source
    exp = open(b, "rb").read()
    reps = 3
    wait_start(os.path.join(os.path.dirname(a), "..", "GO")) if os.environ.get("BARRIER") else None
    for r in range(reps):
        if mode == "read-small" or mode == "read-big":
            bs = 4096 if mode == "read-small" else 8 << 20
            with open(a, "rb", buffering=0) as f:
                parts = []
                while True:
                    x = f.read(bs)
                    if not x:
                        break
                    parts.append(x)
                got = b"".join(parts)
            if got != exp:
                fail("%s: content differs at %d (len %d vs %d)" % (a, first_diff(got, exp), len(got), len(exp)))
        elif mode == "pread":
            fd = os.open(a, os.O_RDONLY)
            for _ in range(300):
                off = rng.randrange(0, len(exp))
                n = rng.choice([1, 100, 4096, 65536, 1 << 20, 3 << 20])
                got = os.pread(fd, n, off)
                if got != exp[off:off + n]:
                    fail("%s: pread(%d, %d) differs" % (a, n, off))
            os.close(fd)
        elif mode in ("mmap-shared", "mmap-copy"):
            acc = mmap.ACCESS_READ if mode == "mmap-shared" else mmap.ACCESS_COPY
            with open(a, "rb") as f:  # read-only fd for both
                m = mmap.mmap(f.fileno(), 0, access=acc)
            if len(m) != len(exp):
                fail("%s: mmap length %d, expected %d" % (a, len(m), len(exp)))
            for _ in range(200):
                off = rng.randrange(0, len(exp))
                n = rng.choice([1, 4096, 100000])
                if m[off:off + n] != exp[off:off + n]:
                    fail("%s: %s slice [%d:+%d] differs" % (a, mode, off, n))
            if m[:] != exp:
                fail("%s: %s whole mapping differs at %d" % (a, mode, first_diff(m[:], exp)))
            if mode == "mmap-copy":  # private writes must not reach the file
                m[0:8] = b"PRIVATE!"
                m[len(m) - 5:] = b"XXXXX"
                if m[0:8] != b"PRIVATE!":
                    fail("MAP_PRIVATE write not visible in the private mapping")
            m.close()
        else:
            fail("unknown mode")
    print("  %s[%d] ok: %d reads of %s" % (mode, seed, reps, os.path.basename(a)))
PY

fs_mount "$STORE" "$MNT"

step "$RANKS concurrent writers (shards + small files in a shared directory + tmp/rename)"
pids=()
for r in $(seq 0 $((RANKS - 1))); do
	fs_bg "$PY" "$WORK/worker.py" write "$SRC/shard-$r.safetensors" "$MNT/run" "$r"
	pids+=("$FS_BG_LAST")
done
mkdir -p "$MNT/run"
touch "$MNT/GO"
for p in "${pids[@]}"; do
	wait "$p" || bad "writer PID $p failed"
	fs_bg_forget "$p"
done
rm -f "$MNT/GO"
n=$(find "$MNT/run/shared" -maxdepth 1 -name 'r*.txt' | wc -l)
[ "$n" -eq $((RANKS * 30)) ] && ok "shared directory holds all $n small files" || bad "shared directory holds $n small files, expected $((RANKS * 30))"
n=$(find "$MNT/run/shared/logs" -name '*.tmp' | wc -l)
[ "$n" -eq 0 ] && ok "no *.tmp left in shared/logs ($(ls "$MNT/run/shared/logs" | wc -l) renamed json files)" || bad "$n *.tmp files left"

check_shards() { # WHEN
	local r bad_n=0
	for r in $(seq 0 $((RANKS - 1))); do
		cmp -s "$SRC/shard-$r.safetensors" "$MNT/run/rank$r/shard.safetensors" || { bad "$1: rank $r shard differs"; bad_n=1; }
	done
	for r in $(seq 0 $((RANKS - 1))); do
		for i in $(seq 0 29); do
			exp=$(for _ in $(seq 0 "$i"); do echo "rank $r file $i"; done)
			[ "$(cat "$MNT/run/shared/r$r-$(printf %02d "$i").txt")" = "$exp" ] || { bad "$1: small file r$r-$i differs"; bad_n=1; break; }
		done
	done
	[ "$bad_n" -eq 0 ] && ok "$1: all shards and small files exact"
}
check_shards "before commit"

step "readers racing the commit: 5 readers start right after big.safetensors is closed"
cp "$SRC/big.safetensors" "$MNT/big.safetensors" || bad "cp into the mount failed"
pids=()
i=0
for m in read-big pread mmap-shared mmap-copy read-small; do
	i=$((i + 1))
	fs_bg "$PY" "$WORK/worker.py" "$m" "$MNT/big.safetensors" "$SRC/big.safetensors" "$i"
	pids+=("$FS_BG_LAST")
done
for p in "${pids[@]}"; do
	wait "$p" || bad "reader PID $p failed (during commit)"
	fs_bg_forget "$p"
done

step "waiting for every commit"
fs_wait_committed "$STORE" 120 && ok "staging drained"
check_shards "after commit"

step "6 concurrent readers of one committed file (+ a writer of another file meanwhile)"
fs_bg cp "$SRC/fresh.bin" "$MNT/fresh.bin"
cpid=$FS_BG_LAST
pids=()
i=10
for m in read-big read-small pread mmap-shared mmap-copy; do
	i=$((i + 1))
	fs_bg "$PY" "$WORK/worker.py" "$m" "$MNT/big.safetensors" "$SRC/big.safetensors" "$i"
	pids+=("$FS_BG_LAST")
done
a=$(sha256sum <"$SRC/big.safetensors" | cut -d' ' -f1)
b=$(cat "$MNT/big.safetensors" | sha256sum | cut -d' ' -f1)
[ "$a" = "$b" ] && ok "cat | sha256sum concurrently with the others" || bad "cat of the committed file differs"
for p in "${pids[@]}"; do
	wait "$p" || bad "reader PID $p failed"
	fs_bg_forget "$p"
done
wait "$cpid" || bad "cp of fresh.bin failed"
fs_bg_forget "$cpid"
cmp -s "$SRC/fresh.bin" "$MNT/fresh.bin" && ok "fresh.bin written meanwhile is exact" || bad "fresh.bin differs"
cmp -s "$SRC/big.safetensors" "$MNT/big.safetensors" && ok "big.safetensors unchanged by the MAP_PRIVATE writes" || bad "big.safetensors changed (MAP_PRIVATE writes leaked?)"

step "remount and check everything again"
fs_remount "$STORE" "$MNT"
check_shards "after remount"
cmp -s "$SRC/big.safetensors" "$MNT/big.safetensors" && ok "big.safetensors exact after remount" || bad "big.safetensors differs after remount"
cmp -s "$SRC/fresh.bin" "$MNT/fresh.bin" && ok "fresh.bin exact after remount" || bad "fresh.bin differs after remount"
pids=()
for m in mmap-shared mmap-copy pread; do
	fs_bg "$PY" "$WORK/worker.py" "$m" "$MNT/run/rank1/shard.safetensors" "$SRC/shard-1.safetensors" 7
	pids+=("$FS_BG_LAST")
done
for p in "${pids[@]}"; do
	wait "$p" || bad "reader PID $p failed (after remount)"
	fs_bg_forget "$p"
done

step "cold readers of a delta version: 5 of the new version, 1 of the old one, at once"
cp "$SRC/big2.safetensors" "$MNT/big.safetensors" || bad "cp of the next version failed"
fs_wait_committed "$STORE" 120 || bad "the next version was not committed"
fs_remount "$STORE" "$MNT"
sync
[ "$(id -u)" -eq 0 ] && echo 3 >/proc/sys/vm/drop_caches
pids=()
i=20
for m in read-big read-big read-small pread mmap-shared; do
	i=$((i + 1))
	fs_bg "$PY" "$WORK/worker.py" "$m" "$MNT/big.safetensors" "$SRC/big2.safetensors" "$i"
	pids+=("$FS_BG_LAST")
done
fs_bg "$PY" "$WORK/worker.py" read-big "$MNT/.ulpfs/versions/big.safetensors/1" "$SRC/big.safetensors" 30
pids+=("$FS_BG_LAST")
for p in "${pids[@]}"; do
	wait "$p" || bad "reader PID $p failed (delta version, cold)"
	fs_bg_forget "$p"
done
cmp -s "$SRC/big2.safetensors" "$MNT/big.safetensors" && ok "the delta version is exact" || bad "the delta version differs"

step "unmount right after a reader of the delta version is killed mid-file"
fs_remount "$STORE" "$MNT"
sync
[ "$(id -u)" -eq 0 ] && echo 3 >/proc/sys/vm/drop_caches
fs_bg dd if="$MNT/big.safetensors" of=/dev/null bs=1M
sleep 0.1
kill "$FS_BG_LAST" 2>/dev/null
wait "$FS_BG_LAST" 2>/dev/null
fs_bg_forget "$FS_BG_LAST"
fs_umount "$MNT"
awk "BEGIN { exit !($FS_UMOUNT_SECS < 20) }" && ok "umount took ${FS_UMOUNT_SECS}s" || bad "umount took ${FS_UMOUNT_SECS}s with read-ahead under way"
fs_finish
