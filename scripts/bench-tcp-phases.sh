#!/usr/bin/env bash
# Where a connection's time goes, TCP with a connection per request (issue 46), for
# Handle.Net 9.0.0 and `handled`, one after the other in one loopback-only network
# namespace, same `handled bench` load (16 clients): req/s, server CPU and context
# switches per request (perf stat on the server and on the whole box), idle and softirq
# share of the box, and per-connection phases from one short trace of socket state
# changes and the server's syscalls (scripts/tcp-phases.py; tracing slows both servers,
# so read its phases side by side, not as absolute times).
#
#   sudo scripts/bench-tcp-phases.sh [path/to/handled]   (default $CARGO_TARGET_DIR/release/handled)
#
# Needs root (ip netns, perf), perf, Java and the Handle.Net harness (CONTRIBUTING.md, "Tests").
set -euo pipefail
cd "$(dirname "$0")/.."
. tests/skip.sh
. tests/handle-net-peer.sh
require_handle_net_peer bench-tcp-phases java python3 perf
BIN=$(realpath "${1:-${CARGO_TARGET_DIR:-target}/release/handled}")
export HS_PEER=${HS_PEER:-${TMPDIR:-/tmp}/hs-peer-phases}
export HS_NETNS=${HS_NETNS:-hsphases}
export HS_HEAP=${HS_HEAP:--Xms512m -Xmx512m}
. "$PEER/env.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/tcp-phases-XXXXXX")
server_pid=
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
  "$PEER/stop.sh" >/dev/null 2>&1 || true
  ip netns del "$HS_NETNS" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

bench() { # SECONDS: one run against the server, its JSON line
  in_ns "$BIN" bench --host 127.0.0.1 --handle TEST/ADMIN -c 16 -d "$1" --warmup 2 --server-pid "$server_pid" \
    --json --quiet --transport tcp --port "$HS_PORT" | tail -n 1
}

# measure NAME: the figures of the server at $server_pid.
measure() {
  local name=$1 out=$work/$1; mkdir -p "$out"
  bench 6 > /dev/null # warm-up (Handle.Net's JIT)
  bench 8 > "$out/bench.json" & local b=$!
  sleep 2.5
  perf stat -x, -p "$server_pid" -e context-switches,task-clock -o "$out/server.txt" -- sleep 5 & local p1=$!
  perf stat -x, -a -e context-switches -o "$out/box.txt" -- sleep 5 & local p2=$!
  head -n 1 /proc/stat > "$out/cpu0"; sleep 5; head -n 1 /proc/stat > "$out/cpu1"
  wait "$b" "$p1" "$p2"
  bench 6 > "$out/bench-trace.json" & b=$!
  sleep 3
  perf record -a -m 4096 -o "$out/trace.data" -e sock:inet_sock_set_state -e 'syscalls:sys_exit_accept*' \
    -e syscalls:sys_enter_read -e syscalls:sys_exit_read -e syscalls:sys_enter_recvfrom -e syscalls:sys_exit_recvfrom \
    -e syscalls:sys_enter_write -e syscalls:sys_exit_write -e syscalls:sys_enter_sendto -e syscalls:sys_exit_sendto \
    -e syscalls:sys_enter_close -- sleep 1.5 > /dev/null 2>&1
  wait "$b"
  python3 - "$name" "$out" <<'PY'
import json, sys
name, o = sys.argv[1:]
b = json.loads(open(o + '/bench.json').read())
def stat(f):
    d = {}
    for l in open(f):
        p = l.strip().split(',')
        if len(p) > 3 and p[0][:1].isdigit(): d[p[2]] = float(p[0])
    return d
s, a = stat(o + '/server.txt'), stat(o + '/box.txt')
c0 = list(map(int, open(o + '/cpu0').read().split()[1:])); c1 = list(map(int, open(o + '/cpu1').read().split()[1:]))
d = [y - x for x, y in zip(c0, c1)]; tot = sum(d)
n = b['throughput'] * 5
print(f"{name}: {b['throughput']:,.0f} req/s; server {s.get('task-clock', 0) * 1e3 / n:.1f} µs CPU and "
      f"{s.get('context-switches', 0) / n:.2f} context switches per request; box {a.get('context-switches', 0) / n:.2f} "
      f"context switches per request, idle {(d[3] + d[4]) / tot:.1%}, softirq {d[6] / tot:.1%}; "
      f"p50 {b['latency_ms']['p50']} ms, p99 {b['latency_ms']['p99']} ms; "
      f"req per client core-s {b.get('per_client_core_second') or 0:,.0f}")
PY
  perf script -F comm,pid,tid,cpu,time,event,trace -i "$out/trace.data" 2>/dev/null | python3 scripts/tcp-phases.py "$server_pid" "$HS_PORT"
  rm -f "$out/trace.data"
}

"$PEER/setup.sh" --force > "$work/setup.log" 2>&1 || { cat "$work/setup.log" >&2; exit 1; }
ip netns list | grep -qw "$HS_NETNS" || ip netns add "$HS_NETNS"
ip -n "$HS_NETNS" link set lo up

"$PEER/start.sh" > /dev/null
server_pid=$(cat "$RUN_DIR/server.pid")
measure "Handle.Net 9.0.0"
"$PEER/stop.sh" > /dev/null
server_pid=

in_ns "$BIN" serve --data-dir "$work/data" --port "$HS_PORT" --http-port "$HS_HTTP_PORT" > "$work/handled.log" 2>&1 &
until grep -q '^ready$' "$work/handled.log"; do sleep 0.05; done
# ip netns exec runs the server as its child: measure the server itself.
server_pid=$(pgrep -f "^$BIN serve --data-dir $work/data" | head -n 1)
measure handled
