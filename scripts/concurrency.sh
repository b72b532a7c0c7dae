#!/usr/bin/env bash
# Throughput and latency against concurrency (1 to 32 clients) for UDP
# resolution over 100,000 handles (uniformly random keys), with the record
# cache off (the default) and on (64 MiB: every record fits), client and
# server sharing this box's cores. Writes docs/charts/concurrency-udp.svg and
# prints a markdown table.
#
#   scripts/concurrency.sh [HANDLED_BINARY] [DATA_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-${CARGO_TARGET_DIR:-target}/release/handled}
data=${2:-/tmp/handled-bench-100k}
port=23661 http=23861
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
scripts/seed-data.sh "$bin" "$data" 100000
runs=()
for mode in uncached cached; do
  mb=0; [ $mode = cached ] && mb=64
  echo "cache_mb = $mb" > "$work/$mode.toml"
  "$bin" serve --data-dir "$data" --config "$work/$mode.toml" --listen 127.0.0.1 --port $port --http-port $http \
    > "$work/server.log" 2>&1 &
  server=$!
  sleep 1
  kill -0 $server 2>/dev/null || { cat "$work/server.log"; exit 1; }
  "$bin" bench --port $port --transport udp --key-prefix TEST --keys 100000 --concurrency-sweep 1,2,4,8,16,32 \
    -d 5 --warmup 1 --server-pid $server --json --quiet > "$work/$mode.jsonl"
  kill $server; wait $server 2>/dev/null || true
  runs+=("$mode (cache_mb=$mb)=$work/$mode.jsonl")
done
python3 scripts/charts.py concurrency "UDP resolution, 100k handles, uniform keys: record cache off vs on" \
  docs/charts/concurrency-udp.svg "${runs[@]}"
