#!/usr/bin/env bash
# Template handles side by side: the original Handle.Net 9.0.0 and handled, both with
# template delimiter "@", the same base handles created through their JSON APIs, the
# same template handles resolved (compare.py says what is compared).
#
#   sudo tests/templates/compare.sh [path/to/handled]   (default target/debug/handled, built if missing)
#
# Needs the Handle.Net harness (tests/handle-net-peer.sh finds it: made by
# scripts/handle-net-harness.sh, or HANDLE_NET_PEER=DIR), Java, Python 3 and root (a loopback-only network
# namespace). Skips with a message when any is missing.
set -euo pipefail
cd "$(dirname "$0")/../.."

. tests/handle-net-peer.sh
require_handle_net_peer "templates compare" java python3

BIN=${1:-target/debug/handled}
[ -x "$BIN" ] || cargo build -q -p handled --bin handled
BIN=$(realpath "$BIN")

. tests/side-by-side.sh
side_by_side templcmp 2652 8002
start_original '    "template_delimiter" = "@"'
start_handled "$BIN" 'server_admins = ["300:TEST/ADMIN"]
[templates]
delimiter = "@"
namespace_override = true'

echo "== compare"
. "$PEER/env.sh"
ip netns exec "$HS_NETNS" python3 tests/templates/compare.py \
  --server "Handle.Net,127.0.0.1,$HS_PORT,$HS_HTTP_PORT,$HS_ADMIN_SECKEY_INDEX:$HS_ADMIN_HANDLE,$HS_SECRET" \
  --server "handled,127.0.0.1,$HANDLED_PORT,$HANDLED_HTTP,300:TEST/ADMIN,$secret"
