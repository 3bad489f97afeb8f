#!/usr/bin/env bash
# Regenerate the format-5 objects of tests/test_container.c
# (format5_objects_still_verify): their large rANS blocks have at most 32
# lanes, the bitstream before format 6's 64-lane blocks.
#
#   tests/data/format5/make_objects.sh ULPFS_OF_FORMAT_5
#
# Run once with a binary that writes object format 5; the objects are
# committed and the tests never run this script.  The inputs are format
# 1's, decoded from the committed format-3 objects (so no numpy is
# needed), and the expected XXH3-128 of every decoded file is the same.
set -euo pipefail
ulpfs=$1
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$here/../format3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$ulpfs" unpack --threads 1 "$src/v0.ulp" -o "$work/v0.safetensors"
"$ulpfs" unpack --threads 1 --ref "$work/v0.safetensors" "$src/v1.ulp" -o "$work/v1.safetensors"
"$ulpfs" pack --threads 1 "$work/v0.safetensors" -o "$here/v0.ulp"
"$ulpfs" pack --threads 1 --ref "$work/v0.safetensors" "$work/v1.safetensors" -o "$here/v1.ulp"
"$ulpfs" pack --threads 1 --chunk-size 16K --ref "$work/v0.safetensors" "$work/v1.safetensors" -o "$here/v1-16k.ulp"
