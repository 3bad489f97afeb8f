#!/usr/bin/env bash
# tests/run-all.sh - install the dependencies, build ulpfs out of tree and run
# every test: "make check" (unit tests, their ASan+UBSan variants and the
# integration tests) and then "make distcheck", which builds everything
# from the tarball and runs a part of the tests there (distcheck_tests in
# Makefile.am).
#
# Meant for a fresh Debian 12 machine, as root (or with sudo).  Ends with
# its wall time (each step's too) and a line "N passed, M failed", and
# exits non-zero if anything failed.
#
# Environment:
#   ULPFS_NO_APT=1          do not apt-get install the dependencies
#   ULPFS_SKIP_DISTCHECK=1  do not run "make distcheck"
#   ULPFS_ALLOW_SKIP=1      a SKIPped test is not a failure
#   ULPFS_BUILD_DIR=DIR     build directory (default: _build in the source
#                           tree; relative paths are taken from there)
#   ULPFS_CONFIGURE_FLAGS   extra ./configure flags (also used by distcheck),
#                           e.g. "--disable-sanitizer-tests"
#   JOBS=N                  make -j N for the build (default: nproc)
#   CHECK_JOBS=N            make -j N for make check and make distcheck
#                           (default: 2 x JOBS: many tests wait on mounts,
#                           servers, fsync and sleeps rather than compute)
#
# Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.

set -euo pipefail

srcdir=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$srcdir"

