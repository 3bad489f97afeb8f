#!/usr/bin/env bash
# tests/fs_modes.sh - run every mount test with one write mode forced:
# FS_WRITE_MODE=passthrough|direct|cached, the tests in FS_MODE_TESTS
# (paths relative to the source tree; make check sets both through
# tests/fs_passthrough.sh and tests/fs_direct.sh and AM_TESTS_ENVIRONMENT).
# Each test checks, when it mounts, that the daemon writes in that mode; a
# forced passthrough the kernel refuses fails (is skipped with
# ULPFS_ALLOW_SKIP=1), loudly.  Exit 0 if all passed, 77 if all were
# skipped, else 1.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
set -u
srcdir=$(cd "$(dirname "$0")/.." && pwd)
mode=${FS_WRITE_MODE:-}
if [ -z "$mode" ] || [ -z "${FS_MODE_TESTS:-}" ]; then
	echo "fs_modes.sh: FS_WRITE_MODE and FS_MODE_TESTS must be set" >&2
	exit 1
fi
export FS_WRITE_MODE
pass=0 fail=0 skip=0 failed=""
t0=$SECONDS
for t in $FS_MODE_TESTS; do
	name=$(basename "$t" .sh)
	echo "=================== $name (write_mode=$mode)"
	FS_TEST="$name@$mode" bash "$srcdir/$t"
	rc=$?
	case $rc in
	0) pass=$((pass + 1)) ;;
	77) skip=$((skip + 1)) ;;
	*) fail=$((fail + 1)) failed="$failed $name" ;;
	esac
	echo "=================== $name (write_mode=$mode): exit $rc"
done
echo
echo "write_mode=$mode: $pass passed, $fail failed, $skip skipped ($((SECONDS - t0)) s)${failed:+; failed:$failed}"
[ "$fail" -gt 0 ] && exit 1
[ "$pass" -eq 0 ] && [ "$skip" -gt 0 ] && exit 77
exit 0
