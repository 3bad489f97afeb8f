#!/usr/bin/env bash
# tests/s3_server.sh - a real S3 server for the tests: OpenStack Swift (Debian
# 12's 2.30) with its s3api middleware (SigV4) and tempauth, plus the
# memcached tempauth needs, on 127.0.0.1 only, on free ports, with all its
# configuration and data in one temporary directory.
#
# Two ways to use it:
#   tests/s3_server.sh run CMD [ARG...]
#       starts the server, runs CMD with the environment below, stops the
#       server and removes its data on every exit path, exits with CMD's
#       status;
#   . tests/s3_server.sh; s3_server_start DIR
#       (from a test that has its own trap, which must call s3_server_stop);
#       s3_server_halt / s3_server_resume stop and restart the proxy (the
#       data stays) to simulate an outage.
#
# After a start the environment holds: AWS_ENDPOINT_URL (http://127.0.0.1:P),
# AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION (us-east-1),
# S3_BUCKET (a bucket that exists), S3_AWS (the awscli command with
# --endpoint-url: Debian's awscli 2.9 ignores AWS_ENDPOINT_URL) and
# S3_S3CMD (s3cmd with its configuration file).  AWS_CONFIG_FILE and
# AWS_SHARED_CREDENTIALS_FILE point into DIR so that ~/.aws is never read.
#
# Swift reads /etc/swift/swift.conf at a fixed path (its swift_dir option
# moves the rings, not that file).  So that /etc stays untouched, every Swift
# process runs in a private mount namespace (unshare -m) in which DIR/etc is
# bind-mounted over /etc/swift; that needs root, as the FUSE tests do.
#
# Processes are killed by the PIDs this script started, never by name.
#
# Copyright (c) 2026 The ulpfs developers.  MIT licence, see COPYING.

S3S_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
S3S_DIR=""
S3S_PIDS=()     # every process we started (memcached and Swift servers)
S3S_PROXY_PID=""
S3S_PROXY_PORT=""

s3s_say() { printf '[s3_server] %s\n' "$*" >&2; }

# Free TCP ports on 127.0.0.1, one per line (bound then released: a small
# race with other programs, harmless on a test machine).
s3s_free_ports() {
	/usr/bin/python3 - "$1" <<'EOF'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
for s in socks:
    print(s.getsockname()[1])
EOF
}

# s3s_spawn NAME CONF [PROGRAM]: one Swift server (PROGRAM: another Swift
# daemon) in its own mount namespace, with the copies of other tests' FUSE
# mounts detached (tests/ns_detach_fuse.sh).  unshare and the inner bash
# exec, so $! is the server's own PID (workers = 0: no forked workers to
# chase; the object updater forks one per pass, in its own session, and
# takes it down with itself on SIGTERM).
s3s_spawn() {
	local name=$1 conf=$2 prog=${3:-swift-$1-server}
	unshare -m --propagation private bash -c \
		'bash "$1" && mount --bind "$2/etc" /etc/swift && exec "$3" "$4"' \
		s3s "$S3S_HERE/ns_detach_fuse.sh" \
		"$S3S_DIR" "$prog" "$conf" \
		>>"$S3S_DIR/log/$name.log" 2>&1 &
	S3S_PIDS+=("$!")
	[ "$name" != proxy ] || S3S_PROXY_PID=$!
}

s3s_write_confs() {
	local d=$S3S_DIR mc=$1 pa=$2 pc=$3 po=$4
	cat >"$d/etc/swift.conf" <<EOF
[swift-hash]
swift_hash_path_suffix = ulpfs-test-$RANDOM$RANDOM
swift_hash_path_prefix = ulpfs-test
[storage-policy:0]
name = Policy-0
default = yes
EOF
	local kind port extra
	for kind in account container object; do
		extra=""
		case $kind in
		account) port=$pa ;;
		container) port=$pc ;;
		# The object server updates the container listing within each
		# PUT and DELETE, giving up after 1 s by default (the listing
		# then lags until the object updater replays it): a loaded test
		# machine gets more time, within the proxy's 10 s node timeout,
		# and an updater replays what still timed out every 10 s (each
		# of its passes forks a Python process that takes 0.2-1 s of
		# CPU: a pass a second cost a fifth of a core per server).
		object) port=$po extra="container_update_timeout = 5" ;;
		esac
		cat >"$d/etc/$kind-server.conf" <<EOF
[DEFAULT]
bind_ip = 127.0.0.1
bind_port = $port
devices = $d/srv
mount_check = false
swift_dir = $d/etc
workers = 0
log_name = $kind
log_level = WARNING
[pipeline:main]
pipeline = $kind-server
[app:$kind-server]
use = egg:swift#$kind
$extra
[$kind-replicator]
[$kind-updater]
interval = 10
user = root
recon_cache_path = $d/run
[$kind-auditor]
EOF
	done
	cat >"$d/etc/proxy-server.conf" <<EOF
