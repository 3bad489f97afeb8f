#!/usr/bin/python3
"""tests/fs_links.py - hard links through the mount (run by tests/fs_local.sh).

  fs_links.py versions MNT ULPFS   write through one name, read every version
                                   through the other, names removed in every
                                   order, then gc and verify
  fs_links.py run ROOT             a checkpoint run, cp -al of it, further
                                   training into the original; prints a
                                   manifest (path, nlink, sha256) to compare
                                   with a plain directory's
"""
import hashlib
import itertools
import os
import random
import subprocess
import sys

fails = 0


def ok(m):
    print("  ok: " + m)


def bad(m):
    global fails
    fails += 1
    print("  FAIL: " + m)


def same(what, got, want):
    if got == want:
        ok(what)
    else:
        bad("%s: got %r, expected %r" % (what, got, want))


def put(p, b, mode="wb"):
    with open(p, mode) as f:
        f.write(b)


def get(p):
    try:
        with open(p, "rb") as f:
            return f.read()
    except OSError as e:
        return ("<%s>" % e).encode()


def blob(seed, n=200000):
    return random.Random(seed).randbytes(n)


def ulpfs(*args):
    return subprocess.run([ULPFS] + list(args), capture_output=True, text=True)


def log_lines(path):
    r = ulpfs("log", path)
    if r.returncode != 0:
        return "<log failed: %s>" % r.stderr.strip()
    return [l.split()[0] + " " + l.split()[-2] for l in r.stdout.splitlines()[1:]]


def versions(mnt):
    os.chdir(mnt)
    os.mkdir("hl")
    v = [blob(1)]
    put("hl/a", v[0])
    ulpfs("sync", mnt)
    os.link("hl/a", "hl/b")
    same("st_nlink after link", (os.stat("hl/a").st_nlink, os.stat("hl/b").st_nlink), (2, 2))
    same("one inode", os.stat("hl/a").st_ino, os.stat("hl/b").st_ino)
    same("a directory's st_nlink is 2 + subdirectories", os.stat("hl").st_nlink, 2)
    c0 = os.stat("hl/a").st_ctime_ns
    os.link("hl/a", "hl/c")
    same("link changes ctime", os.stat("hl/a").st_ctime_ns > c0, True)
    os.unlink("hl/c")
    # Write through b (truncate), then through a (patch in place), then
    # through b again (append).
    v.append(blob(2))
    put("hl/b", v[1])
    ulpfs("sync", mnt)
    b = bytearray(v[1])
    b[1000:1010] = b"0123456789"
    with open("hl/a", "r+b") as f:
        f.seek(1000)
        f.write(b"0123456789")
    v.append(bytes(b))
    ulpfs("sync", mnt)
    put("hl/b", b"tail", "ab")
    v.append(v[2] + b"tail")
    ulpfs("sync", mnt)
    same("both names read the newest content", (get("hl/a") == v[3], get("hl/b") == v[3]), (True, True))
    la, lb = log_lines(mnt + "/hl/a"), log_lines(mnt + "/hl/b")
    same("ulpfs log through either name gives the one history", la, lb)
    same("four versions in the history", len(la) if isinstance(la, list) else la, 4)
    for n in ("a", "b"):
        for i, want in enumerate(v, 1):
            same("version %d read through %s (.ulpfs/versions)" % (i, n), get(".ulpfs/versions/hl/%s/%d" % (n, i)) == want, True)
            r = subprocess.run([ULPFS, "cat", "%s/hl/%s@%d" % (mnt, n, i)], capture_output=True)
            same("version %d through ulpfs cat %s" % (i, n), r.stdout == want, True)

    # Three names, removed in each of the 6 orders; every remaining name
    # keeps the data and the whole history.
    names = ["x", "y", "z"]
    for k, order in enumerate(itertools.permutations(names)):
        d = "order%d" % k
        os.mkdir("hl/" + d)
        c = [blob(100 + k), blob(200 + k)]
        put("hl/%s/x" % d, c[0])
        ulpfs("sync", mnt)
        os.link("hl/%s/x" % d, "hl/%s/y" % d)
        os.link("hl/%s/y" % d, "hl/%s/z" % d)
        put("hl/%s/%s" % (d, order[1]), c[1])
        ulpfs("sync", mnt)
        left = list(names)
        good = True
        for n in order:
            os.unlink("hl/%s/%s" % (d, n))
            left.remove(n)
            for m in left:
                p = "hl/%s/%s" % (d, m)
                good &= os.stat(p).st_nlink == len(left)
                good &= get(p) == c[1]
                good &= log_lines(mnt + "/" + p) == log_lines(mnt + "/hl/%s/%s" % (d, left[0]))
                good &= len(log_lines(mnt + "/" + p)) == 2
                good &= get(".ulpfs/versions/%s/1" % p) == c[0]
        same("names removed in the order %s: the rest keep data, nlink and history" % "".join(order), good, True)
        same("all names gone", os.listdir("hl/" + d), [])
    os.unlink("hl/a")
    same("after rm a, b keeps its data and nlink 1", (get("hl/b") == v[3], os.stat("hl/b").st_nlink), (True, 1))
    same("and its history", len(log_lines(mnt + "/hl/b")), 4)
    # rename over a hard-linked target (POSIX: that name now names the
    # source; the target's other name keeps it)
    put("hl/t", b"target")
    os.link("hl/t", "hl/t2")
    put("hl/s", b"source")
    os.rename("hl/s", "hl/t")
    same("rename over a hard-linked name", (get("hl/t"), get("hl/t2"), os.stat("hl/t2").st_nlink), (b"source", b"target", 1))
    os.link("hl/t", "hl/t3")
    os.rename("hl/t", "hl/t3")  # both names of one file: nothing happens
    same("rename of a name over another name of the same file", (os.path.exists("hl/t"), os.stat("hl/t3").st_nlink), (True, 2))
    os.unlink("hl/b")
    r = ulpfs("gc", mnt)
    same("ulpfs gc", r.returncode, 0)
    r = ulpfs("verify", mnt)
    same("ulpfs verify", (r.returncode, r.stderr.strip()[-200:]), (0, ""))
    r = ulpfs("stats", mnt)
    same("ulpfs stats", r.returncode, 0)


