#!/usr/bin/env bash
# tests/fs_private.sh - old versions and the store directory are as
# private as the live tree (issue 36).  On a store mounted by root with
# default_permissions,allow_other, another user (nobody, by setpriv) must
# be refused by .ulpfs/versions/ and .ulpfs/snapshots/ exactly where the
# live tree refused them when each version was written, and must still
# read what was public:
#   - a 0600 file later made 0644, and a 0644 file later made 0600;
#   - a chown between versions;
#   - a file behind a 0700 directory, and one behind a directory since
#     deleted and made again open;
#   - ACLs (setfacl) granting and denying nobody, on files and directories;
#   - hard links whose names sit in directories of different modes;
#   - a snapshot of each case.
# Every case of the live tree is run on a plain directory beside the
# mount too (the filesystem /tmp is on: ext4 here), and nobody must get
# the same there.  The store directory: 0700/0600 under umask 022 and 077,
# a looser existing store tightened on mount (and the log says so), and a
# clear error for nobody's ulpfs commands.  A table of every case is
# printed at the end.
# FUSE unavailable is a FAILURE unless ULPFS_ALLOW_SKIP=1 (then exit 77).
#
# Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "$0")/cli_lib.sh"
cli_init snapshot sync log

for t in setfacl getfacl setpriv; do
	command -v "$t" >/dev/null || die "$t is missing (apt-get install acl util-linux)"
done
FS_MOUNT_OPTS=${FS_MOUNT_OPTS:+$FS_MOUNT_OPTS,}default_permissions,allow_other
export FS_MOUNT_OPTS
chmod o+x "$WORK" # nobody must reach the mount point
umask 022
STORE=$WORK/store
MNT=$WORK/mnt
PLAIN=$WORK/plain # the same cases on the filesystem under $WORK
mkdir -p "$PLAIN"
chmod 0755 "$PLAIN"
fs_mount "$STORE" "$MNT"

as_nobody() { setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; }
# What nobody gets reading PATH: its bytes, or DENIED / MISSING.
nobody_reads() {
	local out
	if out=$(as_nobody cat "$1" 2>"$WORK/err"); then
		printf '%s' "$out"
	elif grep -q 'Permission denied' "$WORK/err"; then
		printf 'DENIED'
	else
		printf 'MISSING'
	fi
}
TABLE=$WORK/table
printf '%-44s %-12s %-12s %-12s\n' "case (what nobody reads)" "expected" "ulpfs" "plain fs" >"$TABLE"
# row CASE PATH EXPECTED [PLAIN_PATH]: nobody's read of MNT/PATH (and of
# PLAIN_PATH on the plain directory, where the case has an equivalent).
row() {
	local what=$1 path=$2 want=$3 plain=${4:-} got pgot="-"
	got=$(nobody_reads "$MNT/$path")
	[ -n "$plain" ] && pgot=$(nobody_reads "$PLAIN/$plain")
	printf '%-44s %-12s %-12s %-12s\n' "$what" "$want" "$got" "$pgot" >>"$TABLE"
	if [ "$got" = "$want" ]; then
		ok "$what: nobody gets $want"
	else
		bad "$what: nobody gets $got through the mount, expected $want"
	fi
	if [ -n "$plain" ] && [ "$pgot" != "$want" ]; then
		bad "$what: nobody gets $pgot on the plain filesystem, expected $want (the test's model is wrong)"
	fi
}
# both CMD...: run a shell command with $D as the mount, then as the plain
# directory, so that both trees go through the same steps.  A mode, owner
# or ACL is set before the content it guards is written: a version is
# committed as soon as its file is closed.
both() {
	D=$MNT sh -c "$1" || bad "on the mount: $1"
	D=$PLAIN sh -c "$1" || bad "on the plain directory: $1"
}
commit() { "$ULPFS" sync "$MNT" >/dev/null || bad "ulpfs sync"; }
vmode() { stat -c '%a %U:%G' "$MNT/.ulpfs/versions/$1"; }

step "a 0600 file later made 0644"
both 'umask 077; echo "secret v1" >"$D/f"'
commit
both 'chmod 644 "$D/f"; echo "public v2" >"$D/f"'
commit
row "0600 then 0644: live" f "public v2" f
row "0600 then 0644: version 1 (0600)" .ulpfs/versions/f/1 DENIED
row "0600 then 0644: version 2 (0644)" .ulpfs/versions/f/2 "public v2"
check "version 1 shows 0400 root:root" test "$(vmode f/1)" = "400 root:root"
check "version 2 shows 0444 root:root" test "$(vmode f/2)" = "444 root:root"

