#!/bin/bash
# tests/src_layers.sh - the folders of src/ use only the folders below them:
# codec < formats < store < objstore, fs < ctl < cli (objstore and fs not
# each other), in their includes (from the sources) and in their calls
# (from the objects of the build tree, ULP_BUILDDIR, with nm: where each
# function used is defined, wherever it is declared).  The order is
# tests/src_objects.py's FOLDER_RANK.  Inside src/store the layers are
# tests/store_layers.sh's.
#
# Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
set -eu
TOP=${srcdir:-$(dirname "${BASH_SOURCE[0]}")/..}
command -v python3 >/dev/null || { echo "FAIL: python3 not found" >&2; exit 1; }
command -v nm >/dev/null || { echo "FAIL: nm not found" >&2; exit 1; }
[ -n "${ULP_BUILDDIR:-}" ] ||
	{ echo "FAIL: set ULP_BUILDDIR to the build tree (make check does)" >&2; exit 1; }
exec python3 - "$TOP" "$ULP_BUILDDIR" <<'PY'
import os, re, sys

top, builddir = sys.argv[1:3]
sys.path.insert(0, os.path.join(top, "tests"))
import src_objects
from src_objects import FOLDER_RANK as rank, folder

def may_use(a, b):
    """Whether folder a may include or call folder b."""
    return a == b or rank[b] < rank[a]

bad = []
# the includes: "store/x.h" names its folder; "ulpfs/ulp.h" is the codec's
nincl = 0
for f in sorted(rank):
    d = os.path.join(top, "src", f)
    for name in sorted(os.listdir(d)):
        if not name.endswith((".c", ".h")):
            continue
        text = open(os.path.join(d, name), errors="replace").read()
        for inc in re.findall(r'^\s*#\s*include\s+"([a-z_]+)/[^"]+"', text,
                              re.M):
            g = "codec" if inc == "ulpfs" else inc
            if g not in rank:
                continue
            nincl += 1
            if not may_use(f, g):
                bad.append(f"src/{f}/{name} includes a header of {g}/")

ncalls = 0
calls = src_objects.calls(builddir)
if not calls:
    bad.append(f"no objects of src/ under {builddir}")
for a, b, sym in calls:
    if folder(a) not in rank or folder(b) not in rank:
        continue
    ncalls += 1
    if not may_use(folder(a), folder(b)):
        bad.append(f"src/{a} calls {sym}, defined in src/{b}")
for b in bad:
    print("FAIL:", b)
if bad:
    sys.exit(1)
order = " < ".join(", ".join(sorted(k for k in rank if rank[k] == r))
                   for r in sorted(set(rank.values())))
print(f"ok: {nincl} includes of other folders' headers and {ncalls} calls "
      f"between files of src/ go down the order {order}")
PY
