#!/usr/bin/env bash
# tests/s3_client.sh - the S3 client's Criterion tests (tests/test_s3)
# against a real Swift s3api server (tests/s3_server.sh), then the clients
# users have (awscli, s3cmd) reading what the client wrote.
#
# The server's packages missing is a FAILURE unless ULPFS_ALLOW_SKIP=1
# (then exit 77).  Environment: TEST_S3 (the test program; make check sets
# it).
#
# Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.

[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
set -u -o pipefail

here=$(cd "$(dirname "$0")" && pwd)
: "${TEST_S3:?TEST_S3 (the tests/test_s3 program) is not set}"
if ! command -v swift-proxy-server >/dev/null 2>&1; then
	echo "s3_client: Swift is not installed (swift-proxy ...)" >&2
	[ "${ULPFS_ALLOW_SKIP:-0}" = 1 ] && exit 77
	exit 1
fi

# shellcheck disable=SC2016
# shellcheck disable=SC2016
exec "$here/s3_server.sh" run bash -c '
	set -u -o pipefail
	tmp=$(mktemp -d) || exit 1
	trap "rm -rf \"$tmp\"" EXIT
	# interoperability: test_s3 uploads this file (multipart), awscli and
	# s3cmd fetch it
	head -c 20000000 /dev/urandom >"$tmp/f"
	export S3_INTEROP_FILE=$tmp/f
	"$1" || exit 1
	$S3_AWS s3 cp --quiet "s3://$S3_BUCKET/interop/by-ulpfs" "$tmp/a" || exit 1
	cmp "$tmp/f" "$tmp/a" || exit 1
	$S3_S3CMD --quiet get "s3://$S3_BUCKET/interop/by-ulpfs" "$tmp/b" || exit 1
	cmp "$tmp/f" "$tmp/b" || exit 1
	$S3_AWS s3 ls "s3://$S3_BUCKET/interop/" | grep -q " 20000000 by-ulpfs" || exit 1
	echo "s3_client: awscli and s3cmd read what ulpfs wrote"
' s3_client "$TEST_S3"
