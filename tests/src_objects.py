#!/usr/bin/env python3
# tests/src_objects.py - who calls whom in src/, read from the built objects
# with nm: each object of ulpfs and of its libraries (not the sanitizer
# twins) is one source file, its defined and its undefined global symbols.
# Used by tests/store_layers.sh, tests/src_layers.sh and
# tests/file_cycles.sh; run alone it prints the calls between files:
#
#   python3 tests/src_objects.py BUILDDIR [FOLDER]
#
# Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
import os
import re
import subprocess
import sys

# The folders of src/, lowest first: a folder calls only folders of a
# lower rank (objstore and fs share one and do not call each other).
FOLDER_RANK = {"codec": 0, "formats": 1, "store": 2, "objstore": 3, "fs": 3,
               "ctl": 4, "cli": 5}

# automake names an object DIR/PREFIX-BASE.o; these prefixes are ulpfs's
# and its libraries'.
_OBJ = re.compile(r"^(ulpfs|libulp(codec|formats|store|objstore|fsops|ctl)"
                  r"_a)-(.+)\.o$")


# The sources, beside this script: an object whose source is gone (a file
# moved or deleted since a build tree was last cleaned) is left out.
_SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")


def objects(builddir):
    """{"store/catalog.c": path of its object} for every object built."""
    out = {}
    top = os.path.join(builddir, "src")
    for d, _, files in os.walk(top):
        for f in files:
            m = _OBJ.match(f)
            if m:
                src = f"{os.path.relpath(d, top)}/{m.group(3)}.c"
                if os.path.exists(os.path.join(_SRC, src)):
                    out[src] = os.path.join(d, f)
    return out


def symbols(builddir):
    """{source: (defined, undefined)}: the global symbols of each object."""
    objs = objects(builddir)
    if not objs:
        return {}
    names = sorted(objs)
    # one nm for all: it prints "\nPATH:\n" before each file's symbols
    text = subprocess.run(["nm", "-A", "--defined-only", "-g"] +
                          [objs[n] for n in names], check=True,
                          capture_output=True, text=True).stdout
    und = subprocess.run(["nm", "-A", "-u"] + [objs[n] for n in names],
                         check=True, capture_output=True, text=True).stdout
    by_path = {objs[n]: n for n in names}
    res = {n: (set(), set()) for n in names}
    for line in text.splitlines():
        path, _, rest = line.partition(":")
        parts = rest.split()
        if path in by_path and len(parts) == 3:
            res[by_path[path]][0].add(parts[2])
    for line in und.splitlines():
        path, _, rest = line.partition(":")
        parts = rest.split()
        if path in by_path and len(parts) == 2 and parts[0] == "U":
            res[by_path[path]][1].add(parts[1])
    return res


def calls(builddir):
    """[(caller, callee, symbol)]: every use in one source file of a
    symbol another source file defines."""
    syms = symbols(builddir)
    owner = {}
    for src, (defined, _) in syms.items():
        for s in defined:
            owner.setdefault(s, src)
    out = []
    for src, (_, undefined) in sorted(syms.items()):
        for s in sorted(undefined):
            if s in owner and owner[s] != src:
                out.append((src, owner[s], s))
    return out


def folder(src):
    return src.split("/", 1)[0]


def cycles(edges):
    """The strongly connected components of more than one node of the
    graph {node: set(nodes)} (Tarjan), each sorted."""
    index, low, stack, on, out = {}, {}, [], set(), []
    nodes = sorted(set(edges) | {m for v in edges.values() for m in v})

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in nodes:
        if v not in index:
            visit(v)
    return sorted(out)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: src_objects.py BUILDDIR [FOLDER]")
    only = sys.argv[2] if len(sys.argv) > 2 else None
    for a, b, s in calls(sys.argv[1]):
        if only is None or folder(a) == only:
            print(f"{a} -> {b} {s}")
