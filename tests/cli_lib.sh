# tests/cli_lib.sh - shared helpers of the helper-command tests
# (tests/cli_*.sh) and bench/cli_bench.sh.  Source it; do not run it.  It
# sources tests/fs_lib.sh (mounting, clean-up on every exit path, step / ok /
# bad / die / fs_finish) and adds:
#
#   cli_init CMD...          fs_init, then checks that "ulpfs CMD --help"
#                            works for every CMD (a missing command is a
#                            FAILURE, never a skip)
#   run ARGS...              ulpfs ARGS (under timeout): stdout in $OUT_F,
#                            stderr in $ERR_F, status in $RC
#   expect RCS WHAT ARGS...  run, then ok/bad on the status: RCS is "0",
#                            "1", "1|2" ...; a crash (signal) or a hang is
#                            always a failure; on failure the output is shown
#   expect_err RCS PATTERN WHAT ARGS...
#                            as expect, and stderr must contain PATTERN
#                            (fixed string, case-insensitive)
#   in_dir DIR ARGS...       run ARGS with DIR as the working directory
#   util SUBCMD ARGS...      tests/cli_util.py (quietly; output shown on
#                            failure); returns its status
#
# Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.

. "$(dirname "${BASH_SOURCE[0]}")/fs_lib.sh"

CLI_UTIL=$FS_SRCDIR/tests/cli_util.py
RC=0
OUT_F=""
ERR_F=""
RUN_DIR=""

cli_init() {
	local c
	fs_init
	OUT_F=$WORK/cli.out
	ERR_F=$WORK/cli.err
	for c in "$@"; do
		if ! "$ULPFS" "$c" --help >"$WORK/help.out" 2>&1; then
			sed 's/^/    | /' "$WORK/help.out" | head -5 >&2
			die "'ulpfs $c --help' fails: this ulpfs has no working '$c' command"
		fi
		[ -s "$WORK/help.out" ] || bad "'ulpfs $c --help' printed nothing"
	done
}

run() {
	if [ -n "$RUN_DIR" ]; then
		(cd "$RUN_DIR" && exec timeout -k 5 "${CLI_TIMEOUT:-120}" "$ULPFS" "$@") >"$OUT_F" 2>"$ERR_F"
	else
		timeout -k 5 "${CLI_TIMEOUT:-120}" "$ULPFS" "$@" >"$OUT_F" 2>"$ERR_F"
	fi
	RC=$?
}

in_dir() {
	local d=$1
	shift
	RUN_DIR=$d
	"$@"
	local r=$?
	RUN_DIR=""
	return $r
}

show_output() {
	{
		echo "    | \$ ulpfs $*   (exit $RC${RUN_DIR:+, in $RUN_DIR})"
		[ -s "$OUT_F" ] && head -n 15 "$OUT_F" | sed 's/^/    | out: /'
		[ -s "$ERR_F" ] && head -n 15 "$ERR_F" | sed 's/^/    | err: /'
	} >&2
}

rc_in() { # RC RCS
	local IFS='|' r
	for r in $2; do [ "$1" = "$r" ] && return 0; done
	return 1
}

# The status alone: 0 when it is one of RCS and no crash/hang.
rc_ok() {
	if [ "$RC" = 124 ] || [ "$RC" = 137 ]; then
		echo "    | (timed out after ${CLI_TIMEOUT:-120} s)" >&2
		return 1
	fi
	if [ "$RC" -ge 128 ]; then
		echo "    | (killed by signal $((RC - 128)): a crash)" >&2
		return 1
	fi
	rc_in "$RC" "$1"
}

expect() {
	local rcs=$1 what=$2
	shift 2
	run "$@"
	if rc_ok "$rcs"; then
		ok "$what (exit $RC)"
		return 0
	fi
	bad "$what: expected exit $rcs, got $RC"
	show_output "$@"
	return 1
}

expect_err() {
	local rcs=$1 pat=$2 what=$3
	shift 3
	run "$@"
	if ! rc_ok "$rcs"; then
		bad "$what: expected exit $rcs, got $RC"
		show_output "$@"
		return 1
	fi
	if [ "$rcs" != 0 ] && ! [ -s "$ERR_F" ]; then
		bad "$what: exit $RC but nothing on stderr"
		show_output "$@"
		return 1
	fi
	if [ -n "$pat" ] && ! grep -qiF -- "$pat" "$ERR_F"; then
		bad "$what: exit $RC, but stderr does not name '$pat'"
		show_output "$@"
		return 1
	fi
	ok "$what (exit $RC: $(head -n1 "$ERR_F" | cut -c1-100))"
	return 0
}

util() {
	local out r
	out=$("$PY" "$CLI_UTIL" "$@" 2>&1)
	r=$?
	UTIL_OUT=$out
	if [ "$r" -ne 0 ]; then
		printf '%s\n' "$out" | head -n 12 | sed 's/^/    | /' >&2
	fi
	return $r
}

# The number of the newest version of store path P (from log --json),
# "" when unknown.  Args: the store-finding arguments, then P.
newest_version() {
	run log "$@" --json
	[ "$RC" = 0 ] || return 1
	"$PY" - "$OUT_F" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
if isinstance(d, dict):
    for k in ("versions", "log", "entries", "history"):
        if isinstance(d.get(k), list):
            d = d[k]
            break
for k in ("version", "n", "number", "seq", "num", "v"):
    if d and k in d[-1]:
        print(d[-1][k])
        break
PY
}

# Lines of ls -a / find / du of the mount that mention .ulpfs (must be none).
ctl_visible() {
	{
		ls -a "$1"
		find "$1" -mindepth 1
		du -a "$1"
	} 2>/dev/null | grep -c '\.ulpfs'
}
