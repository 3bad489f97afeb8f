#!/usr/bin/env bash
# Regenerate the format-2 objects of tests/test_container.c
# (format2_objects_still_verify): their file hash is the XXH3-128 of the
# whole file, format 3's is a hash over its 2 MiB blocks' hashes.
#
#   tests/data/format2/make_objects.sh ULPFS_OF_FORMAT_2
#
# Run once with a binary that writes object format 2 (the codec before the
# tree hash of format 3); the objects are committed and the tests never
# run this script.  The inputs are format 1's (deterministic: numpy, seed
# 7), so the expected XXH3-128 of every decoded file is the same.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
exec "$here/../format1/make_objects.sh" "$1" "$here"
