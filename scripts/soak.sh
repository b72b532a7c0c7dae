#!/usr/bin/env bash
# Memory soak (issue 5): one server on 1M handles under a steady mixed load
# for SECONDS (default 600): UDP resolution, TCP with a new connection per
# request, the HTTP tunnel with keep-alive, and authenticated admin loops
# (create, resolve, modify, add, remove, delete in DH sessions) — all open loop
# at fixed rates, so the load is the same from start to end. RSS is sampled
# every 10 s (and at rest before and after). Writes docs/charts/soak-rss.svg
# and prints the samples per minute.
#
#   scripts/soak.sh [HANDLED_BINARY] [DATA_DIR] [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-${CARGO_TARGET_DIR:-target}/release/handled}
data=${2:-/tmp/handled-soak-1m}
secs=${3:-600}
port=23671 http=23871
work=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill $p 2>/dev/null || true; done; rm -rf "$work"' EXIT
scripts/seed-data.sh "$bin" "$data" 1000000
# The first start creates TEST/ADMIN and writes its credentials to
# $data/admin-TEST.json (only then: keep the data directory with the file).
"$bin" serve --data-dir "$data" --listen 127.0.0.1 --port $port --http-port $http > "$work/server.log" 2>&1 &
server=$!; pids+=($server)
sleep 1
kill -0 $server 2>/dev/null || { cat "$work/server.log"; exit 1; }
creds="$data/admin-TEST.json"
[ -f "$creds" ] || { echo "no $creds: this data directory's admin credentials are gone; delete $data and rerun" >&2; exit 1; }
rss() { awk '/VmRSS/ {printf "%.1f", $2 / 1024}' /proc/$server/status; }
echo "t_s,rss_mb" > "$work/rss.csv"
echo "0,$(rss)" >> "$work/rss.csv"
echo "at rest: $(rss) MB"
keys=(--key-prefix TEST --keys 1000000 --warmup 0 --quiet --timeout 5)
"$bin" bench --port $port --transport udp "${keys[@]}" -c 16 --rate 5000 -d "$secs" > "$work/udp.txt" &
pids+=($!)
"$bin" bench --port $port --transport tcp "${keys[@]}" -c 8 --rate 500 -d "$secs" > "$work/tcp.txt" &
pids+=($!)
"$bin" bench --port $http --transport http "${keys[@]}" -c 8 --rate 2000 -d "$secs" > "$work/http.txt" &
pids+=($!)
"$bin" bench --port $port --transport tcp-persistent --ops mixed --credentials "$creds" \
  --warmup 0 --quiet -c 4 --rate 300 -d "$secs" > "$work/admin.txt" &
pids+=($!)
for ((t = 10; t <= secs; t += 10)); do
  sleep 10
  echo "$t,$(rss)" >> "$work/rss.csv"
done
wait "${pids[@]:1}" 2>/dev/null || true
sleep 2
echo "$((secs + 2)),$(rss)" >> "$work/rss.csv"
for f in udp tcp http admin; do echo "== $f"; grep -vE "^\s*$" "$work/$f.txt" | tail -3; done
python3 scripts/charts.py rss "$work/rss.csv" "RSS of handled serve over a ${secs} s mixed load, 1M handles" docs/charts/soak-rss.svg
