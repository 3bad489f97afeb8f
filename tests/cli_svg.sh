#!/usr/bin/env bash
# tests/cli_svg.sh - "ulpfs stats --svg FILE", the chart of each
# checkpoint's raw, stored and zstd -19 bytes:
#   - checkpoints are directories (checkpoint-N/), in the order written,
#     not by name; a directory overwritten in place gives one per round
#     of versions (live@1, live@2);
#   - the SVG is well-formed XML with one bar per checkpoint and series,
#     its byte counts equal to stats --json's by_checkpoint figures, which
#     add up to the store's totals; zstd -19 bars only with --zstd19;
#     axis titles, legend, and each checkpoint's name as its label, with
#     markup characters escaped and what XML cannot hold (a byte that is
#     not UTF-8, a control character) shown as U+FFFD;
#   - it opens in a browser: chromium --headless --screenshot of it is not
#     blank and shows the stored and zstd -19 colours;
#   - on an unmounted store too, and on an empty one (no bars, a note); a
#     directory that does not exist, an empty name, --svg on another
#     command: an error, no file left.
# chromium missing is a FAILURE unless ULPFS_ALLOW_SKIP=1 (then exit 77).
#
# Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/cli_lib.sh"
cli_init stats sync gc

CHECK=$FS_SRCDIR/tests/svg_check.py
STORE=$WORK/store
MNT=$WORK/mnt
fs_mount "$STORE" "$MNT"

# ckpt DIR SEED: a checkpoint-like directory (float weights, a small JSON)
ckpt() {
	mkdir -p "$1"
	"$PY" - "$1" "$2" <<'PY'
import json, sys
import numpy as np
d, seed = sys.argv[1], int(sys.argv[2])
w = np.random.default_rng(1).standard_normal(200000).astype(np.float32)
w += np.random.default_rng(seed).standard_normal(w.size).astype(np.float32) * 1e-3 * seed
w.tofile(d + "/weights.bin")
json.dump({"step": seed}, open(d + "/state.json", "w"))
PY
}

step "checkpoints written out of name order, odd names, a file overwritten in place"
ODD=$'run/a&b<c>"d\'e \xff\x01'
LONG=run/$(printf 'x%.0s' $(seq 60))
i=0
for d in run/checkpoint-20 run/checkpoint-3 "$ODD" "$LONG"; do
	i=$((i + 1))
	ckpt "$MNT/$d" "$i"
	"$ULPFS" sync "$MNT" || bad "sync failed"
done
mkdir -p "$MNT/live"
for r in 1 2; do
	echo "round $r" >"$MNT/live/latest.txt"
	"$ULPFS" sync "$MNT" || bad "sync failed"
done
# The newest version of each file is re-encoded against its successor in
# the background (reverse chains): wait for those flips ("ulpfs gc" does),
# so that every chart below sees the same stored sizes.
"$ULPFS" gc "$MNT" >/dev/null || bad "ulpfs gc failed"
want="'run/checkpoint-20' 'run/checkpoint-3' 'run/a&b<c>\"d\\'e \\ufffd\\x01' '$LONG' 'live@1' 'live@2'"

# chart NAME ARGS...: stats ARGS --svg $WORK/NAME.svg --json, then the
# checks of svg_check.py; the checkpoint names in $WORK/NAME.names
chart() {
	local name=$1 z=""
	shift
	case " $* " in *" --zstd19 "*) z=--zstd19 ;; esac
	expect 0 "stats $* --svg $name.svg --json" stats "$@" --json --svg "$WORK/$name.svg"
	cp "$OUT_F" "$WORK/$name.json"
	grep -qF "chart: $WORK/$name.svg (6 checkpoints)" "$ERR_F" &&
		ok "it says where the chart is (on stderr with --json)" || bad "no 'chart:' line: $(cat "$ERR_F")"
	if "$PY" "$CHECK" chart "$WORK/$name.svg" "$WORK/$name.json" $z >"$WORK/$name.names" 2>"$WORK/check.err"; then
		ok "$name.svg: well-formed, a bar per checkpoint and series with its figures, labels, legend, axes"
	else
		bad "$name.svg: $(cat "$WORK/check.err")"
	fi
	local got
	got=$(tr '\n' ' ' <"$WORK/$name.names")
	[ "$got" = "$want " ] && ok "checkpoints in the order written: $got" ||
		bad "checkpoints: $got, expected $want"
	"$PY" - "$WORK/$name.json" $z <<'PY' && ok "by_checkpoint adds up to the store's totals" || bad "by_checkpoint does not add up"
