# tests/s3_lib.sh - helpers of the bucket-store tests (tests/s3_*.sh), on
# top of tests/fs_lib.sh and tests/s3_server.sh.  Source it; do not run it.
#
#   s3_init                  fs_init, then a real Swift s3api server
#                            (stopped and removed on every exit path, after
#                            every mount is gone)
#   s3_mount URL CACHE MNT [OPTS]   ulpfs mount -o settle=50,cache_dir=CACHE
#                            URL MNT; registered for clean-up like fs_mount
#   s3_mount_fails WHAT PATTERN URL CACHE MNT [OPTS]   the mount must fail
#                            with a message matching PATTERN (grep -E -i)
#   s3_keys PREFIX           the bucket's keys under PREFIX, one a line
#   s3_live_objects CATALOG  the objects a catalog's versions name in the
#                            bucket (their representations, and their own
#                            objects the cache evicted), sorted
#   s3_bucket_objects PREFIX the objects under PREFIX/objects/, sorted
#   s3_expect_objects WHEN PREFIX CATALOG   ok when the bucket's objects
#                            under PREFIX are exactly the catalog's, waiting
#                            (deadline S3_LIST_WAIT, default 60 s) for the
#                            listing, which may lag the writes
#   s3_exists KEY            0 when the object KEY exists (a HEAD: not the
#                            listing, which may lag)
#   s3_wait_for SECONDS CMD...   run CMD until it succeeds or SECONDS
#                            passed; its last status
#   s3_umount_unuploaded MNT PATTERN   ulpfs umount MNT must exit non-zero
#                            saying what is not uploaded (grep PATTERN)
#
# Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.

# shellcheck source=tests/fs_lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/fs_lib.sh"
# shellcheck source=tests/s3_server.sh
. "$(dirname "${BASH_SOURCE[0]}")/s3_server.sh"

S3_TOP=""

s3_exit() {
	local rc=$?
	trap - EXIT
	# fs_cleanup unmounts (the daemons may still need the server) and
	# exits: run it in a subshell that starts with our status.
	(
		(exit "$rc")
		fs_cleanup
	)
	rc=$?
	s3_server_stop
	[ -n "$S3_TOP" ] && rm -rf "$S3_TOP"
	exit "$rc"
}

s3_init() {
	fs_init
	if ! command -v swift-proxy-server >/dev/null 2>&1; then
		echo "[$FS_TEST] Swift is not installed (apt-get install swift-proxy swift-object swift-container swift-account memcached)" >&2
		[ "${ULPFS_ALLOW_SKIP:-0}" = 1 ] && exit 77
		exit 1
	fi
	trap s3_exit EXIT
	S3_TOP=$(mktemp -d "${TMPDIR:-/tmp}/ulpfs-s3test.XXXXXX") || die "mktemp"
	s3_server_start "$S3_TOP/swift" || die "the S3 server did not start"
}

s3_mount() {
	local url=$1 cache=$2 mnt=$3 opts log rc
	opts=$(fs_opts "cache_dir=$cache${4:+,$4}")
	mkdir -p "$mnt"
	FS_NMOUNT=$((FS_NMOUNT + 1))
	log=$WORK/mount-$FS_NMOUNT.log
	say "mount: ulpfs mount -o $opts $url $mnt"
	timeout -k 5 120 "$ULPFS" mount -o "$opts" "$url" "$mnt" >"$log" 2>&1
	rc=$?
	if [ "$rc" -ne 0 ]; then
		sed 's/^/    | /' "$log" >&2
		die "ulpfs mount $url failed (exit $rc)"
	fi
	is_fuse_mount "$mnt" || die "ulpfs mount returned 0 but $mnt is not a FUSE mount"
	FS_LAST_PID=$(fs_daemon_pid "$cache") || FS_LAST_PID=""
	case " ${FS_ALL_STORES[*]} " in *" $cache "*) ;; *) FS_ALL_STORES+=("$cache") ;; esac
	FS_MOUNTS+=("$mnt")
	FS_DAEMONS+=("$FS_LAST_PID")
	FS_STORES+=("$cache")
	[ -n "$FS_LAST_PID" ] || die "mounted, but no daemon PID in $cache/daemon.pid"
}

