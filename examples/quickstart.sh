#!/usr/bin/env bash
# examples/quickstart.sh - the main job, end to end, on a fresh Debian 12
# machine as root:
#
#   1. install the dependencies (apt-get) and build ulpfs in _build/;
#   2. mount a new store in a temporary directory;
#   3. train a small GPT with examples/train.py, saving Hugging Face
#      Trainer-style checkpoint-N/ directories into the mount (no rotation),
#      while train.py records the SHA-256 of every byte it writes;
#   4. show `ulpfs log` and `ulpfs stats --zstd19` (what the store saves
#      against the raw files and against zstd -19 of the same files), and
#      write that as a chart, ulpfs-savings.svg, into the directory the
#      script was started from (it outlives the clean-up);
#   5. unmount, remount, and check every checkpoint against what training
#      wrote: sha256sum, torch.load, and the safetensors mmap path;
#   6. check the two claims (model.safetensors versions at least 2x smaller
#      than the plain files; the whole store smaller than zstd -19 of every
#      file), unmount and clean up.
#
#   bash examples/quickstart.sh [--quick]
#
# --quick trains a smaller model for fewer steps (under a minute in all).
# ULPFS_NO_APT=1 skips the apt-get step; ULPFS=path/to/ulpfs uses that
# binary and skips both the apt-get step and the build (make check runs
# it so, as tests/example_quickstart.sh); ULPFS_KEEP=1 keeps the temporary
# directory (store, manifest) for a look afterwards.
set -euo pipefail

started_in=$PWD
svg=$started_in/ulpfs-savings.svg
# the chart is written there at the end: find out now if it cannot be
if ! [ -w "$started_in" ]; then
	echo "quickstart.sh: cannot write $svg (the chart): run it from a directory you can write to" >&2
	exit 1
fi
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$top"
SECONDS=0
phase_start=0
# phase WHAT: how long the step that just ended took, and the total so far
phase() {
	echo "    ($1: $((SECONDS - phase_start)) s; $SECONDS s since the start)"
	phase_start=$SECONDS
}
train_args=()
case "${1:-}" in
--quick) train_args=(--quick) ;;
"") ;;
*) echo "usage: bash examples/quickstart.sh [--quick]" >&2; exit 2 ;;
esac

if [ -n "${ULPFS:-}" ]; then
	ulpfs=$ULPFS
	echo "==> using $ulpfs (no install, no build)"
elif [ "${ULPFS_NO_APT:-0}" != 1 ]; then
	echo "==> installing build and runtime dependencies (apt-get)"
	export DEBIAN_FRONTEND=noninteractive
	# libopenblas0-pthread: Debian's PyTorch otherwise runs its fp32
	# matmuls on the reference BLAS (measured 4.8 GFLOP/s a thread, 75.7
	# with OpenBLAS)
	pkgs=(autoconf automake pkg-config make gcc libc6-dev libfuse3-dev fuse3
		libzstd-dev zstd libsqlite3-dev libxxhash-dev libjansson-dev
		libcriterion-dev python3-torch python3-numpy libopenblas0-pthread)
	apt-get update -qq
	apt-get install -y -qq "${pkgs[@]}" >/dev/null
	echo "    installed (or already there): ${pkgs[*]}"
	phase "packages"
fi

if [ -z "${ULPFS:-}" ]; then
	echo "==> building ulpfs"
	autoreconf -fi >/dev/null
	mkdir -p _build
	(cd _build && { [ -f Makefile ] || ../configure -q; } && make -j"$(nproc)" -s ulpfs)
	ulpfs=$top/_build/ulpfs
	phase "build"
fi

work=$(mktemp -d /tmp/ulpfs-quickstart.XXXXXX)
store=$work/store mnt=$work/mnt manifest=$work/written.sha256
mkdir -p "$mnt"
cleanup() {
	if mountpoint -q "$mnt" 2>/dev/null; then
		"$ulpfs" umount "$mnt" || fusermount3 -uz "$mnt" || true
	fi
	if [ "${ULPFS_KEEP:-0}" = 1 ]; then
		echo "(kept $work)"
	else
		rm -rf "$work"
	fi
}
trap cleanup EXIT
trap "exit 130" INT TERM HUP # so that cleanup runs on a signal too

echo "==> mounting a new store: $store on $mnt"
"$ulpfs" mount "$store" "$mnt"

echo "==> training a small GPT, saving checkpoint-N/ directories into the mount"
# --commit_cmd: after each save, train.py runs `ulpfs sync MNT/run` in the
# background and prints how long the checkpoint took to be committed
/usr/bin/python3 examples/train.py --output_dir "$mnt/run" \
	--sha256_manifest "$manifest" --commit_cmd "$(printf %q "$ulpfs") sync" \
	"${train_args[@]}"
"$ulpfs" sync "$mnt" # wait until every checkpoint is encoded and committed
"$ulpfs" gc "$mnt"   # and until older checkpoints are coded against newer ones
phase "training, every checkpoint committed"