def sha(p):
    return hashlib.sha256(get(p)).hexdigest()[:16]


def run(root):
    os.chdir(root)
    os.makedirs("run/checkpoint-100")
    for name, seed in (("model.safetensors", 1), ("optimizer.pt", 2), ("trainer_state.json", 3)):
        put("run/checkpoint-100/" + name, blob(seed, 50000))
    put("run/latest.pt", blob(4, 50000))
    subprocess.run(["cp", "-al", "run", "linked"], check=True)
    # Further training into the original: a new checkpoint directory, the
    # latest file saved to a temporary and renamed over, the old checkpoint
    # rotated away, and a rewrite of trainer_state.json by rename.
    os.makedirs("run/checkpoint-200")
    for name, seed in (("model.safetensors", 11), ("optimizer.pt", 12), ("trainer_state.json", 13)):
        put("run/checkpoint-200/" + name, blob(seed, 50000))
    put("run/latest.pt.tmp", blob(14, 50000))
    os.rename("run/latest.pt.tmp", "run/latest.pt")
    put("run/checkpoint-100/trainer_state.json.tmp", b"{}")
    os.rename("run/checkpoint-100/trainer_state.json.tmp", "run/checkpoint-100/trainer_state.json")
    subprocess.run(["rm", "-rf", "run/checkpoint-100"], check=True)
    for top in ("run", "linked"):
        for d, dirs, files in os.walk(top):
            dirs.sort()
            for f in sorted(files):
                p = os.path.join(d, f)
                print("%s %d %s" % (p, os.stat(p).st_nlink, sha(p)))


if __name__ == "__main__":
    if sys.argv[1] == "versions":
        ULPFS = sys.argv[3]
        versions(sys.argv[2])
    else:
        run(sys.argv[2])
    sys.exit(1 if fails else 0)
