#!/usr/bin/python3
"""tests/fs_difftest.py - differential random-operation tester of the mount.

A long, seeded, random sequence of filesystem operations runs on an ulpfs
mount (--mnt) and on a plain directory (--plain) side by side.  After every
operation the two must agree: the return value or errno of the operation,
the metadata (link counts and user.* attributes too) and bytes of every
file and the listing of every directory it
touched, the size (and, for readable descriptors, the bytes) seen through
the descriptors it used; every --check-every operations, after every
remount and at the end, the whole trees.

Operations: open with O_RDONLY/O_WRONLY/O_RDWR and O_CREAT, O_EXCL, O_TRUNC,
O_APPEND; pwrite at random offsets and sizes (sparse beyond EOF too), write
and read at the file position, lseek, pread, ftruncate and truncate (grow and
shrink), fsync, mmap reads (mmap.ACCESS_READ, of an open descriptor or of a
path), close, whole-file rewrites (some of them safetensors files,
whose header, tensors or end the later operations hit; some committed
at once and patched or appended to), reopening an existing (committed) file
without O_TRUNC and patching it or appending to it, page-aligned sparse
writes that leave holes, fallocate (punch hole, zero range, keep size:
the modes the plain side's filesystem has), copy_file_range, lseek
SEEK_DATA/SEEK_HOLE (checked for truth, not sameness), rename (files, directories, over existing
targets, into a directory's own subdirectory), renameat2 RENAME_NOREPLACE
and RENAME_EXCHANGE (when the plain directory's filesystem has them),
unlink, mkdir, rmdir, mknod (sockets: FIFOs would block the tester's
own opens, and device nodes open on the plain side but not in the nodev
mount), hard links, chmod, user.* extended attributes (set with
XATTR_CREATE/REPLACE, get, list, remove), "ulpfs sync", and remounts (every --remount-every
operations, all descriptors closed first on both sides).  The names come
from a small fixed set (directories d0 d1 d2 and d0/n d1/n d2/n, files
f0..f5 in each and in the root) so that operations collide.

The sequence depends only on --seed (printed at start; random when not
given) and on the other options: the same options reproduce the same
sequence.  Every choice is made from the random generator and the state of
the plain side.  On a divergence it prints the seed, the index of the
operation, the last 20 operations and the difference, and exits 1.

Remounts: with --ctl-req/--ctl-resp (FIFOs; tests/fs_difftest.sh serves
them with tests/fs_lib.sh's fs_remount) it writes "remount" and waits for
"ok"; else, with --store, it runs "$ULPFS umount" and "$ULPFS mount"
itself; else it does not remount.

Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
"""

import argparse
import collections
import ctypes
import errno
import hashlib
import json
import mmap
import os
import random
import stat
import struct
import subprocess
import sys
import threading
import time

DIRS = ["d0", "d1", "d2", "d0/n", "d1/n", "d2/n"]
PARENTS = [""] + DIRS
FILES = [(p + "/" if p else "") + "f%d" % i for p in PARENTS for i in range(6)]
MAX_FILE = 4 << 20  # offsets and sizes stay below this
AT_FDCWD = -100
RENAME_NOREPLACE, RENAME_EXCHANGE = 1, 2
FL_KEEP_SIZE, FL_PUNCH_HOLE, FL_ZERO_RANGE = 1, 2, 16


class Divergence(Exception):
    pass


def ename(e):
    return errno.errorcode.get(e, str(e))


def wrap(fn, side):
    try:
        return ("ok", fn(side))
    except OSError as e:
        return ("err", ename(e.errno))
    except ValueError as e:  # mmap of an empty file
        return ("valueerror", str(e))


def short(x):
    if isinstance(x, (bytes, bytearray)):
        return "<%d bytes sha256 %s>" % (len(x), hashlib.sha256(x).hexdigest()[:12])
    if isinstance(x, tuple):
        return "(" + ", ".join(short(y) for y in x) + ")"
    if isinstance(x, list):
        return "[" + ", ".join(short(y) for y in x) + "]"
    if isinstance(x, dict):
        return "{" + ", ".join("%s: %s" % (k, short(v)) for k, v in x.items()) + "}"
    return repr(x)


def bytes_diff(a, b):
    n = min(len(a), len(b))
    i = next((k for k in range(0, n, 4096) if a[k:k + 4096] != b[k:k + 4096]), None)
    if i is not None:
        while a[i] == b[i]:
            i += 1
    elif len(a) == len(b):
        return "equal"
    else:
        i = n
    s = max(0, i - 8)
    return ("lengths mount %d plain %d; first difference at offset %d\n"
            "      mount[%d:]: %s\n      plain[%d:]: %s"
            % (len(a), len(b), i, s, a[s:s + 32].hex(" "), s, b[s:s + 32].hex(" ")))


def explain(a, b, indent="    "):
    """Human-readable difference of two comparison results."""
    out = []

    def rec(x, y, where):
        if x == y:
            return
        if isinstance(x, (bytes, bytearray)) and isinstance(y, (bytes, bytearray)):
            out.append("%s%s: %s" % (indent, where or "bytes", bytes_diff(x, y)))
        elif isinstance(x, dict) and isinstance(y, dict):
            for k in sorted(set(x) | set(y)):
                if k not in x:
                    out.append("%s%s%s: only on the plain side: %s" % (indent, where, k, short(y[k])))
                elif k not in y:
                    out.append("%s%s%s: only on the mount: %s" % (indent, where, k, short(x[k])))
                else:
                    rec(x[k], y[k], "%s%s " % (where, k))
        elif (isinstance(x, tuple) and isinstance(y, tuple) and len(x) == len(y)
              and x[:1] == y[:1]):
            for k, (u, v) in enumerate(zip(x, y)):
                rec(u, v, "%s[%d]" % (where, k))
        else:
            out.append("%s%s: mount %s  plain %s" % (indent, where, short(x), short(y)))

    rec(a, b, "")
    return "\n".join(out[:30])


