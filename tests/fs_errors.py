#!/usr/bin/python3
"""tests/fs_errors.py DIR MNT [STICKY] - POSIX's errors and times in DIR (a
directory of the mount MNT that the caller owns), as the caller: root or
not (tests/fs_local.sh runs it both as root and as nobody, with
default_permissions).  STICKY: a sticky, world-writable directory holding
"theirs", a file owned by someone else.  Exit 1 on any failed check."""
import errno
import os
import socket
import stat
import sys
import time

d, mnt = sys.argv[1], sys.argv[2]
sticky = sys.argv[3] if len(sys.argv) > 3 else None
root = os.geteuid() == 0
who = "root" if root else "user"
fails = 0
os.chdir(d)


def res(f, *a):
    try:
        f(*a)
        return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))


def expect(what, want, f, *a):
    global fails
    got = res(f, *a)
    wants = want if isinstance(want, tuple) else (want,)
    if got in wants:
        print("  ok [%s]: %s: %s" % (who, what, got))
    else:
        fails += 1
        print("  FAIL [%s]: %s: %s, expected %s" % (who, what, got, "/".join(wants)))


def same(what, got, want):
    global fails
    if got == want:
        print("  ok [%s]: %s" % (who, what))
    else:
        fails += 1
        print("  FAIL [%s]: %s: %r, expected %r" % (who, what, got, want))


def creat(p, mode=0o644):
    os.close(os.open(p, os.O_CREAT | os.O_WRONLY | os.O_EXCL, mode))


def excl(p):
    os.close(os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))


def ctime_moves(what, p, f, *a, after=None):
    c0 = os.lstat(p).st_ctime_ns
    time.sleep(0.01)
    f(*a)
    same("ctime changes on " + what, os.lstat(after or p).st_ctime_ns > c0, True)


long = "n" * 256
creat("f")
os.mkdir("dir")
creat("dir/in")
os.mkdir("empty")
os.symlink("f", "sl")
os.symlink("nowhere", "dangling")
os.mkfifo("fifo")
s = socket.socket(socket.AF_UNIX)
s.bind("sock")
s.close()

# ENAMETOOLONG
expect("create a 256-byte name", "ENAMETOOLONG", creat, long)
expect("mkdir a 256-byte name", "ENAMETOOLONG", os.mkdir, long)
expect("symlink to a 256-byte name", "ENAMETOOLONG", os.symlink, "f", long)
expect("link to a 256-byte name", "ENAMETOOLONG", os.link, "f", long)
expect("rename to a 256-byte name", "ENAMETOOLONG", os.rename, "f", long)
expect("mkfifo a 256-byte name", "ENAMETOOLONG", os.mkfifo, long)
expect("a 255-byte name works", "ok", creat, "n" * 255)
os.unlink("n" * 255)
deep = "/".join(["x" * 200] * 21)  # 4220 bytes > PATH_MAX
expect("a path over PATH_MAX", "ENAMETOOLONG", os.stat, deep)
expect("symlink target over PATH_MAX", "ENAMETOOLONG", os.symlink, "y" * 4096, "ltoolong")
# ENOTDIR, EISDIR
expect("open under a file", "ENOTDIR", os.open, "f/x", os.O_RDONLY)
expect("mkdir under a file", "ENOTDIR", os.mkdir, "f/x")
expect("rmdir of a file", "ENOTDIR", os.rmdir, "f")
expect("rename a directory over a file", "ENOTDIR", os.rename, "empty", "f")
expect("open a directory for writing", "EISDIR", os.open, "dir", os.O_WRONLY)
expect("unlink a directory", "EISDIR", os.unlink, "dir")
expect("rename a file over a directory", "EISDIR", os.rename, "f", "empty")
expect("truncate a directory", "EISDIR", os.truncate, "dir", 0)
# ENOTEMPTY / EEXIST
expect("rmdir of a non-empty directory", ("ENOTEMPTY", "EEXIST"), os.rmdir, "dir")
expect("rename over a non-empty directory", ("ENOTEMPTY", "EEXIST"), os.rename, "empty", "dir")
expect("mkdir over a file", "EEXIST", os.mkdir, "f")
for n in ("f", "dir", "sl", "dangling", "fifo", "sock"):
    expect("O_CREAT|O_EXCL on an existing %s" % n, "EEXIST", excl, n)
    expect("mkfifo over %s" % n, "EEXIST", os.mkfifo, n)
    expect("symlink over %s" % n, "EEXIST", os.symlink, "f", n)
    expect("link over %s" % n, "EEXIST", os.link, "f", n)
