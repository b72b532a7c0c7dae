#!/usr/bin/env bash
# Handle proxy redirects: GET /TEST/BENCH (302 to the handle's URL) on handled
# vs nginx answering `return 302` to the same URL, and handled's JSON GET of the
# same handle, same box, same run (wrk, keep-alive); then p99 at half the
# measured redirect rate (open loop, `handled bench --rate`, on
# ?redirectionHeaders: the same work answered with 200, which the bench counts
# as success). Servers pinned to CPU 0, load on CPU 1.
# Usage: scripts/bench-proxy.sh [path/to/handled] [seconds]   (needs wrk, nginx)
set -euo pipefail
BIN="$(realpath "${1:-${CARGO_TARGET_DIR:-target}/release/handled}")"
DUR="${2:-5}"
CONNS="${CONNS:-16 64 256}"
WORK="$(mktemp -d)"
trap 'kill ${HPID:-} ${NPID:-} 2>/dev/null || true; rm -rf "$WORK"' EXIT
HZ=$(getconf CLK_TCK)
TARGET_URL="https://example.org/some/landing/page"

cpu_ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }

cat > "$WORK/h.jsonl" <<J
{"handle": "TEST/BENCH", "values": [{"index": 1, "type": "URL", "data": {"format": "string", "value": "$TARGET_URL"}}, {"index": 2, "type": "EMAIL", "data": {"format": "string", "value": "bench@example.org"}}]}
J
taskset -c 0 "$BIN" serve --ephemeral --port 0 --http-port 0 --import "$WORK/h.jsonl" \
  --admin-credentials "$WORK/admin.json" > "$WORK/h.out" 2> "$WORK/h.err" &
HPID=$!
for _ in $(seq 50); do grep -q ready "$WORK/h.out" 2>/dev/null && break; sleep 0.2; done
HPORT=$(grep -o 'http 127.0.0.1:[0-9]*' "$WORK/h.err" | cut -d: -f2)
HURL="http://127.0.0.1:$HPORT/TEST/BENCH"
curl -s -o /dev/null -w '%{http_code} %{redirect_url}\n' "$HURL"

NPORT=18098
cat > "$WORK/nginx.conf" <<N
worker_processes 1;
worker_cpu_affinity 01;
pid $WORK/nginx.pid;
error_log $WORK/nginx.err;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 100000;
  server { listen 127.0.0.1:$NPORT; location / { return 302 $TARGET_URL; } }
}
N
nginx -c "$WORK/nginx.conf" -g 'daemon off;' &
NPID=$!
sleep 0.5
NWORKER=$(pgrep -P $NPID | head -1)
NURL="http://127.0.0.1:$NPORT/TEST/BENCH"
curl -s -o /dev/null -w '%{http_code} %{redirect_url}\n' "$NURL"

run_wrk() { # url conns -> "<req/s> <p99 ms> <requests> <non-3xx>"
  taskset -c 1 wrk -t1 -c"$2" -d"${DUR}s" --latency "$1" > "$WORK/wrk.txt"
  awk '
    /Requests\/sec/ {rps=$2}
    $1=="99%" {v=$2; if (v ~ /us$/) {sub(/us/,"",v); v/=1000} else if (v ~ /ms$/) {sub(/ms/,"",v)} else if (v ~ /s$/) {sub(/s/,"",v); v*=1000}; p99=v}
    /requests in/ {n=$1}
    /Non-2xx or 3xx/ {bad=$5}
    END {print rps, p99, n, bad+0}' "$WORK/wrk.txt"
}

echo "${DUR}s per run; servers on CPU 0, load generator on CPU 1"
printf '%-22s %5s %10s %8s %12s %9s\n' target conns req/s p99_ms req/core-s vs_nginx
declare -A best
for c in $CONNS; do
  for target in nginx-302 handled-302 handled-json; do
    case $target in
      nginx-302) url=$NURL; pid=$NWORKER ;;
      handled-302) url=$HURL; pid=$HPID ;;
      handled-json) url="http://127.0.0.1:$HPORT/api/handles/TEST/BENCH"; pid=$HPID ;;
    esac
    before=$(cpu_ticks "$pid")
    read -r rps p99 n _ < <(run_wrk "$url" "$c")
    after=$(cpu_ticks "$pid")
    per=$(awk -v n="$n" -v t="$((after - before))" -v hz="$HZ" 'BEGIN { if (t > 0) printf "%.0f", n / (t / hz); else print "-" }')
    if [ $target = nginx-302 ]; then nginx_rps=$rps; ratio="-"; else ratio=$(awk -v a="$rps" -v b="$nginx_rps" 'BEGIN { printf "%.0f%%", 100*a/b }'); fi
    [ $target = handled-302 ] && best[$c]=$rps
    printf '%-22s %5s %10s %8s %12s %9s\n' "$target" "$c" "$rps" "$p99" "$per" "$ratio"
  done
done

echo "open loop at half the wrk redirect rate (handled bench --rate, corrected latency):"
for c in $CONNS; do
  rate=$(awk -v r="${best[$c]}" 'BEGIN { printf "%.0f", r / 2 }')
  taskset -c 1 "$BIN" bench --url "$HURL?redirectionHeaders" -c "$c" -d "$DUR" --rate "$rate" --json --quiet \
    > "$WORK/bench.json" 2>/dev/null || true
  python3 - "$WORK/bench.json" "$c" "$rate" <<'P'
import json, sys
path, c, rate = sys.argv[1:4]
try:
    r = json.loads(open(path).read().strip().splitlines()[-1])
except Exception:
    print(f"conns {c}: no result"); sys.exit()
l = r["latency_ms"]
print(f"conns {c:>4} rate {rate:>6}/s: achieved {r['throughput']:.0f}/s, p50 {l['p50']:.2f} ms, p99 {l['p99']:.2f} ms, errors {r['errors']}")
P
done