builddir=${ULPFS_BUILD_DIR:-_build}
case $builddir in
/*) ;;
*) builddir=$srcdir/$builddir ;;
esac
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}
check_jobs=${CHECK_JOBS:-$((jobs * 2))}
read -r -a configure_flags <<<"${ULPFS_CONFIGURE_FLAGS:-}"

# Packages a fresh Debian 12 needs to build and test everything.
apt_packages=(
	autoconf automake pkg-config make gcc libc6-dev
	libfuse3-dev fuse3
	libzstd-dev zstd
	libsqlite3-dev
	libxxhash-dev
	libjansson-dev
	libcriterion-dev
	python3 python3-torch python3-numpy
	# without it Debian's PyTorch runs fp32 matmuls on the reference BLAS
	# (the tests that train: 4.8 GFLOP/s a thread against 75.7)
	libopenblas0-pthread
	# tests/cli_svg.sh opens the stats --svg chart in it (--headless)
	chromium
	fio rsync attr acl
	# tests/fs_bigfile.sh makes its incompressible source with it
	openssl
	libcurl4-openssl-dev libssl-dev libexpat1-dev
	swift-proxy swift-object swift-container swift-account memcached
	curl awscli s3cmd
	# the watchdog of tests/fs_lib.sh shows a hung test's daemon stacks
	gdb
	# the libFuzzer targets (tests/fuzz): clang-14 only recommends the
	# package that holds libFuzzer
	clang-14 libclang-rt-14-dev
)

passed=0
failed=0
skipped=0
finished=0
distcheck_result="not run"
start_time=$SECONDS
failed_logs=()
# Seconds each step took, in order ("packages 95s" ...), for the summary.
step_times=()
step_start=$SECONDS
# step_done NAME: NAME took the seconds since the previous step ended.
step_done() {
	step_times+=("$1 $((SECONDS - step_start))s")
	step_start=$SECONDS
}

say() { printf '==> %s\n' "$*"; }
warn() { printf 'run-all.sh: %s\n' "$*" >&2; }

summary() {
	finished=1
	echo
	echo "==================================================================="
	printf 'tests (automake .trs): %d passed, %d failed' \
		"$((passed - pass_extra))" "$((failed - fail_extra))"
	if [ "$skipped" -gt 0 ]; then
		printf ', %d skipped (allowed by ULPFS_ALLOW_SKIP=1)' "$skipped"
	fi
	printf '\ndistcheck: %s\n' "$distcheck_result"
	# The failing checks of each failed test, here at the end where a
	# truncated CI log still shows them.
	local log
	for log in "${failed_logs[@]}"; do
		echo "failed checks in ${log#./}:"
		grep -E '(^|[] ])(FAIL|FAILED|FATAL|not ok)[: ]' "$log" 2>/dev/null | head -n 20 | sed 's/^/    /' ||
			echo "    (no FAIL line in the log)"
	done
	# A full disk fails tests anywhere: say how much room there was.
	if [ "$failed" -gt 0 ]; then
		echo "free space at the end:"
		df -h "$builddir" "${TMPDIR:-/tmp}" 2>/dev/null | sed 's/^/    /' || true
	fi
	local steps="" t
	for t in "${step_times[@]}"; do steps+="${steps:+, }$t"; done
	printf 'wall time: %d s%s\n' "$((SECONDS - start_time))" "${steps:+ ($steps)}"
	# CPU time of the processes waited for (daemons are not): against
	# the wall time and the cores, how much CHECK_JOBS could still gain.
	# (times in this shell: a subshell's would count nothing)
	local cpu_file
	if cpu_file=$(mktemp "${TMPDIR:-/tmp}/ulpfs-times.XXXXXX"); then
		times >"$cpu_file"
		echo "cpu time: $(sed -n 2p "$cpu_file") (user, sys)"
		rm -f "$cpu_file"
	fi
	echo "==================================================================="
	echo "$passed passed, $failed failed"
}
# Steps that are not .trs results (build, make check itself, distcheck) add
# to these so that the breakdown above stays honest.
pass_extra=0
fail_extra=0

# Record a failed step and stop.
die() {
	warn "$*"
	failed=$((failed + 1))
	fail_extra=$((fail_extra + 1))
	summary
	exit 1
}

on_exit() {
	local rc=$?
	if [ "$finished" = 0 ]; then
		warn "aborted unexpectedly (exit status $rc)"
		failed=$((failed + 1))
		fail_extra=$((fail_extra + 1))
		summary
		[ "$rc" != 0 ] || rc=1
	fi
	exit "$rc"
}
trap on_exit EXIT

# Run a command with its output in a log file; show the log if it fails.
quietly() {
	local logfile=$1
	shift
	local rc=0
	"$@" >"$logfile" 2>&1 || rc=$?
	[ "$rc" != 0 ] || return 0
	warn "command failed (exit $rc): $*"
	echo "----- $logfile (last 200 lines) -----" >&2
	tail -n 200 "$logfile" >&2 || true
	echo "-----" >&2
	return "$rc"
}

# ---------------------------------------------------------------- packages

if [ "${ULPFS_NO_APT:-0}" = 1 ]; then
	say "skipping apt-get (ULPFS_NO_APT=1)"
else
	if [ "$(id -u)" = 0 ]; then
		as_root=(env DEBIAN_FRONTEND=noninteractive)
	elif command -v sudo >/dev/null 2>&1; then
		as_root=(sudo env DEBIAN_FRONTEND=noninteractive)
	else
		die "installing packages needs root or sudo (or set ULPFS_NO_APT=1)"
	fi
	aptlog=$(mktemp "${TMPDIR:-/tmp}/ulpfs-apt.XXXXXX")
	say "apt-get install: ${apt_packages[*]}"
	quietly "$aptlog" "${as_root[@]}" apt-get -qq update ||
		die "apt-get update failed"
	quietly "$aptlog" "${as_root[@]}" apt-get -qq -y \
		-o Dpkg::Use-Pty=0 --no-install-recommends install \
		"${apt_packages[@]}" ||
		die "apt-get install failed"
	rm -f "$aptlog"
fi
step_done packages

# ---------------------------------------------------------------- build

for tool in autoreconf automake make pkg-config; do
	command -v "$tool" >/dev/null 2>&1 ||
		die "$tool not found (run without ULPFS_NO_APT=1 to install it)"
done

# An in-tree configuration blocks out-of-tree builds.
if [ -f "$srcdir/config.status" ]; then
	say "source tree was configured in place; running make distclean there"
	quietly "$srcdir/distclean.log" make -C "$srcdir" distclean ||
		die "make distclean in $srcdir failed; remove the in-tree build by hand"
	rm -f "$srcdir/distclean.log"
fi

mkdir -p "$builddir"

say "autoreconf -fi"
quietly "$builddir/autoreconf.log" autoreconf -fi "$srcdir" ||
	die "autoreconf failed"

cd "$builddir"
say "configure${ULPFS_CONFIGURE_FLAGS:+ $ULPFS_CONFIGURE_FLAGS} (in $builddir)"
quietly configure.out "$srcdir/configure" "${configure_flags[@]}" ||
	die "configure failed (see $builddir/config.log)"
# Print configure's warnings and its feature summary.
grep 'WARNING:' configure.out >&2 || true
sed -n '/configured:$/,$p' configure.out

say "make -j$jobs"
make -j"$jobs" || die "build failed"
step_done build

# ---------------------------------------------------------------- make check

count_results() {
	local trs line
	# Results of this run only: stale ones were deleted before make check,
	# and distcheck's own build tree (ulpfs-*/) is left out.
	while IFS= read -r -d '' trs; do
		while IFS= read -r line; do
			case $line in
			":test-result: PASS"* | ":test-result: XFAIL"*)
				passed=$((passed + 1)) ;;
			":test-result: SKIP"*)
				if [ "${ULPFS_ALLOW_SKIP:-0}" = 1 ]; then
					skipped=$((skipped + 1))
				else
					warn "SKIP counts as a failure: ${trs#./}"
					failed=$((failed + 1))
				fi ;;
			":test-result: "*)
				warn "failed: ${trs#./} (${line#:test-result: })"
				failed_logs+=("${trs%.trs}.log")
				failed=$((failed + 1)) ;;
			esac
		done <"$trs"
	done < <(find . -path './ulpfs-*' -prune -o -name '*.trs' -print0)
}