step "a 0644 file later made 0600"
both 'echo "public v1" >"$D/p"'
commit
both 'chmod 600 "$D/p"; echo "secret v2" >"$D/p"'
commit
row "0644 then 0600: live" p DENIED p
row "0644 then 0600: version 1 (0644)" .ulpfs/versions/p/1 "public v1"
row "0644 then 0600: version 2 (0600)" .ulpfs/versions/p/2 DENIED

step "chown between versions"
both 'umask 077; echo "root own" >"$D/c"'
commit
both 'chown nobody:nogroup "$D/c"; echo "nobody own" >"$D/c"'
commit
row "chown: live (nobody's 0600)" c "nobody own" c
row "chown: version 1 (root's 0600)" .ulpfs/versions/c/1 DENIED
row "chown: version 2 (nobody's 0600)" .ulpfs/versions/c/2 "nobody own"
check "version 2 is nobody's" test "$(vmode c/2)" = "400 nobody:nogroup"

step "a file behind a 0700 directory; an open one beside it"
both 'mkdir -m 0700 "$D/priv" && echo "behind 0700" >"$D/priv/g" && mkdir -m 0755 "$D/pub" && echo "in the open" >"$D/pub/g"'
commit
row "0700 directory: live file" priv/g DENIED priv/g
row "0700 directory: version" .ulpfs/versions/priv/g/1 DENIED
row "0755 directory: live file" pub/g "in the open" pub/g
row "0755 directory: version" .ulpfs/versions/pub/g/1 "in the open"
check "versions/priv mirrors the live 0700 as 0500" test "$(stat -c %a "$MNT/.ulpfs/versions/priv")" = 500
check "nobody cannot list versions/priv" sh -c "! setpriv --reuid=nobody --regid=nogroup --clear-groups ls '$MNT/.ulpfs/versions/priv' >/dev/null 2>&1"

step "ACLs granting and denying nobody"
# the ACL set while the file is open, before its first commit
both 'umask 077; exec 3>"$D/acl-yes" && setfacl -m u:nobody:r "$D/acl-yes" && echo "granted" >&3'
both 'exec 3>"$D/acl-no" && setfacl -m u:nobody:- "$D/acl-no" && echo "refused" >&3'
both 'mkdir -m 0700 "$D/adir" && setfacl -m u:nobody:rx "$D/adir" && echo "through the dir ACL" >"$D/adir/h"'
commit
both 'echo "granted 2" >"$D/acl-yes"; echo "refused 2" >"$D/acl-no"; echo "dir 2" >"$D/adir/h"'
commit
both 'setfacl -b "$D/acl-yes"; setfacl -b "$D/acl-no"'
row "ACL u:nobody:r, since removed: live" acl-yes DENIED acl-yes
row "ACL u:nobody:r: version 1" .ulpfs/versions/acl-yes/1 granted
row "ACL u:nobody:---, since removed: live" acl-no "refused 2" acl-no
row "ACL u:nobody:---: version 1" .ulpfs/versions/acl-no/1 DENIED
row "0700 dir with ACL u:nobody:rx: live" adir/h "dir 2" adir/h
row "0700 dir with ACL u:nobody:rx: version 1" .ulpfs/versions/adir/h/1 "through the dir ACL"
check "getfacl of version 1 names nobody read-only" sh -c "getfacl -p '$MNT/.ulpfs/versions/acl-yes/1' 2>/dev/null | grep -qx 'user:nobody:r--'"
check "versions/adir carries the directory's ACL" sh -c "getfacl -p '$MNT/.ulpfs/versions/adir' 2>/dev/null | grep -qx 'user:nobody:r-x'"

step "hard links in directories of different modes"
both 'mkdir -m 0700 "$D/closed" && mkdir -m 0755 "$D/open" && echo "linked" >"$D/closed/x" && ln "$D/closed/x" "$D/open/x"'
commit
both 'echo "linked 2" >"$D/open/x"'
commit
row "hard link: name in the 0755 directory" open/x "linked 2" open/x
row "hard link: name in the 0700 directory" closed/x DENIED closed/x
row "hard link: version via the 0755 name" .ulpfs/versions/open/x/2 "linked 2"
row "hard link: version via the 0700 name" .ulpfs/versions/closed/x/2 DENIED

