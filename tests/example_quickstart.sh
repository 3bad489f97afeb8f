#!/usr/bin/env bash
# tests/example_quickstart.sh - the README's main job, examples/quickstart.sh
# --quick, run with the ulpfs under test (no apt-get, no build): training
# writes HF-Trainer-style checkpoints into a fresh mount, ulpfs log and
# ulpfs stats --zstd19 run, every checkpoint is checked after a remount
# against the SHA-256 train.py took while writing (sha256sum, torch.load,
# the safetensors mmap path), and the script's own claims (model.safetensors
# at least 2x smaller than plain, the store smaller than zstd -19 of every
# file) must hold.  The quickstart unmounts on every exit path itself.
# make check may run this with a POSIX sh: it needs bash.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/fs_lib.sh"
fs_init

command -v zstd >/dev/null || die "zstd (the command) is not installed"
step "examples/quickstart.sh --quick"
LOG=$WORK/quickstart.log
touch "$LOG.start"
if ULPFS=$ULPFS timeout -k 10 600 bash "$FS_SRCDIR/examples/quickstart.sh" --quick >"$LOG" 2>&1; then
	ok "quickstart exited 0"
else
	bad "quickstart failed (exit $?); its output ends:"
	tail -n 40 "$LOG" | sed 's/^/    | /' >&2
fi
for want in "sha256sum: all 30 files match" "torch.load + safetensors mmap: 30 files in 6 checkpoints" \
	"ulpfs stats --zstd19" "zstd -19 " "every checkpoint verified"; do
	grep -qF -- "$want" "$LOG" && ok "output has: $want" || bad "output lacks: $want"
done
grep -q "NOT MET" "$LOG" && bad "a claim was not met: $(grep "NOT MET" "$LOG")" || ok "no claim reported NOT MET"
grep -E "^model.safetensors: |against zstd -19 of every file" "$LOG" | sed 's/^/    /'
leftover=$(find /tmp -maxdepth 1 -name 'ulpfs-quickstart.*' -newer "$LOG.start" 2>/dev/null | wc -l)
[ "$leftover" = 0 ] && ok "the quickstart removed its temporary directory" || bad "$leftover ulpfs-quickstart.* directories left in /tmp"
fs_finish
