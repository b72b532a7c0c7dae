#!/usr/bin/env bash
# Scaling with cores (Variant's method): the server pinned with `taskset` to 1, 2, 4, …
# cores, `handled bench` pinned to the other cores, resolution of TEST/ADMIN over UDP, TCP
# (a connection per request), the HTTP tunnel and the JSON API; `handled`, then Handle.Net
# 9.0.0 the same way when its harness is there (it runs in a loopback-only network
# namespace and needs root; without it, a line says why it was skipped). One markdown table
# on stdout: req/s, server cores busy, req per server core-second and the bench's own req
# per client core-second, per server and core count.
#
#   scripts/bench-scaling.sh [path/to/handled]     (default $CARGO_TARGET_DIR/release/handled)
#
# CORES="1 2" picks the server core counts (default 1, 2, 4, … up to the machine's cores).
# When the server has every core, the bench cannot have cores of its own: it shares them,
# and the table says so. SECONDS_PER_RUN (default 5, after 2 s of warm-up), CLIENTS (16),
# ROUNDS (1; the table shows the median of the rounds).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$(realpath "${1:-${CARGO_TARGET_DIR:-target}/release/handled}")
SECONDS_PER_RUN=${SECONDS_PER_RUN:-5}
CLIENTS=${CLIENTS:-16}
ROUNDS=${ROUNDS:-1}
ncpu=$(nproc)
if [ -z "${CORES:-}" ]; then
  CORES=
  for ((k = 1; k <= ncpu; k *= 2)); do CORES="$CORES $k"; done
fi
command -v taskset >/dev/null || { echo "taskset not found (util-linux)" >&2; exit 1; }
port=24741 http=24841
work=$(mktemp -d "${TMPDIR:-/tmp}/bench-scaling-XXXXXX")
results=$work/results.jsonl
server_pid=
hn_started=
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
  if [ -n "$hn_started" ]; then "$PEER/stop.sh" >/dev/null 2>&1 || true; ip netns del "$HS_NETNS" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

# server_cpus K / client_cpus K: the CPU lists for a server on K cores.
server_cpus() { echo "0-$(($1 - 1))"; }
client_cpus() { if [ "$1" -lt "$ncpu" ]; then echo "$1-$((ncpu - 1))"; else echo "0-$((ncpu - 1))"; fi; }

# bench SERVER CORES ROUND TRANSPORT PORT PID [prefix command...]: one run, its JSON line tagged.
bench() {
  local server=$1 cores=$2 round=$3 t=$4 p=$5 pid=$6; shift 6
  "$@" taskset -c "$(client_cpus "$cores")" "$BIN" bench --host 127.0.0.1 --port "$p" --transport "$t" \
    --handle TEST/ADMIN -c "$CLIENTS" -d "$SECONDS_PER_RUN" --warmup 2 --server-pid "$pid" --json --quiet |
    python3 -c 'import json,sys; r=json.loads(sys.stdin.read().strip().splitlines()[-1]); r.update(server=sys.argv[1], cores=int(sys.argv[2]), round=int(sys.argv[3]), transport=sys.argv[4], load=sys.argv[5]); print(json.dumps(r))' \
      "$server" "$cores" "$round" "$t" "$(cut -d' ' -f1-3 /proc/loadavg)" >> "$results" || echo "run failed: $server $cores $t" >&2
}

# handled: a fresh data directory (bootstrapped once, unmeasured), then per core count a
# server started under taskset so that its thread pools size to its cores.
"$BIN" serve --data-dir "$work/data" --port $port --http-port $http > "$work/boot.log" 2>&1 &
server_pid=$!
until grep -qs '^ready$' "$work/boot.log"; do kill -0 $server_pid 2>/dev/null || { cat "$work/boot.log" >&2; exit 1; }; sleep 0.05; done
kill $server_pid; wait $server_pid 2>/dev/null || true
server_pid=
for round in $(seq "$ROUNDS"); do
  for k in $CORES; do
    echo "== handled on $k of $ncpu cores (round $round)" >&2
    taskset -c "$(server_cpus "$k")" "$BIN" serve --data-dir "$work/data" --port $port --http-port $http > "$work/serve.log" 2>&1 &
    server_pid=$!
    until grep -qs '^ready$' "$work/serve.log"; do kill -0 $server_pid 2>/dev/null || { cat "$work/serve.log" >&2; exit 1; }; sleep 0.05; done
    for t in udp tcp tcp-persistent http json-api; do
      p=$port; case $t in http | json-api) p=$http ;; esac
      bench handled "$k" "$round" "$t" "$p" "$server_pid"
    done
    kill $server_pid; wait $server_pid 2>/dev/null || true
    server_pid=
  done
