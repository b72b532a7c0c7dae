# The original Handle.Net 9.0.0 and handled side by side in one loopback-only network
# namespace, for the comparison suites (tests/status-handle, tests/templates). Sourced
# after tests/handle-net-peer.sh has found the harness ($PEER).
#
#   side_by_side NAME HANDLED_PORT HANDLED_HTTP   # own HS_PEER and namespace; cleanup on exit
#   start_original 'LINES'                        # config.dct: LINES after case_sensitive
#   start_handled BIN CONFIG_TOML                 # sets $secret, the bootstrap admin's (300:TEST/ADMIN)

side_by_side() {
  local name=$1
  export HS_PEER=${HS_PEER:-${TMPDIR:-/tmp}/hs-peer-$name}
  export HS_NETNS=${HS_NETNS:-hs$name}
  export HS_HEAP=${HS_HEAP:--Xms256m -Xmx512m}
  HANDLED_PORT=$2
  HANDLED_HTTP=$3
  own_netns=hs$name
  work=$(mktemp -d)
  handled_pid=""
  trap side_by_side_cleanup EXIT
}

side_by_side_cleanup() {
  [ -n "$handled_pid" ] && kill "$handled_pid" 2>/dev/null || true
  "$PEER/stop.sh" >/dev/null 2>&1 || true
  [ "$HS_NETNS" = "$own_netns" ] && ip netns del "$own_netns" 2>/dev/null || true
  rm -rf "$work"
}

start_original() {
  echo "== original: setup, start (HS_PEER=$HS_PEER, netns $HS_NETNS)"
  "$PEER/setup.sh" --force >"$work/setup.log" 2>&1 || { cat "$work/setup.log"; exit 1; }
  local cfg="$HS_PEER/svr/config.dct" lines=${1//$'\n'/\\n}
  sed -i "s|^    \"case_sensitive\" = \"no\"\$|&\\n$lines|" "$cfg"
  grep -qF "$(printf '%s' "$1" | head -1)" "$cfg" || { echo "config.dct edit failed: no case_sensitive line in $cfg" >&2; exit 1; }
  "$PEER/start.sh" >"$work/start.log" 2>&1 || { cat "$work/start.log"; exit 1; }
}

start_handled() {
  local bin=$1
  echo "== handled: in the same namespace on ports $HANDLED_PORT / $HANDLED_HTTP"
  printf '%s\n' "$2" >"$work/handled.toml"
  for port in "$HANDLED_PORT" "$HANDLED_HTTP"; do
    if ip netns exec "$HS_NETNS" python3 -c "import socket; socket.create_connection(('127.0.0.1', $port), 1)" 2>/dev/null; then
      echo "port $port is already taken in netns $HS_NETNS" >&2; exit 1
    fi
  done
  # Started directly (not through a shell function) so that $! is handled itself.
  ip netns exec "$HS_NETNS" "$bin" serve --ephemeral --listen 127.0.0.1 --port "$HANDLED_PORT" --http-port "$HANDLED_HTTP" \
    --prefix TEST --config "$work/handled.toml" --admin-credentials "$work/admin.json" >"$work/handled.out" 2>"$work/handled.err" &
  handled_pid=$!
  for _ in $(seq 100); do
    grep -qx ready "$work/handled.out" 2>/dev/null && break
    kill -0 "$handled_pid" 2>/dev/null || { cat "$work/handled.err"; exit 1; }
    sleep 0.1
  done
  grep -qx ready "$work/handled.out" || { echo "handled did not start:" >&2; cat "$work/handled.err" >&2; exit 1; }
  secret=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["secret_key"]["secret"])' "$work/admin.json")
}
