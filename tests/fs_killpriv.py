#!/usr/bin/python3
"""Set-user-ID and set-group-ID bits after writes, truncates, O_TRUNC opens
and chowns, by nobody (no CAP_FSETID) and by root, on the mount and on a
directory of a local filesystem (ext4) beside it: the same mode must come
out of each case in both, and the modes Linux gives (setattr_should_drop_
suidgid) are checked outright as well, so that a reference that behaved
oddly could not hide a fault.

    fs_killpriv.py MNT REF ULPFS

Runs as root; nobody's actions run in forked children that drop to
nobody:nogroup without supplementary groups.  Exit 1 on any failure.
"""
import os
import pwd
import grp
import subprocess
import sys

mnt, ref, ulpfs = sys.argv[1:4]
NOBODY = pwd.getpwnam("nobody").pw_uid
NOGROUP = grp.getgrnam("nogroup").gr_gid
fails = 0


def bad(m):
    global fails
    fails += 1
    print("    FAIL: " + m, flush=True)


def ok(m):
    print("    ok: " + m, flush=True)


def as_nobody(fn):
    """Run fn() in a child as nobody; its exit status (0: fine)."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.setgroups([])
            os.setgid(NOGROUP)
            os.setuid(NOBODY)
            fn()
            code = 0
        except BaseException as e:  # report and exit: never return here
            print("    (as nobody: %r)" % (e,), flush=True)
        os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def run(who, fn):
    if who == "nobody":
        if as_nobody(fn) != 0:
            raise OSError("the action failed as nobody")
    else:
        fn()


def mode(p):
    return os.stat(p).st_mode & 0o7777


def sync_mount(d):
    # the last close's RELEASE follows close(2): ulpfs sync waits for it
    if d == mnt:
        subprocess.run([ulpfs, "sync", mnt], check=True,
                       stdout=subprocess.DEVNULL)


def fresh(d, name, m, owner=0):
    p = os.path.join(d, name)
    if os.path.exists(p):
        os.unlink(p)
    with open(p, "wb") as f:
        f.write(b"0123456789")
    os.chown(p, owner, 0)
    os.chmod(p, m)
    return p


def append(p):
    fd = os.open(p, os.O_WRONLY | os.O_APPEND)
    os.write(fd, b"more")
    os.close(fd)


def pwrite(p):
    fd = os.open(p, os.O_WRONLY)
    os.pwrite(fd, b"xy", 3)
    os.close(fd)


def ftruncate(p):
    fd = os.open(p, os.O_WRONLY)
    os.ftruncate(fd, 4)
    os.close(fd)


def truncate(p):
    os.truncate(p, 20)


def otrunc(p):
    os.close(os.open(p, os.O_WRONLY | os.O_TRUNC))


def chown_self(p):
    os.chown(p, os.getuid(), -1)


def chgrp_root(p):
    os.chown(p, -1, 0)


# (case, action, who, initial mode, owner, mode Linux gives)
S = 0o4000
G = 0o2000
CASES = [
    ("write", append, "nobody", 0o4777, 0, 0o777),
    ("write", append, "nobody", 0o2777, 0, 0o777),
    ("write", append, "nobody", 0o6777, 0, 0o777),
    ("write", pwrite, "nobody", 0o6777, 0, 0o777),
    # S_ISGID without group-execute: nobody is not in the file's group
    ("write", append, "nobody", 0o2766, 0, 0o766),
    ("write", append, "nobody", 0o0777, 0, 0o777),
    ("write", append, "root", 0o6777, 0, 0o6777),
    ("write", append, "root", 0o2766, 0, 0o2766),
    ("ftruncate", ftruncate, "nobody", 0o6777, 0, 0o777),
    ("ftruncate", ftruncate, "root", 0o6777, 0, 0o6777),
    ("truncate", truncate, "nobody", 0o4777, 0, 0o777),
    ("truncate", truncate, "nobody", 0o2766, 0, 0o766),
    ("truncate", truncate, "root", 0o6777, 0, 0o6777),
    ("O_TRUNC", otrunc, "nobody", 0o6777, 0, 0o777),
    ("O_TRUNC", otrunc, "root", 0o6777, 0, 0o6777),
    # chown kills S_ISUID whoever asks; S_ISGID when group-executable,
    # and without that only for a caller outside the group
    ("chown", chown_self, "nobody", 0o6755, NOBODY, 0o755),
    ("chown", chown_self, "nobody", 0o2745, NOBODY, 0o745),
    ("chown", chown_self, "root", 0o6755, 0, 0o755),
    ("chown", chgrp_root, "root", 0o2745, NOBODY, 0o2745),
]

print("  cases on %s and on %s" % (mnt, ref), flush=True)
for i, (what, fn, who, m0, owner, want) in enumerate(CASES):
    got = {}
    for d in (mnt, ref):
        p = fresh(d, "k%d" % i, m0, owner)
        try:
            run(who, lambda: fn(p))
        except OSError as e:
            got[d] = "error %s" % e
            continue
        sync_mount(d)
        got[d] = "%o" % mode(p)
    desc = "%s by %s of a %04o file" % (what, who, m0)
    if got[mnt] != got[ref]:
        bad("%s: %s on the mount, %s on the reference" %
            (desc, got[mnt], got[ref]))
    elif got[ref] != "%o" % want:
        bad("%s: %s on both, %o expected" % (desc, got[ref], want))
    else:
        ok("%s: %s, as on the reference" % (desc, got[mnt]))

# Special files lose the bits on chown too; directories keep them.
for kind in ("fifo", "dir"):
    got = {}
    for d in (mnt, ref):
        p = os.path.join(d, "chown-" + kind)
        (os.mkfifo if kind == "fifo" else os.mkdir)(p)
        os.chmod(p, 0o6755)
        os.chown(p, NOBODY, NOGROUP)
        got[d] = "%o" % mode(p)
    want = "755" if kind == "fifo" else "6755"
    desc = "chown by root of a 6755 %s" % kind
    if got[mnt] != got[ref] or got[ref] != want:
        bad("%s: %s on the mount, %s on the reference, %s expected" %
            (desc, got[mnt], got[ref], want))
    else:
        ok("%s: %s, as on the reference" % (desc, got[mnt]))

# A chmod that sets S_ISUID while a writer (on the mount: a passthrough
# one, which the daemon does not see) is open, then a write by nobody: the
# bit is gone once the writer has closed.  Without a write after the chmod
# (install -m 4755: write, fchmod, close) the bit stays.
print("  chmod u+s while a writer is open", flush=True)
for write_after in (True, False):
    got = {}
    for d in (mnt, ref):
        p = fresh(d, "open-chmod", 0o777)
        r, w = os.pipe()
        r2, w2 = os.pipe()

        def writer():
            fd = os.open(p, os.O_WRONLY)
            os.write(fd, b"first")
            os.write(w, b"o")  # open and written
            os.read(r2, 1)  # chmod done
            if write_after:
                os.pwrite(fd, b"after", 10)
            os.close(fd)

        pid = os.fork()
        if pid == 0:
            os._exit(as_nobody(writer))
        if os.read(r, 1) != b"o":
            bad("the writer did not start")
        os.chmod(p, 0o4777)
        os.write(w2, b"c")
        rc = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        for fd in (r, w, r2, w2):
            os.close(fd)
        if rc != 0:
            got[d] = "writer failed"
            continue
        sync_mount(d)
        got[d] = "%o" % mode(p)
    want = "777" if write_after else "4777"
    desc = "a write %s the chmod" % ("after" if write_after else "before")
    if got[mnt] != got[ref] or got[ref] != want:
        bad("%s: %s on the mount, %s on the reference, %s expected" %
            (desc, got[mnt], got[ref], want))
    else:
        ok("%s: %s, as on the reference" % (desc, got[mnt]))

sys.exit(1 if fails else 0)
