#!/usr/bin/env bash
# tests/fs_crash.sh - kill -9 of the daemon at random moments during a
# stream of writes, closes, in-place overwrites, tmp+rename saves and
# unlinks; after each kill: fusermount3 -u (lazy if needed), remount, and a
# full check against a journal that the writer fsyncs on plain disk before
# and after every operation:
#   - every file whose close() had returned is exact,
#   - every completed unlink/rename is durable (no resurrected files),
#   - the one operation in flight at the kill may have happened or not,
#   - no unknown files appear.
# ULPFS_CRASH_ITERS (default 6) kills; ULPFS_CRASH_SEED picks the random
# moments and operations (printed at the start; rerun with it to reproduce).
# Then kill -9 inside flips (an older version coded again against its
# successor): the daemon kills itself (ULPFS_TEST_CRASH_FLIP=N:S) at the
# N-th flip, once the new object is durable (S 1) or once the catalog has
# switched (S 2), N and S drawn from the same seed; after a remount every
# synced version is exact, verify passes and no object is left over.
# make check may run this with a POSIX sh: it needs bash.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/fs_lib.sh"
fs_init

STORE=$WORK/store
MNT=$WORK/mnt
DATA=$WORK/data
JOURNAL=$WORK/journal
ITERS=${ULPFS_CRASH_ITERS:-6}
SEED=${ULPFS_CRASH_SEED:-$(($(date +%s) % 100000))}
RANDOM=$SEED
say "seed: $SEED (rerun with ULPFS_CRASH_SEED=$SEED), $ITERS kills"
mkdir -p "$DATA"
: >"$JOURNAL"

step "generating content: 6 versions of a 2 MB bf16 safetensors file with ULP drift"
"$PY" "$FS_UTIL" drift "$DATA" --n 6 --elems 1000000 || die "generator failed"

cat >"$WORK/crash.py" <<'PY'
import errno, hashlib, json, os, random, sys, time

mode = sys.argv[1]


def sha(b):
    return hashlib.sha256(b).hexdigest()


if mode == "write":
    mnt, journal, data, seed, it = sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6])
    rng = random.Random(seed)
    versions = [open(os.path.join(data, "v%d" % i, "model.safetensors"), "rb").read() for i in range(1, 7)]
    jfd = os.open(journal, os.O_WRONLY | os.O_APPEND)

    def log(**ev):
        os.write(jfd, (json.dumps(ev) + "\n").encode())
        os.fsync(jfd)

    def content():
        r = rng.random()
        if r < 0.45:
            return versions[rng.randrange(6)]
        if r < 0.9:
            return rng.randbytes(rng.randint(0, 300000))
        return rng.randbytes(rng.randint(1, 8) << 20)

    def write_file(path, b):
        log(ev="open", path=path)
        with open(os.path.join(mnt, path), "wb") as f:
            pos = 0
            while pos < len(b):
                n = rng.choice([4096, 65536, 1 << 20])
                f.write(b[pos:pos + n])
                pos += n
        log(ev="done", path=path, sha=sha(b), size=len(b))

    d = "it%d" % it
    n = 0
    try:
        # In the try: on a loaded machine the kill may come first.
        os.makedirs(os.path.join(mnt, d), exist_ok=True)
        for n in range(100000):
            op = rng.random()
            path = "%s/f%d" % (d, n % 12)
            full = os.path.join(mnt, path)
            if op < 0.55:
                write_file(path, content())  # new file or in-place overwrite (O_TRUNC)
            elif op < 0.8:
                tmp = path + ".tmp"
                write_file(tmp, content())
                log(ev="rename-start", src=tmp, dst=path)
                os.rename(os.path.join(mnt, tmp), full)
                log(ev="rename-done", src=tmp, dst=path)
            elif op < 0.9:
                if os.path.exists(full):
                    log(ev="unlink-start", path=path)
                    os.unlink(full)
                    log(ev="unlink-done", path=path)
            else:  # patch a few bytes without O_TRUNC
                if os.path.exists(full) and os.path.getsize(full) > 100:
                    log(ev="open", path=path)
                    with open(full, "r+b") as f:
                        f.seek(rng.randrange(os.path.getsize(full) - 16))
                        f.write(b"patched-patched!")
                    with open(full, "rb") as f:
                        b = f.read()
                    log(ev="done", path=path, sha=sha(b), size=len(b))
    except OSError as e:
        # the daemon was killed: ENOTCONN / ECONNABORTED are expected
        print("  writer: stopped after %d operations by %s" % (n, errno.errorcode.get(e.errno, e.errno)))
        sys.exit(0 if e.errno in (errno.ENOTCONN, errno.ECONNABORTED, errno.EIO) else 1)
    print("  writer: finished without being interrupted")

