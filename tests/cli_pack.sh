#!/usr/bin/env bash
# tests/cli_pack.sh - the offline codec commands: ulpfs pack, unpack and
# bench on real files, through the command line a user types.
#
#   - pack/unpack round trips, byte for byte, with and without a reference,
#     for a bf16 trajectory (safetensors) and a torch.save zip, with 1 and 2
#     threads, other chunk sizes and zstd levels;
#   - a delta-coded object is smaller than the keyframe of the same file and
#     than zstd -19 of it;
#   - unpack refuses a missing or wrong reference, a truncated object and a
#     flipped byte, with a clear message and no output file left behind;
#   - bad arguments exit with status 2;
#   - bench runs over the trajectory and reports every round trip verified.
#
# Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
FS_TEST=cli_pack
. "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"

cli_init pack unpack bench
command -v zstd >/dev/null || die "zstd (the command) is needed for the baseline"

SRC=$WORK/src TR=$WORK/trainer O=$WORK/obj
mkdir -p "$SRC" "$TR" "$O"

step "generating 3 versions of a bf16 safetensors file and 2 trainer checkpoints"
"$PY" "$FS_UTIL" drift "$SRC" --n 3 --elems 400000 >/dev/null || die "generator failed"
"$PY" "$FS_UTIL" trainer "$TR" --n 2 --elems 200000 >/dev/null || die "trainer generator failed"
v1=$SRC/v1/model.safetensors v2=$SRC/v2/model.safetensors v3=$SRC/v3/model.safetensors
opt1=$TR/checkpoint-1/optimizer.pt opt2=$TR/checkpoint-2/optimizer.pt
for f in "$v1" "$v2" "$v3" "$opt1" "$opt2"; do [ -s "$f" ] || die "missing $f"; done

roundtrip() { # WHAT IN OBJ [REF] [PACK OPTIONS...]
	local what=$1 in=$2 obj=$3 ref=$4
	shift 4
	local refopt=()
	[ -n "$ref" ] && refopt=(--ref "$ref")
	expect 0 "pack $what" pack "${refopt[@]}" "$@" "$in" -o "$obj" || return
	expect 0 "unpack $what" unpack "${refopt[@]}" "$obj" -o "$obj.out" || return
	cmp -s "$in" "$obj.out" && ok "$what: unpacked bytes equal the input" ||
		bad "$what: unpacked bytes differ from the input"
}

step "round trips"
roundtrip "v1 (keyframe)" "$v1" "$O/v1.ulp" ""
roundtrip "v2 against v1" "$v2" "$O/v2.ulp" "$v1"
roundtrip "v3 against v2, 2 threads" "$v3" "$O/v3.ulp" "$v2" --threads 2
roundtrip "v3 against v2, 256K chunks" "$v3" "$O/v3c.ulp" "$v2" --chunk-size 256K
roundtrip "optimizer.pt (torch zip) against the previous one" "$opt2" "$O/opt2.ulp" "$opt1"
roundtrip "optimizer.pt keyframe, --level 3" "$opt1" "$O/opt1.ulp" "" --level 3
: >"$WORK/empty"
roundtrip "an empty file" "$WORK/empty" "$O/empty.ulp" ""
head -c 100000 /dev/urandom >"$WORK/random"
roundtrip "random bytes (not a tensor file)" "$WORK/random" "$O/random.ulp" ""
cmp -s "$O/v3.ulp" "$O/v3c.ulp" && bad "--chunk-size 256K gave the same object as the default" ||
	ok "--chunk-size changes the object"
expect 0 "pack v3 against v2 again, 1 thread" pack --ref "$v2" --threads 1 "$v3" -o "$O/v3t1.ulp"
cmp -s "$O/v3.ulp" "$O/v3t1.ulp" && ok "1 and 2 threads write the same object" ||
	bad "the object depends on the thread count"

step "the portable kernels (ULPFS_SIMD=0) write and read the objects the AVX2 ones do"
ULPFS_SIMD=0 expect 0 "pack v3 against v2, portable kernels" pack --ref "$v2" "$v3" -o "$O/v3p.ulp"
cmp -s "$O/v3.ulp" "$O/v3p.ulp" && ok "bf16 delta: the same object" || bad "bf16 delta: the object depends on the kernels"
ULPFS_SIMD=0 expect 0 "pack optimizer.pt keyframe, portable kernels" pack --level 3 "$opt1" -o "$O/opt1p.ulp"
cmp -s "$O/opt1.ulp" "$O/opt1p.ulp" && ok "optimizer.pt keyframe: the same object" ||
	bad "optimizer.pt keyframe: the object depends on the kernels"
