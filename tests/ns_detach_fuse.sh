#!/usr/bin/env bash
# ns_detach_fuse.sh - run first inside a new private mount namespace
# (unshare -m): detach every FUSE mount the namespace was given a copy of.
#
# A new mount namespace starts with a copy of every mount, the FUSE mounts
# of tests running beside it included, and each copy keeps its FUSE
# connection open: the other test's umount would then leave its daemon
# running until this namespace's processes exit.
#
# Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.
set -u
# The whole list first: unmounting while reading /proc/self/mounts skips
# entries.
targets=()
while read -r _ target type _; do
	case $type in
	fuse | fuse.* | fuseblk)
		# /proc/self/mounts writes a space in a path as \040
		targets+=("$(printf %b "$target")") ;;
	esac
done </proc/self/mounts
rc=0
# (one may fail: detaching a mount detaches the mounts below it; what is
# left is checked below)
for target in "${targets[@]}"; do
	umount -l "$target" 2>/dev/null || :
done
if grep -qE '^[^ ]+ [^ ]+ (fuse|fuse\.[^ ]*|fuseblk) ' /proc/self/mounts; then
	echo "ns_detach_fuse.sh: FUSE mounts left in this namespace:" >&2
	grep -E '^[^ ]+ [^ ]+ (fuse|fuse\.[^ ]*|fuseblk) ' /proc/self/mounts >&2
	rc=1
fi
exit "$rc"
