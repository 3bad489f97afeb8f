#!/usr/bin/env bash
# tests/fs_versions.sh - every closed content is a version: N files copied
# one after another over one path (no sleeps, no syncs between) give N
# versions, each exact, at settle=0, the default (500 ms) and settle=2000;
# N saves written to a temporary name and renamed over the final one give
# N versions of the final name and none of the temporary one; an append
# reopen within the settle delay continues the same version.
# make check may run this with a POSIX sh: it needs bash.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/fs_lib.sh"
fs_init

N=${VERSIONS_N:-6}
SRC=$WORK/src
mkdir -p "$SRC"
for i in $(seq 1 "$N"); do
	head -c $((300000 + i * 1000)) /dev/urandom >"$SRC/f$i"
	head -c $((200000 + i * 1000)) /dev/urandom >"$SRC/g$i"
done

# versions_exact MNT PATH PREFIX: .ulpfs/versions/PATH holds N versions,
# version k holding SRC/PREFIXk.
versions_exact() {
	local mnt=$1 path=$2 prefix=$3 n k
	n=$(ls "$mnt/.ulpfs/versions/$path" 2>/dev/null | wc -l)
	if [ "$n" -ne "$N" ]; then
		bad "$path: $n versions, expected $N"
		"$ULPFS" log "$mnt/$path" >&2
		return
	fi
	for k in $(seq 1 "$N"); do
		cmp -s "$mnt/.ulpfs/versions/$path/$k" "$SRC/$prefix$k" ||
			bad "$path version $k differs from $prefix$k"
	done
	ok "$path: $N versions, each exact"
}

for settle in 0 500 2000; do
	step "settle=$settle: $N copies over one path, $N renames over another"
	STORE=$WORK/store-$settle
	MNT=$WORK/mnt-$settle
	fs_mount "$STORE" "$MNT" "settle=$settle"
	for i in $(seq 1 "$N"); do
		cp "$SRC/f$i" "$MNT/latest.bin" || bad "cp f$i"
	done
	for i in $(seq 1 "$N"); do
		cp "$SRC/g$i" "$MNT/tmp.bin" && mv "$MNT/tmp.bin" "$MNT/saved.bin" || bad "save g$i"
	done
	printf 'one\n' >"$MNT/log.txt"
	printf 'two\n' >>"$MNT/log.txt"
	# One process rewriting a path as fast as it can: the kernel sends
	# each close's RELEASE after close(2) returns, so the next open often
	# reaches the daemon first, and that content must still be a version.
	rapid=0
	if [ "$settle" = 0 ]; then
		rapid=100
		"$PY" - "$MNT/rapid.bin" "$rapid" <<'PY' || bad "rapid rewrites failed"
import os, sys
p, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, b"%06d\n" % i * 1000)
    os.close(fd)
PY
	fi
	"$ULPFS" sync "$MNT" || bad "ulpfs sync"
	versions_exact "$MNT" latest.bin f
	if [ "$rapid" -gt 0 ]; then
		"$PY" - "$MNT/.ulpfs/versions/rapid.bin" "$rapid" <<'PY' && ok "rapid.bin: $rapid rewrites, $rapid versions, each exact" || bad "rapid.bin lost versions"
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
got = sorted(int(v) for v in os.listdir(d))
if got != list(range(1, n + 1)):
    sys.exit("rapid.bin: %d versions, expected %d" % (len(got), n))
for k in got:
    if open(os.path.join(d, str(k)), "rb").read() != b"%06d\n" % (k - 1) * 1000:
        sys.exit("rapid.bin version %d differs" % k)
PY
	fi
	versions_exact "$MNT" saved.bin g
	[ -e "$MNT/.ulpfs/versions/tmp.bin" ] && bad "tmp.bin has a history"
	n=$(ls "$MNT/.ulpfs/versions/log.txt" | wc -l)
	[ "$n" -eq 1 ] && [ "$(cat "$MNT/.ulpfs/versions/log.txt/1")" = "$(printf 'one\ntwo')" ] &&
		ok "append reopen: one version" || bad "append reopen: $n versions"
	fs_umount "$MNT"
	fs_mount "$STORE" "$MNT" "settle=$settle"
	versions_exact "$MNT" latest.bin f
	"$ULPFS" verify "$MNT" >"$WORK/verify.txt" 2>&1 && ok "verify after remount" ||
		{ cat "$WORK/verify.txt" >&2; bad "verify after remount"; }
	fs_umount "$MNT"
done
fs_finish
