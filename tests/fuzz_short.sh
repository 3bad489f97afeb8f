#!/usr/bin/env bash
# tests/fuzz_short.sh - make check's run of the libFuzzer targets: each
# one's regression inputs, then a couple of seconds of fuzzing from its
# seeds (tests/fuzz/run.sh --seconds ULPFS_FUZZ_SECONDS, default 2).  Fails
# on any crash, leak, sanitizer report or input that takes more than a
# second of CPU time, and loudly when configure found no clang with
# libFuzzer: it never skips.
#
# Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ ! -e tests/fuzz/.built ]; then
	echo "fuzz_short: FAIL: the libFuzzer targets were not built: configure" \
		"found no clang that links -fsanitize=fuzzer (Debian 12:" \
		"apt-get install clang-14 libclang-rt-14-dev; see config.log)" >&2
	exit 1
fi
exec bash "$here/fuzz/run.sh" --seconds "${ULPFS_FUZZ_SECONDS:-2}" --build .
