#!/usr/bin/env bash
# Template handles side by side: the original Handle.Net 9.0.0 and handled, both with
# template delimiter "@", the same base handles created through their JSON APIs, the
# same template handles resolved (compare.py says what is compared).
#
#   sudo tests/templates/compare.sh [path/to/handled]   (default target/debug/handled, built if missing)
#
# Needs the Handle.Net harness at ../shared/peers/handle-net (relative to the repository;
# override with HANDLE_NET_PEER=DIR), Java, Python 3 and root (a loopback-only network
# namespace). Skips with a message when any is missing.
set -euo pipefail
cd "$(dirname "$0")/../.."

. tests/handle-net-peer.sh
require_handle_net_peer "templates compare" java python3

BIN=${1:-target/debug/handled}
[ -x "$BIN" ] || cargo build -q -p handled --bin handled
BIN=$(realpath "$BIN")

# Our own instance of the harness: its own scratch dir and namespace, a small heap.
export HS_PEER=${HS_PEER:-${TMPDIR:-/tmp}/hs-peer-templates}
export HS_NETNS=${HS_NETNS:-hstemplcmp}
export HS_HEAP=${HS_HEAP:--Xms256m -Xmx512m}
HANDLED_PORT=2652
HANDLED_HTTP=8002

work=$(mktemp -d)
handled_pid=""
cleanup() {
  [ -n "$handled_pid" ] && kill "$handled_pid" 2>/dev/null || true
  "$PEER/stop.sh" >/dev/null 2>&1 || true
  [ "$HS_NETNS" = hstemplcmp ] && ip netns del hstemplcmp 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

echo "== original: setup, template_delimiter \"@\", start (HS_PEER=$HS_PEER, netns $HS_NETNS)"
"$PEER/setup.sh" --force >"$work/setup.log" 2>&1 || { cat "$work/setup.log"; exit 1; }
cfg="$HS_PEER/svr/config.dct"
sed -i 's|^    "case_sensitive" = "no"$|&\n    "template_delimiter" = "@"|' "$cfg"
grep -q '"template_delimiter" = "@"' "$cfg" || { echo "config.dct edit failed: no case_sensitive line in $cfg" >&2; exit 1; }
"$PEER/start.sh" >"$work/start.log" 2>&1 || { cat "$work/start.log"; exit 1; }

echo "== handled: the same settings, in the same namespace on ports $HANDLED_PORT / $HANDLED_HTTP"
cat >"$work/handled.toml" <<'TOML'
server_admins = ["300:TEST/ADMIN"]
[templates]
delimiter = "@"
namespace_override = true
TOML
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

echo "== compare"
. "$PEER/env.sh"
ip netns exec "$HS_NETNS" python3 tests/templates/compare.py \
  --server "Handle.Net,127.0.0.1,$HS_PORT,$HS_HTTP_PORT,$HS_ADMIN_SECKEY_INDEX:$HS_ADMIN_HANDLE,$HS_SECRET" \
  --server "handled,127.0.0.1,$HANDLED_PORT,$HANDLED_HTTP,300:TEST/ADMIN,$secret"
