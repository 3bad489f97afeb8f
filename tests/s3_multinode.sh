#!/usr/bin/env bash
# tests/s3_multinode.sh - examples/multinode.py through bucket stores (real
# Swift s3api): 4 gloo ranks on 2 "nodes", each node writing DeepSpeed-like
# shards into its own mount of s3://BUCKET/run/node-N; then, as another
# machine would, fresh read-only mounts of both node stores (new cache
# directories) and a resumed run whose losses must equal the original's
# bit for bit.  Prints the bits per element of the flattened fp32
# partitions (zero_pp_rank_*_optim_states.pt) as stored, and checks that
# each partition stored as a delta takes under 0.95x zstd -3's bytes (a
# flat fp32 buffer found the float codec).
#
# FUSE or Swift unavailable is a FAILURE unless ULPFS_ALLOW_SKIP=1.
#
# Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.

[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/s3_lib.sh"
s3_init

EX=$FS_SRCDIR/examples/multinode.py
STEPS=30
RESUME=20

step "the job: 4 ranks, 2 per node, a save every 10 steps into per-node bucket mounts"
for n in 0 1; do
	s3_mount "s3://$S3_BUCKET/run/node-$n" "$WORK/cache-w$n" "$WORK/node$n"
done
if "$PY" "$EX" --mounts "$WORK/node0,$WORK/node1" --steps "$STEPS" \
	--save-every 10 --losses "$WORK/run.json" >"$WORK/job.log" 2>&1; then
	ok "multinode.py ran ($STEPS steps)"
else
	tail -20 "$WORK/job.log" | sed 's/^/    | /' >&2
	die "multinode.py failed"
fi
for n in 0 1; do
	"$ULPFS" sync "$WORK/node$n" >"$WORK/sync.log" 2>&1 || bad "sync node $n: $(cat "$WORK/sync.log")"
done
[ -f "$WORK/node0/global_step$RESUME/mp_rank_00_model_states.pt" ] || bad "no model states on node 0"
for r in 0 1 2 3; do
	[ -f "$WORK/node$((r / 2))/global_step$RESUME/zero_pp_rank_${r}_mp_rank_00_optim_states.pt" ] ||
		bad "rank $r's shard is not on node $((r / 2))"
done
# The older steps are reverse deltas once the flips are done: gc waits.
for n in 0 1; do "$ULPFS" gc "$WORK/node$n" >/dev/null 2>&1 || bad "gc node $n"; done
say "bits per element of the flattened fp32 partitions (stored bytes x 8 / (size / 4)):"
# A delta that found the float codec takes well under zstd -3's bytes (a
# flat fp32 buffer that fell to zstd would take about as many).
ndelta=0
for n in 0 1; do
	for f in "$WORK/node$n"/global_step*/zero_pp_rank_*_optim_states.pt; do
		z3=$(zstd -3 -c -q -- "$f" | wc -c)
		if "$ULPFS" log --json "$f" | "$PY" -c '
import json, sys
v = json.load(sys.stdin)[-1]
z3 = int(sys.argv[1])
print("    %-60s %8d -> %8d bytes  %6.2f bits/element (zstd -3: %6.2f)  ref %s" % (
    v["path"], v["size"], v["stored"], 8.0 * v["stored"] / (v["size"] / 4.0),
    8.0 * z3 / (v["size"] / 4.0),
    "none (keyframe)" if v["ref"] is None else v["ref"]["path"]))
sys.exit(3 if v["ref"] is None else 0 if v["stored"] < 0.95 * z3 else 1)' "$z3"; then
			ndelta=$((ndelta + 1))
		else
			[ $? = 3 ] || bad "$f: its delta takes no fewer bytes than zstd -3 (no float codec?)"
		fi
	done
done
[ "$ndelta" -ge 4 ] && ok "$ndelta partition deltas take under 0.95x zstd -3's bytes (the float codec)" ||
	bad "only $ndelta partitions are deltas under 0.95x zstd -3"
for n in 0 1; do fs_umount "$WORK/node$n"; done

step "another machine: fresh read-only mounts of both node stores, resume from step $RESUME"
for n in 0 1; do
	s3_mount "s3://$S3_BUCKET/run/node-$n" "$WORK/cache-r$n" "$WORK/ro$n" ro
done
[ "$(cat "$WORK/ro0/latest")" = "global_step$STEPS" ] && ok "latest tag read from node 0's bucket" || bad "latest tag: $(cat "$WORK/ro0/latest")"
if "$PY" "$EX" --mounts "$WORK/ro0,$WORK/ro1" --steps "$STEPS" --resume "$RESUME" \
	--losses "$WORK/resumed.json" >"$WORK/resume.log" 2>&1; then
	ok "resumed from the read-only bucket mounts"
else
	tail -20 "$WORK/resume.log" | sed 's/^/    | /' >&2
	die "the resumed run failed"
fi
if "$PY" - "$WORK/run.json" "$WORK/resumed.json" <<'EOF'; then
import json, sys
a = json.load(open(sys.argv[1]))
b = json.load(open(sys.argv[2]))
assert b, "no losses resumed"
bad = [k for k in b if a.get(k) != b[k]]
print("    steps %s..%s: %s" % (min(b, key=int), max(b, key=int),
      "identical" if not bad else "DIFFER at %s" % bad))
sys.exit(1 if bad else 0)
EOF
	ok "the loss continues bit-identically after the resume"
else
	bad "resumed losses differ from the original run"
fi
for n in 0 1; do fs_umount "$WORK/ro$n"; done

fs_finish
