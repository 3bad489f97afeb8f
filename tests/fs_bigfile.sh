#!/usr/bin/env bash
# tests/fs_bigfile.sh - a file of 2 GiB + 12345 bytes (offsets past 2^31,
# an unaligned tail) written through the mount with dd in 64 MiB pieces,
# read back bit-exact from staging, after the commit (same mount) and after
# a remount; random ranges around the 2 GiB boundary with pread.
# ULPFS_BIG_MIB sets the size in MiB (default 2048).  Needs 8 GiB free.
# make check may run this with a POSIX sh: it needs bash.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/fs_lib.sh"
fs_init

STORE=$WORK/store
MNT=$WORK/mnt
SRC=$WORK/big.src
MIB=${ULPFS_BIG_MIB:-2048}
TAIL=12345
SIZE=$((MIB * 1048576 + TAIL))

step "free space"
free=$(fs_free_bytes "$WORK")
need=$((8 << 30))
say "$(fs_mib "$free") MiB free under $WORK"
[ "$free" -ge "$need" ] || die "only $(fs_mib "$free") MiB free under $WORK: this test needs 8 GiB (source, staging and objects of a ${MIB} MiB file); set TMPDIR to a bigger filesystem"

# Incompressible bytes: an AES-128-CTR key stream (openssl), at a few
# times /dev/urandom's speed; each read back is compared with cmp.
step "source: ${MIB} MiB + $TAIL bytes of an AES-CTR key stream"
command -v openssl >/dev/null || die "openssl not found (apt-get install openssl)"
openssl enc -aes-128-ctr -nosalt -pbkdf2 -pass pass:ulpfs-bigfile \
	-in /dev/zero 2>/dev/null | head -c "$SIZE" >"$SRC"
[ "$(stat -c %s "$SRC")" -eq "$SIZE" ] || die "source has the wrong size"

fs_mount "$STORE" "$MNT"

step "dd of=MNT/big bs=64M (conv=fsync)"
t0=$(date +%s.%N)
dd if="$SRC" of="$MNT/big" bs=64M conv=fsync status=none || bad "dd into the mount failed"
t=$(calc "$(date +%s.%N) - $t0")
say "written in ${t}s ($(calc "$SIZE / 1048576 / $t" 1) MiB/s)"
[ "$(stat -c %s "$MNT/big")" -eq "$SIZE" ] && ok "size $SIZE" || bad "size $(stat -c %s "$MNT/big"), expected $SIZE"

pread_check() { # WHEN: random ranges, and the ones around 2^31 and the end
	"$PY" - "$MNT/big" "$SRC" <<'PY' || bad "$1: pread ranges differ"
import os, random, sys
a, b = (os.open(p, os.O_RDONLY) for p in sys.argv[1:3])
size = os.fstat(b).st_size
rng = random.Random(5)
offs = [0, (1 << 31) - 7, 1 << 31, (1 << 31) + 4096, (1 << 32) - 3, size - 1, size - 12345, size - 100000]
offs += [rng.randrange(size) for _ in range(200)]
for off in offs:
    if off < 0 or off >= size:
        continue
    n = rng.choice([1, 13, 4096, 1 << 20])
    x, y = os.pread(a, n, off), os.pread(b, n, off)
    if x != y:
        print("pread(%d, %d) differs (%d vs %d bytes)" % (n, off, len(x), len(y)))
        sys.exit(1)
if os.pread(a, 10, size) != b"" or os.pread(a, 10, size + 12345) != b"":
    print("read past EOF returns data")
    sys.exit(1)
print("  %d ranges equal" % len(offs))
PY
}

step "read back before the commit (from staging)"
cmp -s "$SRC" "$MNT/big" && ok "equal" || bad "differs: $(cmp "$SRC" "$MNT/big" 2>&1)"
pread_check "before commit"

step "waiting for the commit"
t0=$(date +%s.%N)
fs_wait_committed "$STORE" 600 && ok "committed $(calc "$(date +%s.%N) - $t0")s after the check"
say "objects/: $(fs_file_bytes "$STORE/objects") bytes"
cmp -s "$SRC" "$MNT/big" && ok "equal after the commit (same mount)" ||
	bad "after the commit: $(cmp "$SRC" "$MNT/big" 2>&1)"

step "umount + remount, read back"
fs_remount "$STORE" "$MNT"
[ "$(stat -c %s "$MNT/big")" -eq "$SIZE" ] && ok "size after remount" || bad "size $(stat -c %s "$MNT/big") after remount"
sync
echo 3 >/proc/sys/vm/drop_caches 2>/dev/null
t0=$(date +%s.%N)
if cmp -s "$SRC" "$MNT/big"; then
	t=$(calc "$(date +%s.%N) - $t0")
	ok "equal after remount (read at $(calc "$SIZE / 1048576 / $t" 1) MiB/s incl. cmp with the source)"
else
	bad "after remount: $(cmp "$SRC" "$MNT/big" 2>&1)"
fi
pread_check "after remount"
rm -f "$SRC"
fs_umount "$MNT"
fs_finish