import json, sys
s = json.load(open(sys.argv[1]))
cks = s["by_checkpoint"]
assert sum(c["versions"] for c in cks) == s["versions"]["live"] + s["versions"]["ghost"], cks
assert sum(c["logical"] for c in cks) == s["logical"], (cks, s["logical"])
assert sum(c["stored"] for c in cks) == s["physical"], (cks, s["physical"])
if len(sys.argv) > 2:
    assert sum(c["zstd19"] for c in cks) == s["zstd19"]["bytes"], cks
else:
    assert all("zstd19" not in c for c in cks), cks
PY
}

step "stats --svg on the mount, without and with --zstd19"
chart plain "$MNT"
chart z19 --zstd19 "$MNT"
expect 0 "stats --svg (text)" stats --svg "$WORK/text.svg" "$MNT"
grep -q "^logical " "$OUT_F" && grep -qF "chart: $WORK/text.svg (6 checkpoints)" "$OUT_F" &&
	ok "the usual figures, then where the chart is" || bad "stats --svg printed: $(head -3 "$OUT_F")"
cmp -s "$WORK/text.svg" "$WORK/plain.svg" && ok "the same chart with and without --json" ||
	bad "text.svg differs from plain.svg"

step "it opens in a browser: chromium --headless --screenshot"
if ! command -v chromium >/dev/null; then
	if [ "${ULPFS_ALLOW_SKIP:-0}" = 1 ]; then
		say "chromium is not installed: SKIPPING (ULPFS_ALLOW_SKIP=1)"
		exit 77
	fi
	die "chromium is not installed (apt-get install chromium): cannot check that the chart renders"
fi
size=$("$PY" -c 'import sys, xml.etree.ElementTree as E; r = E.parse(sys.argv[1]).getroot(); print("%s,%s" % (r.get("width"), r.get("height")))' "$WORK/z19.svg")
mkdir -p "$WORK/chromium" "$WORK/home"
# as root chromium needs --no-sandbox; the rest keeps it off the network
# and out of any profile but its own
if HOME=$WORK/home timeout -k 5 120 chromium --headless --no-sandbox --disable-gpu \
	--disable-background-networking --disable-component-update --disable-sync \
	--no-first-run --user-data-dir="$WORK/chromium" --window-size="$size" \
	--screenshot="$WORK/z19.png" "file://$WORK/z19.svg" >"$WORK/chromium.log" 2>&1 &&
	[ -s "$WORK/z19.png" ]; then
	ok "chromium wrote a screenshot ($size)"
	if out=$("$PY" "$CHECK" png "$WORK/z19.png" --colour 1f77b4 --colour ff7f0e --colour 9e9e9e 2>&1); then
		ok "the screenshot is not blank and shows all three series: $out"
	else
		bad "$out"
	fi
else
	bad "chromium failed: $(tail -n 5 "$WORK/chromium.log")"
fi
[ -n "${ULPFS_SVG_KEEP:-}" ] && cp "$WORK/z19.svg" "$WORK/z19.png" "$ULPFS_SVG_KEEP/"

step "an unmounted store"
fs_umount "$MNT"
chart unmounted --zstd19 --store "$STORE"
cmp -s "$WORK/unmounted.svg" "$WORK/z19.svg" && ok "the same chart as on the mount" ||
	bad "unmounted.svg differs from z19.svg"

step "an empty store: a chart that says so"
fs_mount "$WORK/empty" "$MNT"
fs_umount "$MNT"
expect 0 "stats --svg of an empty store" stats --store "$WORK/empty" --svg "$WORK/empty.svg"
"$PY" - "$WORK/empty.svg" <<'PY' && ok "empty.svg: well-formed, no bars, 'no versions in the store'" || bad "empty.svg is not the empty chart"
import sys, xml.etree.ElementTree as ET
ns = "{http://www.w3.org/2000/svg}"
root = ET.parse(sys.argv[1]).getroot()
assert not [r for r in root.iter(ns + "rect") if r.find(ns + "title") is not None]
assert "no versions in the store" in ["".join(t.itertext()) for t in root.iter(ns + "text")]
PY

step "bad arguments"
expect_err 1 "No such file" "--svg into a directory that does not exist" \
	stats --store "$STORE" --svg "$WORK/nodir/x.svg"
[ -z "$(ls "$WORK/nodir" 2>/dev/null)" ] && ok "nothing written" || bad "files left in nodir"
expect_err 2 "empty file name" "--svg ''" stats --store "$STORE" --svg ""
expect_err 2 "not accepted" "--svg on log" log --store "$STORE" --svg "$WORK/log.svg" run
[ ! -e "$WORK/log.svg" ] && ok "log --svg wrote nothing" || bad "log --svg wrote $WORK/log.svg"
fs_finish
