#!/usr/bin/env bash
# tests/fs_oldstore.sh - a store written by the release before reverse
# deltas (tests/data/store-v3, forward chains, catalog schema 3) mounts,
# reads every version and snapshot bit-exact against the SHA-256 of what
# was written, is converted by "ulpfs gc" (no version coded against an
# older one is left), verifies, and reads the same after a remount.
# make check may run this with a POSIX sh: it needs bash.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/fs_lib.sh"
fs_init

DATA=$FS_SRCDIR/tests/data/store-v3
STORE=$WORK/store
MNT=$WORK/mnt
# (chmod: under make distcheck the source tree is read-only)
cp -r "$DATA" "$STORE" && chmod -R u+w "$STORE" || die "copying $DATA failed"
mkdir -p "$STORE/staging"

sum_of() { awk -v f="$1" '$2 == f { print $1 }' "$DATA/SHA256SUMS"; }
# every_version_exact WHAT: versions 1-5 of model.safetensors, each
# checkpoint's trainer_state.json, and the pinned checkpoint-0 in snap4.
every_version_exact() {
	local i got bad0=$FS_FAILS
	for i in 1 2 3 4 5; do
		got=$(sha256sum <"$MNT/.ulpfs/versions/model.safetensors/$i" | cut -d' ' -f1)
		[ "$got" = "$(sum_of "v$((i - 1)).safetensors")" ] || bad "$1: model.safetensors version $i differs"
	done
	for i in 1 2 3 4; do
		got=$(sha256sum <"$MNT/checkpoint-$i/trainer_state.json" | cut -d' ' -f1)
		[ "$got" = "$(sum_of "s$i.json")" ] || bad "$1: checkpoint-$i/trainer_state.json differs"
	done
	got=$(sha256sum <"$MNT/.ulpfs/snapshots/snap4/checkpoint-0/trainer_state.json" | cut -d' ' -f1)
	[ "$got" = "$(sum_of s0.json)" ] || bad "$1: snap4's checkpoint-0/trainer_state.json differs"
	[ "$(readlink "$MNT/link")" = model.safetensors ] || bad "$1: the symlink changed"
	[ "$FS_FAILS" = "$bad0" ] && ok "$1: every version and the snapshot exact"
}
# forward_links: versions coded against an older version (ref < id).
forward_links() {
	"$ULPFS" log --json "$MNT" | "$PY" -c '
import json, sys
vs = json.load(sys.stdin)
ids = {(v["path"], v["seq"]): v["id"] for v in vs}
print(sum(1 for v in vs if v["state"] == "live" and v["ref"]
          and ids[(v["ref"]["path"], v["ref"]["seq"])] < v["id"]))'
}

step "mounting a forward-chain store of the previous release"
fs_mount "$STORE" "$MNT"
every_version_exact "as written"
n=$(forward_links)
[ "$n" -gt 0 ] && ok "$n forward links before gc" || bad "no forward links found before gc ($n): the test store is not what it should be"
"$ULPFS" verify "$MNT" >"$WORK/verify.txt" 2>&1 && ok "verify before conversion" || { cat "$WORK/verify.txt" >&2; bad "verify before conversion"; }

step "ulpfs gc converts the forward chains"
"$ULPFS" gc "$MNT" || bad "ulpfs gc failed"
n=$(forward_links)
[ "$n" = 0 ] && ok "no forward link left" || bad "$n forward links left after gc"
every_version_exact "after gc"
"$ULPFS" verify "$MNT" >"$WORK/verify.txt" 2>&1 && ok "verify after conversion" || { cat "$WORK/verify.txt" >&2; bad "verify after conversion"; }
fs_remount "$STORE" "$MNT"
every_version_exact "after a remount"
fs_umount "$MNT"
fs_finish