ULPFS_SIMD=0 expect 0 "unpack v3, portable kernels" unpack --ref "$v2" "$O/v3.ulp" -o "$O/v3p.out"
cmp -s "$v3" "$O/v3p.out" && ok "the portable kernels decode the object exactly" ||
	bad "the portable kernels decode different bytes"

step "sizes: a delta against its reference is smaller than the keyframe and than zstd -19"
expect 0 "pack v2 alone" pack "$v2" -o "$O/v2kf.ulp"
delta=$(stat -c %s "$O/v2.ulp") kf=$(stat -c %s "$O/v2kf.ulp")
z19=$(zstd -19 -q -c "$v2" | wc -c)
say "v2: raw $(stat -c %s "$v2"), keyframe $kf, delta $delta, zstd -19 $z19 bytes"
[ "$delta" -lt "$kf" ] && ok "the delta is smaller than the keyframe" || bad "delta $delta >= keyframe $kf"
[ "$delta" -lt "$z19" ] && ok "the delta is smaller than zstd -19" || bad "delta $delta >= zstd -19 $z19"

step "unpack refuses what it cannot decode exactly, and leaves no output behind"
expect_err 1 "ref" "unpack a delta without its reference" unpack "$O/v2.ulp" -o "$O/x1"
[ -e "$O/x1" ] && bad "a failed unpack left $O/x1" || ok "no output file after the failure"
expect_err 1 "ref" "unpack a delta against the wrong reference" unpack --ref "$v3" "$O/v2.ulp" -o "$O/x2"
[ -e "$O/x2" ] && bad "a failed unpack left $O/x2" || ok "no output file after the failure"
sz=$(stat -c %s "$O/v1.ulp")
head -c $((sz - 100)) "$O/v1.ulp" >"$O/trunc.ulp"
expect 1 "unpack a truncated object" unpack "$O/trunc.ulp" -o "$O/x3"
[ -e "$O/x3" ] && bad "a failed unpack left $O/x3" || ok "no output file after the failure"
cp "$O/v1.ulp" "$O/flip.ulp"
printf '\xa5' | dd of="$O/flip.ulp" bs=1 seek=$((sz / 2)) conv=notrunc status=none
expect 1 "unpack an object with a flipped byte in its middle" unpack "$O/flip.ulp" -o "$O/x4"
grep -qi "checksum\|corrupt" "$ERR_F" && ok "the message names the checksum / corruption" ||
	bad "the message does not say the object is corrupt: $(cat "$ERR_F")"
[ -e "$O/x4" ] && bad "a failed unpack left $O/x4" || ok "no output file after the failure"
expect_err 1 "" "pack a file that does not exist" pack "$WORK/nosuch" -o "$O/x5"
[ -e "$O/x5" ] && bad "a failed pack left $O/x5" || ok "no output file after the failure"

step "bad arguments"
expect 2 "pack without -o" pack "$v1"
expect 2 "pack with two inputs" pack "$v1" "$v2" -o "$O/x6"
expect 2 "pack --threads x" pack --threads x "$v1" -o "$O/x6"
expect 2 "pack --level 0" pack --level 0 "$v1" -o "$O/x6"
expect 2 "pack --level 23" pack --level 23 "$v1" -o "$O/x6"
expect 2 "pack --chunk-size 3" pack --chunk-size 3 "$v1" -o "$O/x6"
expect 2 "unpack --level (a pack-only option)" unpack --level 3 "$O/v1.ulp" -o "$O/x6"
expect 2 "unpack without -o" unpack "$O/v1.ulp"
expect 2 "pack --bogus" pack --bogus "$v1" -o "$O/x6"
[ -e "$O/x6" ] && bad "a usage error left $O/x6" || ok "no output file after usage errors"

step "bench over the trajectory"
expect 0 "bench --reps 1 v1 v2 v3" bench --reps 1 "$v1" "$v2" "$v3"
grep -qi "verified" "$OUT_F" && ok "bench reports its round trips verified" ||
	{ bad "bench output does not mention verified round trips"; sed 's/^/    | /' "$OUT_F" | head -20 >&2; }
grep -q "zstd" "$OUT_F" && ok "bench prints the zstd baselines" || bad "bench prints no zstd baseline"
expect 0 "bench --cpu-time v1 v2" bench --reps 1 --cpu-time --no-zstd19 "$v1" "$v2"
grep -qi "verified" "$OUT_F" && grep -q "zstd-3 dec" "$OUT_F" && ok "bench --cpu-time reports speeds and verified round trips" ||
	bad "bench --cpu-time output lacks speeds or verification"

fs_finish
