#!/usr/bin/env bash
# TCP with a connection per request (issue 46): `handled`, Handle.Net 9.0.0 and the echo
# references alternating in one loopback-only network namespace, same port, same load
# (`handled bench --transport tcp -c 16`, `--raw` for the echoes, which count a reply
# when it carries the request's id). Which candidate is fastest is the TCP "ceiling";
# each candidate's req/s and req per server core-second, medians over ROUNDS, and the
# ratio of each median to the fastest one. On a shared box read the ratios, not the rates.
#
#   sudo scripts/bench-tcp-ceiling.sh [candidate ...]
#
# A candidate is handle-net, echo (crates/server/examples/echo_reference.rs: tokio, the
# server's own listener), epoll (crates/server/examples/tcp_echo_epoll.rs: no runtime, a
# thread and SO_REUSEPORT listener per core), or NAME=path/to/handled (default:
# handled=$CARGO_TARGET_DIR/release/handled), NAME=path/to/echo_reference or
# NAME=path/to/tcp_echo_epoll (other builds of the echoes). Default: handle-net echo epoll handled.
# nginx's stream module is no candidate: without njs it cannot send back anything of the
# request (`return` writes a fixed string and closes unread), so it does less than an echo
# and its replies fail the request-id check. ROUNDS (default 3), SECONDS_PER_RUN
# (default 8), EPOLL_THREADS (the epoll echo's threads; default one per core). The
# echoes: `cargo build --release -p handled-server --examples`. Each run's JSON line is
# also appended to ${TMPDIR:-/tmp}/tcp-ceiling-last.jsonl (kept if the script stops).
# Needs root (ip netns), Java and the Handle.Net harness (CONTRIBUTING.md, "Tests").
set -euo pipefail
cd "$(dirname "$0")/.."
. tests/skip.sh
. tests/handle-net-peer.sh
require_handle_net_peer bench-tcp-ceiling java python3
T=${CARGO_TARGET_DIR:-target}
BENCH=$(realpath "$T/release/handled")
ROUNDS=${ROUNDS:-3}
EPOLL_THREADS=${EPOLL_THREADS:-} # threads of the epoll echo (default: one per core)
SECONDS_PER_RUN=${SECONDS_PER_RUN:-8}
export HS_PEER=${HS_PEER:-${TMPDIR:-/tmp}/hs-peer-ceiling}
export HS_NETNS=${HS_NETNS:-hsceiling}
export HS_HEAP=${HS_HEAP:--Xms512m -Xmx512m}
. "$PEER/env.sh"
[ $# -gt 0 ] || set -- handle-net echo epoll "handled=$BENCH"
work=$(mktemp -d "${TMPDIR:-/tmp}/tcp-ceiling-XXXXXX")
results=$work/results.jsonl
pid=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
  "$PEER/stop.sh" >/dev/null 2>&1 || true
  ip netns del "$HS_NETNS" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# wait_ready LOG PID: until the server's log says "ready".
wait_ready() {
  until grep -q '^ready$' "$1"; do
    kill -0 "$2" 2>/dev/null || { cat "$1" >&2; exit 1; }
    sleep 0.02
  done
}

# start CANDIDATE: the server, its pid in $pid (the process itself, not ip netns exec).
start() {
  local log
  log=$(mktemp "$work/server-XXXXXX.log") # a fresh log: an old "ready" must not count
  case $1 in
    handle-net) "$PEER/start.sh" > /dev/null; pid=$(cat "$RUN_DIR/server.pid"); return ;;
    echo) in_ns "$T/release/examples/echo_reference" 127.0.0.1 "$HS_PORT" "$HS_HTTP_PORT" > "$log" 2>&1 & ;;
    epoll) in_ns "$T/release/examples/tcp_echo_epoll" 127.0.0.1 "$HS_PORT" $EPOLL_THREADS > "$log" 2>&1 & ;;
    *=*/echo_reference) in_ns "${1#*=}" 127.0.0.1 "$HS_PORT" "$HS_HTTP_PORT" > "$log" 2>&1 & ;;
    *=*/tcp_echo_epoll) in_ns "${1#*=}" 127.0.0.1 "$HS_PORT" $EPOLL_THREADS > "$log" 2>&1 & ;;
    *=*) in_ns "${1#*=}" serve --data-dir "$work/data-${1%%=*}" --port "$HS_PORT" --http-port "$HS_HTTP_PORT" > "$log" 2>&1 & ;;
  esac
  local launcher=$!
  wait_ready "$log" "$launcher"
  # The process that listens (not the shell or ip netns exec that started it).
  pid=
  until [ -n "$pid" ]; do
    pid=$(in_ns ss -Htlnp "sport = :$HS_PORT" | grep -o 'pid=[0-9]*' | head -n 1 | cut -d= -f2 || true)
  done
}

stop() {
  if [ "$1" = handle-net ]; then "$PEER/stop.sh" > /dev/null; else kill "$pid"; wait 2>/dev/null || true; fi
  # The next candidate binds the same ports: until nothing listens there any more.
  while in_ns ss -Htln "sport = :$HS_PORT" | grep -q .; do sleep 0.05; done
  pid=
}

run() { # CANDIDATE ROUND SECONDS
  local raw=()
  case $1 in echo | epoll | *=*/echo_reference | *=*/tcp_echo_epoll) raw=(--raw) ;; esac
  in_ns "$BENCH" bench --host 127.0.0.1 --handle TEST/ADMIN -c 16 -d "$3" --warmup 2 --server-pid "$pid" \
    --json --quiet --transport tcp --port "$HS_PORT" "${raw[@]}" | tail -n 1 |
    python3 -c 'import json,sys; r=json.loads(sys.stdin.read()); r.update(server=sys.argv[1], round=int(sys.argv[2]), load=open("/proc/loadavg").read().split()[0]); print(json.dumps(r))' \
      "${1%%=*}" "$2"
}

"$PEER/setup.sh" --force > "$work/setup.log" 2>&1 || { cat "$work/setup.log" >&2; exit 1; }
ip netns list | grep -qw "$HS_NETNS" || ip netns add "$HS_NETNS"
ip -n "$HS_NETNS" link set lo up
for round in $(seq "$ROUNDS"); do
  for c in "$@"; do
    echo "== round $round: ${c%%=*} (load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
    start "$c"
    run "$c" "$round" 4 > /dev/null # warm-up (Handle.Net's JIT, handled's first bootstrap)
    run "$c" "$round" "$SECONDS_PER_RUN" | tee -a "${TMPDIR:-/tmp}/tcp-ceiling-last.jsonl" >> "$results"
    stop "$c"
  done
done

python3 - "$results" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
names = list(dict.fromkeys(r["server"] for r in rows))
med = lambda n, k: statistics.median([r.get(k) or 0 for r in rows if r["server"] == n])
best = max(names, key=lambda n: med(n, "throughput"))
print(f"| candidate | req/s, each round | median | ÷ fastest ({best}) | req per server core-s (median) | errors | load average |")
print("|---|---|---|---|---|---|---|")
for n in names:
    rs = [r for r in rows if r["server"] == n]
    errs = sum(sum(r["errors"].values()) if isinstance(r.get("errors"), dict) else (r.get("errors") or 0) for r in rs)
    each = " / ".join(format(r["throughput"], ",.0f") for r in rs)
    print(f"| {n} | {each} | {med(n, 'throughput'):,.0f} | "
          f"{med(n, 'throughput') / med(best, 'throughput'):.2f} | {med(n, 'per_server_core_second'):,.0f} | {errs} | "
          + " / ".join(r["load"] for r in rs) + " |")
PY
