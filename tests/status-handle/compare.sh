#!/usr/bin/env bash
# The status handle 0.SITE/status side by side: the original Handle.Net 9.0.0 and handled,
# both with the monitor on and TEST/WATCHER in status_handle_admins, asked by the same
# callers (anonymous, server admin, the watcher, another identity) over TCP, UDP, the HTTP
# tunnel (the official Java client library, StatusProbe.java) and the JSON API. compare.py
# compares codes, indexes, types, permissions, TTLs and field names; the figures differ.
#
#   sudo tests/status-handle/compare.sh [path/to/handled]   (default target/debug/handled, built if missing)
#
# Needs the Handle.Net harness at ../shared/peers/handle-net (relative to the repository;
# override with HANDLE_NET_PEER=DIR), Java, Python 3 and root (a loopback-only network
# namespace). Skips with a message when any is missing.
set -euo pipefail
cd "$(dirname "$0")/../.."
REPO=$(pwd)

. tests/handle-net-peer.sh
require_handle_net_peer "status-handle compare" java javac python3

BIN=${1:-target/debug/handled}
[ -x "$BIN" ] || cargo build -q -p handled --bin handled
BIN=$(realpath "$BIN")

# Our own instance of the harness: its own scratch dir and namespace, a small heap.
export HS_PEER=${HS_PEER:-${TMPDIR:-/tmp}/hs-peer-status-handle}
export HS_NETNS=${HS_NETNS:-hsstatuscmp}
export HS_HEAP=${HS_HEAP:--Xms256m -Xmx512m}
HANDLED_PORT=2651
HANDLED_HTTP=8001

work=$(mktemp -d)
handled_pid=""
cleanup() {
  [ -n "$handled_pid" ] && kill "$handled_pid" 2>/dev/null || true
  "$PEER/stop.sh" >/dev/null 2>&1 || true
  [ "$HS_NETNS" = hsstatuscmp ] && ip netns del hsstatuscmp 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
in_ns() { ip netns exec "$HS_NETNS" "$@"; }

echo "== original: setup, monitor on, TEST/WATCHER a status handle admin, start (HS_PEER=$HS_PEER, netns $HS_NETNS)"
"$PEER/setup.sh" --force >"$work/setup.log" 2>&1 || { cat "$work/setup.log"; exit 1; }
cfg="$HS_PEER/svr/config.dct"
sed -i 's|^    "case_sensitive" = "no"$|&\n    "enable_monitor_daemon" = "yes"\n    "status_handle_admins" = (\n      "300:TEST/WATCHER"\n    )|' "$cfg"
grep -q '"enable_monitor_daemon" = "yes"' "$cfg" || { echo "config.dct edit failed: no case_sensitive line in $cfg" >&2; exit 1; }
"$PEER/start.sh" >"$work/start.log" 2>&1 || { cat "$work/start.log"; exit 1; }

echo "== handled: the same settings, in the same namespace on ports $HANDLED_PORT / $HANDLED_HTTP"
cat >"$work/handled.toml" <<'EOF'
server_admins = ["300:TEST/ADMIN"]
status_handle_admins = ["300:TEST/WATCHER"]
enable_monitor_daemon = true
EOF
for port in "$HANDLED_PORT" "$HANDLED_HTTP"; do
  if in_ns python3 -c "import socket; socket.create_connection(('127.0.0.1', $port), 1)" 2>/dev/null; then
    echo "port $port is already taken in netns $HS_NETNS" >&2; exit 1
  fi
done
# Started directly (not through a shell function) so that $! is handled itself.
ip netns exec "$HS_NETNS" "$BIN" serve --ephemeral --listen 127.0.0.1 --port "$HANDLED_PORT" --http-port "$HANDLED_HTTP" \
  --prefix TEST --config "$work/handled.toml" --admin-credentials "$work/admin.json" >"$work/handled.out" 2>"$work/handled.err" &
handled_pid=$!
for _ in $(seq 100); do
  grep -qx ready "$work/handled.out" 2>/dev/null && break
  kill -0 "$handled_pid" 2>/dev/null || { cat "$work/handled.err"; exit 1; }
  sleep 0.1
done
grep -qx ready "$work/handled.out" || { echo "handled did not start:" >&2; cat "$work/handled.err" >&2; exit 1; }
secret=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["secret_key"]["secret"])' "$work/admin.json")

echo "== compile the probe, compare"
. "$PEER/env.sh"
cp=$(hsj_classpath)
javac -d "$work/classes" -cp "$cp" tests/status-handle/StatusProbe.java
in_ns python3 tests/status-handle/compare.py --create --probe-cp "$work/classes:$cp" \
  --server "Handle.Net,127.0.0.1,$HS_PORT,$HS_HTTP_PORT,$HS_ADMIN_SECKEY_INDEX:$HS_ADMIN_HANDLE,$HS_SECRET" \
  --server "handled,127.0.0.1,$HANDLED_PORT,$HANDLED_HTTP,300:TEST/ADMIN,$secret"
