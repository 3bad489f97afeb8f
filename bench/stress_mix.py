#!/usr/bin/python3
"""bench/stress_mix.py - a filesystem stress mix in the manner of xfstests'
fsstress (not packaged in Debian 12), for bench/stress_bench.sh.

    stress_mix.py run DIR [--procs 4] [--ops 2000] [--seed 1] [--max-off BYTES]
    stress_mix.py compare A B

run: PROCS processes, OPS operations each, in DIR/p0 .. DIR/pN-1 (each its
own seeded generator and its own subtree, so that the tree left behind
depends only on the seed: a run on the mount and one on a plain directory
can be compared).  The operations, drawn with fixed weights: create, write
at a random offset up to MAX-OFF (default 1 GiB: files sparse and of about
that size), O_DIRECT write and read (4 KiB aligned), buffered read, append,
copy_file_range from another file, fallocate (mode 0, KEEP_SIZE,
PUNCH_HOLE), truncate, link, unlink, rename, mkdir, fsync, fdatasync, stat.
Each process keeps a few descriptors open and closes them at random; errors
(ENOENT after an unlink, ...) are counted, not fatal.  Prints the seconds
taken and the operation counts.

compare: A holds the same files as B (names, types, sizes, link counts),
with the same bytes wherever B has data (B's SEEK_DATA map) and zeros in
B's holes (sampled: the first, middle and last 4 KiB of each).  Exit 1 on
a difference.

Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
"""

import argparse
import errno
import mmap
import multiprocessing
import os
import random
import stat
import sys
import time

NAMES = 24  # files per process (about 100 for 4 processes)
ALIGN = 4096


def op_counts(rng, dirpath, ops, max_off):
    counts = {}
    fds = {}
    dbuf = mmap.mmap(-1, 1 << 20)  # aligned, for O_DIRECT
    dbuf.write(rng.randbytes(1 << 20))

    def name():
        sub = rng.choice(["", "a/", "a/b/"])
        return os.path.join(dirpath, sub + "f%d" % rng.randrange(NAMES))

    def fd_of(path, flags=os.O_RDWR):
        if path in fds and rng.random() < 0.7:
            return fds[path]
        fd = os.open(path, flags | os.O_CREAT, 0o644)
        if len(fds) < 6 and not flags & os.O_DIRECT:
            old = fds.pop(path, None)
            if old is not None:
                os.close(old)
            fds[path] = fd
        return fd

    def done(fd):
        if fd not in fds.values():
            os.close(fd)

    def off():
        r = rng.random()
        return (rng.randrange(max_off) if r < 0.3 else rng.randrange(1 << 22)) // ALIGN * ALIGN

    def o_write():
        fd = fd_of(name())
        os.pwrite(fd, rng.randbytes(rng.choice([512, 4096, 65536, rng.randrange(1, 200000)])), off())
        done(fd)

    def o_dwrite():
        fd = os.open(name(), os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o644)
        try:
            n = rng.choice([4096, 65536, 1 << 20])
            os.pwritev(fd, [memoryview(dbuf)[:n]], off())
        finally:
            os.close(fd)

    def o_dread():
        fd = os.open(name(), os.O_RDONLY | os.O_DIRECT)
        try:
            buf = mmap.mmap(-1, 65536)
            os.preadv(fd, [buf], off())
        finally:
            os.close(fd)

    def o_read():
        fd = os.open(name(), os.O_RDONLY)
        try:
            os.pread(fd, rng.randrange(1, 200000), off())
        finally:
            os.close(fd)

    def o_append():
        fd = os.open(name(), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, b"line %d\n" % rng.randrange(1 << 30))
        finally:
            os.close(fd)

    def o_copy():
        src = os.open(name(), os.O_RDONLY)
        try:
            dst = fd_of(name())
            size = os.fstat(src).st_size
            n = rng.choice([4096, 65536, rng.randrange(1, 1 << 20)])
            os.copy_file_range(src, dst, n, rng.randrange(size + 1), off())
            done(dst)
        finally:
            os.close(src)

    def o_falloc():
        fd = fd_of(name())
        mode = rng.choice([0, 1, 3])  # mode 0, KEEP_SIZE, PUNCH_HOLE|KEEP_SIZE
        n = rng.choice([4096, 65536, 1 << 20])
        if mode == 0:
            os.posix_fallocate(fd, off(), n)
        else:
            fallocate(fd, mode, off(), n)
        done(fd)

    def o_truncate():
        os.truncate(name(), rng.choice([0, off(), rng.randrange(1 << 20)]))

    def o_link():
        os.link(name(), name())

    def o_unlink():
        p = name()
        old = fds.pop(p, None)
        if old is not None:
            os.close(old)
        os.unlink(p)

    def o_rename():
        a, b = name(), name()
        for p in (a, b):
            old = fds.pop(p, None)
            if old is not None:
                os.close(old)
        os.rename(a, b)

    def o_mkdir():
        os.makedirs(os.path.join(dirpath, rng.choice(["a", "a/b"])), exist_ok=True)

    def o_fsync():
        fd = fd_of(name())
        (os.fsync if rng.random() < 0.5 else os.fdatasync)(fd)
        done(fd)

    def o_stat():
        os.stat(name())

    def o_close():
        if fds:
            p = rng.choice(sorted(fds))
            os.close(fds.pop(p))

    table = [(10, o_write), (6, o_dwrite), (3, o_dread), (5, o_read), (5, o_append), (5, o_copy),
             (5, o_falloc), (4, o_truncate), (3, o_link), (3, o_unlink), (4, o_rename), (2, o_mkdir),
             (3, o_fsync), (4, o_stat), (8, o_close)]
    weights = [w for w, _ in table]
    os.makedirs(os.path.join(dirpath, "a/b"), exist_ok=True)
    for _ in range(ops):
        _, fn = rng.choices(table, weights=weights)[0]
        try:
            fn()
            counts[fn.__name__[2:]] = counts.get(fn.__name__[2:], 0) + 1
        except OSError as e:
            k = "error " + errno.errorcode.get(e.errno, str(e.errno))
            counts[k] = counts.get(k, 0) + 1
    for fd in fds.values():
        os.close(fd)
    return counts


