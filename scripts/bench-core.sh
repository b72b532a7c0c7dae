#!/usr/bin/env bash
# Resolution throughput and server CPU per request over UDP, TCP and the HTTP
# tunnel, for `handled` and for the echo references (same listeners, no protocol
# work; measured with `handled bench --raw`, which counts replies carrying the
# request's id), measured in one run on this box, with the bench's own CPU per
# request beside the server's. Prints a markdown table.
#
#   scripts/bench-core.sh [DATA_DIR_10K] [DATA_DIR_1M] [seconds per run]
# Data dirs come from `handled import` (see BENCHMARKS.md); missing ones are made.
set -euo pipefail
cd "$(dirname "$0")/.."
d10k=${1:-/tmp/handled-bench-10k}
d1m=${2:-/tmp/handled-bench-1m}
secs=${3:-5}
target=${CARGO_TARGET_DIR:-target}
cargo build --release -q -p handled -p handled-server --examples
bin=$target/release/handled
echo_bin=$target/release/examples/echo_reference
port=24641 http=24800 eport=24700 ehttp=24900

make_data() { scripts/seed-data.sh "$bin" "$1" "$2"; }
make_data "$d10k" 10000
make_data "$d1m" 1000000

results=$(mktemp)
bench() { # label pid port transport keys [bench options]
  local label=$1 pid=$2 p=$3 t=$4 keys=$5; shift 5
  "$bin" bench --port "$p" --transport "$t" -c 16 -d "$secs" --warmup 2 --key-prefix TEST --keys "$keys" --server-pid "$pid" --json "$@" 2>/dev/null \
    | python3 -c "import json,sys; r=json.load(sys.stdin); r['label']='$label'; r['protocol']='$t'; print(json.dumps(r))" >> "$results" || true
}
serve() { # data dir
  "$bin" serve --data-dir "$1" --port $port --http-port $http > /dev/null 2>&1 &
  sleep 0.7; echo $!
}

"$echo_bin" 127.0.0.1 $eport $ehttp > /dev/null &
epid=$!
trap 'kill $epid 2>/dev/null || true' EXIT
sleep 0.5
for keys in 10000 1000000; do
  dir=$d10k; [ $keys = 1000000 ] && dir=$d1m
  pid=$(serve "$dir")
  rss_rest=$(awk '/VmRSS/ {print $2}' /proc/$pid/status)
  for t in udp tcp tcp-persistent http; do
    p=$port; [ $t = http ] && p=$http
    bench "handled $keys" "$pid" $p $t $keys
    if [ $keys = 10000 ]; then
      ep=$eport; [ $t = http ] && ep=$ehttp
      bench "echo" "$epid" $ep $t $keys --raw
    fi
  done
  rss_load=$(awk '/VmRSS/ {print $2}' /proc/$pid/status)
  echo "{\"label\":\"rss $keys\",\"rest_kb\":$rss_rest,\"load_kb\":$rss_load}" >> "$results"
  kill $pid; wait $pid 2>/dev/null || true
done
python3 - "$results" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
runs = [r for r in rows if 'protocol' in r]
print("| transport | server | req/s | p50 ms | p99 ms | req per server core-s | vs echo | req per client core-s | client ÷ server |")
print("|---|---|---|---|---|---|---|---|---|")
echo = {r['protocol']: r.get('per_server_core_second') or 0 for r in runs if r['label'] == 'echo'}
for r in runs:
    per = r.get('per_server_core_second') or 0
    ratio = f"{per / echo[r['protocol']]:.0%}" if r['label'] != 'echo' and echo.get(r['protocol']) else ""
    errs = sum(r['errors'].values())
    note = f" ({errs} errors)" if errs else ""
    client = r.get('per_client_core_second') or 0
    cost = f"{client / per:.2f}" if per and client else ""
    lat = f"| {r['latency_ms']['p50']:.3f} | {r['latency_ms']['p99']:.3f} |"
    print(f"| {r['protocol']} | {r['label']}{note} | {r['throughput']:.0f} {lat} {per:.0f} | {ratio} | {client:.0f} | {cost} |")
for r in rows:
    if r['label'].startswith('rss'):
        print(f"\n{r['label'].split()[1]} handles: RSS {r['rest_kb']/1024:.1f} MB at rest, {r['load_kb']/1024:.1f} MB after the runs", end="")
print()
PY
