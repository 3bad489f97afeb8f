#!/bin/bash
# tests/func_length.sh - no function of src/ is longer than 150 lines,
# counted from the first line of its signature to its closing brace.  The
# sources are clang-formatted (.clang-format): a function's body opens
# with "{" alone on a line and closes with "}" alone, both in column 0.
# Prints the longest functions, and every one over the limit.
#
#   bash tests/func_length.sh [MAX]
#
# Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
set -eu
TOP=${srcdir:-$(dirname "${BASH_SOURCE[0]}")/..}
command -v python3 >/dev/null || { echo "FAIL: python3 not found" >&2; exit 1; }
exec python3 - "$TOP/src" "${1:-150}" <<'PY'
import os, re, sys

src, limit = sys.argv[1], int(sys.argv[2])
funcs = []  # (lines, file:line, name)
for d, _, files in os.walk(src):
    for f in sorted(files):
        if not f.endswith((".c", ".h")):
            continue
        path = os.path.join(d, f)
        lines = open(path, errors="replace").read().split("\n")
        i = 0
        while i < len(lines):
            if lines[i] != "{":
                i += 1
                continue
            # the signature: from the last line above in column 0
            s = i - 1
            while s > 0 and lines[s][:1] in (" ", "\t"):
                s -= 1
            sig = " ".join(lines[s:i])
            m = re.search(r"(\w+)\s*\(", sig)
            e = i + 1
            while e < len(lines) and lines[e] != "}":
                e += 1
            if e == len(lines):
                sys.exit(f"FAIL: {path}:{i + 1}: no closing brace")
            if m:
                funcs.append((e - s + 1,
                              f"{os.path.relpath(path, src)}:{s + 1}",
                              m.group(1)))
            i = e + 1
funcs.sort(reverse=True)
if len(funcs) < 500:
    sys.exit(f"FAIL: only {len(funcs)} functions found: not parsed")
print(f"{len(funcs)} functions; the longest:")
for n, where, name in funcs[:8]:
    print(f"  {n:4d}  {name}  (src/{where})")
over = [x for x in funcs if x[0] > limit]
for n, where, name in over:
    print(f"FAIL: {name} (src/{where}) is {n} lines, over {limit}")
if over:
    sys.exit(1)
print(f"ok: none over {limit} lines")
PY