step "snapshots of every case, then a directory deleted and made again"
both 'mkdir -m 0700 "$D/gone" && echo "was behind 0700" >"$D/gone/k"'
commit
expect 0 "snapshot create s1" snapshot create --store "$STORE" s1
S=.ulpfs/snapshots/s1
row "snapshot: the 0644-then-0600 file" $S/p DENIED
row "snapshot: the 0600-then-0644 file" $S/f "public v2"
row "snapshot: behind the 0700 directory" $S/priv/g DENIED
row "snapshot: in the 0755 directory" $S/pub/g "in the open"
row "snapshot: nobody's own file" $S/c "nobody own"
row "snapshot: ACL-opened 0700 directory" $S/adir/h "dir 2"
row "snapshot: hard link, 0700 name" $S/closed/x DENIED
row "snapshot: hard link, 0755 name" $S/open/x "linked 2"
row "snapshot: the directory about to go" $S/gone/k DENIED
both 'rm -rf "$D/gone" && mkdir -m 0755 "$D/gone" && echo "now public" >"$D/gone/k"'
commit
row "re-made open directory: live" gone/k "now public" gone/k
row "re-made: the version kept by s1 (was 0700)" .ulpfs/versions/gone/k/1 DENIED
row "re-made: the new version" .ulpfs/versions/gone/k/2 "now public"
row "snapshot after the deletion" $S/gone/k DENIED

step "after a remount, the same"
fs_umount "$MNT"
fs_mount "$STORE" "$MNT"
row "remount: version 1 of the 0600 file" .ulpfs/versions/f/1 DENIED
row "remount: version 1 of the 0644 file" .ulpfs/versions/p/1 "public v1"
row "remount: behind 0700" .ulpfs/versions/priv/g/1 DENIED

step "the store directory is private to root"
# store_modes STORE: "MODE NAME" of the store, its directories and files
store_modes() {
	find "$1" \( -type d -o -type f \) -printf '%m %P\n' | sort -k2
}
loose=$(store_modes "$STORE" | awk '($1 != 700 && $1 != 600) { print }')
check "store, objects, staging 0700 and every file 0600 under umask 022" test -z "$loose"
[ -z "$loose" ] || printf '%s\n' "$loose" | head -5 | sed 's/^/    | /' >&2
row "the catalog, read directly" ../store/catalog.db DENIED
obj=$(find "$STORE/objects" -type f | head -n1)
check "nobody cannot read an object" sh -c "! setpriv --reuid=nobody --regid=nogroup --clear-groups cat '$obj' >/dev/null 2>&1"
run log --store "$STORE" f
check "root's ulpfs log works" test "$RC" = 0
as_nobody "$ULPFS" log --store "$STORE" f >"$WORK/nb.out" 2>"$WORK/nb.err"
check "nobody's ulpfs log --store fails" test $? != 0
check "... saying that the store is private, and whose" grep -q "permission denied: a store is private to the user its daemon runs as (root" "$WORK/nb.err"
as_nobody "$ULPFS" log "$MNT/f" >"$WORK/nb.out" 2>"$WORK/nb.err"
check "nobody's ulpfs log through the mount fails with the same words" grep -q "a store is private" "$WORK/nb.err"
check "the control socket stays 0600" test "$(stat -c %a "$STORE/control.sock")" = 600

step "a store made under umask 077, and a looser one tightened on mount"
umask 077
fs_mount "$WORK/store077" "$WORK/mnt077"
echo x >"$WORK/mnt077/x"
"$ULPFS" sync "$WORK/mnt077" >/dev/null
check "umask 077: private as well" test -z "$(store_modes "$WORK/store077" | awk '($1 != 700 && $1 != 600)')"
fs_umount "$WORK/mnt077"
umask 022
fs_umount "$MNT"
chmod 0755 "$STORE" "$STORE/objects" "$STORE/staging"
chmod 0644 "$STORE/catalog.db" "$STORE"/objects/*
fs_mount "$STORE" "$MNT"
check "the loosened store is tight again" test -z "$(store_modes "$STORE" | awk '($1 != 700 && $1 != 600)')"
check "ulpfs mount says it tightened it" grep -q "tightened .* directories to 0700 and .* files to 0600" "$WORK/mount-$FS_NMOUNT.log"
row "after the tightening: version 2 of the 0600 file" .ulpfs/versions/f/2 "public v2"

step "what nobody got, case by case"
cat "$TABLE"
fs_finish