class Slot:
    def __init__(self, sid, fds, path, acc, append):
        self.sid, self.fds, self.path, self.acc, self.append = sid, fds, path, acc, append
        self.ino = os.fstat(fds[1]).st_ino  # the plain side's: names the file

    @property
    def readable(self):
        return self.acc != os.O_WRONLY

    def __repr__(self):
        acc = {os.O_RDONLY: "r", os.O_WRONLY: "w", os.O_RDWR: "rw"}[self.acc]
        return "fd#%d(%s,%s%s)" % (self.sid, self.path, acc, ",append" if self.append else "")


class Tester:
    def __init__(self, a):
        self.a = a
        self.roots = [os.path.abspath(a.mnt), os.path.abspath(a.plain)]
        self.rng = random.Random(a.seed)
        self.slots = {}
        self.next_sid = 0
        self.idx = 0
        self.hist = collections.deque(maxlen=20)
        self.counts = collections.Counter()
        self.progress = time.monotonic()
        self.limit = 180.0
        self.nremount = 0
        self.ctl = None
        if a.ctl_req:
            self.ctl = (open(a.ctl_req, "w", buffering=1), open(a.ctl_resp, "r"))
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.rename2 = self.probe_renameat2()
        self.ops = [
            (12, self.op_open), (16, self.op_pwrite), (5, self.op_write), (6, self.op_pread),
            (3, self.op_read), (2, self.op_lseek), (4, self.op_ftruncate), (2, self.op_fsync),
            (3, self.op_mmap), (10, self.op_close), (3, self.op_truncate), (5, self.op_patch),
            (4, self.op_rewrite), (2, self.op_readpath), (6, self.op_rename), (4, self.op_unlink),
            (3, self.op_mkdir), (3, self.op_rmdir), (1, self.op_stat),
            (2, self.op_mknod), (3, self.op_link), (3, self.op_xattr), (2, self.op_chmod),
        ]
        if self.rename2:
            self.ops.append((2, self.op_rename2))
        # Appends to committed files, sparse writes with large holes,
        # copy_file_range, SEEK_DATA/SEEK_HOLE; hole punching and zeroing
        # where the plain side's filesystem has them.
        self.ops += [(4, self.op_append), (3, self.op_sparse), (3, self.op_copy),
                     (2, self.op_seekdata), (0.25, self.op_model)]
        self.falloc = [m for m in (FL_PUNCH_HOLE | FL_KEEP_SIZE, FL_ZERO_RANGE,
                                   FL_ZERO_RANGE | FL_KEEP_SIZE, FL_KEEP_SIZE)
                       if self.probe_fallocate(m)]
        if self.falloc:
            self.ops.append((3, self.op_fallocate))
        if a.sync_every:
            self.ops.append((100.0 / a.sync_every, self.op_sync))
        self.weights = [w for w, _ in self.ops]

    # ------------------------------------------------------------ helpers

    def p(self, side, rel):
        return os.path.join(self.roots[side], rel) if rel else self.roots[side]

    def probe_renameat2(self):
        base = self.roots[1]
        a, b = os.path.join(base, ".probe-a"), os.path.join(base, ".probe-b")
        open(a, "w").close()
        r = self.libc.renameat2(AT_FDCWD, a.encode(), AT_FDCWD, b.encode(), ctypes.c_uint(RENAME_NOREPLACE))
        for x in (a, b):
            if os.path.exists(x):
                os.unlink(x)
        return r == 0

    def probe_fallocate(self, mode):
        """Whether the plain side's filesystem has this fallocate mode."""
        path = os.path.join(self.roots[1], ".probe-f")
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            os.write(fd, bytes(8192))
            return self.fallocate(fd, mode, 0, 4096) == 0
        except OSError:
            return False
        finally:
            os.close(fd)
            os.unlink(path)

    def fallocate(self, fd, mode, off, n):
        if self.libc.fallocate(fd, mode, ctypes.c_long(off), ctypes.c_long(n)) != 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
        return 0

    def renameat2(self, a, b, flags):
        if self.libc.renameat2(AT_FDCWD, a.encode(), AT_FDCWD, b.encode(), ctypes.c_uint(flags)) != 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
        return 0

    def plain_size(self, rel):
        try:
            st = os.stat(self.p(1, rel))
            return st.st_size if stat.S_ISREG(st.st_mode) else 0
        except OSError:
            return 0

    def plain_exists(self, rel):
        return os.path.lexists(self.p(1, rel))

    def pick_file(self, existing=0.7):
        """A file name; with probability `existing` one that exists (plain side)."""
        if self.rng.random() < existing:
            ex = [f for f in FILES if os.path.isfile(self.p(1, f))]
            if ex:
                return self.rng.choice(ex)
        return self.rng.choice(FILES)

    def pick_any(self):
        r = self.rng.random()
        if r < 0.65:
            return self.pick_file()
        if r < 0.95:
            return self.rng.choice(DIRS)
        return self.rng.choice(FILES + DIRS)

    def gen_size(self):
        r = self.rng.random()
        if r < 0.03:
            return 0
        if r < 0.2:
            return self.rng.randint(1, 16)
        if r < 0.7:
            return self.rng.randint(1, 4096)
        if r < 0.96:
            return self.rng.randint(4097, 65536)
        return self.rng.randint(65537, 400000)

    def gen_off(self, size):
        r = self.rng.random()
        if r < 0.15:
            o = 0
        elif r < 0.35:
            o = size
        elif r < 0.75:
            o = self.rng.randint(0, size)
        elif r < 0.96:
            o = size + self.rng.randint(1, 70000)  # sparse beyond EOF
        else:
            o = self.rng.randint(0, MAX_FILE)
        return min(o, MAX_FILE - 1)

    def gen_len(self, size):
        r = self.rng.random()
        if r < 0.2:
            return 0
        if r < 0.45:
            return self.rng.randint(0, size + 10)
        if r < 0.7:
            return size
        if r < 0.9:
            return max(0, size - self.rng.randint(0, 70000))
        return size + self.rng.randint(1, 300000)

    def gen_data(self, n, base):
        """n bytes: random, zeros, a repeated byte, or `base` (what is there
        now on the plain side) with a few low bits flipped (what a training
        step does to bf16 weights: the delta encoder's case)."""
        r = self.rng.random()
        if r < 0.3:
            return self.rng.randbytes(n)
        if r < 0.42:
            return bytes(n)
        if r < 0.5:
            return bytes([self.rng.randrange(256)]) * n
        b = bytearray(base[:n])
        if len(b) < n:
            b += self.rng.randbytes(n - len(b))
        for _ in range(max(1, n // 64)):
            if n:
                i = self.rng.randrange(n)
                b[i] ^= 1 << self.rng.randrange(3)
        return bytes(b)

    def plain_base(self, rel_or_fd, off, n):
        try:
            if isinstance(rel_or_fd, int):
                return os.pread(rel_or_fd, n, off)
            with open(self.p(1, rel_or_fd), "rb") as f:
                f.seek(off)
                return f.read(n)
        except OSError:
            return b""

    # --------------------------------------------------------- comparing

    def diverge(self, what, a, b):
        raise Divergence("%s\n%s" % (what, explain(a, b)))

    def info(self, side, rel, content=True):
        """What a path is: type, mode, size and bytes of a file; type,
        mode and sorted listing of a directory; or the errno."""
        path = self.p(side, rel)
        try:
            st = os.lstat(path)
        except OSError as e:
            return ("err", ename(e.errno))
        mode = stat.S_IMODE(st.st_mode)
        if stat.S_ISDIR(st.st_mode):
            try:
                ls = sorted(os.listdir(path))
            except OSError as e:
                ls = ("err", ename(e.errno))
            return ("dir", oct(mode), st.st_nlink, ls, self.xattrs(path))
        if stat.S_ISREG(st.st_mode):
            data = b""
            if content:
                try:
                    with open(path, "rb", buffering=0) as f:
                        data = f.readall()
                except OSError as e:
                    data = ("err", ename(e.errno))
            return ("file", oct(mode), st.st_size, st.st_nlink, data, self.xattrs(path))
        return ("other", oct(st.st_mode), st.st_nlink, st.st_rdev, self.xattrs(path))

    def xattrs(self, path):
        """The user.* attributes of a path (not followed), sorted."""
        try:
            return sorted((n, os.getxattr(path, n, follow_symlinks=False))
                          for n in os.listxattr(path, follow_symlinks=False) if n.startswith("user."))
        except OSError as e:
            return ("err", ename(e.errno))

    def check_paths(self, rels):
        seen = set()
        for rel in rels:
            for r in (rel, os.path.dirname(rel)):
                if r in seen:
                    continue
                seen.add(r)
                a, b = self.info(0, r), self.info(1, r)
                if a != b:
                    self.diverge("state of %r differs after the operation" % (r or "/"), a, b)

    def slot_info(self, s, side):
        fd = s.fds[side]
        try:
            size = os.fstat(fd).st_size
        except OSError as e:
            return ("err", ename(e.errno))
        data = b""
        if s.readable:
            try:
                data = os.pread(fd, size + 1, 0)
            except OSError as e:
                data = ("err", ename(e.errno))
        return ("fd", size, data)

    def check_slot(self, s):
        a, b = self.slot_info(s, 0), self.slot_info(s, 1)
        if a != b:
            self.diverge("fstat/pread through %r differ" % s, a, b)

    def tree(self, side):
        out = {}

        def walk(rel):
            i = self.info(side, rel)
            out[rel or "/"] = i
            if i[0] == "dir" and isinstance(i[3], list):
                for n in i[3]:
                    walk(os.path.join(rel, n) if rel else n)

        walk("")
        return out

    def check_tree(self, why):
        a, b = self.tree(0), self.tree(1)
        if a != b:
            self.diverge("whole trees differ (%s)" % why, a, b)
        self.counts["tree checks"] += 1

    # -------------------------------------------------------------- running

    def run(self, name, desc, fn, paths=(), slots=(), post=None):
        """Apply fn(side) on both sides, compare, run post(results), check."""
        self.hist.append("#%d %s %s" % (self.idx, name, desc))
        self.progress = time.monotonic()
        ra = wrap(fn, 0)
        rb = wrap(fn, 1)
        self.hist[-1] += " -> " + short(rb)
        if self.a.verbose:
            print("  " + self.hist[-1], flush=True)
        self.counts[name] += 1
        if post:
            post(ra, rb)
        if ra != rb:
            self.diverge("results of %s %s differ" % (name, desc), ra, rb)
        for s in slots:
            if s.sid in self.slots:
                self.check_slot(s)
        self.check_paths(list(paths) + [s.path for s in slots if s.path])

    def pick_slot(self):
        if not self.slots:
            return None
        return self.slots[self.rng.choice(sorted(self.slots))]

    def op_open(self):
        if len(self.slots) >= 8:
            return self.op_close()
        rel = self.pick_any() if self.rng.random() < 0.1 else self.pick_file(0.6)
        acc = self.rng.choice([os.O_RDONLY, os.O_WRONLY, os.O_RDWR, os.O_RDWR])
        fl = acc
        if self.rng.random() < 0.6:
            fl |= os.O_CREAT
            if self.rng.random() < 0.2:
                fl |= os.O_EXCL
        # O_RDONLY|O_TRUNC is unspecified by POSIX: not used.
        if acc != os.O_RDONLY and self.rng.random() < 0.25:
            fl |= os.O_TRUNC
        if acc != os.O_RDONLY and self.rng.random() < 0.2:
            fl |= os.O_APPEND
        mode = self.rng.choice([0o644, 0o600, 0o664, 0o755])
        fds = [None, None]
        names = [n for n in ("O_CREAT", "O_EXCL", "O_TRUNC", "O_APPEND") if fl & getattr(os, n)]
        desc = "%s %s %s" % (rel, "|".join([{0: "O_RDONLY", 1: "O_WRONLY", 2: "O_RDWR"}[acc]] + names), oct(mode))

        def fn(side):
            fds[side] = os.open(self.p(side, rel), fl, mode)

        def post(ra, rb):
            if ra[0] == "ok" and rb[0] == "ok" and stat.S_ISDIR(os.fstat(fds[1]).st_mode):
                # A directory opened O_RDONLY: its st_size, lseek offsets
                # and mmap errno are filesystem-specific; compare its
                # type through the descriptors, then close it.
                ta, tb = [stat.S_IFMT(os.fstat(fd).st_mode) for fd in fds]
                for fd in fds:
                    os.close(fd)
                if ta != tb:
                    self.diverge("open %s: a directory on the plain side only" % rel, ta, tb)
                self.new = []
            elif ra[0] == "ok" and rb[0] == "ok":
                s = Slot(self.next_sid, fds, rel, acc, bool(fl & os.O_APPEND))
                self.next_sid += 1
                self.slots[s.sid] = s
                self.hist[-1] += " = fd#%d" % s.sid
                self.new = [s]
            else:
                for fd in fds:
                    if fd is not None:
                        os.close(fd)
                self.new = []

        self.new = []
        self.run("open", desc, fn, paths=[rel], post=post)
        for s in self.new:
            self.check_slot(s)

    def op_pwrite(self):
        s = self.pick_slot()
        if not s:
            return self.op_open()
        size = os.fstat(s.fds[1]).st_size
        off, n = self.gen_off(size), self.gen_size()
        n = min(n, MAX_FILE - off)
        data = self.gen_data(n, self.plain_base(s.fds[1], off, n) if s.readable else self.plain_base(s.path or "", off, n))
        self.run("pwrite", "%r off=%d len=%d" % (s, off, n),
                 lambda side: os.pwrite(s.fds[side], data, off), slots=[s])

    def op_write(self):
        s = self.pick_slot()
        if not s:
            return self.op_open()
        pos = os.lseek(s.fds[1], 0, os.SEEK_CUR)
        if pos > MAX_FILE // 2:
            return self.op_lseek(s)
        n = self.gen_size()
        data = self.gen_data(n, self.plain_base(s.fds[1], pos, n) if s.readable else b"")
        self.run("write", "%r pos=%d len=%d" % (s, pos, n),
                 lambda side: (os.write(s.fds[side], data), os.lseek(s.fds[side], 0, os.SEEK_CUR)),
                 slots=[s])

    def op_pread(self):
        s = self.pick_slot()
        if not s:
            return self.op_open()
        size = os.fstat(s.fds[1]).st_size
        off = self.rng.choice([0, self.rng.randint(0, size + 10), size, size + 5000])
        n = self.rng.choice([1, self.rng.randint(1, 9000), self.rng.randint(1, 300000), size + 1])
        self.run("pread", "%r off=%d len=%d" % (s, off, n), lambda side: os.pread(s.fds[side], n, off), slots=[s])

    def op_read(self):
        s = self.pick_slot()
        if not s:
            return self.op_open()
        n = self.rng.randint(1, 70000)
        self.run("read", "%r len=%d" % (s, n),
                 lambda side: (os.read(s.fds[side], n), os.lseek(s.fds[side], 0, os.SEEK_CUR)), slots=[s])

    def op_lseek(self, s=None):
        s = s or self.pick_slot()
        if not s:
            return self.op_open()
        size = os.fstat(s.fds[1]).st_size
        wh = self.rng.choice([os.SEEK_SET, os.SEEK_CUR, os.SEEK_END])
        off = {os.SEEK_SET: self.rng.randint(0, size + 9000),
               os.SEEK_CUR: -os.lseek(s.fds[1], 0, os.SEEK_CUR) // 2,
               os.SEEK_END: self.rng.randint(-size, 9000)}[wh]
        self.run("lseek", "%r off=%d whence=%d" % (s, off, wh), lambda side: os.lseek(s.fds[side], off, wh), slots=[s])

    def op_ftruncate(self):
        s = self.pick_slot()
        if not s:
            return self.op_open()
        n = min(self.gen_len(os.fstat(s.fds[1]).st_size), MAX_FILE)
        self.run("ftruncate", "%r len=%d" % (s, n), lambda side: os.ftruncate(s.fds[side], n), slots=[s])

    def op_fsync(self):
        s = self.pick_slot()
        if not s:
            return self.op_open()
        self.run("fsync", repr(s), lambda side: os.fsync(s.fds[side]), slots=[s])

    def op_mmap(self):
        s = self.pick_slot() if self.rng.random() < 0.6 else None
        rel = None if s else self.pick_file()
        size = os.fstat(s.fds[1]).st_size if s else self.plain_size(rel)
        off = self.rng.randint(0, size)
        n = self.rng.randint(1, 70000)

        def fn(side):
            fd = s.fds[side] if s else os.open(self.p(side, rel), os.O_RDONLY)
            try:
                with mmap.mmap(fd, 0, access=mmap.ACCESS_READ) as m:
                    return (len(m), m[off:off + n], m[:] if len(m) <= 1 << 20 else b"")
            finally:
                if not s:
                    os.close(fd)

        self.run("mmap", "%s off=%d len=%d" % (repr(s) if s else rel, off, n), fn,
                 slots=[s] if s else [], paths=[] if s else [rel])

    def close_slot(self, s):
        del self.slots[s.sid]

        def fn(side):
            fd, s.fds[side] = s.fds[side], None
            os.close(fd)

        self.run("close", repr(s), fn, paths=[s.path] if s.path else [])

    def op_close(self):
        s = self.pick_slot()
        if not s:
            return self.op_open()
        self.close_slot(s)

    def op_truncate(self):
        rel = self.pick_file(0.85)
        n = min(self.gen_len(self.plain_size(rel)), MAX_FILE)
        self.run("truncate", "%s len=%d" % (rel, n), lambda side: os.truncate(self.p(side, rel), n), paths=[rel])

    def op_patch(self):
        """Reopen an existing (often committed) file without O_TRUNC and
        change a few bytes in place."""
        rel = self.pick_file(0.95)
        size = self.plain_size(rel)
        off = self.rng.randint(0, size)
        n = min(self.gen_size(), 8192)
        data = self.gen_data(n, self.plain_base(rel, off, n))
        acc = self.rng.choice([os.O_RDWR, os.O_WRONLY])

        def fn(side):
            fd = os.open(self.p(side, rel), acc)
            try:
                return os.pwrite(fd, data, off)
            finally:
                os.close(fd)

        self.run("patch", "%s off=%d len=%d" % (rel, off, n), fn, paths=[rel])

    def op_append(self):
        """Reopen an existing (often committed) file with O_APPEND, add a
        few lines, close: a log appended across restarts."""
        rel = self.pick_file(0.95)
        n = self.rng.choice([1, self.rng.randint(1, 200), self.rng.randint(1, 70000)])
        data = self.gen_data(n, b"")

        def fn(side):
            fd = os.open(self.p(side, rel), os.O_WRONLY | os.O_APPEND)
            try:
                return os.write(fd, data), os.fstat(fd).st_size
            finally:
                os.close(fd)

        self.run("append", "%s len=%d" % (rel, n), fn, paths=[rel])

    def op_sparse(self):
        """A write far past the end (or into the middle) of an open file,
        page-aligned, so that it leaves real holes behind or between."""
        s = self.pick_slot()
        if not s or s.acc == os.O_RDONLY:
            return self.op_open()
        size = os.fstat(s.fds[1]).st_size
        off = (self.rng.randint(0, size + (2 << 20)) // 4096) * 4096
        off = min(off, MAX_FILE - 65536)
        n = self.rng.choice([4096, 65536, self.rng.randint(1, 65536)])
        data = self.gen_data(n, b"")
        self.run("sparse", "%r off=%d len=%d" % (s, off, n),
                 lambda side: os.pwrite(s.fds[side], data, off), slots=[s])

    def op_fallocate(self):
        s = self.pick_slot()
        if not s:
            return self.op_open()
        mode = self.rng.choice(self.falloc)
        size = os.fstat(s.fds[1]).st_size
        off = self.rng.choice([0, self.rng.randint(0, size), (self.rng.randint(0, size) // 4096) * 4096])
        n = self.rng.choice([1, self.rng.randint(1, 70000), 4096 * self.rng.randint(1, 64)])
        n = max(1, min(n, MAX_FILE - off))
        self.run("fallocate", "%r mode=%#x off=%d len=%d" % (s, mode, off, n),
                 lambda side: (self.fallocate(s.fds[side], mode, off, n), os.fstat(s.fds[side]).st_size),
                 slots=[s])

    def op_copy(self):
        """copy_file_range from a file (an open descriptor or a new
        read-only open of a path) into an open writable descriptor."""
        d = self.pick_slot()
        if not d or d.acc == os.O_RDONLY:
            return self.op_open()
        src = self.pick_slot() if self.rng.random() < 0.5 else None
        rel = None if src else self.pick_file(0.9)
        ssize = os.fstat(src.fds[1]).st_size if src else self.plain_size(rel)
        off_in = self.rng.choice([0, self.rng.randint(0, ssize), (self.rng.randint(0, ssize) // 4096) * 4096])
        dsize = os.fstat(d.fds[1]).st_size
        off_out = self.rng.choice([0, dsize, self.rng.randint(0, dsize + 70000)])
        off_out = min(off_out, MAX_FILE - 1)
        n = self.rng.choice([1, self.rng.randint(1, 70000), ssize, self.rng.randint(1, 1 << 20)])
        n = min(n, MAX_FILE - off_out)

        def fn(side):
            fd = src.fds[side] if src else os.open(self.p(side, rel), os.O_RDONLY)
            try:
                return os.copy_file_range(fd, d.fds[side], n, off_in, off_out), os.fstat(d.fds[side]).st_size
            finally:
                if not src:
                    os.close(fd)

        self.run("copy", "%s off=%d -> %r off=%d len=%d" % (repr(src) if src else rel, off_in, d, off_out, n),
                 fn, slots=[d] + ([src] if src else []), paths=[] if src else [rel])

    def op_seekdata(self):
        """lseek SEEK_DATA/SEEK_HOLE: a filesystem may report a hole as data
        (a committed version is data throughout), so the mount's answer is
        checked for being true of the plain side's bytes (what it skips is
        zeros), not for being the same answer; past the end both must say
        ENXIO.  The file positions are put back on both sides."""
        s = self.pick_slot()
        if not s:
            return self.op_open()
        size = os.fstat(s.fds[1]).st_size
        off = self.rng.choice([0, self.rng.randint(0, size), size, size + 10])
        wh = self.rng.choice([os.SEEK_DATA, os.SEEK_HOLE])
        desc = "%r off=%d %s" % (s, off, "SEEK_DATA" if wh == os.SEEK_DATA else "SEEK_HOLE")
        self.hist.append("#%d seekdata %s" % (self.idx, desc))
        self.progress = time.monotonic()
        self.counts["seekdata"] += 1
        pos = [os.lseek(fd, 0, os.SEEK_CUR) for fd in s.fds]

        def seek(side, o, w):
            return wrap(lambda _: os.lseek(s.fds[side], o, w), side)

        ra, rb = seek(0, off, wh), seek(1, off, wh)
        self.hist[-1] += " -> mount %s, plain %s" % (short(ra), short(rb))
        if ra[0] == "ok" and wh == os.SEEK_HOLE:
            nd = seek(0, ra[1], os.SEEK_DATA)  # where that hole ends
        for side in (0, 1):
            os.lseek(s.fds[side], pos[side], os.SEEK_SET)
        if off >= size or rb[0] != "ok" and wh == os.SEEK_HOLE:
            if ra != rb:
                self.diverge("lseek %s" % desc, ra, rb)
            return
        if ra[0] != "ok":
            # ENXIO from SEEK_DATA: no data left, all zeros to the end.
            if ra != ("err", "ENXIO") or wh != os.SEEK_DATA:
                self.diverge("lseek %s failed on the mount" % desc, ra, rb)
            lo, hi = off, size
        elif wh == os.SEEK_DATA:
            lo, hi = off, ra[1]
        else:
            lo, hi = ra[1], nd[1] if nd[0] == "ok" else size
        with open("/proc/self/fd/%d" % s.fds[1], "rb") as f:
            f.seek(lo)
            skipped = f.read(max(0, hi - lo))
        r = ra[1] if ra[0] == "ok" else size
        if not off <= r <= size or any(skipped):
            self.diverge("lseek %s: [%d, %d) is not a hole on the plain side" % (desc, lo, hi), ra, rb)

    def gen_safetensors(self, big=False):
        """A safetensors file of a few tensors (bf16, f32, and at times an
        odd-sized u8 one that leaves the next unaligned), with big of more
        than one chunk (2 MiB): patches, appends and truncations of it then
        land in its header, its tensors or past its end."""
        hdr, pos, body = {"__metadata__": {"format": "pt"}}, 0, []
        for i in range(self.rng.randint(1, 4) if not big else 4):
            dt, w = self.rng.choice([("BF16", 2), ("F32", 4), ("BF16", 2), ("U8", 1)])
            n = self.rng.randint(1, 450000 if big else 20000) if w > 1 else self.rng.randint(1, 999)
            hdr["t%d" % i] = {"dtype": dt, "shape": [n], "data_offsets": [pos, pos + n * w]}
            pos += n * w
            body.append(self.gen_data(n * w, b""))
        h = json.dumps(hdr).encode()
        h += b" " * (-len(h) % 8)
        return (struct.pack("<Q", len(h)) + h + b"".join(body))[:MAX_FILE]

    def op_model(self):
        """A safetensors file committed ("ulpfs sync"), then reopened without
        O_TRUNC and patched in its header, anywhere (mostly inside its
        tensors) or appended to: a copy-up of a file with tensors, coded
        with its base's map and chunks or parsed again."""
        rel = self.pick_file(0.8)
        data = self.gen_safetensors(big=True)

        def write(side):
            with open(self.p(side, rel), "wb") as f:
                return f.write(data)

        self.run("model", "%s len=%d" % (rel, len(data)), write, paths=[rel])
        self.op_sync()
        size = self.plain_size(rel)
        r = self.rng.random()
        off = self.rng.randint(0, min(size, 300)) if r < 0.2 else size if r < 0.35 else self.rng.randint(0, size)
        n = min(self.gen_size(), 8192)
        patch = self.gen_data(n, self.plain_base(rel, off, n))

        def fn(side):
            fd = os.open(self.p(side, rel), os.O_RDWR)
            try:
                return os.pwrite(fd, patch, off)
            finally:
                os.close(fd)

        self.run("model-patch", "%s off=%d len=%d" % (rel, off, n), fn, paths=[rel])

    def op_rewrite(self):
        rel = self.pick_file(0.8)
        if self.rng.random() < 0.2:
            data = self.gen_safetensors()
        else:
            n = self.gen_size() * self.rng.choice([1, 1, 4])
            data = self.gen_data(n, self.plain_base(rel, 0, n))

        def fn(side):
            with open(self.p(side, rel), "wb") as f:
                return f.write(data)

        self.run("rewrite", "%s len=%d" % (rel, len(data)), fn, paths=[rel])

    def op_readpath(self):
        rel = self.pick_file(0.9)

        def fn(side):
            with open(self.p(side, rel), "rb") as f:
                return f.read()

        self.run("readpath", rel, fn, paths=[rel])

    def retarget(self, src, dst, exchange=False):
        """Follow renames in the descriptors' paths (only used to choose
        which paths to check; both sides get the same treatment)."""
        for s in self.slots.values():
            p = s.path
            if p is None:
                continue
            if p == dst or p.startswith(dst + "/"):
                s.path = (src + p[len(dst):]) if exchange else None
            elif p == src or p.startswith(src + "/"):
                s.path = dst + p[len(src):]

    def subtree(self, rel):
        out = [rel]
        i = self.info(1, rel, content=False)
        if i[0] == "dir" and isinstance(i[3], list):
            for n in i[3]:
                out += self.subtree(rel + "/" + n)
        return out

    def rename_pair(self):
        r = self.rng.random()
        if r < 0.7:
            return self.pick_file(0.8), self.pick_file(0.5)
        if r < 0.9:
            return self.rng.choice(DIRS), self.rng.choice(DIRS)
        return self.pick_any(), self.pick_any()

    def op_rename(self):
        src, dst = self.rename_pair()
        ok = [False]

        def post(ra, rb):
            ok[0] = rb[0] == "ok"

        self.run("rename", "%s -> %s" % (src, dst),
                 lambda side: os.rename(self.p(side, src), self.p(side, dst)), paths=[src, dst], post=post)
        if ok[0]:
            self.retarget(src, dst)
            self.check_paths(self.subtree(dst))

    def op_rename2(self):
        src, dst = self.rename_pair()
        flags = self.rng.choice([RENAME_NOREPLACE, RENAME_NOREPLACE, RENAME_EXCHANGE])
        ok = [False]

        def post(ra, rb):
            ok[0] = rb[0] == "ok"

        self.run("renameat2", "%s -> %s %s" % (src, dst, "NOREPLACE" if flags == 1 else "EXCHANGE"),
                 lambda side: self.renameat2(self.p(side, src), self.p(side, dst), flags),
                 paths=[src, dst], post=post)
        if ok[0]:
            if flags == RENAME_EXCHANGE:
                tmp = "\0"
                self.retarget(src, tmp)
                self.retarget(dst, src)
                self.retarget(tmp, dst)
                self.check_paths(self.subtree(src))
            else:
                self.retarget(src, dst)
            self.check_paths(self.subtree(dst))

    def op_unlink(self):
        rel = self.pick_file(0.8) if self.rng.random() < 0.9 else self.pick_any()
        for s in self.slots.values():
            if s.path == rel and os.path.isfile(self.p(1, rel)):
                s.path = None
        self.run("unlink", rel, lambda side: os.unlink(self.p(side, rel)), paths=[rel])

    def op_mkdir(self):
        rel = self.rng.choice(DIRS) if self.rng.random() < 0.9 else self.pick_file()
        self.run("mkdir", rel, lambda side: os.mkdir(self.p(side, rel), 0o755), paths=[rel])

    def op_rmdir(self):
        rel = self.rng.choice(DIRS) if self.rng.random() < 0.9 else self.pick_file()
        self.run("rmdir", rel, lambda side: os.rmdir(self.p(side, rel)), paths=[rel])

    def op_mknod(self):
        # Sockets: FIFOs would block the opens of other operations, and
        # device nodes open on the plain side but not in the (nodev) mount.
        rel = self.pick_file(0.2)
        self.run("mknod", rel, lambda side: os.mknod(self.p(side, rel), stat.S_IFSOCK | 0o640), paths=[rel])

    def op_chmod(self):
        # No set-id bits: as root (CAP_FSETID) a write keeps them on ext4,
        # which tests/fs_errors.py covers for both users.
        rel = self.pick_any()
        mode = self.rng.choice([0o644, 0o600, 0o755, 0o700, 0o444, 0o1777, 0o000])
        self.run("chmod", "%s %s" % (rel, oct(mode)),
                 lambda side: os.chmod(self.p(side, rel), mode, follow_symlinks=False), paths=[rel])

    def op_link(self):
        src = self.pick_file(0.9) if self.rng.random() < 0.95 else self.pick_any()
        dst = self.pick_file(0.3)
        self.run("link", "%s -> %s" % (src, dst),
                 lambda side: os.link(self.p(side, src), self.p(side, dst)), paths=[src, dst])

    def op_xattr(self):
        rel = self.pick_any()
        name = "user.a%d" % self.rng.randint(0, 3)
        r = self.rng.random()
        if r < 0.5:
            # ext4 keeps one block of attributes per inode (ENOSPC past it;
            # ulpfs keeps 64 KiB): stay below 4 x 700 bytes.
            val = self.rng.randbytes(self.rng.choice([0, 1, 10, 200, 700]))
            flags = self.rng.choice([0, 0, os.XATTR_CREATE, os.XATTR_REPLACE])
            desc = "set %s %s (%d bytes, flags %d)" % (rel, name, len(val), flags)
            fn = lambda side: os.setxattr(self.p(side, rel), name, val, flags)
        elif r < 0.7:
            desc = "get %s %s" % (rel, name)
            fn = lambda side: os.getxattr(self.p(side, rel), name)
        elif r < 0.85:
            desc = "list %s" % rel
            fn = lambda side: sorted(os.listxattr(self.p(side, rel)))
        else:
            desc = "remove %s %s" % (rel, name)
            fn = lambda side: os.removexattr(self.p(side, rel), name)
        self.run("xattr", desc, fn, paths=[rel])

    def op_stat(self):
        rel = self.pick_any()
        self.run("stat", rel, lambda side: self.info(side, rel), paths=[rel])

    def op_sync(self):
        def fn(side):
            if side == 1:
                return 0
            r = subprocess.run([self.a.ulpfs, "sync", self.roots[0]], capture_output=True, text=True)
            return 0 if r.returncode == 0 else ("ulpfs sync failed", r.returncode, r.stderr.strip())

        self.run("sync", "", fn, paths=[""])

    def close_all(self):
        for sid in sorted(self.slots):
            self.close_slot(self.slots[sid])

    def remount(self, why):
        self.close_all()
        if not self.ctl and not self.a.store:
            return False
        self.hist.append("#%d remount (%s)" % (self.idx, why))
        self.progress = time.monotonic()
        self.limit = 900.0
        t0 = time.monotonic()
        if self.ctl:
            self.ctl[0].write("remount\n")
            r = self.ctl[1].readline().strip()
            if r != "ok":
                raise Divergence("remount failed: the wrapper answered %r" % r)
        else:
            for cmd in ([self.a.ulpfs, "umount", self.roots[0]],
                        [self.a.ulpfs, "mount", "-o", "settle=50", self.a.store, self.roots[0]]):
                r = subprocess.run(cmd, capture_output=True, text=True)
                if r.returncode:
                    raise Divergence("%s failed (exit %d): %s" % (" ".join(cmd), r.returncode, r.stderr))
        self.limit = 180.0
        self.nremount += 1
        self.counts["remount"] += 1
        self.remount_secs = getattr(self, "remount_secs", 0.0) + time.monotonic() - t0
        self.check_tree("after remount #%d (%s)" % (self.nremount, why))
        return True

    def watchdog(self):
        while True:
            time.sleep(5)
            if time.monotonic() - self.progress > self.limit:
                print("\n[difftest] HANG: operation #%d has not finished after %.0f s (seed %d)"
                      % (self.idx, self.limit, self.a.seed), flush=True)
                print("[difftest] last operations:\n  " + "\n  ".join(self.hist), flush=True)
                os._exit(1)

    def main(self):
        a = self.a
        threading.Thread(target=self.watchdog, daemon=True).start()
        t0 = time.monotonic()
        last = t0
        try:
            self.check_tree("at start")
            for self.idx in range(a.ops):
                _, op = self.rng.choices(self.ops, weights=self.weights)[0]
                op()
                if a.check_every and (self.idx + 1) % a.check_every == 0:
                    self.check_tree("periodic, after op #%d" % self.idx)
                if a.remount_every and (self.idx + 1) % a.remount_every == 0 and self.idx + 1 < a.ops:
                    self.remount("every %d ops" % a.remount_every)
                if time.monotonic() - last > a.report_every:
                    last = time.monotonic()
                    print("[difftest] %d/%d ops, %.0f s, %d remounts" % (self.idx + 1, a.ops, last - t0, self.nremount),
                          flush=True)
            self.idx = a.ops
            self.close_all()
            self.check_tree("at the end, all closed")
            if a.ops:
                self.op_sync()
            self.remount("final")
        except Divergence as e:
            print("\n[difftest] DIVERGENCE at operation #%d (seed %d, %d ops, remount every %d)"
                  % (self.idx, a.seed, a.ops, a.remount_every), flush=True)
            print("[difftest] last operations (plain side's result shown):\n  " + "\n  ".join(self.hist))
            print("[difftest] difference: %s" % e)
            print("[difftest] reproduce with: --seed %d --ops %d --remount-every %d --check-every %d --sync-every %d"
                  % (a.seed, self.idx + 1, a.remount_every, a.check_every, a.sync_every), flush=True)
            return 1
        dt = time.monotonic() - t0
        print("[difftest] PASSED: seed %d, %d ops in %.1f s (%.0f ops/s), %d remounts (%.1f s), %d tree checks"
              % (a.seed, a.ops, dt, a.ops / dt if dt else 0, self.nremount,
                 getattr(self, "remount_secs", 0.0), self.counts["tree checks"]))
        print("[difftest] operations: " + ", ".join("%s %d" % kv for kv in sorted(self.counts.items())), flush=True)
        return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mnt", required=True, help="the ulpfs mount")
    ap.add_argument("--plain", required=True, help="an empty plain directory")
    ap.add_argument("--store", help="the store (remounts without --ctl-req)")
    ap.add_argument("--ctl-req", help="FIFO to ask the wrapper for a remount")
    ap.add_argument("--ctl-resp", help="FIFO with the wrapper's answers")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--ops", type=int, default=3000)
    ap.add_argument("--remount-every", type=int, default=1000, help="0: only the final remount")
    ap.add_argument("--check-every", type=int, default=200, help="whole-tree comparison period")
    ap.add_argument("--sync-every", type=int, default=300, help="about one 'ulpfs sync' per N ops (0: none)")
    ap.add_argument("--verbose", action="store_true", help="print every operation")
    ap.add_argument("--report-every", type=float, default=30.0, help="progress line period (s)")
    a = ap.parse_args()
    a.ulpfs = os.environ.get("ULPFS", "ulpfs")
    if a.seed is None:
        a.seed = int.from_bytes(os.urandom(4), "little")
    print("[difftest] seed %d, %d ops, remount every %d, tree check every %d, sync about every %d"
          % (a.seed, a.ops, a.remount_every, a.check_every, a.sync_every), flush=True)
    for d in (a.mnt, a.plain):
        if os.listdir(d):
            print("[difftest] %s is not empty" % d, file=sys.stderr)
            return 2
    return Tester(a).main()


if __name__ == "__main__":
    sys.exit(main())
