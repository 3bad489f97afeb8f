#!/usr/bin/env bash
# tests/codec_decoders.sh - the codec's unit tests under each AVX-512 rANS
# decoder: the one that loads its table entries by gathers (the default on
# Intel, and on AMD Zen 5 for blocks with contexts) and the one that loads
# them one by one (the default on AMD Zen 4, whose gathers are slow, and
# on Zen 5 for blocks of one table).  A CPU runs only its defaults in the
# other unit tests;
# ULPFS_RANS_GATHERS picks the other here, so that both are tested on any
# CPU with AVX-512.  Without AVX-512 neither runs: the test is skipped
# (exit 77), which tests/run-all.sh counts as a failure unless
# ULPFS_ALLOW_SKIP=1.
#
# Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
set -u

progs=(tests/test_rans tests/test_codec tests/test_container)
for f in avx512f avx512bw avx512vl avx512cd avx512vbmi avx512_vbmi2; do
	if ! grep -qw "$f" /proc/cpuinfo; then
		echo "codec_decoders: SKIP: this CPU lacks $f, so no AVX-512 rANS decoder runs here" >&2
		exit 77
	fi
done
failed=0
for g in 0 1; do
	for p in "${progs[@]}"; do
		[ -x "$p" ] || { echo "codec_decoders: $p was not built" >&2; exit 1; }
		echo "== ULPFS_RANS_GATHERS=$g $p"
		if ! ULPFS_RANS_GATHERS=$g "./$p"; then
			echo "codec_decoders: FAIL: $p with ULPFS_RANS_GATHERS=$g" >&2
			failed=1
		fi
	done
done
exit "$failed"