find . -path './ulpfs-*' -prune -o -name '*.trs' -print0 | xargs -0 rm -f
rm -f test-suite.log

say "make -j$check_jobs check"
check_rc=0
make -j"$check_jobs" check || check_rc=$?
step_done "make check"
count_results
if [ "$check_rc" != 0 ]; then
	if [ -f test-suite.log ]; then
		echo "----- $builddir/test-suite.log -----"
		cat test-suite.log
		echo "-----"
	fi
	# A failure that no .trs recorded (a test that did not compile, no
	# Criterion, ...) still counts.
	if [ "$failed" = 0 ]; then
		warn "make check failed (exit $check_rc) before any test failed"
		failed=$((failed + 1))
		fail_extra=$((fail_extra + 1))
	fi
elif [ "$((passed + failed + skipped))" = 0 ]; then
	warn "make check ran no tests at all"
	failed=$((failed + 1))
	fail_extra=$((fail_extra + 1))
fi

# ---------------------------------------------------------------- distcheck

if [ "${ULPFS_SKIP_DISTCHECK:-0}" = 1 ]; then
	distcheck_result="skipped (ULPFS_SKIP_DISTCHECK=1)"
	say "skipping make distcheck (ULPFS_SKIP_DISTCHECK=1)"
elif [ "$check_rc" != 0 ]; then
	distcheck_result="not run (make check failed)"
	say "skipping make distcheck: make check failed"
else
	say "make distcheck (log: $builddir/distcheck.log)"
	# The tarball's build runs a part of the suite (distcheck_tests in
	# Makefile.am): make check above has just run all of it.
	# Nor does it build the sanitizer variant or the fuzz targets again
	# (FUZZ_CC=): the same sources, compiled and run under ASan+UBSan
	# and libFuzzer by make check above.
	if quietly distcheck.log make -j"$check_jobs" distcheck \
		DISTCHECK_CONFIGURE_FLAGS="--disable-sanitizer-tests${ULPFS_CONFIGURE_FLAGS:+ $ULPFS_CONFIGURE_FLAGS}" \
		TESTS='$(distcheck_tests)' FUZZ_CC=; then
		distcheck_result="passed"
		grep -A2 'archives ready for distribution' distcheck.log || true
		passed=$((passed + 1))
		pass_extra=$((pass_extra + 1))
	else
		distcheck_result="FAILED (see $builddir/distcheck.log)"
		failed=$((failed + 1))
		fail_extra=$((fail_extra + 1))
		# A failed distcheck leaves its build tree: show the logs of
		# the tests that failed there, which distcheck.log lacks.
		while IFS= read -r -d '' trs; do
			grep -q '^:test-result: \(FAIL\|ERROR\)' "$trs" || continue
			echo "----- distcheck: ${trs%.trs}.log (last 150 lines) -----"
			tail -n 150 "${trs%.trs}.log" 2>/dev/null || true
			echo "-----"
			failed_logs+=("${trs%.trs}.log")
		done < <(find . -path './ulpfs-*' -name '*.trs' -print0 2>/dev/null)
	fi
	step_done distcheck
fi

summary
[ "$failed" = 0 ]
