#!/usr/bin/python3
# tests/fs_snaptree.py DIR [--content] - a manifest of the tree DIR, one
# line per entry, sorted by path: type, mode, owner, device number, size,
# atime and mtime (ns), link count, a symlink's target, every extended
# attribute (ACLs included, in hex), and for the second and later names of
# one inode the first one's path (so that hard links compare as links,
# whatever the inode numbers).  --content adds each regular file's sha256.
# ctime is left out: nothing can set it, so a copy never has the
# original's.  tests/fs_snapmeta.sh compares a live tree with a snapshot
# of it and with what "ulpfs restore" brings back.
#
# Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
import hashlib
import os
import stat
import sys

top = sys.argv[1]
content = "--content" in sys.argv[2:]
SKIP = {".ulpfs"}  # the control directory at the root of a mount
first = {}
lines = []


def xattrs(p):
    try:
        names = sorted(os.listxattr(p, follow_symlinks=False))
    except OSError as e:
        return "listxattr:" + str(e.errno)
    out = []
    for n in names:
        try:
            out.append(n + "=" + os.getxattr(p, n, follow_symlinks=False).hex())
        except OSError as e:
            out.append(n + "!" + str(e.errno))
    return ",".join(out)


def entry(rel):
    p = os.path.join(top, rel) if rel else top
    st = os.lstat(p)
    f = [rel or ".", stat.filemode(st.st_mode), "%d:%d" % (st.st_uid, st.st_gid)]
    if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
        f.append("dev=%d:%d" % (os.major(st.st_rdev), os.minor(st.st_rdev)))
    if not stat.S_ISDIR(st.st_mode):
        f.append("size=%d" % st.st_size)
    f.append("atime=%d mtime=%d nlink=%d" % (st.st_atime_ns, st.st_mtime_ns, st.st_nlink))
    if stat.S_ISLNK(st.st_mode):
        f.append("-> " + os.readlink(p))
    if not stat.S_ISDIR(st.st_mode) and st.st_nlink > 1:
        key = st.st_ino
        if key in first:
            f.append("link-of=" + first[key])
        else:
            first[key] = rel
    f.append("xattrs[" + xattrs(p) + "]")
    if content and stat.S_ISREG(st.st_mode):
        with open(p, "rb") as fh:
            f.append("sha256=" + hashlib.sha256(fh.read()).hexdigest())
    lines.append(" ".join(f))
    if stat.S_ISDIR(st.st_mode):
        for name in sorted(os.listdir(p)):
            if not rel and name in SKIP:
                continue
            entry(os.path.join(rel, name) if rel else name)


entry("")
print("\n".join(lines))
