#!/usr/bin/env bash
# tests/fuzz/run.sh - run every libFuzzer target (or those named) for a
# given time each; see tests/fuzz/README.md.
#
#   tests/fuzz/run.sh [--seconds N] [--build DIR] [--keep DIR] [TARGET...]
#
# --seconds N  fuzzing time per target (default 60); 0 only replays the
#              seeds and the regression inputs
# --build DIR  the build tree whose tests/fuzz/ holds the targets (default
#              the current directory; make builds them with make check,
#              or alone with: make tests/fuzz/.built)
# --keep DIR   the working corpora live in DIR/TARGET and are kept (a
#              later run goes on from them); default a temporary one
# TARGET       names from the table below (default all this CPU runs)
#
# Each target first runs its regression inputs (tests/fuzz/regress/CORPUS:
# inputs that once failed), then fuzzes from its seeds
# (tests/fuzz/corpus/CORPUS and the real files of tests/data it names): a
# crash, a leak, a sanitizer report, an input that takes more than a
# second of CPU time (tests/fuzz/fuzz_cpu.h) or more than 2 GiB fail the
# target; its input is left in the artifacts directory printed.
# libFuzzer's own -timeout, which counts wall-clock time, is 30 s: on a
# busy machine a second of wall-clock time says nothing about the input.  At the end a table gives each
# target's executions and coverage (libFuzzer's cov and ft).  Exit 0 only
# when every target passed.
#
# Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
data=$here/../data
seconds=60
build=.
keep=
while [ $# -gt 0 ]; do
	case $1 in
	--seconds) seconds=${2:?}; shift 2 ;;
	--build) build=${2:?}; shift 2 ;;
	--keep) keep=${2:?}; shift 2 ;;
	--help|-h) sed -n '2,/^# Copyright/p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	-*) echo "run.sh: unknown option $1" >&2; exit 2 ;;
	*) break ;;
	esac
done
case $seconds in ''|*[!0-9]*) echo "run.sh: --seconds needs a number" >&2; exit 2 ;; esac

# name binary corpus environment (- for none); the SIMD variants only
# where the CPU runs them (the codec picks its kernels from the CPU,
# ULPFS_SIMD caps the level, ULPFS_RANS_GATHERS picks the AVX-512
# decoder: src/codec/rans.h)
has() { grep -qw "$1" /proc/cpuinfo; }
avx2=0 avx512=0
has avx2 && has bmi2 && avx2=1
if [ $avx2 = 1 ]; then
	avx512=1
	for f in avx512f avx512bw avx512vl avx512cd avx512vbmi avx512_vbmi2; do
		has $f || avx512=0
	done
fi
table=(
	"object fuzz_object object -"
	"object_ref fuzz_object_ref object -"
	"safetensors fuzz_safetensors safetensors -"
	"torchzip fuzz_torchzip torchzip -"
	"distcp fuzz_distcp distcp -"
	"s3_xml fuzz_s3_xml s3_xml -"
	"catalog_pointer fuzz_catalog_pointer catalog_pointer -"
	"catalog fuzz_catalog catalog -"
	"ctl fuzz_ctl ctl -"
)
for k in rans float; do
	table+=("$k-scalar fuzz_$k $k ULPFS_SIMD=0")
	[ $avx2 = 1 ] && table+=("$k-avx2 fuzz_$k $k ULPFS_SIMD=1")
	[ $avx512 = 1 ] && table+=("$k-avx512-gathers fuzz_$k $k ULPFS_RANS_GATHERS=1"
		"$k-avx512-loads fuzz_$k $k ULPFS_RANS_GATHERS=0")
done
[ $avx2 = 1 ] || echo "run.sh: this CPU lacks AVX2/BMI2: only the scalar rANS and float decoders run" >&2
[ $avx512 = 1 ] || echo "run.sh: this CPU lacks the AVX-512 the codec needs: its AVX-512 decoders do not run" >&2

