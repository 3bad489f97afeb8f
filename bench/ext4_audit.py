#!/usr/bin/python3
"""bench/ext4_audit.py PLAIN MNT [--json FILE] - what a local filesystem
does that the mount does not.

Runs a list of operations that Linux's ext4 supports (renameat2 flags,
O_TMPFILE, flock and fcntl locks, leases, statx btime, the inode-flag
ioctls of chattr/lsattr, utimensat UTIME_NOW/OMIT, fallocate modes,
copy_file_range, SEEK_DATA/SEEK_HOLE, O_DIRECT, file handles, FIEMAP,
special files, xattrs, ...) once in PLAIN (a directory on ext4) and once
in MNT (an ulpfs mount), each in a fresh subdirectory, and prints one line
per operation: its result on each side (ok or the errno name) and a verdict.
"refused" marks the operations that succeed on ext4 and fail in the mount
with ENOSYS, EPERM, EOPNOTSUPP or ENOTTY (the "not supported" answers);
"differs" any other difference.  Exit status 0 whatever it finds (this is
an audit; ulpfs(1), "Differences from a local filesystem", says why each
one is left); 2 on bad arguments.  Run as root (some operations need
CAP_MKNOD, CAP_DAC_READ_SEARCH or CAP_LEASE).

Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
"""
import ctypes
import ctypes.util
import errno
import fcntl
import json
import mmap
import os
import signal
import socket
import stat
import struct
import sys

libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
AT_FDCWD = -100
RENAME_NOREPLACE, RENAME_EXCHANGE, RENAME_WHITEOUT = 1, 2, 4
FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE = 0x01, 0x02
FALLOC_FL_COLLAPSE_RANGE, FALLOC_FL_ZERO_RANGE, FALLOC_FL_INSERT_RANGE = 0x08, 0x10, 0x20
FS_IOC_GETFLAGS, FS_IOC_SETFLAGS = 0x80086601, 0x40086602
FS_IOC_GETVERSION = 0x80087601
FS_IOC_FSGETXATTR = 0x801C581F
FS_IOC_FIEMAP = 0xC020660B
FS_NOATIME_FL, FS_APPEND_FL = 0x80, 0x20
STATX_BTIME = 0x800
F_OFD_GETLK, F_OFD_SETLK = 36, 37
F_SETLEASE, F_GETLEASE = 1024, 1025
O_TMPFILE = getattr(os, "O_TMPFILE", 0o20200000)
RWF_DSYNC, RWF_APPEND = 0x2, 0x10

libc.renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
libc.statx.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_uint, ctypes.c_void_p]
libc.sync_file_range.argtypes = [ctypes.c_int, ctypes.c_long, ctypes.c_long, ctypes.c_uint]
libc.name_to_handle_at.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p,
                                   ctypes.POINTER(ctypes.c_int), ctypes.c_int]
libc.syncfs.argtypes = [ctypes.c_int]


def check(rc):
    if rc < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return rc


def make(d, name, data=b"x" * 65536):
    p = os.path.join(d, name)
    with open(p, "wb") as f:
        f.write(data)
    return p


OPS = []


def op(fn):
    OPS.append(fn)
    return fn


@op
def renameat2_noreplace(d):
    a, b = make(d, "a"), make(d, "b")
    try:
        check(libc.renameat2(AT_FDCWD, a.encode(), AT_FDCWD, b.encode(), RENAME_NOREPLACE))
        return "renamed over an existing name"
    except OSError as e:
        if e.errno != errno.EEXIST:
            raise
    check(libc.renameat2(AT_FDCWD, a.encode(), AT_FDCWD, (b + "2").encode(), RENAME_NOREPLACE))


@op
def renameat2_exchange(d):
    a, b = make(d, "a", b"A"), make(d, "b", b"B")
    check(libc.renameat2(AT_FDCWD, a.encode(), AT_FDCWD, b.encode(), RENAME_EXCHANGE))
    if open(a, "rb").read() != b"B":
        return "not exchanged"


@op
def renameat2_whiteout(d):
    a = make(d, "a")
    check(libc.renameat2(AT_FDCWD, a.encode(), AT_FDCWD, (a + "2").encode(), RENAME_WHITEOUT))
    st = os.lstat(a)
    if not stat.S_ISCHR(st.st_mode) or st.st_rdev != 0:
        return "no whiteout left behind"


@op
def o_tmpfile(d):
    fd = os.open(d, O_TMPFILE | os.O_RDWR, 0o600)
    try:
        os.write(fd, b"tmp")
        # os.link would call link(2), which does not follow the /proc link
        check(libc.linkat(AT_FDCWD, ("/proc/self/fd/%d" % fd).encode(), AT_FDCWD,
                          os.path.join(d, "linked").encode(), 0x400))  # AT_SYMLINK_FOLLOW
    finally:
        os.close(fd)
    if open(os.path.join(d, "linked"), "rb").read() != b"tmp":
        return "linked O_TMPFILE content lost"


