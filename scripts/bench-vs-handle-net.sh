#!/usr/bin/env bash
# Head-to-head: Handle.Net 9.0.0 and handled side by side on this box, one after the
# other in the same loopback-only network namespace, same ports, same load tool
# (`handled bench`, 16 clients): start-up of an existing site, RSS at rest, resolution of TEST/ADMIN over
# UDP, TCP (a connection per request, as the Java client does) and the HTTP tunnel,
# durable creates in admin sessions over the HTTP tunnel, RSS after the load.
# ROUNDS alternating rounds (default 2); a markdown table on stdout (BENCHMARKS.md).
#
#   sudo scripts/bench-vs-handle-net.sh [path/to/handled]   (default $CARGO_TARGET_DIR/release/handled)
#
# Needs root (ip netns), Java and the Handle.Net harness (CONTRIBUTING.md, "Tests").
set -euo pipefail
cd "$(dirname "$0")/.."
. tests/skip.sh
. tests/handle-net-peer.sh
require_handle_net_peer bench-vs-handle-net java python3
BIN=$(realpath "${1:-${CARGO_TARGET_DIR:-target}/release/handled}")
ROUNDS=${ROUNDS:-2}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-10}
export HS_PEER=${HS_PEER:-${TMPDIR:-/tmp}/hs-peer-h2h}
export HS_NETNS=${HS_NETNS:-hsh2h}
# Handle.Net's own launcher runs the server with -Xmx200M; a little more room here.
export HS_HEAP=${HS_HEAP:--Xms512m -Xmx512m}
. "$PEER/env.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/h2h-XXXXXX")
results=$work/results.jsonl
server_pid=
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
  "$PEER/stop.sh" >/dev/null 2>&1 || true
  ip netns del "$HS_NETNS" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }

# bench SERVER ROUND WHAT PID ARGS...: one run, its JSON line tagged.
bench() {
  local server=$1 round=$2 what=$3 pid=$4; shift 4
  in_ns "$BIN" bench --host 127.0.0.1 --handle TEST/ADMIN -c 16 -d "$SECONDS_PER_RUN" --warmup 2 \
    --server-pid "$pid" --json --quiet "$@" |
    python3 -c 'import json,sys; r=json.loads(sys.stdin.read().strip().splitlines()[-1]); r.update(server=sys.argv[1], round=int(sys.argv[2]), what=sys.argv[3]); print(json.dumps(r))' \
      "$server" "$round" "$what" >> "$results"
}

measure() {
  local server=$1 round=$2 pid=$3 start_ms=$4 creds=$5
  sleep 2
  echo "{\"server\": \"$server\", \"round\": $round, \"what\": \"start\", \"start_ms\": $start_ms, \"rss_kb\": $(rss_kb "$pid")}" >> "$results"
  bench "$server" "$round" udp "$pid" --transport udp --port "$HS_PORT"
  bench "$server" "$round" tcp "$pid" --transport tcp --port "$HS_PORT"
  bench "$server" "$round" http "$pid" --transport http --port "$HS_HTTP_PORT"
  bench "$server" "$round" create "$pid" --transport http --port "$HS_HTTP_PORT" --ops create --credentials "$creds"
  echo "{\"server\": \"$server\", \"round\": $round, \"what\": \"after\", \"rss_kb\": $(rss_kb "$pid")}" >> "$results"
}

"$PEER/setup.sh" --force > "$work/setup.log" 2>&1 || { cat "$work/setup.log" >&2; exit 1; }
printf '{"handle": "%s", "secret_key": {"index": %s, "secret": "%s"}}\n' \
  "$HS_ADMIN_HANDLE" "$HS_ADMIN_SECKEY_INDEX" "$HS_SECRET" > "$work/hn-admin.json"
