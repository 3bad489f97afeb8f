#!/usr/bin/env bash
# tests/client_tools.sh - everyday tools as clients of the mount:
#   - cp -a, rsync -a (then an incremental rsync of changed files: rsync's
#     temporary file + rename) and tar c | tar x of a source tree (binary
#     and text files, safetensors versions, an empty file, odd names,
#     subdirectories, symlinks, modes and mtimes) INTO the mount; after a
#     remount every copy is sha256-identical to the source, with the same
#     types, modes, mtimes and symlink targets; then the same three tools
#     copy OUT of the mount into a plain directory, checked the same way;
#   - fio: a sequential 1 MiB write job with verify=crc32c (do_verify=1,
#     end_fsync) on the mount, then after a remount a separate sequential
#     read job verifying every block's crc32c; both must exit 0 with no
#     verify error.
# make check may run this with a POSIX sh: it needs bash.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/fs_lib.sh"
fs_init

for t in rsync tar fio sha256sum; do
	command -v "$t" >/dev/null || die "$t is not installed (Debian: apt-get install $t)"
done
STORE=$WORK/store
MNT=$WORK/mnt
SRC=$WORK/src
OUT=$WORK/out
FIO_SIZE=${CLIENT_FIO_SIZE:-256M}

# Types, modes, mtimes (files), sizes and symlink targets, sorted: what
# cp -a / rsync -a / tar x must preserve besides the bytes.
meta_tree() {
	(cd "$1" && find . -mindepth 1 \( -type f -printf 'f %p %m %s %T@\n' \) -o \
		\( -type d -printf 'd %p %m\n' \) -o \( -type l -printf 'l %p -> %l\n' \) | LC_ALL=C sort)
}

# same_tree SRC COPY WHAT: bytes (sha256sum) and metadata.
same_tree() {
	fs_compare_trees "$1" "$2" "$3"
	if diff <(meta_tree "$1") <(meta_tree "$2") >"$WORK/meta.diff"; then
		ok "$3: $(meta_tree "$2" | wc -l) entries: same types, modes, mtimes, symlink targets"
	else
		bad "$3: metadata differs (< source, > copy):"
		head -20 "$WORK/meta.diff" | sed 's/^/    | /' >&2
	fi
}

run_tool() { # run_tool WHAT COMMAND...: the command must succeed
	local what=$1
	shift
	if "$@" >"$WORK/tool.log" 2>&1; then
		ok "$what"
	else
		bad "$what failed:"
		tail -20 "$WORK/tool.log" | sed 's/^/    | /' >&2
	fi
}

step "source tree"
mkdir -p "$SRC/ckpt" "$SRC/docs/deep/er" "$SRC/bin" "$SRC/with space"
"$PY" "$FS_UTIL" drift "$SRC/ckpt" --n 3 --elems 1048576 >/dev/null || die "fs_util.py drift failed"
head -c 5000000 /dev/urandom >"$SRC/bin/random.bin"
head -c 3000000 /dev/zero >"$SRC/bin/zeros.bin"
head -c 1234567 /dev/urandom >"$SRC/bin/odd-size.bin"
cp /usr/share/common-licenses/GPL-3 "$SRC/docs/GPL-3.txt" 2>/dev/null || seq 1 100000 >"$SRC/docs/GPL-3.txt"
seq 1 200000 >"$SRC/docs/deep/er/numbers.txt"
: >"$SRC/docs/empty"
echo "spaces and ümlauts" >"$SRC/with space/fïle name.txt"
chmod 600 "$SRC/docs/deep/er/numbers.txt"
chmod 755 "$SRC/bin/odd-size.bin"
chmod 750 "$SRC/docs/deep"
ln -s ../docs/GPL-3.txt "$SRC/bin/licence"
ln -s ckpt/v3/model.safetensors "$SRC/latest"
ln -s does-not-exist "$SRC/dangling"
touch -d '2021-03-04 05:06:07.123456789' "$SRC/docs/GPL-3.txt" "$SRC/bin/zeros.bin"
touch -d '2001-01-01 00:00:00' "$SRC/docs/deep/er"
say "$(find "$SRC" | wc -l) entries, $(fs_file_bytes "$SRC") bytes"

fs_mount "$STORE" "$MNT"

step "copies into the mount: cp -a, rsync -a, tar c | tar x"
run_tool "cp -a SRC MNT/cp" cp -a "$SRC" "$MNT/cp"
run_tool "rsync -a SRC/ MNT/rsync/" rsync -a "$SRC/" "$MNT/rsync/"
mkdir -p "$MNT/tar"
run_tool "tar -C SRC -c . | tar -C MNT/tar -x" bash -c 'set -o pipefail; tar --format=posix -C "$1" -cf - . | tar -C "$2" -xpf -' _ "$SRC" "$MNT/tar"
for d in cp rsync tar; do same_tree "$SRC" "$MNT/$d" "$d into the mount"; done

step "incremental rsync -a of changed files (temporary file + rename)"
cp -a "$SRC" "$WORK/src0" # the tree as cp and tar copied it
mkdir -p "$WORK/ckpt2"
"$PY" "$FS_UTIL" drift "$WORK/ckpt2" --n 4 --elems 1048576 --seed 2 >/dev/null || die "fs_util.py drift failed"
cp "$WORK/ckpt2/v4/model.safetensors" "$SRC/ckpt/v3/model.safetensors"
seq 5 200003 >"$SRC/docs/deep/er/numbers.txt"
rm "$SRC/bin/odd-size.bin"
run_tool "rsync -a --delete SRC/ MNT/rsync/" rsync -a --delete "$SRC/" "$MNT/rsync/"
same_tree "$SRC" "$MNT/rsync" "rsync update into the mount"