# the real files of tests/data each corpus starts from besides its own
extra_seeds() {
	case $1 in
	object) ls "$data"/format*/v1-16k.ulp ;;
	torchzip | distcp) ls "$data"/*.pt ;;
	catalog) echo "$data/store-v3/catalog.db" ;;
	esac
}

want=("$@")
selected() {
	[ ${#want[@]} = 0 ] && return 0
	local w
	for w in "${want[@]}"; do [ "$w" = "$1" ] && return 0; done
	return 1
}
for w in "${want[@]}"; do
	found=0
	for row in "${table[@]}"; do
		[ "${row%% *}" = "$w" ] && found=1
	done
	[ $found = 1 ] || { echo "run.sh: no target $w on this CPU" >&2; exit 2; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/ulpfs-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
artifacts=${keep:-$work}/artifacts
mkdir -p "$artifacts"
[ -n "$keep" ] && mkdir -p "$keep"
limits=(-timeout=30 -rss_limit_mb=2048)
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"

failed=() summary=()
start=$SECONDS
for row in "${table[@]}"; do
	read -r name bin corpus env <<<"$row"
	selected "$name" || continue
	exe=$build/tests/fuzz/$bin
	if [ ! -x "$exe" ]; then
		echo "run.sh: FAIL: $exe was not built (configure: FUZZ_CC; make tests/fuzz/.built)" >&2
		failed+=("$name")
		continue
	fi
	envv=()
	[ "$env" != - ] && envv=("$env")
	log=$work/$name.log
	# the target's own temporary files (fuzz_catalog) go under $work
	run() { env TMPDIR="$work" "${envv[@]}" "$exe" "$@"; }
	regress=$here/regress/$corpus
	if [ -d "$regress" ] && [ -n "$(ls -A "$regress")" ]; then
		if ! run "${limits[@]}" "$regress"/* >"$log" 2>&1; then
			echo "run.sh: FAIL: $name: a regression input fails again" >&2
			tail -40 "$log" >&2
			failed+=("$name")
			continue
		fi
	fi
	dir=${keep:-$work}/$name
	mkdir -p "$dir"
	seeds=()
	[ -d "$here/corpus/$corpus" ] && seeds+=("$here/corpus/$corpus")
	while read -r f; do [ -n "$f" ] && seeds+=("$f"); done < <(extra_seeds "$corpus")
	seed_dir=$work/$name.seeds
	mkdir -p "$seed_dir"
	for s in "${seeds[@]}"; do
		if [ -d "$s" ]; then cp "$s"/* "$seed_dir"/; else cp "$s" "$seed_dir/$(basename "$(dirname "$s")")-$(basename "$s")"; fi
	done
	t0=$SECONDS
	if [ "$seconds" = 0 ]; then
		args=(-runs=0)
	else
		args=(-max_total_time="$seconds")
	fi
	echo "== $name (${env/#-/default kernels}) $seconds s" >&2
	if run "${args[@]}" "${limits[@]}" -print_final_stats=1 \
		-artifact_prefix="$artifacts/$name-" "$dir" "$seed_dir" >"$log" 2>&1; then
		res=ok
	else
		res=FAIL
		failed+=("$name")
		echo "run.sh: FAIL: $name (input in $artifacts):" >&2
		grep -v '^#[0-9]' "$log" | tail -60 >&2
	fi
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
	last=$(grep -E '^#[0-9]+[[:space:]]+(DONE|INITED|NEW|REDUCE|pulse)' "$log" | tail -1)
	cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
	ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
	corp=$(sed -n 's/.* corp: \([0-9]*\/[0-9A-Za-z]*\).*/\1/p' <<<"$last")
	summary+=("$(printf '%-22s %12s %7s %7s %11s %6s %s' "$name" "${execs:-?}" \
		"${cov:-?}" "${ft:-?}" "${corp:-?}" "$((SECONDS - t0))s" "$res")")
done
printf '%-22s %12s %7s %7s %11s %6s %s\n' target execs cov ft corpus time result
printf '%s\n' "${summary[@]}"
echo "total wall time $((SECONDS - start)) s"
if [ ${#failed[@]} -gt 0 ]; then
	echo "run.sh: FAILED: ${failed[*]}" >&2
	exit 1
fi
exit 0
