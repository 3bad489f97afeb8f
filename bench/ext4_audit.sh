#!/usr/bin/env bash
# bench/ext4_audit.sh [--modes "passthrough direct"] [--json DIR]
#
# The audit against a local filesystem (issue 13): bench/ext4_audit.py
# runs each operation a local ext4 supports in a plain directory under
# TMPDIR (which must be ext4) and in an ulpfs mount (default_permissions,
# as root), once per write mode, and lists where the mount refuses
# (ENOSYS, EPERM, EOPNOTSUPP, ENOTTY) or otherwise differs.  ulpfs(1),
# "Differences from a local filesystem", gives the reason for each.
# Needs root and FUSE; ULPFS=path/to/ulpfs (default _build/ulpfs).
#
# Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
. "$(dirname "${BASH_SOURCE[0]}")/../tests/fs_lib.sh"

MODES="passthrough direct"
JSON=""
while [ $# -gt 0 ]; do
	case $1 in
	--modes) MODES=$2; shift 2 ;;
	--json) JSON=$2; shift 2 ;;
	-h | --help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "ext4_audit.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done
fs_init
fstype=$(df --output=fstype "$WORK" | tail -n1 | tr -d ' ')
[ "$fstype" = ext4 ] || die "the plain side ($WORK) is on $fstype, not ext4: set TMPDIR"
[ "$(id -u)" = 0 ] || die "run as root (mknod, trusted.*, leases, file handles)"
FS_MOUNT_OPTS=${FS_MOUNT_OPTS:+$FS_MOUNT_OPTS,}default_permissions
say "$(uname -sr), ulpfs $(git -C "$FS_SRCDIR" rev-parse --short HEAD 2>/dev/null || echo '?')"
for mode in $MODES; do
	step "write mode $mode"
	mkdir -p "$WORK/plain-$mode"
	FS_WRITE_MODE=$mode fs_mount "$WORK/store-$mode" "$WORK/mnt-$mode"
	"$PY" "$FS_SRCDIR/bench/ext4_audit.py" "$WORK/plain-$mode" "$WORK/mnt-$mode" \
		${JSON:+--json "$JSON/ext4_audit-$mode.json"} || bad "ext4_audit.py failed"
	fs_umount "$WORK/mnt-$mode"
done
fs_finish