last=$(cd "$mnt/run" && ls -d checkpoint-* | sort -t- -k2 -n | tail -n 1)
first=$(cd "$mnt/run" && ls -d checkpoint-* | sort -t- -k2 -n | head -n 1)
echo
echo "==> ulpfs log run/$last: the files of the last checkpoint"
"$ulpfs" log "$mnt/run/$last"
echo
echo "==> ulpfs log --chain run/$first/model.safetensors: what it is coded against"
echo "    (the newest checkpoint is stored standalone, older ones against the next)"
"$ulpfs" log --chain "$mnt/run/$first/model.safetensors"
echo
echo "==> ulpfs stats --zstd19 --svg: the store against the raw files and against zstd -19"
"$ulpfs" stats --zstd19 --svg "$svg" "$mnt"
"$ulpfs" stats --zstd19 --json "$mnt" >"$work/stats.json" # cached: instant
phase "log and stats (zstd -19 of every file)"

echo
echo "==> unmounting (returns once everything is committed), then remounting"
"$ulpfs" umount "$mnt"
store_bytes=$(du -sb "$store" | cut -f1)
"$ulpfs" mount "$store" "$mnt"

phase "unmount and remount"
echo "==> checking every checkpoint against what training wrote"
n=$(wc -l <"$manifest")
(cd "$mnt/run" && sha256sum --quiet -c "$manifest")
echo "sha256sum: all $n files match the SHA-256 train.py computed while writing them"
/usr/bin/python3 - "$mnt/run" <<'PY'
import glob, json, mmap, os, struct, sys
import warnings
import torch
warnings.filterwarnings("ignore", message="The given buffer is not writable")
root = sys.argv[1]
DT = {"BF16": (torch.bfloat16, torch.int16), "F16": (torch.float16, torch.int16),
      "F32": (torch.float32, torch.int32)}
ckpts = sorted(glob.glob(os.path.join(root, "checkpoint-*")),
               key=lambda p: int(p.rsplit("-", 1)[1]))
loaded = tensors = 0
for ck in ckpts:
    opt = torch.load(os.path.join(ck, "optimizer.pt"), map_location="cpu")
    torch.load(os.path.join(ck, "scheduler.pt"), map_location="cpu")
    torch.load(os.path.join(ck, "rng_state.pth"), map_location="cpu")
    with open(os.path.join(ck, "trainer_state.json")) as f:
        step = json.load(f)["global_step"]
    assert ck.endswith("-%d" % step), (ck, step)
    master = opt["fp32_master_weights"]
    # the safetensors loader's path: mmap the file, tensors are views of it
    with open(os.path.join(ck, "model.safetensors"), "rb") as f:
        m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    hlen = struct.unpack("<Q", m[:8])[0]
    hdr = json.loads(m[8:8 + hlen])
    hdr.pop("__metadata__", None)
    assert set(hdr) == set(master), ck
    for name, info in hdr.items():
        b, e = info["data_offsets"]
        dt, bits = DT[info["dtype"]]
        size = torch.tensor([], dtype=dt).element_size()
        t = torch.frombuffer(m, dtype=dt, count=(e - b) // size,
                             offset=8 + hlen + b).view(info["shape"])
        want = master[name].to(dt)
        # bit for bit: the bf16 weights are the master weights rounded
        if not torch.equal(t.view(bits), want.view(bits)):
            sys.exit("%s: %s differs from the master weights" % (ck, name))
        tensors += 1
    del t, want
    loaded += 5
print("torch.load + safetensors mmap: %d files in %d checkpoints loaded through "
      "the mount; %d bf16 tensors equal the optimizer's master weights rounded"
      % (loaded, len(ckpts), tensors))
PY
"$ulpfs" umount "$mnt"
phase "checks"

echo
echo "==> what the store saved"
/usr/bin/python3 - "$work/stats.json" "$store_bytes" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
store = int(sys.argv[2])
logical, z19 = s["logical"], s["zstd19"]["bytes"]
st = s["by_kind"]["safetensors"]
ratio = st["logical"] / st["stored"]
mb = lambda b: "%.1f MB" % (b / 1e6)
print("model.safetensors: %d versions, %s as plain files, %s stored: %.2fx smaller"
      % (st["versions"], mb(st["logical"]), mb(st["stored"]), ratio))
print("whole store on disk (du -sb: objects, catalog, 4 MiB reserve): %s" % mb(store))
print("  against the raw files (%s): %.2fx smaller, %s saved"
      % (mb(logical), logical / store, mb(logical - store)))
print("  against zstd -19 of every file (%s): %.1f%% smaller, %s saved"
      % (mb(z19), 100.0 * (z19 - store) / z19, mb(z19 - store)))
ok = True
if ratio < 2:
    print("NOT MET: model.safetensors versions should take at least 2x less space")
    ok = False
if store >= z19:
    print("NOT MET: the store should be smaller than zstd -19 of the files")
    ok = False
sys.exit(0 if ok else 1)
PY
echo "==> done in $SECONDS s: every checkpoint verified; the store is unmounted and removed"
echo "    the chart of every checkpoint (raw, stored, zstd -19), for a browser: $svg"
