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
rc=0
while read -r _ target type _; do
	case $type in
	fuse | fuse.* | fuseblk)
		# /proc/self/mounts writes a space in a path as \040
		umount -l "$(printf %b "$target")" || rc=1 ;;
	esac
done </proc/self/mounts
exit "$rc"
