#!/usr/bin/env bash
# bench/pjdfstest.sh PJDFSTEST_DIR [GROUP...]
#
# Runs the pjdfstest POSIX conformance suite (https://github.com/pjd/pjdfstest,
# built by its own "autoreconf -ifs && ./configure && make pjdfstest", outside
# this tree) as root in a fresh ulpfs mount with default_permissions and
# allow_other (its tests switch to other users), and prints, per group and in
# total, the assertions passed out of those run and those the suite marks
# TODO for Linux (expected to fail: Linux's local filesystems fail them too),
# then every failure with the suite's own reason ("tried ..., expected ...,
# got ...").  GROUPs are
# directories of PJDFSTEST_DIR/tests; default: the issue's subset chmod
# chown ftruncate link mkdir open rename rmdir symlink truncate unlink
# utimensat.  Exit status 1 when an assertion failed.  ULPFS=path/to/ulpfs
# (default _build/ulpfs); FS_WRITE_MODE picks a write mode.
#
# Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "${BASH_SOURCE[0]}")/../tests/fs_lib.sh"

PJD=${1:-}
[ -n "$PJD" ] || { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
shift
PJD=$(realpath "$PJD")
[ -x "$PJD/pjdfstest" ] && [ -d "$PJD/tests" ] || { echo "pjdfstest.sh: $PJD has no built pjdfstest and tests/" >&2; exit 2; }
GROUPS_RUN=${*:-chmod chown ftruncate link mkdir open rename rmdir symlink truncate unlink utimensat}
fs_init
[ "$(id -u)" = 0 ] || die "pjdfstest runs as root"
command -v prove >/dev/null || die "prove (perl) is missing"
FS_MOUNT_OPTS=${FS_MOUNT_OPTS:+$FS_MOUNT_OPTS,}default_permissions,allow_other
chmod o+x "$WORK" # the suite's other users must reach the mount point
fs_mount "$WORK/store" "$WORK/mnt"
say "pjdfstest $(git -C "$PJD" rev-parse --short=12 HEAD 2>/dev/null || echo '?'), ulpfs $(git -C "$FS_SRCDIR" rev-parse --short HEAD 2>/dev/null || echo '?'), $(uname -r), write mode $(fs_write_mode "$WORK/mnt")"
tpass=0 ttotal=0 ttodo=0
: >"$WORK/failures"
for g in $GROUPS_RUN; do
	[ -d "$PJD/tests/$g" ] || die "no test group $g in $PJD/tests"
	pass=0 total=0 todo=0
	for t in $(cd "$PJD/tests/$g" && ls -1 *.t | sort -V); do
		(cd "$WORK/mnt" && timeout -k 5 600 prove -v "$PJD/tests/$g/$t") >"$WORK/tap" 2>&1
		p=$(grep -cE '^ok [0-9]+' "$WORK/tap")
		f=$(grep -E '^not ok' "$WORK/tap" | grep -cv '# TODO')
		d=$(grep -E '^not ok' "$WORK/tap" | grep -c '# TODO')
		pass=$((pass + p)) total=$((total + p + f)) todo=$((todo + d))
		grep -E '^not ok' "$WORK/tap" | grep -v '# TODO' | sed "s|^|$g/$t: |" >>"$WORK/failures"
		grep -qE '^(Result: PASS|Result: FAIL)' "$WORK/tap" || echo "$g/$t: did not finish ($(tail -n1 "$WORK/tap"))" >>"$WORK/failures"
	done
	say "$(printf '%-10s %5d / %5d passed, %d TODO' "$g" "$pass" "$total" "$todo")"
	tpass=$((tpass + pass)) ttotal=$((ttotal + total)) ttodo=$((ttodo + todo))
done
say "$(printf '%-10s %5d / %5d passed (%s%%), %d TODO' total "$tpass" "$ttotal" "$(calc "100 * $tpass / ($ttotal > 0 ? $ttotal : 1)" 2)" "$ttodo")"
if [ -s "$WORK/failures" ]; then
	say "failures:"
	sed 's/^/    /' "$WORK/failures"
fi
# Nothing the suite leaves behind matters: the mount goes with $WORK.
fs_umount "$WORK/mnt"
[ -s "$WORK/failures" ] && bad "$(wc -l <"$WORK/failures") failed assertions"
fs_finish