step "remount: everything read back from the store"
fs_remount "$STORE" "$MNT"
same_tree "$SRC" "$MNT/rsync" "rsync copy after remount"
same_tree "$WORK/src0" "$MNT/cp" "cp copy (tree before the changes) after remount"
same_tree "$WORK/src0" "$MNT/tar" "tar copy (tree before the changes) after remount"
"$PY" "$FS_UTIL" safetensors-check "$MNT/rsync/ckpt/v3/model.safetensors" "$SRC/ckpt/v3/model.safetensors" >"$WORK/st.log" 2>&1 &&
	ok "memmap of the rsync'ed safetensors: $(cat "$WORK/st.log")" || bad "$(cat "$WORK/st.log")"

step "copies out of the mount: cp -a, rsync -a, tar c | tar x"
mkdir -p "$OUT/tar"
run_tool "cp -a MNT/rsync OUT/cp" cp -a "$MNT/rsync" "$OUT/cp"
run_tool "rsync -a MNT/rsync/ OUT/rsync/" rsync -a "$MNT/rsync/" "$OUT/rsync/"
run_tool "tar -C MNT/rsync -c . | tar -C OUT/tar -x" bash -c 'set -o pipefail; tar --format=posix -C "$1" -cf - . | tar -C "$2" -xpf -' _ "$MNT/rsync" "$OUT/tar"
for d in cp rsync tar; do same_tree "$SRC" "$OUT/$d" "$d out of the mount"; done

step "fio: sequential write of $FIO_SIZE with verify=crc32c"
mkdir -p "$MNT/fio"
FIO_COMMON=(--name=ulpfs-seq --bs=1M --ioengine=psync --verify=crc32c --randrepeat=1 --norandommap=0
	--verify_state_save=0)
FIO=(fio "${FIO_COMMON[@]}" --filename="$MNT/fio/seq.dat" --size="$FIO_SIZE")
# control, in a plain directory: the read job does verify (a flipped byte fails it)
CTL=(fio "${FIO_COMMON[@]}" --filename="$WORK/fio-control.dat" --size=8M)
if "${CTL[@]}" --rw=write --do_verify=1 >"$WORK/fio-ctl.log" 2>&1 && "${CTL[@]}" --rw=read >>"$WORK/fio-ctl.log" 2>&1 &&
	printf X | dd of="$WORK/fio-control.dat" bs=1 seek=5000000 conv=notrunc 2>/dev/null &&
	! "${CTL[@]}" --rw=read >"$WORK/fio-ctl2.log" 2>&1 && grep -q 'crc32c: verify failed' "$WORK/fio-ctl2.log"; then
	ok "control: the fio read job verifies (a corrupted plain file fails it)"
else
	bad "control: the fio read job does not catch a corrupted byte in a plain file"
fi
fio_ok() { # fio_ok LOG WHAT
	if grep -Eiq 'verify.*(fail|bad|mismatch)|bad magic|crc32c.*wanted|fio: .*error|err= *[1-9]' "$1"; then
		bad "$2: fio reported errors:"
		grep -Ei 'verify|magic|crc|err' "$1" | head -20 | sed 's/^/    | /' >&2
		return 1
	fi
	ok "$2: fio exit 0, no verify errors ($(grep -Eo '(READ|WRITE): bw=[^ ]+' "$1" | tr '\n' ' '))"
}
t0=$SECONDS
if timeout -k 5 300 "${FIO[@]}" --rw=write --do_verify=1 --end_fsync=1 >"$WORK/fio-write.log" 2>&1; then
	fio_ok "$WORK/fio-write.log" "write + verify"
else
	bad "fio write job failed (exit $?):"
	tail -30 "$WORK/fio-write.log" | sed 's/^/    | /' >&2
fi
say "write job: $((SECONDS - t0)) s"
sum_before=$(sha256sum <"$MNT/fio/seq.dat" | cut -d' ' -f1)

step "remount, then a separate fio read job verifying every block"
fs_remount "$STORE" "$MNT"
t0=$SECONDS
if timeout -k 5 300 "${FIO[@]}" --rw=read >"$WORK/fio-read.log" 2>&1; then
	fio_ok "$WORK/fio-read.log" "read + verify after remount"
else
	bad "fio read/verify job failed (exit $?):"
	tail -30 "$WORK/fio-read.log" | sed 's/^/    | /' >&2
fi
say "read job: $((SECONDS - t0)) s"
sum_after=$(sha256sum <"$MNT/fio/seq.dat" | cut -d' ' -f1)
[ "$sum_before" = "$sum_after" ] && ok "fio file: same sha256 before and after remount" ||
	bad "fio file changed across the remount: $sum_before -> $sum_after"
sz=$(stat -c %s "$MNT/fio/seq.dat")
want=$("$PY" -c 'import sys; s=sys.argv[1]; print(int(s[:-1]) << {"K":10,"M":20,"G":30}[s[-1]] if s[-1] in "KMG" else int(s))' "$FIO_SIZE")
[ "$sz" = "$want" ] && ok "fio file size $sz" || bad "fio file size $sz, expected $want"

fs_umount "$MNT"
fs_finish
