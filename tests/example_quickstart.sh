#!/usr/bin/env bash
# tests/example_quickstart.sh - the README's main job, examples/quickstart.sh
# --quick, run with the ulpfs under test (no apt-get, no build): training
# writes HF-Trainer-style checkpoints into a fresh mount, ulpfs log and
# ulpfs stats --zstd19 run, every checkpoint is checked after a remount
# against the SHA-256 train.py took while writing (sha256sum, torch.load,
# the safetensors mmap path), and the script's own claims (model.safetensors
# at least 2x smaller than plain, the store smaller than zstd -19 of every
# file) must hold, and the chart ulpfs-savings.svg must be in the directory
# it was started from, with raw, stored and zstd -19 bars for each of the
# 6 checkpoints.  The quickstart unmounts on every exit path itself.
# make check may run this with a POSIX sh: it needs bash.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/fs_lib.sh"
fs_init

command -v zstd >/dev/null || die "zstd (the command) is not installed"
step "examples/quickstart.sh --quick"
LOG=$WORK/quickstart.log
mkdir "$WORK/start"
if (cd "$WORK/start" && ULPFS=$ULPFS timeout -k 10 600 bash "$FS_SRCDIR/examples/quickstart.sh" --quick) >"$LOG" 2>&1; then
	ok "quickstart exited 0"
else
	bad "quickstart failed (exit $?); its output ends:"
	tail -n 40 "$LOG" | sed 's/^/    | /' >&2
fi
for want in "sha256sum: all 30 files match" "torch.load + safetensors mmap: 30 files in 6 checkpoints" \
	"ulpfs stats --zstd19" "zstd -19 " "every checkpoint verified"; do
	grep -qF -- "$want" "$LOG" && ok "output has: $want" || bad "output lacks: $want"
done
# train.py's progress: step/total, loss, time left; each save's time, and
# each checkpoint's commit time (ulpfs sync run after the save)
n=$(grep -cE '^\[train\] step [0-9]+/60 loss [0-9.]+ .*s/step, [0-9ms]+ left$' "$LOG")
[ "$n" -ge 7 ] && ok "$n progress lines with the time left" || bad "$n progress lines (step N/60 ... left), expected 7 or more"
for c in 10 20 30 40 50 60; do
	grep -qE "^\[train\] step $c: saved .*/checkpoint-$c in [0-9.]+s$" "$LOG" &&
		grep -qE "^\[train\] checkpoint-$c: committed [0-9.]+s after its save \(.* sync\)$" "$LOG" ||
		bad "no save time or no commit time for checkpoint-$c"
done
ok "save and commit times of the 6 checkpoints: $(grep -o 'checkpoint-[0-9]*: committed [0-9.]*s' "$LOG" | sed 's/: committed / /' | tr '\n' ' ')"
SVG=$WORK/start/ulpfs-savings.svg
grep -qF "for a browser: $SVG" "$LOG" && ok "it names the chart: $SVG" || bad "no line naming $SVG"
if out=$("$PY" - "$SVG" 2>&1 <<'PY'
import sys, xml.etree.ElementTree as ET
ns = "{http://www.w3.org/2000/svg}"
root = ET.parse(sys.argv[1]).getroot()
bars = {}
for r in root.iter(ns + "rect"):
    if r.find(ns + "title") is not None:
        bars[r.get("fill")] = bars.get(r.get("fill"), 0) + 1
assert sorted(bars.values()) == [6, 6, 6], bars
names = [t.text for t in root.iter(ns + "text") if t.text and t.text.startswith("run/checkpoint-")]
assert names == ["run/checkpoint-%d" % n for n in range(10, 70, 10)], names
print("3 x 6 bars, labels " + " ".join(names))
PY
); then
	ok "the chart is there: $out"
else
	bad "the chart: $out"
fi
grep -q "NOT MET" "$LOG" && bad "a claim was not met: $(grep "NOT MET" "$LOG")" || ok "no claim reported NOT MET"
grep -E "^model.safetensors: |against zstd -19 of every file" "$LOG" | sed 's/^/    /'
# its own temporary directory, named in its output (others' quickstarts
# may run at the same time)
qs_work=$(sed -n 's|^==> mounting a new store: \(.*\)/store on .*|\1|p' "$LOG")
case $qs_work in
/*/ulpfs-quickstart.*)
	[ ! -e "$qs_work" ] && ok "the quickstart removed its temporary directory $qs_work" ||
		bad "the quickstart left $qs_work"
	;;
*) bad "no temporary directory named in the output ('$qs_work')" ;;
esac
fs_finish
