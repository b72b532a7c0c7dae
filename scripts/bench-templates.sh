#!/usr/bin/env bash
# Template handles beside stored records of the same values (issue 41, S3): the
# Technical Manual's namespace (§11.2) builds TEST/small@box(1,2,3,4) from a
# 2-value base and TEST/big@box(1,2,3,4) from a 2,000-value base; TEST/small-built
# and TEST/big-built hold exactly what those builds answer. Each binary given is
# measured in turn (e.g. before and after a change), same box, same run: req/s and
# requests per server core-second, and the template's cost against the stored
# record's. Server on CPU 0, `handled bench` (8 clients) on CPU 1.
# Usage: scripts/bench-templates.sh [seconds] BIN [BIN ...]
set -euo pipefail
DUR=${1:-5}; shift
[ $# -gt 0 ] || { echo "usage: $0 [seconds] BIN [BIN ...]" >&2; exit 2; }
WORK=$(mktemp -d)
trap 'kill ${HPID:-} 2>/dev/null || true; rm -rf "$WORK"' EXIT
HZ=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }

python3 - "$WORK" "$(dirname "$0")/../tests/templates/manual-namespace.xml" <<'P'
import json, sys
work = sys.argv[1]
namespace = open(sys.argv[2]).read().strip()
def v(i, t, d):
    return {"index": i, "type": t, "data": {"format": "string", "value": d}}
small = [v(1, "URL", "https://example.org/data/abc"), v(2, "EMAIL", "contact@example.org")]
big = [v(i, "URL", f"https://example.org/data/item{i}") for i in range(1, 2001)]
def built(values):
    return [dict(x, data={"format": "string", "value": x["data"]["value"] + "?wh=4&ww=3&wy=2&wx=1"})
            if x["type"] == "URL" else x for x in values]
with open(f"{work}/records.jsonl", "w") as f:
    for h, values in [("TEST/small", small), ("TEST/small-built", built(small)),
                      ("TEST/big", big), ("TEST/big-built", built(big))]:
        f.write(json.dumps({"handle": h, "values": values}) + "\n")
with open(f"{work}/config.toml", "w") as f:
    f.write("[templates]\nnamespace = " + json.dumps(namespace) + "\n")
P

# One run: "<req/s> <req per core-s> <p99 ms>".
run() { # bin transport handle
  local before after
  before=$(cpu_ticks "$HPID")
  taskset -c 1 "$1" bench --port "$NPORT" --transport "$2" --handle "$3" -c 8 -d "$DUR" --json --quiet \
    > "$WORK/bench.json" 2>/dev/null || true
  after=$(cpu_ticks "$HPID")
  python3 - "$WORK/bench.json" $((after - before)) "$HZ" <<'P'
import json, sys
try:
    r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
except Exception:
    print("- - -"); sys.exit()
ticks, hz = int(sys.argv[2]), int(sys.argv[3])
per = f"{r['ok'] / (ticks / hz):.0f}" if ticks else "-"
errors = r["errors"]
errors = sum(errors.values()) if isinstance(errors, dict) else errors
print(f"{r['throughput']:.0f} {per} {r['latency_ms']['p99']:.2f} {errors}")
P
}

echo "${DUR}s per run; server on CPU 0, 8 bench clients on CPU 1"
printf '%-28s %-15s %-22s %10s %12s %8s %7s %9s\n' binary transport handle req/s req/core-s p99_ms errors vs_stored
for bin in "$@"; do
  bin=$(realpath "$bin")
  taskset -c 0 "$bin" serve --ephemeral --config "$WORK/config.toml" --port 0 --http-port 0 \
    --import "$WORK/records.jsonl" > "$WORK/h.out" 2> "$WORK/h.err" &
  HPID=$!
  for _ in $(seq 300); do grep -q ready "$WORK/h.out" 2>/dev/null && break; sleep 0.2; done
  grep -q ready "$WORK/h.out" || { echo "$bin did not start:" >&2; cat "$WORK/h.err" >&2; exit 1; }
  NPORT=$(grep -o 'tcp 127.0.0.1:[0-9]*' "$WORK/h.err" | head -1 | cut -d: -f2)
  label=$(basename "$(dirname "$bin")")/$(basename "$bin")
  for pair in "udp small" "tcp-persistent big"; do
    read -r transport name <<< "$pair"
    read -r s_rps s_per s_p99 s_err < <(run "$bin" "$transport" "TEST/$name-built")
    read -r t_rps t_per t_p99 t_err < <(run "$bin" "$transport" "TEST/$name@box(1,2,3,4)")
    ratio=$(awk -v a="$t_per" -v b="$s_per" 'BEGIN { if (b > 0 && a > 0) printf "%.2f", a / b; else print "-" }')
    printf '%-28s %-15s %-22s %10s %12s %8s %7s %9s\n' "$label" "$transport" "TEST/$name-built" "$s_rps" "$s_per" "$s_p99" "$s_err" "-"
    printf '%-28s %-15s %-22s %10s %12s %8s %7s %9s\n' "$label" "$transport" "TEST/$name@box(...)" "$t_rps" "$t_per" "$t_p99" "$t_err" "$ratio"
  done
  kill "$HPID"; wait "$HPID" 2>/dev/null || true
done
