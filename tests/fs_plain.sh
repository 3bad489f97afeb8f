#!/usr/bin/env bash
# tests/fs_plain.sh - the plain newest version (-o plain_newest): a written
# file commits as its plain bytes (objects/ holds them, the catalog says
# plain), reads of it (read and mmap) reach no daemon READ where the
# kernel offers passthrough, a reader that opened it keeps reading it
# across its successor's commit and flip, the flip codes it and removes
# the plain file, the space bound codes the oldest plain files standalone,
# verify hashes plain files, and a kill -9 at each step of a plain commit
# (ULPFS_TEST_CRASH_COMMIT=N:S: S 1 linked, S 2 in the catalog) or of a
# flip of a plain version loses nothing and leaves nothing over.
# make check may run this with a POSIX sh: it needs bash.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/fs_lib.sh"
fs_init

STORE=$WORK/store
MNT=$WORK/mnt
DATA=$WORK/data
mkdir -p "$DATA"

step "content: 4 versions of a 2 MB bf16 safetensors file with ULP drift"
"$PY" "$FS_UTIL" drift "$DATA" --n 4 --elems 1000000 || die "generator failed"
v() { echo "$DATA/v$1/model.safetensors"; }

sql() { "$PY" -c 'import sqlite3, sys
c = sqlite3.connect("file:" + sys.argv[1] + "/catalog.db?mode=ro", uri=True)
for r in c.execute(sys.argv[2]): print(*r)' "$STORE" "$1"; }
# plain flag of the newest version of PATH
newest_plain() { sql "SELECT plain FROM versions WHERE path = '$1' ORDER BY seq DESC LIMIT 1"; }
reads() { "$ULPFS" stats "$MNT" 2>/dev/null | tr ' ' '\n' | awk '$0 == "READ" { getline; print; f = 1 } END { if (!f) print 0 }'; }

fs_mount "$STORE" "$MNT" plain_newest=auto
step "a written file commits plain"
cp "$(v 1)" "$MNT/m.safetensors"
"$ULPFS" sync "$MNT" >/dev/null || bad "sync failed"
[ "$(newest_plain m.safetensors)" = 1 ] && ok "version 1 is plain" || bad "version 1 is not plain"
obj=$(sql "SELECT object FROM versions WHERE path = 'm.safetensors'")
cmp -s "$STORE/objects/$obj" "$(v 1)" && ok "its object file is the plain bytes" || bad "objects/$obj is not the plain bytes"
[ "$(fs_staged_count "$STORE")" = 0 ] && ok "staging is empty" || bad "staging left files"

step "reads of the plain newest (read, mmap)"
r0=$(reads)
sync
echo 3 >/proc/sys/vm/drop_caches 2>/dev/null
cmp -s "$MNT/m.safetensors" "$(v 1)" && ok "cat reads it" || bad "cat reads other bytes"
"$PY" - "$MNT/m.safetensors" "$(v 1)" <<'PY' && ok "mmap reads it" || bad "mmap reads other bytes"
import mmap, sys
with open(sys.argv[1], "rb") as f:
    m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
    sys.exit(0 if m[:] == open(sys.argv[2], "rb").read() else 1)
PY
if [ "$(fs_write_mode "$MNT")" = passthrough ]; then
	r1=$(reads)
	[ "$r1" = "$r0" ] && ok "no READ reached the daemon (passthrough)" ||
		bad "the daemon served $((r1 - r0)) READs of a plain newest"
else
	say "write mode $(fs_write_mode "$MNT"): reads go through the daemon"
fi

step "a reader across the successor's commit and flip"
"$PY" - "$MNT/m.safetensors" "$(v 1)" "$(v 2)" "$ULPFS" "$MNT" <<'PY' && ok "open fd and mmap keep version 1; a new open reads version 2" || bad "reader across the flip"
import mmap, shutil, subprocess, sys
path, v1, v2, ulpfs, mnt = sys.argv[1:]
one, two = open(v1, "rb").read(), open(v2, "rb").read()
f = open(path, "rb")
m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
head = f.read(4096)
shutil.copyfile(v2, path + ".tmp")
subprocess.run([ulpfs, "sync", mnt], check=True, stdout=subprocess.DEVNULL)
import os
os.rename(path + ".tmp", path)
subprocess.run([ulpfs, "sync", mnt], check=True, stdout=subprocess.DEVNULL)
subprocess.run([ulpfs, "gc", mnt], check=True, stdout=subprocess.DEVNULL)
ok = head + f.read() == one and m[:] == one
ok = ok and open(path, "rb").read() == two
sys.exit(0 if ok else 1)
PY
cp "$(v 3)" "$MNT/m.safetensors"
"$ULPFS" sync "$MNT" >/dev/null && "$ULPFS" gc "$MNT" >/dev/null || bad "sync/gc failed"
n=$(sql "SELECT count(*) FROM versions WHERE plain = 1 AND state <> 2")
[ "$(newest_plain m.safetensors)" = 1 ] && [ "$n" = 1 ] && ok "only the newest is plain" ||
	bad "$n plain versions, newest plain: $(newest_plain m.safetensors)"
cmp -s "$MNT/.ulpfs/versions/m.safetensors/1" "$(v 1)" && cmp -s "$MNT/m.safetensors" "$(v 3)" &&
	ok "versions read back after the flips" || bad "versions differ after the flips"
read -r nv no < <(fs_versions_and_objects "$STORE" "$MNT")
[ "$nv" = "$no" ] && ok "$no objects for $nv versions" || bad "$no object files for $nv versions"
"$ULPFS" verify "$MNT" >"$WORK/verify.txt" 2>&1 && ok "verify passes" || { cat "$WORK/verify.txt" >&2; bad "verify failed"; }

step "verify hashes the plain file"
obj=$(sql "SELECT object FROM versions WHERE plain = 1 AND path = 'm.safetensors'")
cp "$STORE/objects/$obj" "$WORK/keep"
printf '\x55' | dd of="$STORE/objects/$obj" bs=1 seek=1000000 conv=notrunc status=none
"$ULPFS" verify "$MNT" >"$WORK/verify.txt" 2>&1 && bad "verify missed a changed plain file" || ok "verify reports a changed plain file"
cat "$WORK/keep" >"$STORE/objects/$obj"
fs_umount "$MNT"

step "the space bound: past it the least recently written plain newest is coded standalone"
# unrelated files (no predecessor, so no flip codes them)
head -c $((2 << 20)) /dev/urandom >"$WORK/bound-a.bin"
head -c $((2 << 20)) /dev/urandom >"$WORK/bound-b.bin"
fs_mount "$STORE" "$MNT" plain_newest=3M
cp "$WORK/bound-a.bin" "$MNT/bound-a.bin"
"$ULPFS" sync "$MNT" >/dev/null
cp "$WORK/bound-b.bin" "$MNT/bound-b.bin"
"$ULPFS" sync "$MNT" >/dev/null && "$ULPFS" gc "$MNT" >/dev/null || bad "sync/gc failed"
p=$(sql "SELECT coalesce(sum(stored), 0) FROM versions WHERE plain = 1 AND state <> 2")
[ "$p" -le $((3 << 20)) ] && ok "plain bytes $p within 3 MiB" || bad "plain bytes $p past 3 MiB"
[ "$(newest_plain bound-b.bin)" = 1 ] && [ "$(newest_plain bound-a.bin)" = 0 ] &&
	ok "the newest stays plain, the least recently written was coded" ||
	bad "plain flags: bound-b $(newest_plain bound-b.bin), bound-a $(newest_plain bound-a.bin)"
cmp -s "$MNT/bound-a.bin" "$WORK/bound-a.bin" && cmp -s "$MNT/bound-b.bin" "$WORK/bound-b.bin" &&
	ok "both read back" || bad "a file differs after the bound"
fs_umount "$MNT"

step "kill -9 at each step of a plain commit and of its flip"
for point in C1 C2 F1 F2; do
	case $point in
	C*) ULPFS_TEST_CRASH_COMMIT=1:${point#C} fs_mount "$STORE" "$MNT" plain_newest=auto ;;
	F*) ULPFS_TEST_CRASH_FLIP=1:${point#F} fs_mount "$STORE" "$MNT" plain_newest=auto ;;
	esac
	pid=$FS_LAST_PID
	cp "$(v 4)" "$MNT/k-$point.safetensors"
	cp "$(v 1)" "$MNT/k-$point.safetensors" 2>/dev/null
	"$ULPFS" sync "$MNT" >/dev/null 2>&1
	pid_alive "$pid" && "$ULPFS" gc "$MNT" >/dev/null 2>&1
	wait_pid_gone "$pid" 30 || { bad "$point: the daemon did not reach its crash point"; kill -9 "$pid"; }
	fs_force_umount "$MNT" 30
	fs_mount "$STORE" "$MNT" plain_newest=auto
	"$ULPFS" sync "$MNT" >/dev/null && "$ULPFS" gc "$MNT" >/dev/null || bad "$point: sync/gc after the remount failed"
	got=$(sha256sum <"$MNT/k-$point.safetensors" | cut -d' ' -f1)
	case $got in
	"$(sha256sum <"$(v 4)" | cut -d' ' -f1)" | "$(sha256sum <"$(v 1)" | cut -d' ' -f1)") ok "$point: the file reads a closed version" ;;
	*) bad "$point: the file reads neither closed version" ;;
	esac
	"$ULPFS" verify "$MNT" >"$WORK/verify.txt" 2>&1 || { cat "$WORK/verify.txt" >&2; bad "$point: verify"; }
	read -r nv no < <(fs_versions_and_objects "$STORE" "$MNT")
	[ "$nv" = "$no" ] && [ "$(fs_staged_count "$STORE")" = 0 ] && ok "$point: $no objects for $nv versions, staging empty" ||
		bad "$point: $no object files for $nv versions, $(fs_staged_count "$STORE") staged"
	fs_umount "$MNT"
done
fs_finish
