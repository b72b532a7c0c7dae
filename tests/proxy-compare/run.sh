#!/usr/bin/env bash
# Compare handled's web handle proxy with the original Handle.Net 9.0.0 proxy:
# seed tests/proxy-compare/records.jsonl into both, send the same requests
# (compare.py's list) and report status / Location / Expires / page-content
# differences, the by-design ones apart.
#
#   sudo tests/proxy-compare/run.sh [path/to/handled]     (default $CARGO_TARGET_DIR/debug/handled, built if missing)
#
# Needs the Handle.Net harness (tests/handle-net-peer.sh finds it: made by
# scripts/handle-net-harness.sh, or HANDLE_NET_PEER=DIR), Java and root (it runs in a
# loopback-only network namespace). Skips with a message when any is missing.
# Writes the report to $OUT (default: tests/proxy-compare/last-run.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
REPO=$(pwd)
OUT=${OUT:-$REPO/tests/proxy-compare/last-run.md}

. tests/handle-net-peer.sh
require_handle_net_peer proxy-compare java python3

BIN=${1:-${CARGO_TARGET_DIR:-target}/debug/handled}
[ -x "$BIN" ] || cargo build -q -p handled --bin handled
BIN=$(realpath "$BIN")

# Our own instance of the harness: its own scratch dir and namespace, a small heap.
export HS_PEER=${HS_PEER:-${TMPDIR:-/tmp}/hs-peer-proxy-compare}
export HS_NETNS=${HS_NETNS:-hsproxycmp}
export HS_HEAP=${HS_HEAP:--Xms256m -Xmx512m}
export HS_HTTP_PORT=${HS_HTTP_PORT:-8000}
HANDLED_HTTP=${HANDLED_HTTP:-8001}

work=$(mktemp -d)
handled_pid=""
cleanup() {
  [ -n "$handled_pid" ] && kill "$handled_pid" 2>/dev/null || true
  "$PEER/stop.sh" >/dev/null 2>&1 || true
  [ "$HS_NETNS" = hsproxycmp ] && ip netns del hsproxycmp 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

echo "== original: setup + start (HS_PEER=$HS_PEER, netns $HS_NETNS)"
"$PEER/setup.sh" --force >"$work/setup.log" 2>&1 || { cat "$work/setup.log"; exit 1; }
"$PEER/start.sh" >"$work/start.log" 2>&1 || { cat "$work/start.log"; exit 1; }
in_ns() { ip netns exec "$HS_NETNS" "$@"; }

echo "== handled: serve in the same namespace on HTTP port $HANDLED_HTTP"
if in_ns python3 -c "import socket; socket.create_connection(('127.0.0.1', $HANDLED_HTTP), 1)" 2>/dev/null; then
  echo "port $HANDLED_HTTP is already taken in netns $HS_NETNS" >&2; exit 1
fi
# Started directly (not through a shell function) so that $! is handled itself.
ip netns exec "$HS_NETNS" "$BIN" serve --ephemeral --listen 127.0.0.1 --port 2651 --http-port "$HANDLED_HTTP" --prefix TEST \
  --admin-credentials "$work/admin.json" --import tests/proxy-compare/records.jsonl >"$work/handled.log" 2>&1 &
handled_pid=$!
for _ in $(seq 100); do
  in_ns python3 -c "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:$HANDLED_HTTP/healthz', timeout=1)" 2>/dev/null && break
  kill -0 "$handled_pid" 2>/dev/null || { cat "$work/handled.log"; exit 1; }
  sleep 0.2
done

echo "== seed the original, compare"
in_ns python3 tests/proxy-compare/compare.py --seed-original "https://127.0.0.1:$HS_HTTP_PORT"
in_ns python3 tests/proxy-compare/compare.py --handled "http://127.0.0.1:$HANDLED_HTTP" \
  --original "http://127.0.0.1:$HS_HTTP_PORT" --markdown "$OUT"
echo "report written to $OUT"