elif mode == "check":
    mnt, journal, final = sys.argv[2], sys.argv[3], sys.argv[4] == "final"
    state = {}  # path -> sha ("exact"), or "ANY" (content unspecified)
    alt = None  # the operation in flight at the kill: a second acceptable state
    events = [json.loads(l) for l in open(journal) if l.strip()]
    pending = None
    for ev in events:
        e = ev["ev"]
        if e == "open":
            pending = ev
            state[ev["path"]] = "ANY"  # truncated / partially written
        elif e == "done":
            pending = None
            state[ev["path"]] = ev["sha"]
        elif e == "rename-start":
            pending = ev
        elif e == "rename-done":
            pending = None
            state[ev["dst"]] = state.pop(ev["src"])
        elif e == "unlink-start":
            pending = ev
        elif e == "unlink-done":
            pending = None
            state.pop(ev["path"], None)
        elif e == "not-done":  # a check found the in-flight operation undone
            pending = None
    # the operation in flight when the daemon died may or may not have
    # happened: build the other acceptable state
    if pending and pending["ev"] == "rename-start":
        alt = dict(state)
        alt[pending["dst"]] = alt.pop(pending["src"])
    elif pending and pending["ev"] == "unlink-start":
        alt = dict(state)
        alt.pop(pending["path"], None)

    found = {}
    errors = []
    for dp, dn, fn in os.walk(mnt):
        for f in fn:
            p = os.path.relpath(os.path.join(dp, f), mnt)
            try:
                with open(os.path.join(dp, f), "rb") as fh:
                    found[p] = sha(fh.read())
            except OSError as e:
                errors.append("%s: read failed: %s" % (p, e))

    def compare(model):
        probs = []
        for p, h in model.items():
            if p not in found:
                if h != "ANY":
                    probs.append("%s: missing (its close had returned)" % p)
            elif h != "ANY" and found[p] != h:
                probs.append("%s: content differs from what was closed" % p)
        for p in found:
            if p not in model:
                probs.append("%s: unexpected file (deleted or renamed away, or never written)" % p)
        return probs

    probs = compare(state)
    resolution = None
    if pending and not probs:
        resolution = {"ev": "not-done"}
    if probs and alt is not None:
        probs2 = compare(alt)
        if not probs2:
            probs = []
            # it happened: record that, so that later checks expect it too
            resolution = dict(pending, ev=pending["ev"].replace("-start", "-done"))
        else:
            probs = ["(before the in-flight %s) %s" % (pending["ev"], x) for x in probs] + \
                    ["(after it) %s" % x for x in probs2]
    # a file that was in flight at an earlier kill is frozen since (later
    # iterations write elsewhere): what recovery made of it must not change
    seen_path = journal + ".anyseen"
    seen = json.load(open(seen_path)) if os.path.exists(seen_path) else {}
    for p, h in seen.items():
        if state.get(p) == "ANY" and found.get(p) != h:
            probs.append("%s: in flight at an earlier kill; its recovered content changed since (%s -> %s)"
                         % (p, h[:12] if h else "absent", found.get(p, "absent")[:12]))
    for p, h in state.items():
        if h == "ANY" and p not in seen and not (pending and pending.get("path") == p):
            seen[p] = found.get(p)
    if pending and pending["ev"] == "open":
        seen[pending["path"]] = found.get(pending["path"])
    json.dump(seen, open(seen_path, "w"))
    if resolution and not probs and not final:
        # the writer is dead: append what the kill left, as an event
        with open(journal, "a") as j:
            j.write(json.dumps(resolution) + "\n")
    probs = errors + probs
    nexact = sum(1 for h in state.values() if h != "ANY")
    if probs:
        for x in probs[:30]:
            print("    FAIL: " + x)
        sys.exit(1)
    print("  check: %d files exact, %d in-flight (unspecified), %d journal events, in-flight at kill: %s%s"
          % (nexact, len(state) - nexact, len(events), pending["ev"] if pending else "none",
             " (%s)" % resolution["ev"] if resolution else ""))
PY

step "first mount"
fs_mount "$STORE" "$MNT"

