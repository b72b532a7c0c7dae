#!/usr/bin/env bash
# The status handle 0.SITE/status side by side: the original Handle.Net 9.0.0 and handled,
# both with the monitor on and TEST/WATCHER in status_handle_admins, asked by the same
# callers (anonymous, server admin, the watcher, another identity) over TCP, UDP, the HTTP
# tunnel (the official Java client library, StatusProbe.java) and the JSON API. compare.py
# compares codes, indexes, types, permissions, TTLs and field names; the figures differ.
#
#   sudo tests/status-handle/compare.sh [path/to/handled]   (default target/debug/handled, built if missing)
#
# Needs the Handle.Net harness (tests/handle-net-peer.sh finds it: made by
# scripts/handle-net-harness.sh, or HANDLE_NET_PEER=DIR), Java, Python 3 and root (a loopback-only network
# namespace). Skips with a message when any is missing.
set -euo pipefail
cd "$(dirname "$0")/../.."

. tests/handle-net-peer.sh
require_handle_net_peer "status-handle compare" java javac python3

BIN=${1:-target/debug/handled}
[ -x "$BIN" ] || cargo build -q -p handled --bin handled
BIN=$(realpath "$BIN")

. tests/side-by-side.sh
side_by_side statuscmp 2651 8001
start_original '    "enable_monitor_daemon" = "yes"
    "status_handle_admins" = (
      "300:TEST/WATCHER"
    )'
start_handled "$BIN" 'server_admins = ["300:TEST/ADMIN"]
status_handle_admins = ["300:TEST/WATCHER"]
enable_monitor_daemon = true'

echo "== compile the probe, compare"
. "$PEER/env.sh"
cp=$(hsj_classpath)
javac -d "$work/classes" -cp "$cp" tests/status-handle/StatusProbe.java
in_ns python3 tests/status-handle/compare.py --create --probe-cp "$work/classes:$cp" \
  --server "Handle.Net,127.0.0.1,$HS_PORT,$HS_HTTP_PORT,$HS_ADMIN_SECKEY_INDEX:$HS_ADMIN_HANDLE,$HS_SECRET" \
  --server "handled,127.0.0.1,$HANDLED_PORT,$HANDLED_HTTP,300:TEST/ADMIN,$secret"
