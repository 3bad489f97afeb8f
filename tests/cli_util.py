#!/usr/bin/python3
"""cli_util.py - checkers for the ulpfs helper tests (tests/cli_*.sh) and
bench/cli_bench.sh.  Run with /usr/bin/python3 (numpy).

The JSON checks accept the obvious spellings of each field (the helper's
own names first), so that they test what the output means, not how a key
is spelled; a field that is missing under every spelling is a failure and
the keys that were there are printed.

Subcommands (each prints what it found, exits 1 on a failure):

  json FILE                 FILE parses as JSON (prints its shape)
  versions FILE [--count N] [--numbers 1,2,3]
                            "ulpfs log --json": a list of versions (those
                            with "state": "deleted" are left out), each with
                            number, time, size, stored size, ratio, reference,
                            depth, keyframe flag, hash; numbers increasing
  field FILE N KEY          print field KEY (any spelling) of version N
  paths FILE                every "path"-like string anywhere in FILE
  names FILE                every snapshot name in "snapshot list --json"
  keys FILE KEY[|ALT...]... every KEY (or one of its ALTs) occurs somewhere
  mmap-tensors FILE REF     python mmap of FILE + numpy.frombuffer of every
                            safetensors tensor, compared with REF's bytes
  mmap-bytes FILE REF       mmap ACCESS_READ of all of FILE equals REF
"""

import json
import mmap
import os
import struct
import sys

FIELDS = {
    "number": ("version", "n", "number", "seq", "num", "v"),
    "time": ("time", "mtime", "created", "date", "timestamp", "committed",
             "mtime_ns", "created_ns", "time_ns"),
    "size": ("size", "logical_size", "logical", "logical_bytes", "bytes"),
    "stored": ("stored", "stored_size", "stored_bytes", "physical",
               "physical_bytes", "object_size"),
    "ratio": ("ratio", "compression_ratio"),
    "ref": ("ref", "reference", "ref_version", "reference_version", "base"),
    "depth": ("depth", "chain_depth"),
    "keyframe": ("keyframe", "is_keyframe", "key"),
    "hash": ("hash", "xxh3", "xxh128", "digest", "checksum"),
}


def load(path):
    with open(path) as f:
        return json.load(f)


def version_list(doc):
    if isinstance(doc, list):
        return doc
    if isinstance(doc, dict):
        for k in ("versions", "log", "entries", "chain", "history"):
            if isinstance(doc.get(k), list):
                return doc[k]
        for v in doc.values():  # {"path": ..., "<something>": [...]}
            if isinstance(v, list) and v and isinstance(v[0], dict):
                return v
    raise SystemExit("no list of versions in the JSON (top level: %s)"
                     % (sorted(doc) if isinstance(doc, dict) else type(doc).__name__))


def get(d, what):
    for k in FIELDS.get(what, (what,)):
        if k in d:
            return k, d[k]
    return None, None


def cmd_json(a):
    doc = load(a[0])
    if isinstance(doc, dict):
        print("object with keys: %s" % ", ".join(sorted(doc)))
    elif isinstance(doc, list):
        print("list of %d" % len(doc))
    else:
        print(type(doc).__name__)
    return 0


def cmd_versions(a):
    path, count, numbers = a[0], None, None
    i = 1
    while i < len(a):
        if a[i] == "--count":
            count = int(a[i + 1])
            i += 2
        elif a[i] == "--numbers":
            numbers = [int(x) for x in a[i + 1].split(",") if x]
            i += 2
        else:
            raise SystemExit("versions: bad argument %s" % a[i])
    vs = version_list(load(path))
    fails = []
    nums = []
    gone = [get(v, "number")[1] for v in vs
            if isinstance(v, dict) and str(v.get("state", "")).lower() == "deleted"]
    if gone:  # listed as history, but no longer readable: not counted
        print("deleted (listed, not counted): %s" % ",".join(str(n) for n in gone))
        vs = [v for v in vs if get(v, "number")[1] not in gone]
    for v in vs:
        if not isinstance(v, dict):
            fails.append("a version is not an object: %r" % (v,))
            continue
        missing = [f for f in FIELDS if get(v, f)[0] is None]
        if missing:
            fails.append("version %r lacks %s (keys: %s)"
                         % (get(v, "number")[1], ", ".join(missing), ", ".join(sorted(v))))
        n = get(v, "number")[1]
        nums.append(n)
    print("versions: %s" % ",".join(str(n) for n in nums))
    if any(not isinstance(n, int) for n in nums):
        fails.append("version numbers are not all integers: %r" % nums)
    elif nums != sorted(nums) or len(set(nums)) != len(nums):
        fails.append("version numbers not increasing (oldest first): %r" % nums)
    if count is not None and len(nums) != count:
        fails.append("expected %d versions, got %d" % (count, len(nums)))
    if numbers is not None and nums != numbers:
        fails.append("expected versions %r, got %r" % (numbers, nums))
    for f in fails[:10]:
        print("FAIL: " + f)
    return 1 if fails else 0