done

# Handle.Net 9.0.0, when its harness is here (tests/handle-net-peer.sh finds it).
# In a subshell: a missing harness prints "SKIP …: why" and exits there, not here.
if found=$(. tests/handle-net-peer.sh; require_handle_net_peer bench-scaling java; echo "$PEER"); then
  PEER=$found
  export HS_PEER=$work/hs-peer HS_NETNS=${HS_NETNS:-hsscale}
  # Handle.Net's own launcher gives the JVM 200 MB; a little more room, as bench-vs-handle-net.sh.
  export HS_HEAP=${HS_HEAP:--Xms512m -Xmx512m}
  . "$PEER/env.sh"
  "$PEER/setup.sh" --force > "$work/hn-setup.log" 2>&1 || { cat "$work/hn-setup.log" >&2; exit 1; }
  hn_started=1
  for round in $(seq "$ROUNDS"); do
    for k in $CORES; do
      echo "== Handle.Net 9.0.0 on $k of $ncpu cores (round $round)" >&2
      # The JVM inherits the affinity: its thread pools and GC size to K cores.
      taskset -c "$(server_cpus "$k")" "$PEER/start.sh" > /dev/null
      hn_pid=$(cat "$RUN_DIR/server.pid")
      # The JVM compiles its hot paths first: one unmeasured run per transport.
      for t in udp tcp http json-api; do
        p=$HS_PORT; case $t in http | json-api) p=$HS_HTTP_PORT ;; esac
        in_ns "$BIN" bench --host 127.0.0.1 --port "$p" --transport "$t" --handle TEST/ADMIN -c "$CLIENTS" -d 3 --warmup 0 --json --quiet > /dev/null || true
        bench handle-net "$k" "$round" "$t" "$p" "$hn_pid" in_ns
      done
      "$PEER/stop.sh" > /dev/null
    done
  done
else
  why=${found#SKIP bench-scaling: }
  echo "Handle.Net 9.0.0 skipped: $why" >&2
  echo "{\"skipped\": $(python3 -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$why")}" >> "$results"
fi

python3 - "$results" "$ncpu" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
ncpu = int(sys.argv[2])
skipped = [r["skipped"] for r in rows if "skipped" in r]
runs = [r for r in rows if "transport" in r]
med = lambda v: statistics.median(v) if v else None
print("| server | transport | server cores | bench cores | req/s | server cores busy | req per server core-s | req per client core-s | errors | load (1/5/15 min) |")
print("|---|---|---|---|---|---|---|---|---|---|")
keys = sorted({(r["server"], r["transport"], r["cores"]) for r in runs}, key=lambda k: (k[0] != "handled", k[1], k[2]))
for server, t, k in keys:
    g = [r for r in runs if (r["server"], r["transport"], r["cores"]) == (server, t, k)]
    rate = med([r["throughput"] for r in g])
    busy = med([r["server_cpu_s"] / r["elapsed_s"] for r in g if r.get("server_cpu_s")])
    per = med([r["per_server_core_second"] for r in g if r.get("per_server_core_second")])
    client = med([r["per_client_core_second"] for r in g if r.get("per_client_core_second")])
    errors = sum(sum(r["errors"].values()) for r in g)
    bench = f"{ncpu - k} of their own" if k < ncpu else f"{ncpu}, shared with the server"
    f = lambda v, fmt="{:,.0f}": "-" if v is None else fmt.format(v)
    print(f"| {server} | {t} | {k} | {bench} | {f(rate)} | {f(busy, '{:.2f}')} | {f(per)} | {f(client)} | {errors} | {'; '.join(r['load'] for r in g)} |")
for s in skipped:
    print(f"\nHandle.Net 9.0.0 not measured: {s}")
PY
