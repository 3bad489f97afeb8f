#!/usr/bin/env bash
# tests/fs_direct.sh - the mount tests with -o write_mode=direct forced
# (tests/fs_modes.sh).
FS_WRITE_MODE=direct exec bash "$(dirname "$0")/fs_modes.sh"
