#!/usr/bin/env bash
# tests/client_dcp.sh - PyTorch Distributed Checkpoint (DCP) files through a
# real mount: bench/dcp_layout.py writes three checkpoints of a small
# training run's real tensors as DCP lays them out (2 ranks x 2 files of
# torch.save archives back to back, .metadata through .metadata.tmp, the
# last checkpoint written as tmp-checkpoint-N/ and renamed).
#   - the checkpoints read back bit-exact, before and after a remount;
#   - every .distcp version is parsed as a DCP file and its tensors float
#     coded (stats: by_kind.distcp, by_dtype.f32), and each is coded against
#     the same rank's file of the next checkpoint (ulpfs log --json);
#   - truncated, corrupted and reordered copies read back exactly: the
#     first two through the generic path, the reordered one still as DCP;
#   - a checkpoint whose 8 files 8 forked processes write at once reads
#     back exactly, every file parsed as DCP.
# make check may run this with a POSIX sh: it needs bash.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/fs_lib.sh"
fs_init

MAKE_TRAJ=$FS_SRCDIR/bench/make_trajectory.py
DCP=$FS_SRCDIR/bench/dcp_layout.py
DCP_ARGS=(--ranks 2 --threads 2 --tmp-dir)

step "a small real training run"
timeout -k 5 120 "$PY" "$MAKE_TRAJ" --out "$WORK/traj" --quick --steps 6 \
	--every 2 --layers 1 --d-model 32 --threads 1 >"$WORK/traj.log" 2>&1 ||
	die "make_trajectory.py failed: $(tail -5 "$WORK/traj.log")"

step "its DCP checkpoints written into a plain directory and a mount"
fs_mount "$WORK/store" "$WORK/mnt"
timeout -k 5 120 "$PY" "$DCP" --traj "$WORK/traj" --root "$WORK/ref" \
	--root "$WORK/mnt/run" "${DCP_ARGS[@]}" || die "dcp_layout.py failed"
nfiles=$(find "$WORK/ref" -name '*.distcp' | wc -l)
[ "$nfiles" -eq 12 ] || die "expected 12 .distcp files, found $nfiles"
"$ULPFS" sync "$WORK/mnt" || bad "ulpfs sync failed"
"$ULPFS" gc "$WORK/mnt" || bad "ulpfs gc failed" # the flips done
fs_compare_trees "$WORK/ref" "$WORK/mnt/run" "the checkpoints read back"

step "every .distcp is float coded against the same rank's file"
"$ULPFS" stats --json "$WORK/mnt" >"$WORK/stats.json" || bad "ulpfs stats failed"
r=$("$PY" - "$WORK/stats.json" "$nfiles" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
k = d["by_kind"].get("distcp", {})
f = d["by_dtype"].get("f32", {})
n = int(sys.argv[2])
if k.get("versions") != n:
    print("by_kind.distcp: %s versions, want %d" % (k.get("versions"), n))
elif f.get("logical", 0) < 0.8 * k["logical"]:
    print("f32 coded %s of %s distcp bytes" % (f.get("logical"), k["logical"]))
else:
    print("ok %d %d %d %d" % (k["versions"], k["logical"], k["stored"], f["logical"]))
PY
)
case $r in
ok\ *)
	set -- $r
	ok "$2 DCP versions, $3 bytes stored as $4 ($(calc "$3 / $4" 2)x), $5 bytes f32-coded" ;;
*) bad "$r" ;;
esac
"$ULPFS" log --json "$WORK/mnt/run" >"$WORK/log.json" || bad "ulpfs log failed"
r=$("$PY" - "$WORK/log.json" <<'PY'
import json, os, sys
good, bad = 0, []
for v in json.load(open(sys.argv[1])):
    p = v["path"]
    if v["state"] != "live" or not p.endswith(".distcp"):
        continue
    if p.endswith("checkpoint-6/" + os.path.basename(p)):
        continue  # the newest: a keyframe, the others are coded against it
    ref = v["ref"]["path"] if v["ref"] else None
    if ref and os.path.basename(ref) == os.path.basename(p) and ref != p:
        good += 1
    else:
        bad.append("%s -> %s" % (p, ref))
print("ok %d" % good if not bad and good == 8 else "%d good; %s" % (good, "; ".join(bad)))
PY
)
case $r in
ok\ *) ok "${r#ok } older .distcp versions reference the same rank's file" ;;
*) bad "references: $r" ;;
esac