@op
def flock_exclusive(d):
    p = make(d, "f")
    f1, f2 = open(p, "rb"), open(p, "rb")
    fcntl.flock(f1, fcntl.LOCK_EX | fcntl.LOCK_NB)
    try:
        fcntl.flock(f2, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return "a second exclusive flock was granted"
    except OSError as e:
        if e.errno != errno.EWOULDBLOCK:
            raise
    fcntl.flock(f1, fcntl.LOCK_UN)
    fcntl.flock(f2, fcntl.LOCK_SH | fcntl.LOCK_NB)


def flock_struct(typ, start=0, length=0):
    # struct flock on x86_64: short type, short whence, off_t start, off_t len, pid_t pid
    return struct.pack("hhqqi4x", typ, 0, start, length, 0)


@op
def fcntl_posix_lock(d):
    p = make(d, "f")
    with open(p, "r+b") as f:
        fcntl.fcntl(f, fcntl.F_SETLK, flock_struct(fcntl.F_WRLCK))
        r = fcntl.fcntl(f, fcntl.F_GETLK, flock_struct(fcntl.F_WRLCK))
        if struct.unpack("hhqqi4x", r)[0] != fcntl.F_UNLCK:
            return "F_GETLK reports our own lock"
        fcntl.fcntl(f, fcntl.F_SETLK, flock_struct(fcntl.F_UNLCK))
    # a lock another process holds is seen
    held_r, held_w = os.pipe()
    done_r, done_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            g = open(p, "r+b")
            fcntl.fcntl(g, fcntl.F_SETLK, flock_struct(fcntl.F_WRLCK))
            os.write(held_w, b"1")
            os.read(done_r, 1)
        finally:
            os._exit(0)
    try:
        os.read(held_r, 1)
        with open(p, "r+b") as f:
            try:
                fcntl.fcntl(f, fcntl.F_SETLK, flock_struct(fcntl.F_WRLCK))
                return "a conflicting POSIX lock was granted"
            except OSError as e:
                if e.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
    finally:
        os.write(done_w, b"1")
        os.waitpid(pid, 0)
        for fd in (held_r, held_w, done_r, done_w):
            os.close(fd)


@op
def fcntl_ofd_lock(d):
    p = make(d, "f")
    f1, f2 = open(p, "r+b"), open(p, "r+b")
    fcntl.fcntl(f1, F_OFD_SETLK, flock_struct(fcntl.F_WRLCK))
    try:
        fcntl.fcntl(f2, F_OFD_SETLK, flock_struct(fcntl.F_WRLCK))
        return "a conflicting OFD lock was granted"
    except OSError as e:
        if e.errno != errno.EAGAIN:
            raise


@op
def fcntl_lease(d):
    p = make(d, "f")
    with open(p, "rb") as f:
        fcntl.fcntl(f, F_SETLEASE, fcntl.F_RDLCK)
        if fcntl.fcntl(f, F_GETLEASE) != fcntl.F_RDLCK:
            return "lease not held"
        fcntl.fcntl(f, F_SETLEASE, fcntl.F_UNLCK)


@op
def statx_btime(d):
    p = make(d, "f")
    buf = ctypes.create_string_buffer(256)
    check(libc.statx(AT_FDCWD, p.encode(), 0, STATX_BTIME, buf))
    mask = struct.unpack_from("I", buf, 0)[0]
    if not mask & STATX_BTIME:
        return "no btime in stx_mask"


@op
def utimensat_now_omit(d):
    p = make(d, "f")
    os.utime(p, ns=(1_000_000_000, 2_000_000_000))
    UTIME_NOW, UTIME_OMIT = (1 << 30) - 1, (1 << 30) - 2
    ts = (ctypes.c_long * 4)(0, UTIME_OMIT, 0, UTIME_NOW)
    check(libc.utimensat(AT_FDCWD, p.encode(), ts, 0))
    st = os.stat(p)
    if st.st_atime_ns != 1_000_000_000 or st.st_mtime_ns < 3_000_000_000:
        return "UTIME_OMIT/UTIME_NOW not applied"


@op
def chattr_getflags(d):
    p = make(d, "f")
    with open(p, "rb") as f:
        fcntl.ioctl(f, FS_IOC_GETFLAGS, b"\0" * 8)


@op
def chattr_setflags_noatime(d):
    p = make(d, "f")
    with open(p, "rb") as f:
        buf = bytearray(8)
        fcntl.ioctl(f, FS_IOC_GETFLAGS, buf)
        flags = struct.unpack("l", bytes(buf))[0] | FS_NOATIME_FL
        fcntl.ioctl(f, FS_IOC_SETFLAGS, struct.pack("l", flags))


@op
def fsgetxattr_ioctl(d):
    p = make(d, "f")
    with open(p, "rb") as f:
        fcntl.ioctl(f, FS_IOC_FSGETXATTR, b"\0" * 28)


@op
def getversion_ioctl(d):
    p = make(d, "f")
    with open(p, "rb") as f:
        fcntl.ioctl(f, FS_IOC_GETVERSION, b"\0" * 8)


@op
def fiemap_ioctl(d):
    p = make(d, "f")
    os.sync()
    with open(p, "rb") as f:
        # struct fiemap: start, length, flags, mapped, count, reserved
        fcntl.ioctl(f, FS_IOC_FIEMAP, struct.pack("QQIIII", 0, 1 << 62, 0, 0, 0, 0))


def falloc(d, mode, off, length):
    p = make(d, "f", b"y" * (1 << 20))
    fd = os.open(p, os.O_RDWR)
    try:
        check(libc.fallocate(fd, mode, off, length))
    finally:
        os.close(fd)


@op
def fallocate_default(d):
    falloc(d, 0, 1 << 20, 1 << 20)


@op
def fallocate_keep_size(d):
    falloc(d, FALLOC_FL_KEEP_SIZE, 1 << 20, 1 << 20)


@op
def fallocate_punch_hole(d):
    falloc(d, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 4096, 65536)


@op
def fallocate_zero_range(d):
    falloc(d, FALLOC_FL_ZERO_RANGE, 4096, 65536)


@op
def fallocate_collapse_range(d):
    falloc(d, FALLOC_FL_COLLAPSE_RANGE, 65536, 65536)


@op
def fallocate_insert_range(d):
    falloc(d, FALLOC_FL_INSERT_RANGE, 65536, 65536)


@op
def copy_file_range(d):
    a, b = make(d, "a"), make(d, "b", b"")
    fa, fb = os.open(a, os.O_RDONLY), os.open(b, os.O_WRONLY)
    try:
        n = os.copy_file_range(fa, fb, 65536)
    finally:
        os.close(fa)
        os.close(fb)
    if n != 65536:
        return "copied %d bytes" % n


@op
def seek_data_hole(d):
    p = os.path.join(d, "sparse")
    with open(p, "wb") as f:
        f.seek(1 << 20)
        f.write(b"z")
    fd = os.open(p, os.O_RDONLY)
    try:
        data, hole = os.lseek(fd, 0, os.SEEK_DATA), os.lseek(fd, 0, os.SEEK_HOLE)
    finally:
        os.close(fd)
    if data == 0 and hole == (1 << 20) + 1:
        return "holes not reported (data %d, hole %d)" % (data, hole)


@op
def o_direct(d):
    p = make(d, "f")
    fd = os.open(p, os.O_RDWR | os.O_DIRECT)
    try:
        m = mmap.mmap(-1, 4096)
        m.write(b"d" * 4096)
        os.pwrite(fd, m, 0)
        os.preadv(fd, [m], 0)
    finally:
        os.close(fd)


@op
def o_noatime(d):
    os.close(os.open(make(d, "f"), os.O_RDONLY | os.O_NOATIME))


@op
def pwritev2_flags(d):
    fd = os.open(make(d, "f"), os.O_RDWR)
    try:
        os.pwritev(fd, [b"a"], 0, RWF_DSYNC)
        os.pwritev(fd, [b"b"], -1, RWF_APPEND)
    finally:
        os.close(fd)


@op
def mmap_shared_write(d):
    p = make(d, "f")
    with open(p, "r+b") as f:
        m = mmap.mmap(f.fileno(), 4096)
        m[0:5] = b"hello"
        m.flush()
        m.close()
    if open(p, "rb").read(5) != b"hello":
        return "mmap write lost"


@op
def sync_calls(d):
    fd = os.open(make(d, "f"), os.O_RDWR)
    try:
        os.fsync(fd)
        os.fdatasync(fd)
        check(libc.sync_file_range(fd, 0, 0, 7))
        check(libc.syncfs(fd))
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


@op
def sendfile_splice(d):
    a, b = make(d, "a"), make(d, "b", b"")
    fa, fb = os.open(a, os.O_RDONLY), os.open(b, os.O_WRONLY)
    try:
        os.sendfile(fb, fa, 0, 4096)
        r, w = os.pipe()
        os.splice(fa, w, 4096, offset_src=0)
        os.splice(r, fb, 4096)
        os.close(r)
        os.close(w)
    finally:
        os.close(fa)
        os.close(fb)


@op
def special_files(d):
    os.mkfifo(os.path.join(d, "fifo"))
    os.mknod(os.path.join(d, "chr"), stat.S_IFCHR | 0o600, os.makedev(1, 3))
    os.mknod(os.path.join(d, "blk"), stat.S_IFBLK | 0o600, os.makedev(7, 0))
    socket.socket(socket.AF_UNIX).bind(os.path.join(d, "sock"))


@op
def links(d):
    p = make(d, "f")
    os.link(p, p + ".hard")
    os.symlink("f", os.path.join(d, "sym"))
    fd = os.open(p, os.O_PATH)
    try:
        check(libc.linkat(fd, b"", AT_FDCWD, (p + ".empty").encode(), 0x1000))  # AT_EMPTY_PATH
    finally:
        os.close(fd)
    if os.stat(p).st_nlink != 3:
        return "nlink %d" % os.stat(p).st_nlink


@op
def xattrs_all_namespaces(d):
    p = make(d, "f")
    for n in ("user.a", "trusted.b", "security.c"):
        os.setxattr(p, n, b"v")
    os.setxattr(os.path.join(d, "."), "user.dir", b"v")
    os.symlink("f", os.path.join(d, "sl"))
    os.setxattr(os.path.join(d, "sl"), "trusted.sl", b"v", follow_symlinks=False)


@op
def posix_acl(d):
    p = make(d, "f")
    # system.posix_acl_access for u::rw-, u:65534:r--, g::r--, m::r--, o::---
    ent = [(0x01, 6, 0xFFFFFFFF), (0x02, 4, 65534), (0x04, 4, 0xFFFFFFFF),
           (0x10, 4, 0xFFFFFFFF), (0x20, 0, 0xFFFFFFFF)]
    os.setxattr(p, "system.posix_acl_access", struct.pack("<I", 2) + b"".join(
        struct.pack("<HHI", t, perm, i) for t, perm, i in ent))


@op
def file_handle(d):
    p = make(d, "f")
    buf = ctypes.create_string_buffer(8 + 128)
    struct.pack_into("I", buf, 0, 128)
    mnt = ctypes.c_int()
    check(libc.name_to_handle_at(AT_FDCWD, p.encode(), buf, ctypes.byref(mnt), 0))


@op
def dnotify_inotify(d):
    import select  # noqa: F401  (inotify through libc)
    fd = check(libc.inotify_init1(os.O_NONBLOCK))
    try:
        check(libc.inotify_add_watch(fd, d.encode(), 0x100))  # IN_CREATE
        make(d, "new")
        if len(os.read(fd, 4096)) == 0:
            return "no event"
    finally:
        os.close(fd)


@op
def truncate_and_statfs(d):
    p = make(d, "f")
    os.truncate(p, 10)
    os.truncate(p, 1 << 30)
    st = os.statvfs(d)
    if st.f_namemax < 255:
        return "f_namemax %d" % st.f_namemax


@op
def big_directory(d):
    for i in range(3000):
        open(os.path.join(d, "e%04d" % i), "wb").close()
    if len(os.listdir(d)) != 3000:
        return "listed %d" % len(os.listdir(d))


def timeout(signum, frame):
    raise OSError(errno.ETIMEDOUT, "the operation did not finish in 30 s")


def run(top, fn):
    d = os.path.join(top, "audit-" + fn.__name__)
    os.mkdir(d)
    signal.signal(signal.SIGALRM, timeout)
    signal.alarm(30)
    try:
        r = fn(d)
        return "ok" if r is None else "wrong: " + r
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
    finally:
        signal.alarm(0)


def main():
    args = sys.argv[1:]
    out = None
    if "--json" in args:
        i = args.index("--json")
        out = args[i + 1]
        del args[i:i + 2]
    if len(args) != 2 or not all(os.path.isdir(a) for a in args):
        print(__doc__.split("\n\n")[0], file=sys.stderr)
        return 2
    plain, mnt = args
    refused_errs = {"ENOSYS", "EPERM", "EOPNOTSUPP", "ENOTSUP", "ENOTTY"}
    rows = []
    print("%-26s %-22s %-22s %s" % ("operation", "ext4", "ulpfs", "verdict"))
    for fn in OPS:
        a, b = run(plain, fn), run(mnt, fn)
        if a == b:
            v = "same"
        elif a == "ok" and b in refused_errs:
            v = "refused"
        else:
            v = "differs"
        rows.append({"op": fn.__name__, "ext4": a, "ulpfs": b, "verdict": v})
        print("%-26s %-22s %-22s %s" % (fn.__name__, a, b, v), flush=True)
    n = {v: sum(r["verdict"] == v for r in rows) for v in ("same", "refused", "differs")}
    print("# %d operations: %d same, %d refused in the mount, %d otherwise different"
          % (len(rows), n["same"], n["refused"], n["differs"]))
    if out:
        with open(out, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