[DEFAULT]
bind_ip = 127.0.0.1
bind_port = $S3S_PROXY_PORT
swift_dir = $d/etc
workers = 0
log_name = proxy
log_level = WARNING
[pipeline:main]
pipeline = catch_errors gatekeeper healthcheck proxy-logging cache listing_formats s3api tempauth copy slo dlo proxy-logging proxy-server
[app:proxy-server]
use = egg:swift#proxy
allow_account_management = true
account_autocreate = true
[filter:catch_errors]
use = egg:swift#catch_errors
[filter:gatekeeper]
use = egg:swift#gatekeeper
[filter:healthcheck]
use = egg:swift#healthcheck
[filter:proxy-logging]
use = egg:swift#proxy_logging
[filter:cache]
use = egg:swift#memcache
memcache_servers = 127.0.0.1:$mc
[filter:listing_formats]
use = egg:swift#listing_formats
[filter:s3api]
use = egg:swift#s3api
location = us-east-1
storage_domain = localhost
[filter:tempauth]
use = egg:swift#tempauth
user_test_tester = testing .admin
[filter:copy]
use = egg:swift#copy
[filter:slo]
use = egg:swift#slo
[filter:dlo]
use = egg:swift#dlo
EOF
}

# The account, container and object rings (one device each, on the ports
# given), written by one Python process with Swift's own RingBuilder:
# swift-ring-builder would take nine processes.
s3s_make_rings() {
	/usr/bin/python3 - "$S3S_DIR/etc" "$1" "$2" "$3" \
		>>"$S3S_DIR/log/rings.log" 2>&1 <<'EOF'
import os, sys
from swift.common.ring import RingBuilder
etc = sys.argv[1]
for kind, port in zip(("account", "container", "object"), sys.argv[2:5]):
    b = RingBuilder(4, 1, 1)
    b.add_dev({"region": 1, "zone": 1, "ip": "127.0.0.1", "port": int(port),
               "device": "d1", "weight": 100})
    b.rebalance()
    b.save(os.path.join(etc, kind + ".builder"))
    b.get_ring().save(os.path.join(etc, kind + ".ring.gz"))
EOF
}

# Wait until the proxy answers /healthcheck (Swift starts in about 6 s).
s3s_wait_ready() {
	local i
	for i in $(seq 1 300); do
		if curl -sf -o /dev/null "http://127.0.0.1:$S3S_PROXY_PORT/healthcheck"; then
			return 0
		fi
		kill -0 "$S3S_PROXY_PID" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}

# s3s_create_bucket NAME: a bucket is a Swift container of the account;
# made with two curl requests through tempauth's own API (awscli would
# start a Python interpreter that takes seconds).  The proxy answers its
# healthcheck before the account and container servers all do: a 503
# then is retried, as awscli retried it.
s3s_create_bucket() {
	local hdrs token url retry=(--retry 60 --retry-delay 1 --retry-max-time 120 --retry-connrefused)
	hdrs=$(curl -sSf "${retry[@]}" -D - -o /dev/null -H "X-Storage-User: test:tester" \
		-H "X-Storage-Pass: testing" "http://127.0.0.1:$S3S_PROXY_PORT/auth/v1.0") || return 1
	token=$(printf '%s\n' "$hdrs" | tr -d '\r' | sed -n 's/^[Xx]-[Aa]uth-[Tt]oken: //p' | tail -n 1)
	url=$(printf '%s\n' "$hdrs" | tr -d '\r' | sed -n 's/^[Xx]-[Ss]torage-[Uu]rl: //p' | tail -n 1)
	[ -n "$token" ] && [ -n "$url" ] || { echo "tempauth gave no token: $hdrs"; return 1; }
	curl -sSf "${retry[@]}" -X PUT -H "X-Auth-Token: $token" -o /dev/null "$url/$1"
}