step "truncated, corrupted and reordered .distcp files"
src=$WORK/ref/checkpoint-4/__0_0.distcp
size=$(stat -c %s "$src")
mkdir -p "$WORK/odd"
head -c $((size / 2)) "$src" >"$WORK/odd/__0_0.distcp.trunc"
# The first archive's end record broken: no archive boundary is found.
cp "$src" "$WORK/odd/__0_0.distcp.flip"
eocd=$(grep -obaF $'PK\x05\x06' "$src" | head -1 | cut -d: -f1)
printf 'XXXX' | dd of="$WORK/odd/__0_0.distcp.flip" bs=1 seek="$eocd" conv=notrunc status=none
"$PY" - "$WORK/ref/checkpoint-4" "$WORK/odd/__0_0.distcp.rev" <<'PY' || bad "reordering failed"
import os, pickle, sys
d = sys.argv[1]
md = pickle.load(open(os.path.join(d, ".metadata"), "rb"))
items = sorted(v for v in md["storage_data"].values() if v[0] == "__0_0.distcp")
data = open(os.path.join(d, "__0_0.distcp"), "rb").read()
assert sum(n for _, _, n in items) == len(data)
with open(sys.argv[2], "wb") as f:
    for _, off, n in reversed(items):
        f.write(data[off:off + n])
PY
mkdir "$WORK/mnt/odd"
for f in "$WORK/odd"/*; do
	cp "$f" "$WORK/mnt/odd/" || bad "cp $f failed"
done
"$ULPFS" sync "$WORK/mnt" || bad "ulpfs sync failed"
"$ULPFS" stats --json "$WORK/mnt" >"$WORK/stats2.json" || bad "ulpfs stats failed"
r=$("$PY" -c 'import json, sys
a, b = (json.load(open(p))["by_kind"] for p in sys.argv[1:3])
print(b["distcp"]["versions"] - a["distcp"]["versions"],
      b["other"]["versions"] - a["other"]["versions"])' \
	"$WORK/stats.json" "$WORK/stats2.json")
[ "$r" = "1 2" ] && ok "reordered: DCP; truncated and corrupted: generic" ||
	bad "new DCP and generic versions: $r, want 1 2"

step "8 writer processes write one checkpoint's 8 files at once"
timeout -k 5 120 "$PY" "$DCP" --src "$WORK/traj/step-000006" --ranks 2 --threads 4 \
	--writers 8 --out "$WORK/ref/checkpoint-8" --out "$WORK/mnt/run/checkpoint-8" ||
	bad "dcp_layout.py --writers 8 failed"
"$ULPFS" sync "$WORK/mnt" || bad "ulpfs sync failed"
fs_compare_trees "$WORK/ref/checkpoint-8" "$WORK/mnt/run/checkpoint-8" "the concurrent writers' files"
"$ULPFS" stats --json "$WORK/mnt" >"$WORK/stats3.json" || bad "ulpfs stats failed"
r=$("$PY" -c 'import json, sys
a, b = (json.load(open(p))["by_kind"] for p in sys.argv[1:3])
print(b["distcp"]["versions"] - a["distcp"]["versions"])' "$WORK/stats2.json" "$WORK/stats3.json")
[ "$r" = 8 ] && ok "their 8 files are DCP versions" || bad "$r new DCP versions, want 8"

step "remount: everything bit-exact"
fs_remount "$WORK/store" "$WORK/mnt"
fs_compare_trees "$WORK/ref" "$WORK/mnt/run" "the checkpoints after the remount"
fs_compare_trees "$WORK/odd" "$WORK/mnt/odd" "the odd files after the remount"
out=$("$ULPFS" verify "$WORK/mnt" 2>&1) && ok "ulpfs verify: ${out##*$'\n'}" ||
	bad "ulpfs verify failed: $out"
fs_umount "$WORK/mnt"
fs_finish
