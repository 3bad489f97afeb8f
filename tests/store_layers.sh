#!/bin/bash
# tests/store_layers.sh - the store's modules include only the headers of
# their own layer and of the layers below it, as the table at the top of
# src/store/store_core.h says, but for the calls upward listed there.
# Every file of src/store must be placed in that table, and every
# exception must still be needed: the table and the sources cannot drift
# apart unnoticed.  With the build tree's objects (ULP_BUILDDIR, which
# make check sets) it also checks the calls: each function a store file
# uses from another store file is defined in its own layer or below (nm;
# tests/src_objects.py), wherever it is declared.
#
# Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
set -eu
TOP=${srcdir:-$(dirname "${BASH_SOURCE[0]}")/..}
SRC=$TOP/src/store
command -v python3 >/dev/null || { echo "FAIL: python3 not found" >&2; exit 1; }
exec python3 - "$SRC" "$TOP/tests" "${ULP_BUILDDIR:-}" <<'PY'
import os, re, sys

src, tests, builddir = sys.argv[1:4]
sys.path.insert(0, tests)
import src_objects
core = open(os.path.join(src, "store_core.h")).read()
lines = [l[3:] if l.startswith(" * ") else "" for l in core.split("\n")]

def section(start):
    """The indented table after the paragraph starting with start, up to
    the blank line that ends it."""
    i = next(k for k, l in enumerate(lines) if l.startswith(start))
    while not re.match(r"  \S", lines[i]):
        i += 1
    out = []
    while lines[i].strip():
        out.append(lines[i])
        i += 1
    return out

names = re.compile(r"\b[a-z_]+\.[ch]\b")
layer_of, order = {}, []
for l in section("Layers, lowest first"):
    m = re.match(r"  (\w+)\s", l)
    if m and not l.startswith("   "):
        order.append(m.group(1))
    for n in names.findall(l):
        if n in layer_of:
            sys.exit(f"FAIL: {n} is placed twice in the layer table")
        layer_of[n] = len(order) - 1

# "Calls upward that remain (files: headers): none." or a table of them.
allowed = set()
head = next(l for l in lines if l.startswith("Calls upward that remain"))
if not re.match(r"Calls upward that remain \(files: headers\): none\.", head):
    for l in section("Calls upward that remain"):
        m = re.match(r"  ([a-z_., ]+\.c): ([a-z_., ]+\.h)\s", l)
        if not m:
            sys.exit(f"FAIL: unparsed line of the calls upward: {l!r}")
        for f in names.findall(m.group(1)):
            for h in names.findall(m.group(2)):
                allowed.add((f, h))

bad, used = [], set()
for f in sorted(os.listdir(src)):
    if not f.endswith((".c", ".h")):
        continue
    if f not in layer_of:
        bad.append(f"{f} is in no layer of the table")
        continue
    text = open(os.path.join(src, f)).read()
    for h in re.findall(r'#include "store/([^"]+)"', text):
        if h not in layer_of:
            bad.append(f"{f} includes {h}, which is in no layer")
        elif layer_of[h] > layer_of[f]:
            if (f, h) in allowed:
                used.add((f, h))
            else:
                bad.append(f"{f} ({order[layer_of[f]]}) includes {h} "
                           f"({order[layer_of[h]]}), a layer above it")
# The calls, from the objects: a call to a file of a layer above is an
# exception of the table (the caller and a header of the callee's layer)
# or an error.
ncalls = None
if builddir:
    ncalls = 0
    calls = [(a[6:], b[6:], s) for a, b, s in src_objects.calls(builddir)
             if a.startswith("store/") and b.startswith("store/")]
    if not calls:
        bad.append(f"no calls between store objects under {builddir}")
    for f, g, sym in calls:
        ncalls += 1
        if f not in layer_of or g not in layer_of:
            bad.append(f"{f} calls {sym} of {g}, a file in no layer")
        elif layer_of[g] > layer_of[f]:
            ok = [h for (ff, h) in allowed
                  if ff == f and layer_of.get(h) == layer_of[g]]
            if ok:
                used.update((f, h) for h in ok)
            else:
                bad.append(f"{f} ({order[layer_of[f]]}) calls {sym}, "
                           f"defined in {g} ({order[layer_of[g]]}), a "
                           f"layer above it")
for f, h in sorted(allowed - used):
    bad.append(f"the exception {f}: {h} is no longer needed")
for n in layer_of:
    if not os.path.exists(os.path.join(src, n)):
        bad.append(f"the table names {n}, which does not exist")
if len(order) < 5 or len(layer_of) < 30:
    bad.append(f"the table was not parsed ({len(order)} layers, "
               f"{len(layer_of)} files)")
for b in bad:
    print("FAIL:", b)
if bad:
    sys.exit(1)
print(f"ok: {len(layer_of)} files in {len(order)} layers, "
      f"{len(used)} calls upward, each listed; "
      + (f"{ncalls} calls between store objects checked" if ncalls
         is not None else "calls not checked (no ULP_BUILDDIR)"))
PY
