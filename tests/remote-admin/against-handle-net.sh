#!/usr/bin/env bash
# handled verifying an administrator held on the original Handle.Net 9.0.0 server: a
# secret-key answer goes there as VERIFY_CHALLENGE and its DSA-signed reply is checked.
#
#   sudo tests/remote-admin/against-handle-net.sh [path/to/handled]   (default $CARGO_TARGET_DIR/debug/handled)
#
# Three servers in a loopback-only network namespace: Handle.Net (homes TEST, holds TEST/ADMIN
# with HS_SECKEY 301 = benchsecret), a handled "root" R (homes 0.NA, and 0.NA/TEST's HS_SITE is
# replaced by Handle.Net's site record) and the handled under test B (homes LOCAL,
# server_admins = 301:TEST/ADMIN, root_info = R's site). Passes when the right secret creates
# LOCAL/… on B and a wrong one is refused with 403.
#
# Needs the Handle.Net harness (tests/handle-net-peer.sh finds it: made by
# scripts/handle-net-harness.sh, or HANDLE_NET_PEER=DIR), Java, jq and root. Skips with a message when any is missing.
set -euo pipefail
cd "$(dirname "$0")/../.."
REPO=$(pwd)

. tests/handle-net-peer.sh
require_handle_net_peer "remote-admin against Handle.Net" java jq

BIN=${1:-${CARGO_TARGET_DIR:-target}/debug/handled}
[ -x "$BIN" ] || cargo build -q -p handled --bin handled
BIN=$(realpath "$BIN")

export HS_PEER=${HS_PEER:-${TMPDIR:-/tmp}/hs-peer-remote-admin}
export HS_NETNS=${HS_NETNS:-hsremoteadmin}
export HS_HEAP=${HS_HEAP:--Xms256m -Xmx512m}

work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  "$PEER/stop.sh" >/dev/null 2>&1 || true
  [ "$HS_NETNS" = hsremoteadmin ] && ip netns del hsremoteadmin 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
in_ns() { ip netns exec "$HS_NETNS" "$@"; }

# serve NAME PORT HTTP_PORT ARGS...: a handled in the namespace, waited for until "ready".
serve() {
  local name=$1 port=$2 http=$3
  shift 3
  ip netns exec "$HS_NETNS" "$BIN" serve --ephemeral --listen 127.0.0.1 --port "$port" --http-port "$http" \
    --admin-credentials "$work/$name.json" "$@" >"$work/$name.out" 2>"$work/$name.err" &
  pids+=($!)
  for _ in $(seq 100); do
    grep -qx ready "$work/$name.out" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "handled $name did not start:" >&2
  cat "$work/$name.err" >&2
  exit 1
}

echo "== Handle.Net: setup + start (HS_PEER=$HS_PEER, netns $HS_NETNS)"
"$PEER/setup.sh" --force >"$work/setup.log" 2>&1 || { cat "$work/setup.log"; exit 1; }
"$PEER/start.sh" >"$work/start.log" 2>&1 || { cat "$work/start.log"; exit 1; }

echo "== root R: homes 0.NA; 0.NA/TEST points at Handle.Net"
serve root 4641 4642 --prefix 0.NA,TEST
site=$(jq -c '[{"index":1,"type":"HS_SITE","data":{"format":"site","value":.}}]' "$HS_PEER/svr/siteinfo.json")
in_ns "$BIN" modify-value 0.NA/TEST --json "$site" --port 4641 --credentials "$work/root-TEST.json" >/dev/null
in_ns curl -sf http://127.0.0.1:4642/api/site | jq .site >"$work/root_site.json"

echo "== B: homes LOCAL, server_admins = 301:TEST/ADMIN (on Handle.Net), root_info = R"
printf 'server_admins = ["301:TEST/ADMIN"]\nroot_info = "%s"\n' "$work/root_site.json" >"$work/b.toml"
serve local 3641 3642 --prefix LOCAL --config "$work/b.toml"

status=0
as_admin() { in_ns "$BIN" create "$1" 1:URL:https://example.org/remote --port 3641 --admin 301:TEST/ADMIN --secret "$2"; }
if as_admin LOCAL/by-handle-net-admin benchsecret >/dev/null; then
  echo "ok: the admin held on Handle.Net created LOCAL/by-handle-net-admin"
else
  echo "FAIL: the right secret was refused"; status=1
fi
out=$(as_admin LOCAL/forged not-the-secret 2>&1) && { echo "FAIL: a wrong secret was accepted"; status=1; }
if [ $status = 0 ] && grep -q "AUTHENTICATION_FAILED (403)" <<<"$out"; then
  echo "ok: a wrong secret is refused with 403"
else
  echo "FAIL: wrong secret: $out"; status=1
fi
[ $status = 0 ] || { echo "--- B's log"; cat "$work/local.err"; }
exit $status