s3_mount_fails() {
	local what=$1 pat=$2 url=$3 cache=$4 mnt=$5 opts out rc
	opts=$(fs_opts "cache_dir=$cache${6:+,$6}")
	mkdir -p "$mnt"
	out=$(timeout -k 5 120 "$ULPFS" mount -o "$opts" "$url" "$mnt" 2>&1)
	rc=$?
	if [ "$rc" -eq 0 ]; then
		bad "$what: the mount succeeded"
		is_fuse_mount "$mnt" && FS_MOUNTS+=("$mnt") FS_DAEMONS+=("") FS_STORES+=("$cache")
		return 1
	fi
	if printf '%s\n' "$out" | grep -Eqi -- "$pat"; then
		ok "$what: refused (exit $rc): $(printf '%s' "$out" | head -n 3 | tr '\n' ' ')"
	else
		bad "$what: refused, but the message does not match /$pat/: $out"
	fi
}

s3_keys() {
	# shellcheck disable=SC2086
	$S3_AWS s3 ls --recursive "s3://$S3_BUCKET/$1" | awk '{ print $4 }'
}

s3_umount_unuploaded() {
	local mnt=$1 pat=$2 rc
	timeout -k 5 300 "$ULPFS" umount "$mnt" >"$WORK/umount.log" 2>&1
	rc=$?
	if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && grep -q -- "$pat" "$WORK/umount.log"; then
		ok "umount exits $rc and says: $(head -c 240 "$WORK/umount.log")"
	else
		bad "umount exit $rc, want non-zero and /$pat/: $(cat "$WORK/umount.log")"
	fi
	is_mounted "$mnt" && die "still mounted after umount"
	fs_forget_mount "$mnt"
}

s3_live_objects() {
	/usr/bin/python3 -c '
import os, sqlite3, sys
c = sqlite3.connect(sys.argv[1])
# A version with a bucket representation (src/objstore/reps.h) is that
# object in the bucket, the others their own objects; a local object the
# cache no longer holds (evicted: the bucket has the only copy) is there
# too.
reps = c.execute("SELECT count(*) FROM sqlite_master WHERE name = ?", ("bucket_reps",)).fetchone()[0]
q = ("SELECT coalesce(r.object, v.object), v.object FROM versions AS v"
     " LEFT JOIN bucket_reps AS r ON r.version = v.id AND r.state = 1"
     if reps else "SELECT v.object, v.object FROM versions AS v")
held = os.path.join(os.path.dirname(os.path.abspath(sys.argv[1])), "objects")
want = set()
for (o, mine) in c.execute(q + " WHERE v.state <> 2 AND v.object IS NOT NULL AND v.object <> \"\""):
    want.add(o)
    if not os.path.exists(os.path.join(held, mine)):
        want.add(mine)
for o in sorted(want):
    print(o)
' "$1" | sort
}

s3_bucket_objects() {
	s3_keys "$1/objects/" | sed 's|.*/||' | sort
}

s3_exists() {
	$S3_AWS s3api head-object --bucket "$S3_BUCKET" --key "$1" >/dev/null 2>&1
}

# Swift answers a PUT or DELETE once the object is stored, and updates the
# container listing in the same request but with a timeout (a loaded
# machine may miss it, and the listing catches up later): whatever is
# checked through the listing is waited for, with a deadline.
s3_wait_for() {
	local secs=$1 end
	shift
	end=$((SECONDS + secs))
	until "$@"; do
		[ "$SECONDS" -ge "$end" ] && return 1
		sleep 0.5
	done
}

s3_objects_match() {
	local want
	want=$(s3_live_objects "$2")
	[ -n "$want" ] && [ "$want" = "$(s3_bucket_objects "$1")" ]
}

s3_expect_objects() {
	local when=$1 prefix=$2 cat=$3 want
	if s3_wait_for "${S3_LIST_WAIT:-60}" s3_objects_match "$prefix" "$cat"; then
		ok "$when: the bucket holds exactly the $(s3_live_objects "$cat" | wc -l) objects the catalog names"
	else
		want=$(s3_live_objects "$cat")
		bad "$when: bucket objects differ from the catalog's (want $(wc -l <<<"$want")): $(diff <(echo "$want") <(s3_bucket_objects "$prefix") | head -5 | tr '\n' ' ')"
		# what the catalog says of each object that differs
		diff <(echo "$want") <(s3_bucket_objects "$prefix") | sed -n 's/^[<>] //p' | head -5 |
			while read -r o; do
				say "  $o: $(/usr/bin/python3 -c 'import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
print("versions", c.execute("SELECT id, path, seq, state, ref FROM versions WHERE object = ?", (sys.argv[2],)).fetchall(),
      "reps", c.execute("SELECT * FROM bucket_reps WHERE object = ?", (sys.argv[2],)).fetchall())' "$cat" "$o" 2>&1)"
			done
	fi
}
