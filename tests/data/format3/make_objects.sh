#!/usr/bin/env bash
# Regenerate the format-3 objects of tests/test_container.c
# (format3_objects_still_verify): their float streams are the bitstream
# before format 4's (no escape symbols in the delta blocks' tables).
#
#   tests/data/format3/make_objects.sh ULPFS_OF_FORMAT_3
#
# Run once with a binary that writes object format 3; the objects are
# committed and the tests never run this script.  The inputs are format
# 1's (deterministic: numpy, seed 7), so the expected XXH3-128 of every
# decoded file is the same.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
exec "$here/../format1/make_objects.sh" "$1" "$here"