for it in $(seq 1 "$ITERS"); do
	step "iteration $it/$ITERS: writer running, then kill -9 of the daemon"
	pid=$FS_LAST_PID
	pid_argv_mentions "$pid" "$STORE" || [ "$(cat "$STORE/daemon.pid" 2>/dev/null)" = "$pid" ] ||
		die "refusing to kill PID $pid: not our daemon"
	fs_bg "$PY" "$WORK/crash.py" write "$MNT" "$JOURNAL" "$DATA" $((SEED * 100 + it)) "$it"
	wpid=$FS_BG_LAST
	delay=$(printf '0.%03d' $((RANDOM % 1000)))
	delay=$(calc "$delay * 2.5 + 0.2")
	sleep "$delay"
	how="at a random moment, ${delay}s after the writer started"
	if [ $((it % 2)) -eq 0 ]; then
		# even iterations: in the encode window -- right after a close
		# returned, while the file waits (settle) or is being encoded
		w=$(printf '0.%03d' $((RANDOM % 80)))
		n=0
		while [ $n -lt 400 ]; do
			last=$(tail -n1 "$JOURNAL")
			case $last in *'"done"'*)
				[ "$(fs_staged_count "$STORE")" -gt 0 ] && break ;;
			esac
			sleep 0.005
			n=$((n + 1))
		done
		sleep "$w"
		how="${w}s after a close returned, with $(fs_staged_count "$STORE") file(s) in staging"
	fi
	if ! pid_alive "$wpid"; then
		wait "$wpid"
		bad "iteration $it: the writer stopped before the kill (exit $?)"
	fi
	say "kill -9 $pid $how ($(grep -c '"done"' "$JOURNAL") closes journaled so far)"
	kill -9 "$pid" || bad "kill -9 $pid failed"
	wait_pid_gone "$pid" 10 || bad "daemon $pid still alive 10 s after kill -9"
	# the writer must get an error (ENOTCONN), not hang
	n=0
	while pid_alive "$wpid" && [ $n -lt 200 ]; do sleep 0.05; n=$((n + 1)); done
	if pid_alive "$wpid"; then
		bad "iteration $it: the writer hangs 10 s after the daemon died; killing it"
		kill -9 "$wpid"
	fi
	wait "$wpid"
	wrc=$?
	fs_bg_forget "$wpid"
	[ "$wrc" -eq 0 ] || [ "$wrc" -eq 137 ] || bad "iteration $it: the writer failed with exit $wrc (an error other than ENOTCONN)"
	fs_force_umount "$MNT" 30
	is_mounted "$MNT" && die "cannot unmount $MNT after the kill"

	step "iteration $it: remount (recovery) and full check"
	fs_mount "$STORE" "$MNT"
	if out=$("$PY" "$WORK/crash.py" check "$MNT" "$JOURNAL" now 2>&1); then
		printf '%s\n' "$out"
		ok "iteration $it: everything closed before the kill is exact"
	else
		printf '%s\n' "$out" >&2
		bad "iteration $it: data lost or wrong after kill -9 + remount (seed $SEED)"
	fi
done

for it in 1 2 3; do
	nflip=$((1 + RANDOM % 2))
	stage=$((1 + RANDOM % 2))
	step "flip crash $it/3: kill -9 at flip $nflip, stage $stage (seed $SEED)"
	fs_umount "$MNT"
	ULPFS_TEST_CRASH_FLIP=$nflip:$stage fs_mount "$STORE" "$MNT"
	pid=$FS_LAST_PID
	synced=0
	for i in 1 2 3 4; do
		cp "$DATA/v$i/model.safetensors" "$MNT/flip-$it.safetensors" 2>/dev/null || break
		"$ULPFS" sync "$MNT" >/dev/null 2>&1 || break
		synced=$i
	done
	pid_alive "$pid" && "$ULPFS" gc "$MNT" >/dev/null 2>&1
	wait_pid_gone "$pid" 30 || { bad "flip crash $it: the daemon did not reach flip $nflip"; kill -9 "$pid"; }
	fs_force_umount "$MNT" 30
	is_mounted "$MNT" && die "cannot unmount $MNT after the flip crash"
	fs_mount "$STORE" "$MNT"
	# A copy in staging at the kill is queued again: commit it first, so
	# that no object is counted ahead of its catalog row.
	"$ULPFS" sync "$MNT" >/dev/null || bad "flip crash $it: sync after the remount failed"
	"$ULPFS" gc "$MNT" >/dev/null || bad "flip crash $it: gc after the remount failed"
	for i in $(seq 1 "$synced"); do
		cmp -s "$MNT/.ulpfs/versions/flip-$it.safetensors/$i" "$DATA/v$i/model.safetensors" ||
			bad "flip crash $it: version $i of flip-$it.safetensors differs (seed $SEED)"
	done
	"$ULPFS" verify "$MNT" >"$WORK/verify.txt" 2>&1 || { cat "$WORK/verify.txt" >&2; bad "flip crash $it: verify (seed $SEED)"; }
	read -r nv no < <(fs_versions_and_objects "$STORE" "$MNT")
	[ "$nv" = "$no" ] && ok "flip crash $it: $synced synced versions exact, $no objects for $nv versions" ||
		bad "flip crash $it: $no object files for $nv versions (seed $SEED)"
	rm -f "$MNT/flip-$it.safetensors" # the journal's check knows no such file
done

step "clean umount, remount, final check (staging empty, everything still exact)"
fs_umount "$MNT"
n=$(fs_staged_count "$STORE")
[ "$n" -eq 0 ] && ok "staging is empty after a clean umount" || bad "$n files left in staging/ after umount"
fs_mount "$STORE" "$MNT"
if out=$("$PY" "$WORK/crash.py" check "$MNT" "$JOURNAL" final 2>&1); then
	printf '%s\n' "$out"
	ok "final check"
else
	printf '%s\n' "$out" >&2
	bad "final check failed (seed $SEED)"
fi
fs_umount "$MNT"
fs_finish