# ELOOP
os.symlink("loop2", "loop1")
os.symlink("loop1", "loop2")
expect("open through a symlink loop", "ELOOP", os.open, "loop1", os.O_RDONLY)
expect("O_NOFOLLOW on a symlink", "ELOOP", os.open, "sl", os.O_RDONLY | os.O_NOFOLLOW)
# EPERM
expect("link to a directory", "EPERM", os.link, "dir", "dirlink")
expect("link of a FIFO", "ok", os.link, "fifo", "fifo2")
same("FIFO st_nlink 2", os.stat("fifo").st_nlink, 2)
# EXDEV: the control directory is another filesystem to names (a user
# without write permission on it is refused by the kernel first: EACCES).
xdev = ("EXDEV",) if root else ("EXDEV", "EACCES")
expect("rename out of .ulpfs", xdev, os.rename, mnt + "/.ulpfs/versions", "v")
expect("rename into .ulpfs", xdev, os.rename, "f", mnt + "/.ulpfs/f")
expect("link into .ulpfs", xdev, os.link, "f", mnt + "/.ulpfs/f")
expect("create in .ulpfs", "EROFS" if root else ("EROFS", "EACCES"), creat, mnt + "/.ulpfs/new")
# Permissions
os.chmod("empty", 0o555)
expect("create in a 0555 directory", "ok" if root else "EACCES", creat, "empty/x")
os.chmod("empty", 0o755)
if root:
    os.unlink("empty/x")
creat("noread", 0o000)
expect("open a 0000 file", "ok" if root else "EACCES", os.open, "noread", os.O_RDONLY)
expect("chown to root", "ok" if root else "EPERM", os.chown, "f", 0, 0)
if root:
    os.chown("f", os.getuid(), os.getgid())
if sticky:
    expect("unlink another's file in a sticky directory", "ok" if root else "EPERM", os.unlink, sticky + "/theirs")
    if not root:
        expect("rename another's file in a sticky directory", "EPERM", os.rename, sticky + "/theirs", sticky + "/mine2")
        expect("chmod another's file", "EPERM", os.chmod, sticky + "/theirs", 0o777)
        expect("set another's file's times", "EPERM", os.utime, sticky + "/theirs", (1, 1))
    creat(sticky + "/mine-" + who)
    expect("unlink one's own file in a sticky directory", "ok", os.unlink, sticky + "/mine-" + who)
# Set-id bits: a write by a user without CAP_FSETID and a chown clear them.
creat("suid", 0o644)
os.chmod("suid", 0o6755)
with open("suid", "ab") as fh:
    fh.write(b"x")
m = stat.S_IMODE(os.stat("suid").st_mode)
same("write clears set-user-ID (not for root)", m, 0o6755 if root else 0o0755)
os.chmod("suid", 0o6755)
os.chown("suid", os.getuid(), os.getgid())
same("chown clears set-user-ID and set-group-ID", stat.S_IMODE(os.stat("suid").st_mode), 0o755)
# ctime on every metadata change and on link and unlink
ctime_moves("chmod", "f", os.chmod, "f", 0o600)
ctime_moves("chown", "f", os.chown, "f", os.getuid(), os.getgid())
ctime_moves("utimens", "f", os.utime, "f", (5, 5))
ctime_moves("truncate", "f", os.truncate, "f", 10)
ctime_moves("link", "f", os.link, "f", "f2")
ctime_moves("unlink of another name", "f", os.unlink, "f2")
ctime_moves("rename", "f", os.rename, "f", "f3", after="f3")
ctime_moves("setxattr", "f3", os.setxattr, "f3", "user.x", b"1")
ctime_moves("chmod of a FIFO", "fifo", os.chmod, "fifo", 0o600)
ctime_moves("rename of a directory", "dir", os.rename, "dir", "dir2", after="dir2")
dm = os.stat(".").st_mtime_ns
time.sleep(0.01)
os.link("f3", "f4")
same("link changes the directory's mtime", os.stat(".").st_mtime_ns > dm, True)
# Directories: st_nlink = 2 + subdirectories
os.mkdir("dir2/a")
os.mkdir("dir2/b")
same("st_nlink of a directory with 2 subdirectories", os.stat("dir2").st_nlink, 4)
os.rmdir("dir2/b")
same("after rmdir of one", os.stat("dir2").st_nlink, 3)
sys.exit(1 if fails else 0)