def cmd_field(a):
    vs = version_list(load(a[0]))
    for v in vs:
        if get(v, "number")[1] == int(a[1]):
            k, x = get(v, a[2])
            if k is None:
                print("FAIL: version %s has no %s (keys: %s)" % (a[1], a[2], sorted(v)))
                return 1
            print(json.dumps(x) if not isinstance(x, str) else x)
            return 0
    print("FAIL: no version %s" % a[1])
    return 1


def walk(x, fn):
    if isinstance(x, dict):
        for k, v in x.items():
            fn(k, v)
            walk(v, fn)
    elif isinstance(x, list):
        for v in x:
            walk(v, fn)


def cmd_paths(a):
    out = set()

    def fn(k, v):
        if isinstance(v, str) and "path" in k.lower():
            out.add(v)
    doc = load(a[0])
    walk(doc, fn)
    if isinstance(doc, list):  # a list of plain path strings
        out.update(x for x in doc if isinstance(x, str))
    for p in sorted(out):
        print(p)
    return 0


def cmd_names(a):
    doc = load(a[0])
    out = []
    if isinstance(doc, dict) and isinstance(doc.get("snapshots"), (list, dict)):
        doc = doc["snapshots"]
    if isinstance(doc, dict):  # {"name": {...}}
        out = list(doc)
    else:
        for s in doc:
            if isinstance(s, str):
                out.append(s)
            elif isinstance(s, dict) and isinstance(s.get("name"), str):
                out.append(s["name"])
    for n in out:
        print(n)
    return 0


def cmd_keys(a):
    doc = load(a[0])
    seen = set()
    walk(doc, lambda k, v: seen.add(k.lower()))
    missing = []
    for alts in a[1:]:
        if not any(x.lower() in seen for x in alts.split("|")):
            missing.append(alts)
    if missing:
        print("FAIL: missing %s (keys present: %s)" % ("; ".join(missing), ", ".join(sorted(seen))))
        return 1
    print("all of %d keys present" % (len(a) - 1))
    return 0


ST = {"BF16": "<u2", "F16": "<f2", "F32": "<f4", "F64": "<f8", "I64": "<i8",
      "I32": "<i4", "U8": "u1", "I8": "i1"}


def cmd_mmap_tensors(a):
    import numpy as np
    path, ref = a
    want = open(ref, "rb").read()
    with open(path, "rb") as f:
        m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        n = struct.unpack("<Q", m[:8])[0]
        hdr = json.loads(bytes(m[8:8 + n]))
        hdr.pop("__metadata__", None)
        base, nt = 8 + n, 0
        for name, info in hdr.items():
            b, e = info["data_offsets"]
            dt = np.dtype(ST.get(info["dtype"], "u1"))
            cnt = (e - b) // dt.itemsize
            t = np.frombuffer(m, dtype=dt, count=cnt, offset=base + b)
            r = np.frombuffer(want, dtype=dt, count=cnt, offset=base + b)
            if not np.array_equal(t.view(np.uint8), r.view(np.uint8)):
                print("FAIL: %s: tensor %s differs from %s" % (path, name, ref))
                return 1
            nt += 1
            del t
        m.close()
    print("%s: %d tensors via mmap+numpy.frombuffer equal %s" % (path, nt, ref))
    return 0


def cmd_mmap_bytes(a):
    path, ref = a
    want = open(ref, "rb").read()
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size != len(want):
            print("FAIL: %s: size %d, expected %d" % (path, os.fstat(f.fileno()).st_size, len(want)))
            return 1
        m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        ok = m[:] == want
        m.close()
    print("%s: mmap %s" % (path, "equal" if ok else "DIFFERS"))
    return 0 if ok else 1


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    f = {"json": cmd_json, "versions": cmd_versions, "field": cmd_field,
         "paths": cmd_paths, "names": cmd_names, "keys": cmd_keys,
         "mmap-tensors": cmd_mmap_tensors, "mmap-bytes": cmd_mmap_bytes}.get(sys.argv[1])
    if not f:
        print("unknown subcommand %s" % sys.argv[1])
        return 2
    try:
        return f(sys.argv[2:])
    except (OSError, ValueError, KeyError, IndexError) as e:
        print("FAIL: %s %s: %r" % (sys.argv[1], " ".join(sys.argv[2:]), e))
        return 1


if __name__ == "__main__":
    sys.exit(main())