# The namespace (start.sh makes it too, but handled starts first): loopback only.
ip netns list | grep -qw "$HS_NETNS" || ip netns add "$HS_NETNS"
ip -n "$HS_NETNS" link set lo up
# handled's first start makes its keys and admin (Handle.Net's setup.sh did that above):
# bootstrap once, unmeasured, so that each round starts an existing site as Handle.Net does.
# start_handled LOG: serve on the data directory in the namespace, logging to LOG;
# returns once it says "ready", with its pid in $started_pid.
start_handled() {
  in_ns "$BIN" serve --data-dir "$work/data" --port "$HS_PORT" --http-port "$HS_HTTP_PORT" > "$1" 2>&1 &
  started_pid=$!
  until grep -q '^ready$' "$1"; do
    kill -0 "$started_pid" 2>/dev/null || { cat "$1" >&2; exit 1; }
    sleep 0.01
  done
}
start_handled "$work/boot.log"
boot=$started_pid
kill "$(pgrep -P "$boot" -x "$(basename "$BIN" | cut -c1-15)" || echo "$boot")"
wait "$boot" 2>/dev/null || true
for round in $(seq "$ROUNDS"); do
  echo "== round $round: Handle.Net 9.0.0" >&2
  started=$("$PEER/start.sh")
  hn_pid=$(cat "$RUN_DIR/server.pid")
  hn_ms=$(printf '%s\n' "$started" | tail -n 1 | python3 -c 'import json,sys; print(json.load(sys.stdin)["startup_ms"])')
  measure handle-net "$round" "$hn_pid" "$hn_ms" "$work/hn-admin.json"
  "$PEER/stop.sh" >/dev/null

  echo "== round $round: handled" >&2
  log=$work/handled.log
  t0=$(date +%s%N)
  start_handled "$log"
  handled_pid=$started_pid
  handled_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  # ip netns exec runs the server as its child: measure the server itself.
  server_pid=$(pgrep -P "$handled_pid" -x "$(basename "$BIN" | cut -c1-15)" || echo "$handled_pid")
  measure handled "$round" "$server_pid" "$handled_ms" "$work/data/admin-TEST.json"
  kill "$server_pid"; wait "$handled_pid" 2>/dev/null || true
  server_pid=
done

python3 - "$results" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for r in rows:
    if isinstance(r.get("errors"), dict):
        r["errors"] = sum(r["errors"].values())
def pick(server, what, key):
    vals = [r[key] for r in rows if r["server"] == server and r["what"] == what and r.get(key) is not None]
    return vals
def span(vals, fmt):
    if not vals: return "-"
    lo, hi = min(vals), max(vals)
    return fmt(lo) if lo == hi else f"{fmt(lo)}–{fmt(hi)}"
n = lambda v: f"{v:,.0f}"
print("| measured | Handle.Net 9.0.0 | handled | handled ÷ Handle.Net (medians) |")
print("|---|---|---|---|")
def line(label, what, key, fmt=n, scale=1.0):
    a = [v * scale for v in pick("handle-net", what, key)]
    b = [v * scale for v in pick("handled", what, key)]
    r = statistics.median(b) / statistics.median(a) if a and b and statistics.median(a) else None
    ratio = "-" if r is None else f"{r:.2f}×" if r < 0.1 else f"{r:.1f}×"
    print(f"| {label} | {span(a, fmt)} | {span(b, fmt)} | {ratio} |")
line("start-up to answering, ms", "start", "start_ms")
line("RSS at rest, MB", "start", "rss_kb", lambda v: f"{v:.0f}", 1 / 1024)
for what, label in [("udp", "UDP"), ("tcp", "TCP, a connection per request"), ("http", "HTTP tunnel")]:
    line(f"resolution over {label}, req/s", what, "throughput")
    line(f"resolution over {label}, req per server core-s", what, "per_server_core_second")
line("durable creates (16 admin sessions, HTTP tunnel), /s", "create", "throughput")
line("errors in the create runs", "create", "errors")
line("RSS after the load, MB", "after", "rss_kb", lambda v: f"{v:.0f}", 1 / 1024)
PY
