#!/usr/bin/env bash
# Regenerate the format-4 objects of tests/test_container.c
# (format4_objects_still_verify): their standalone float streams are the
# bitstream before format 5's (two rANS symbols per element: the
# exponent, then sign and top mantissa bits in its context).
#
#   tests/data/format4/make_objects.sh ULPFS_OF_FORMAT_4 [OUTDIR]
#
# (OUTDIR, default this directory: tests/data/format5 makes its objects
# from the same inputs with this script.)
#
# Run once with a binary that writes object format 4; the objects are
# committed and the tests never run this script.  The inputs are format
# 1's, decoded from the committed format-3 objects (so no numpy is
# needed), and the expected XXH3-128 of every decoded file is the same.
set -euo pipefail
ulpfs=$1
dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
here=${2:-$dir}
src=$dir/../format3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$ulpfs" unpack --threads 1 "$src/v0.ulp" -o "$work/v0.safetensors"
"$ulpfs" unpack --threads 1 --ref "$work/v0.safetensors" "$src/v1.ulp" -o "$work/v1.safetensors"
"$ulpfs" pack --threads 1 "$work/v0.safetensors" -o "$here/v0.ulp"
"$ulpfs" pack --threads 1 --ref "$work/v0.safetensors" "$work/v1.safetensors" -o "$here/v1.ulp"
"$ulpfs" pack --threads 1 --chunk-size 16K --ref "$work/v0.safetensors" "$work/v1.safetensors" -o "$here/v1-16k.ulp"
