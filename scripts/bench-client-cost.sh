#!/usr/bin/env bash
# The bench's CPU per request beside the server's, in the same runs: `handled serve` on
# the 10k-handle store, `handled bench` (16 clients, uniform keys) over UDP, TCP
# persistent, the HTTP tunnel and the JSON API, ROUNDS short runs each, alternating;
# the bench's own CPU (getrusage) and the server's (/proc/PID/stat) over the measured
# seconds. Prints a markdown table of medians, with the load average beside each run,
# since CPU per request moves less than throughput on a shared machine.
#
#   scripts/bench-client-cost.sh [DATA_DIR_10K] [seconds per run]   (ROUNDS=5)
#
# BENCH_OPTS adds options to every run (e.g. --async-udp to compare the UDP engines).
set -euo pipefail
cd "$(dirname "$0")/.."
d10k=${1:-${TMPDIR:-/tmp}/handled-bench-10k}
secs=${2:-4}
ROUNDS=${ROUNDS:-5}
bin=${CARGO_TARGET_DIR:-target}/release/handled
[ -x "$bin" ] || cargo build --release -q -p handled
scripts/seed-data.sh "$bin" "$d10k" 10000
port=24651 http=24851
results=$(mktemp)
"$bin" serve --data-dir "$d10k" --port $port --http-port $http > "$results.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; rm -f "$results" "$results.log"' EXIT
until grep -q '^ready$' "$results.log"; do kill -0 $pid 2>/dev/null || { cat "$results.log" >&2; exit 1; }; sleep 0.05; done
for round in $(seq "$ROUNDS"); do
  for t in udp tcp-persistent http json-api; do
    p=$port; case $t in http | json-api) p=$http ;; esac
    # shellcheck disable=SC2086
    "$bin" bench --port $p --transport $t -c 16 -d "$secs" --warmup 1 --key-prefix TEST --keys 10000 \
      --server-pid $pid --json --quiet ${BENCH_OPTS:-} |
      python3 -c 'import json,sys; r=json.load(sys.stdin); r.update(transport=sys.argv[1], load=sys.argv[2]); print(json.dumps(r))' \
        "$t" "$(cut -d' ' -f1 /proc/loadavg)" >> "$results"
  done
done
python3 - "$results" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("| transport | runs | req/s | req per server core-s | req per client core-s | client ÷ server | errors | load (1 min) per run |")
print("|---|---|---|---|---|---|---|---|")
for t in ["udp", "tcp-persistent", "http", "json-api"]:
    g = [r for r in rows if r["transport"] == t]
    if not g:
        continue
    med = lambda k: statistics.median([r[k] for r in g if r.get(k)] or [0])
    ratios = [r["per_client_core_second"] / r["per_server_core_second"] for r in g if r.get("per_server_core_second") and r.get("per_client_core_second")]
    ratio = f"{statistics.median(ratios):.2f} ({min(ratios):.2f}–{max(ratios):.2f})" if ratios else "-"
    errors = sum(sum(r["errors"].values()) for r in g)
    print(f"| {t} | {len(g)} | {med('throughput'):,.0f} | {med('per_server_core_second'):,.0f} | {med('per_client_core_second'):,.0f} | {ratio} | {errors} | {' '.join(r['load'] for r in g)} |")
PY