_libc = None


def fallocate(fd, mode, off, n):
    global _libc
    import ctypes
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
    if _libc.fallocate(fd, mode, off, n) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def child(args):
    root, k, ops, seed, max_off = args
    return op_counts(random.Random(seed * 1000 + k), os.path.join(root, "p%d" % k), ops, max_off)


def run(a):
    t0 = time.monotonic()
    with multiprocessing.Pool(a.procs) as pool:
        res = pool.map(child, [(a.dir, k, a.ops, a.seed, a.max_off) for k in range(a.procs)])
    dt = time.monotonic() - t0
    total = {}
    for c in res:
        for k, v in c.items():
            total[k] = total.get(k, 0) + v
    print("stress_mix: %d processes x %d operations in %.2f s" % (a.procs, a.ops, dt))
    print("stress_mix: " + ", ".join("%s %d" % kv for kv in sorted(total.items())), flush=True)
    return 0


def data_ranges(fd, size):
    off = 0
    while off < size:
        try:
            d = os.lseek(fd, off, os.SEEK_DATA)
        except OSError:
            return
        h = os.lseek(fd, d, os.SEEK_HOLE)
        yield d, h
        off = h


def compare(a, b):
    bad = 0
    for dirpath, dirs, files in os.walk(b):
        rel = os.path.relpath(dirpath, b)
        other = os.path.join(a, rel)
        if sorted(os.listdir(dirpath)) != sorted(os.listdir(other)):
            print("compare: %s: listings differ" % rel)
            bad += 1
            continue
        for f in files:
            pb, pa = os.path.join(dirpath, f), os.path.join(other, f)
            sb, sa = os.lstat(pb), os.lstat(pa)
            if (stat.S_IFMT(sb.st_mode), sb.st_size, sb.st_nlink) != (stat.S_IFMT(sa.st_mode), sa.st_size, sa.st_nlink):
                print("compare: %s: type/size/links %s vs %s" % (os.path.join(rel, f),
                      (sa.st_size, sa.st_nlink), (sb.st_size, sb.st_nlink)))
                bad += 1
                continue
            fb, fa = os.open(pb, os.O_RDONLY), os.open(pa, os.O_RDONLY)
            prev = 0
            for lo, hi in list(data_ranges(fb, sb.st_size)) + [(sb.st_size, sb.st_size)]:
                if lo > prev:  # a hole of B: zeros in A (sampled)
                    for o in {prev, (prev + lo) // 2 // ALIGN * ALIGN, max(prev, lo - ALIGN)}:
                        n = min(ALIGN, lo - o)
                        if n > 0 and any(os.pread(fa, n, o)):
                            print("compare: %s: not zeros at %d (a hole of the plain file)" % (os.path.join(rel, f), o))
                            bad += 1
                for o in range(lo, hi, 1 << 22):
                    n = min(1 << 22, hi - o)
                    if os.pread(fa, n, o) != os.pread(fb, n, o):
                        print("compare: %s: bytes differ in [%d, %d)" % (os.path.join(rel, f), o, o + n))
                        bad += 1
                        break
                prev = hi
            os.close(fa)
            os.close(fb)
    print("compare: %s" % ("same files, same data" if not bad else "%d differences" % bad), flush=True)
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("dir")
    r.add_argument("--procs", type=int, default=4)
    r.add_argument("--ops", type=int, default=2000)
    r.add_argument("--seed", type=int, default=1)
    r.add_argument("--max-off", type=int, default=1 << 30)
    c = sub.add_parser("compare")
    c.add_argument("a")
    c.add_argument("b")
    a = ap.parse_args()
    return run(a) if a.cmd == "run" else compare(a.a, a.b)


if __name__ == "__main__":
    sys.exit(main())
