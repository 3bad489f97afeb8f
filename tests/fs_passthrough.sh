#!/usr/bin/env bash
# tests/fs_passthrough.sh - the mount tests with -o write_mode=passthrough forced
# (tests/fs_modes.sh).
FS_WRITE_MODE=passthrough exec bash "$(dirname "$0")/fs_modes.sh"
