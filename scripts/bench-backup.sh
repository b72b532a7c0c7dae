#!/usr/bin/env bash
# Read and write latency of a live server with and without `handled backup`
# running (BENCHMARKS.md, "Backup while serving"). Loopback only.
#
#   cargo build --release -p handled
#   [RATES="8 32 0"] scripts/bench-backup.sh [HANDLES] [SECONDS] [ROUNDS]
#
# Loads HANDLES handles (TEST/0 ..) into a fresh data directory, starts the
# server, then per round runs for SECONDS: resolves over UDP (4 clients, keys
# uniform over the loaded handles) and authenticated creates over TCP (4
# clients) at the same time: alone, then while backups run back to back at each
# of RATES (--max-rate-mib; 8 is the default, 0 unlimited).
set -euo pipefail
HANDLES=${1:-200000}
SECONDS_PER_RUN=${2:-20}
ROUNDS=${3:-2}
BIN=${HANDLED:-${CARGO_TARGET_DIR:-target}/release/handled}
DIR=$(mktemp -d /tmp/bench-backup.XXXXXX)
NATIVE=24641
HTTP=24800
trap 'kill $SERVER 2>/dev/null || true; rm -rf "$DIR"' EXIT

python3 - "$HANDLES" > "$DIR/load.jsonl" <<'EOF'
import json, sys
pad = "x" * 150
for i in range(int(sys.argv[1])):
    value = {"format": "string", "value": f"https://example.org/{i}/{pad}"}
    print(json.dumps({"handle": f"TEST/{i}", "values": [{"index": 1, "type": "URL", "data": value}]}))
EOF
"$BIN" import "$DIR/load.jsonl" --data-dir "$DIR/data" >/dev/null 2>&1
rm "$DIR/load.jsonl"
printf 'server_admins = ["300:TEST/ADMIN"]\n' > "$DIR/handled.toml"
"$BIN" serve --config "$DIR/handled.toml" --data-dir "$DIR/data" --listen 127.0.0.1 --port $NATIVE \
    --http-port $HTTP --prefix TEST --admin-credentials "$DIR/admin.json" > "$DIR/serve.out" 2> "$DIR/serve.err" &
SERVER=$!
for _ in $(seq 50); do grep -q ready "$DIR/serve.out" 2>/dev/null && break; sleep 0.2; done
echo "store: $(du -h "$DIR/data/handles.redb" | cut -f1), $HANDLES handles; load average $(cut -d' ' -f1-3 /proc/loadavg)"

run() { # label, with_backup, backup arguments
    local label=$1 with_backup=$2 pids=()
    shift 2
    "$BIN" bench --host 127.0.0.1 --port $NATIVE --transport udp --key-prefix TEST --keys "$HANDLES" \
        --ops resolve -c 4 -d "$SECONDS_PER_RUN" --quiet --label "reads, $label" > "$DIR/reads.txt" 2>&1 &
    pids+=($!)
    "$BIN" bench --host 127.0.0.1 --port $NATIVE --transport tcp-persistent --credentials "$DIR/admin.json" \
        --ops create -c 4 -d "$SECONDS_PER_RUN" --quiet --label "writes, $label" > "$DIR/writes.txt" 2>&1 &
    pids+=($!)
    local backups=0 started=$SECONDS
    if [ "$with_backup" = 1 ]; then
        sleep 1 # the benches' warm-up
        while [ $((SECONDS - started)) -lt "$SECONDS_PER_RUN" ]; do
            /usr/bin/time -f "backup: %e s wall, %M KiB client RSS" "$BIN" backup "$DIR/backup.hbk" --force \
                --http-port $HTTP --credentials "$DIR/admin.json" --insecure "$@" 2>> "$DIR/backups.txt"
            backups=$((backups + 1))
        done
    fi
    wait "${pids[@]}"
    cat "$DIR/reads.txt" "$DIR/writes.txt"
    if [ "$with_backup" = 1 ]; then
        echo "$backups backups of $(du -h "$DIR/backup.hbk" | cut -f1) during the run:"
        grep -E "^backup" "$DIR/backups.txt" | tail -n 4
        : > "$DIR/backups.txt"
    fi
    echo "server RSS $(ps -o rss= -p $SERVER) KiB, store file $(du -h "$DIR/data/handles.redb" | cut -f1)"
}

for r in $(seq "$ROUNDS"); do
    run "no backup (round $r)" 0
    for rate in ${RATES:-8 32 0}; do
        run "backups at --max-rate-mib $rate (round $r)" 1 --max-rate-mib "$rate"
    done
done
