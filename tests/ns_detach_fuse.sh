#!/usr/bin/env bash
# ns_detach_fuse.sh [KEEP...] - run first inside a new private mount
# namespace (unshare -m): detach every FUSE mount the namespace was given a
# copy of, but those mounted on a KEEP path (the test's own).
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
kept() {
	local k
	for k in "$@"; do [ "$k" = "$target" ] && return 0; done
	return 1
}
# (one may fail: detaching a mount detaches the mounts below it; what is
# left is checked below)
for target in "${targets[@]}"; do
	kept "$@" || umount -l "$target" 2>/dev/null || :
done
left=()
while read -r _ target type _; do
	case $type in
	fuse | fuse.* | fuseblk)
		target=$(printf %b "$target")
		kept "$@" || left+=("$target") ;;
	esac
done </proc/self/mounts
[ "${#left[@]}" = 0 ] && exit 0
echo "ns_detach_fuse.sh: FUSE mounts left in this namespace: ${left[*]}" >&2
exit 1
