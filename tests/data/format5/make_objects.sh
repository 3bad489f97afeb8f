#!/usr/bin/env bash
# Regenerate the format-5 objects of tests/test_container.c
# (format5_objects_still_verify): their large rANS blocks have at most 32
# lanes, the bitstream before format 6's 64-lane blocks.
#
#   tests/data/format5/make_objects.sh ULPFS_OF_FORMAT_5
#
# Run once with a binary that writes object format 5 (main at 985632d);
# the objects are committed and the tests never run this script.  The
# inputs are format 4's, so the expected XXH3-128 of every decoded file
# is the same.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
exec "$here/../format4/make_objects.sh" "$1" "$here"
