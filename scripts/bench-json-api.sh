#!/usr/bin/env bash
# GET /api/handles/X on handled vs nginx serving a static file of the same
# size, same box, same run: throughput and p99 (wrk, and `handled bench`),
# server CPU per request from /proc/PID/stat, at several keep-alive
# connection counts; then HTTPS. Servers pinned to CPU 0, load on CPU 1.
# Usage: scripts/bench-json-api.sh [path/to/handled] [seconds]   (needs wrk, nginx)
set -euo pipefail
BIN="$(realpath "${1:-${CARGO_TARGET_DIR:-target}/release/handled}")"
DUR="${2:-5}"
CONNS="${CONNS:-16 64 256}"
WORK="$(mktemp -d)"
trap 'kill ${HPID:-} ${NPID:-} 2>/dev/null || true; rm -rf "$WORK"' EXIT
HZ=$(getconf CLK_TCK)

cpu_ticks() { # utime+stime of a process and its threads
  awk '{print $14+$15}' "/proc/$1/stat"
}

# handled, in memory, one handle to fetch.
cat > "$WORK/h.jsonl" <<'J'
{"handle": "TEST/BENCH", "values": [{"index": 1, "type": "URL", "data": {"format": "string", "value": "https://example.org/some/landing/page"}}, {"index": 2, "type": "EMAIL", "data": {"format": "string", "value": "bench@example.org"}}]}
J
taskset -c 0 "$BIN" serve --ephemeral --port 0 --http-port 0 --import "$WORK/h.jsonl" \
  --admin-credentials "$WORK/admin.json" > "$WORK/h.out" 2> "$WORK/h.err" &
HPID=$!
for _ in $(seq 50); do grep -q ready "$WORK/h.out" 2>/dev/null && break; sleep 0.2; done
HPORT=$(grep -o 'http 127.0.0.1:[0-9]*' "$WORK/h.err" | cut -d: -f2)
HURL="http://127.0.0.1:$HPORT/api/handles/TEST/BENCH"
curl -s "$HURL" > "$WORK/body.json"
SIZE=$(stat -c %s "$WORK/body.json")

# nginx: one worker on CPU 0, the same bytes as a static file.
NPORT=18097
mkdir -p "$WORK/www/api/handles/TEST"
cp "$WORK/body.json" "$WORK/www/api/handles/TEST/BENCH"
cat > "$WORK/nginx.conf" <<N
worker_processes 1;
worker_cpu_affinity 01;
pid $WORK/nginx.pid;
error_log $WORK/nginx.err;
events { worker_connections 4096; }
http {
  access_log off;
  default_type application/json;
  keepalive_requests 100000;
  server { listen 127.0.0.1:$NPORT; root $WORK/www; }
}
N
nginx -c "$WORK/nginx.conf" -g 'daemon off;' &
NPID=$!
sleep 0.5
NWORKER=$(pgrep -P $NPID | head -1)
NURL="http://127.0.0.1:$NPORT/api/handles/TEST/BENCH"

# wrk: "<req/s> <p99 ms>"
run_wrk() { # url conns
  taskset -c 1 wrk -t1 -c"$2" -d"${DUR}s" --latency "$1" > "$WORK/wrk.txt"
  local rps p99 n
  rps=$(awk '/Requests\/sec/ {print $2}' "$WORK/wrk.txt")
  p99=$(awk '$1=="99%" {v=$2; if (v ~ /us$/) {sub(/us/,"",v); v/=1000} else if (v ~ /ms$/) {sub(/ms/,"",v)} else if (v ~ /s$/) {sub(/s/,"",v); v*=1000}; print v}' "$WORK/wrk.txt")
  n=$(awk '/requests in/ {print $1}' "$WORK/wrk.txt")
  echo "$rps $p99 $n"
}

echo "body: $SIZE bytes; ${DUR}s per run; servers on CPU 0, load generator on CPU 1"
printf '%-8s %-6s %5s %12s %9s %14s %9s\n' tool target conns req/s p99_ms req/core-s vs_nginx
for c in $CONNS; do
  for target in nginx handled; do
    if [ $target = nginx ]; then url=$NURL; pid=$NWORKER; else url=$HURL; pid=$HPID; fi
    before=$(cpu_ticks $pid)
    read -r rps p99 n < <(run_wrk "$url" "$c")
    after=$(cpu_ticks $pid)
    cpu=$(( after - before ))
    per=$(awk -v n="$n" -v t="$cpu" -v hz="$HZ" 'BEGIN { if (t > 0) printf "%.0f", n / (t / hz); else print "-" }')
    if [ $target = nginx ]; then nginx_rps=$rps; ratio="-"; else ratio=$(awk -v a="$rps" -v b="$nginx_rps" 'BEGIN { printf "%.0f%%", 100*a/b }'); fi
    printf '%-8s %-6s %5s %12s %9s %14s %9s\n' wrk $target "$c" "$rps" "$p99" "$per" "$ratio"
  done
  # Our own load generator on the JSON API (closed loop, keep-alive).
  before=$(cpu_ticks $HPID)
  taskset -c 1 "$BIN" bench --url "$HURL" -c "$c" -d "$DUR" --json --quiet > "$WORK/bench.json" 2>/dev/null || true
  after=$(cpu_ticks $HPID)
  python3 - "$WORK/bench.json" "$c" $(( after - before )) "$HZ" <<'P'
import json, sys
path, c, ticks, hz = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
try:
    r = json.loads(open(path).read().strip().splitlines()[-1])
except Exception:
    print(f"{'bench':<8} {'handled':<6} {c:>5} {'(no result)':>12}"); sys.exit()
n, rate, p99 = r["ok"], r["throughput"], r["latency_ms"]["p99"]
per = f"{n / (ticks / hz):.0f}" if ticks else "-"
print(f"{'bench':<8} {'handled':<6} {c:>5} {rate:>12.0f} {p99:>9.2f} {per:>14} {'-':>9}  errors={r['errors']} sockets={r['sockets_opened']}")
P
done

echo "HTTPS (same port, self-signed certificate from the server key):"
for c in $CONNS; do
  before=$(cpu_ticks $HPID)
  read -r rps p99 n < <(run_wrk "https://127.0.0.1:$HPORT/api/handles/TEST/BENCH" "$c")
  after=$(cpu_ticks $HPID)
  per=$(awk -v n="$n" -v t="$((after - before))" -v hz="$HZ" 'BEGIN { if (t > 0) printf "%.0f", n / (t / hz); else print "-" }')
  printf '%-8s %-6s %5s %12s %9s %14s %9s\n' wrk https "$c" "$rps" "$p99" "$per" "-"
done
