#!/usr/bin/env bash
# tests/fuzz/build.sh - build the libFuzzer targets with clang, ASan and
# UBSan (make builds them through it: see the fuzzing block of
# Makefile.am; tests/fuzz/README.md).
#
#   build.sh SRCDIR BUILDDIR
#
# Environment (make passes what configure found): FUZZ_CC (a clang that
# links -fsanitize=fuzzer), FUZZ_DEP_CFLAGS, FUZZ_DEP_LIBS.  The library
# sources each target needs are compiled once into BUILDDIR/tests/fuzz/obj
# (again only when a source or header is newer); the targets land in
# BUILDDIR/tests/fuzz.
#
# Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
set -euo pipefail
src=$(cd "$1" && pwd)
build=$(cd "$2" && pwd)
cc=${FUZZ_CC:?FUZZ_CC is not set: configure found no clang with -fsanitize=fuzzer}
out=$build/tests/fuzz
obj=$out/obj
mkdir -p "$obj"

read -r -a dep_cflags <<<"${FUZZ_DEP_CFLAGS:-}"
read -r -a dep_libs <<<"${FUZZ_DEP_LIBS:-}"
san=(-fsanitize=address,undefined -fno-sanitize-recover=all
	-fno-omit-frame-pointer)
cflags=(-std=gnu11 -g -O1 -Wall -Wextra -Werror -DHAVE_CONFIG_H
	-I"$build" -I"$src/include" -I"$src/src" -I"$src/src/codec"
	-I"$src/src/formats" -I"$src/tests/fuzz" "${san[@]}" "${dep_cflags[@]}")

codec=(util hasher rans rans_avx2 rans_avx512 rans_avx512_enc floatcode
	floatcode_avx2 floatcode_avx2_enc floatcode_avx512
	floatcode_avx512_enc chunk plan pool container pipeline baseline)
formats=(safetensors torchzip distcp pickle_scan tensor_map side_match)
codec_objs=() formats_objs=()
for f in "${codec[@]}"; do codec_objs+=("src/codec/$f.c"); done
for f in "${formats[@]}"; do formats_objs+=("src/formats/$f.c"); done

headers=$(find "$src/src" "$src/include" "$src/tests/fuzz" -name '*.h')
# compile SRC [TAG [FLAGS]]: SRC (relative to SRCDIR) into obj/, with
# libFuzzer's coverage, when the object is missing or older than the
# source or any header; sets O to the object's path.  TAG names a second
# object of the same source, built with FLAGS.
compile() {
	local s=$1 tag=${2:-} o h stale=0
	local extra=()
	[ -n "${3:-}" ] && extra=("$3")
	o=${s%.c}$tag.o
	o=$obj/${o//\//_}
	if [ ! -e "$o" ] || [ "$src/$s" -nt "$o" ]; then
		stale=1
	else
		for h in $headers; do
			if [ "$h" -nt "$o" ]; then
				stale=1
				break
			fi
		done
	fi
	if [ "$stale" = 1 ]; then
		echo "  FUZZCC   $s$tag" >&2
		"$cc" "${cflags[@]}" -fsanitize=fuzzer-no-link "${extra[@]}" \
			-c "$src/$s" -o "$o.tmp"
		mv "$o.tmp" "$o"
	fi
	O=$o
}

# link NAME [-nomain] OBJECT...: a target (or, -nomain, a program with
# its own main) in BUILDDIR/tests/fuzz.
link() {
	local name=$1 fuzzer=-fsanitize=fuzzer
	shift
	if [ "$1" = -nomain ]; then
		fuzzer=
		shift
	fi
	echo "  FUZZLD   tests/fuzz/$name" >&2
	"$cc" "${san[@]}" $fuzzer "$@" "${dep_libs[@]}" -o "$out/$name.tmp"
	mv "$out/$name.tmp" "$out/$name"
}

lib=()
for s in "${codec_objs[@]}" "${formats_objs[@]}"; do
	compile "$s"
	lib+=("$O")
done
t=tests/fuzz
# on NAME SOURCE TAG FLAGS [OBJECTS...]: the target NAME of SOURCE
on() {
	local name=$1 s=$2 tag=$3 flags=$4
	shift 4
	compile "$s" "$tag" "$flags"
	link "$name" "$O" "$@"
}
on fuzz_object $t/fuzz_object.c "" "" "${lib[@]}"
on fuzz_object_ref $t/fuzz_object.c _ref -DFUZZ_WITH_REF=1 "${lib[@]}"
on fuzz_rans $t/fuzz_rans.c "" "" "${lib[@]}"
on fuzz_float $t/fuzz_float.c "" "" "${lib[@]}"
on fuzz_safetensors $t/fuzz_format.c "" "" "${lib[@]}"
on fuzz_torchzip $t/fuzz_format.c _tz -DFUZZ_TORCHZIP=1 "${lib[@]}"
on fuzz_distcp $t/fuzz_format.c _dc -DFUZZ_DISTCP=1 "${lib[@]}"
compile src/objstore/s3_xml.c
on fuzz_s3_xml $t/fuzz_s3_xml.c "" "" "$O"
compile src/objstore/catalog_pointer.c
on fuzz_catalog_pointer $t/fuzz_catalog_pointer.c "" "" "$O"
compile src/store/catalog.c
catalog_o=$O
on fuzz_catalog $t/fuzz_catalog.c "" "" "$O"
compile src/ctl/ctl_parse.c
on fuzz_ctl $t/fuzz_ctl.c "" "" "$O"
# the seed maker (tests/fuzz/make_seeds.sh): the codec's encoders
compile $t/make_seeds.c
link make_seeds -nomain "$O" "${lib[@]}" "$catalog_o"