s3_server_start() {
	S3S_DIR=$1
	local tool
	for tool in memcached swift-proxy-server swift-object-server \
		swift-container-server swift-account-server unshare curl; do
		command -v "$tool" >/dev/null 2>&1 || {
			s3s_say "$tool not found (apt-get install swift-proxy swift-object swift-container swift-account memcached curl)"
			return 1
		}
	done
	[ -d /etc/swift ] || {
		s3s_say "/etc/swift missing (the swift package creates it; it is the bind-mount target)"
		return 1
	}
	mkdir -p "$S3S_DIR/etc" "$S3S_DIR/srv/d1" "$S3S_DIR/log" "$S3S_DIR/run" || return 1
	local ports
	mapfile -t ports < <(s3s_free_ports 5)
	[ "${#ports[@]}" = 5 ] || { s3s_say "no free ports"; return 1; }
	S3S_PROXY_PORT=${ports[4]}
	s3s_write_confs "${ports[0]}" "${ports[1]}" "${ports[2]}" "${ports[3]}" &&
		s3s_make_rings "${ports[1]}" "${ports[2]}" "${ports[3]}" ||
		{ s3s_say "configuration failed: $(tail -n 5 "$S3S_DIR/log/rings.log")"; return 1; }

	memcached -l 127.0.0.1 -p "${ports[0]}" -U 0 -u root -m 32 \
		>>"$S3S_DIR/log/memcached.log" 2>&1 &
	S3S_PIDS+=("$!")
	s3s_spawn account "$S3S_DIR/etc/account-server.conf"
	s3s_spawn container "$S3S_DIR/etc/container-server.conf"
	s3s_spawn object "$S3S_DIR/etc/object-server.conf"
	s3s_spawn object-updater "$S3S_DIR/etc/object-server.conf" swift-object-updater
	s3s_spawn proxy "$S3S_DIR/etc/proxy-server.conf"
	if ! s3s_wait_ready; then
		s3s_say "Swift did not start; its logs:"
		tail -n 20 "$S3S_DIR"/log/*.log >&2
		return 1
	fi

	export AWS_ENDPOINT_URL="http://127.0.0.1:$S3S_PROXY_PORT"
	export AWS_ACCESS_KEY_ID="test:tester"
	export AWS_SECRET_ACCESS_KEY="testing"
	export AWS_REGION="us-east-1"
	export AWS_DEFAULT_REGION="us-east-1"
	unset AWS_SESSION_TOKEN AWS_PROFILE
	export AWS_CONFIG_FILE="$S3S_DIR/aws-config"
	export AWS_SHARED_CREDENTIALS_FILE="$S3S_DIR/aws-credentials"
	: >"$AWS_CONFIG_FILE"
	: >"$AWS_SHARED_CREDENTIALS_FILE"
	export S3_BUCKET="ulpfs-test"
	S3_AWS="/usr/bin/aws --endpoint-url $AWS_ENDPOINT_URL"
	cat >"$S3S_DIR/s3cfg" <<EOF
[default]
access_key = $AWS_ACCESS_KEY_ID
secret_key = $AWS_SECRET_ACCESS_KEY
host_base = 127.0.0.1:$S3S_PROXY_PORT
host_bucket = 127.0.0.1:$S3S_PROXY_PORT
use_https = False
signature_v2 = False
bucket_location = us-east-1
EOF
	S3_S3CMD="s3cmd -c $S3S_DIR/s3cfg"
	export S3_AWS S3_S3CMD
	if ! s3s_create_bucket "$S3_BUCKET" >>"$S3S_DIR/log/client.log" 2>&1; then
		s3s_say "creating the bucket failed: $(tail -n 5 "$S3S_DIR/log/client.log")"
		return 1
	fi
	s3s_say "Swift s3api on $AWS_ENDPOINT_URL, bucket $S3_BUCKET"
}

# Stop the proxy only: clients get "connection refused", the data stays.
s3_server_halt() {
	[ -n "$S3S_PROXY_PID" ] || return 0
	kill "$S3S_PROXY_PID" 2>/dev/null
	wait "$S3S_PROXY_PID" 2>/dev/null
	local p keep=()
	for p in "${S3S_PIDS[@]}"; do
		[ "$p" = "$S3S_PROXY_PID" ] || keep+=("$p")
	done
	S3S_PIDS=("${keep[@]}")
	S3S_PROXY_PID=""
}

# Start the proxy again on the same port.
s3_server_resume() {
	s3s_spawn proxy "$S3S_DIR/etc/proxy-server.conf"
	s3s_wait_ready
}

# Kill what we started (by PID), wait for it, remove the data.
s3_server_stop() {
	local p
	for p in "${S3S_PIDS[@]}"; do
		kill "$p" 2>/dev/null
	done
	for p in "${S3S_PIDS[@]}"; do
		wait "$p" 2>/dev/null
	done
	S3S_PIDS=()
	S3S_PROXY_PID=""
	if [ -n "$S3S_DIR" ] && [ -d "$S3S_DIR" ] && [ "${ULPFS_KEEP_WORK:-0}" != 1 ]; then
		rm -rf "$S3S_DIR"
	fi
	S3S_DIR=""
}

# Executed (not sourced): "run CMD...".
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	set -u
	[ "${1:-}" = run ] && [ $# -ge 2 ] || {
		echo "usage: $0 run COMMAND [ARG...]" >&2
		exit 2
	}
	shift
	s3s_top=$(mktemp -d "${TMPDIR:-/tmp}/ulpfs-s3.XXXXXX") || exit 1
	trap 's3_server_stop; rm -rf "$s3s_top"' EXIT
	trap 'exit 130' INT TERM
	s3_server_start "$s3s_top/swift" || exit 1
	rc=0
	"$@" || rc=$?
	exit "$rc"
fi
