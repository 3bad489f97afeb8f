#!/bin/bash
# tests/file_cycles.sh - circles of calls between the files of each folder
# of src/, from the objects of the build tree (ULP_BUILDDIR, with nm; see
# tests/src_objects.py): a group of files each of which reaches the others
# through calls.  Every circle is printed; src/ctl and src/cli must have
# none (the other folders' are known and reported only).
#
#   ULP_BUILDDIR=_build bash tests/file_cycles.sh
#
# Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
set -eu
TOP=${srcdir:-$(dirname "${BASH_SOURCE[0]}")/..}
command -v python3 >/dev/null || { echo "FAIL: python3 not found" >&2; exit 1; }
[ -n "${ULP_BUILDDIR:-}" ] ||
	{ echo "FAIL: set ULP_BUILDDIR to the build tree (make check does)" >&2; exit 1; }
exec python3 - "$TOP" "$ULP_BUILDDIR" <<'PY'
import os, sys

top, builddir = sys.argv[1:3]
sys.path.insert(0, os.path.join(top, "tests"))
import src_objects
from src_objects import FOLDER_RANK, folder

STRICT = ("ctl", "cli")  # folders that must have no circle

calls = src_objects.calls(builddir)
if not calls:
    sys.exit(f"FAIL: no objects of src/ under {builddir}")
bad = 0
for f in sorted(FOLDER_RANK, key=lambda k: (FOLDER_RANK[k], k)):
    edges = {}
    for a, b, _ in calls:
        if folder(a) == f and folder(b) == f:
            edges.setdefault(a, set()).add(b)
    circles = src_objects.cycles(edges)
    print(f"src/{f}: {len(circles) or 'no'} circle(s)")
    for c in circles:
        print("   ", " ".join(x.split("/", 1)[1] for x in c))
        if f in STRICT:
            bad += 1
if bad:
    print(f"FAIL: {bad} circle(s) in src/" + ", src/".join(STRICT))
    sys.exit(1)
print("ok: no circle in src/" + " or src/".join(STRICT))
PY
