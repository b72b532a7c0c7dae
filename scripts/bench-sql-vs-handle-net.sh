#!/usr/bin/env bash
# Issue 26's side-by-side: Handle.Net 9.0.0 on PostgreSQL (storage_type = "sql") against
# handled on the same PostgreSQL (store = "sql"), and handled on its embedded store, one
# after the other in one loopback-only network namespace, same ports, same load tool
# (`handled bench`, 16 clients), PostgreSQL's own CPU counted (`--db-pid`: the postmaster
# and its per-connection backends):
# - resolution over UDP, TCP (a connection per request, as the Java client does) and the
#   JSON API over HTTPS, uniform over N handles (TEST/0 .. TEST/N-1, a URL and an EMAIL
#   each, the rows written with plain SQL as a depositing application would);
# - UDP and JSON p99 in an open loop at half of the peak just measured;
# - durable creates (16 admin sessions over the HTTP tunnel, PostgreSQL with fsync and
#   synchronous_commit on, as installed).
# ROUNDS alternating rounds (default 2); a markdown table on stdout (BENCHMARKS.md).
# SERVERS chooses among "handle-net handled-sql handled-embedded" (default: all three);
# SQL_SETTINGS adds lines to handled's [sql] table (e.g. "read_statements = 16").
#
#   sudo scripts/bench-sql-vs-handle-net.sh [path/to/handled]   (default $CARGO_TARGET_DIR/release/handled)
#
# Needs root (ip netns, runuser), Java, PostgreSQL's binaries, the JDBC driver (fetched with
# Maven when missing) and the Handle.Net harness; skips (exit 77) saying which is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
. tests/skip.sh
. tests/handle-net-peer.sh
SUITE=bench-sql-vs-handle-net
require_handle_net_peer "$SUITE" java python3 runuser
BIN=$(realpath "${1:-${CARGO_TARGET_DIR:-target}/release/handled}")
[ -x "$BIN" ] || { echo "no handled binary at $BIN" >&2; exit 2; }
ROUNDS=${ROUNDS:-2}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-10}
KEYS=${KEYS:-10000}
DB=postgres
# Durable, as a production database runs; a little more cache than the tests' 32 MB.
PG_SETTINGS=${PG_SETTINGS:--c shared_buffers=128MB -c max_connections=200}
. tests/sql-handle-net/db-postgres.sh
. tests/sql-handle-net/handle-net-on-sql.sh
require_database_and_driver

export HS_NETNS=${HS_NETNS:-hsbsql}
export HS_HEAP=${HS_HEAP:--Xms512m -Xmx512m}
export HS_PORT=2641 HS_HTTP_PORT=8000
WORK=$(mktemp -d "${TMPDIR:-/tmp}/bench-sql-XXXXXX")
chmod 755 "$WORK"
export HS_PEER="$WORK/hn"
results=$WORK/results.jsonl
server_pid=
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null || true
  "$PEER/stop.sh" >/dev/null 2>&1 || true
  db_stop
  ip netns del "$HS_NETNS" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
log() { echo "== $*" >&2; }
die() { echo "FAIL: $*" >&2; exit 1; }
in_ns() { ip netns exec "$HS_NETNS" "$@"; }

ip netns list | grep -qw "$HS_NETNS" || ip netns add "$HS_NETNS"
ip -n "$HS_NETNS" link set lo up
db_start >&2
db_tables
handle_net_on_sql >&2
PG_PID=$(head -1 "$WORK/pg/data/postmaster.pid")

# The rows bulk-loaded with COPY, as an operator loads a large registry: the indexes
# dropped, the rows copied in, the indexes made again (the §8.2 layout, bytea names).
log "$KEYS handles loaded with COPY (TEST/0 .. TEST/$((KEYS - 1)), the values scripts/seed-data.sh makes)"
before=$(sql_as handleserver "select count(*) from handles")
sql_as handleserver "alter table handles drop constraint handles_pkey; drop index dataindex; drop index handleindex;" >/dev/null
python3 -c '
import sys
hx = lambda s: "\\\\x" + s.encode().hex()
out = sys.stdout
for i in range(int(sys.argv[1])):
    h = hx("TEST/%d" % i)
    out.write("%s\t1\t%s\t%s\t0\t86400\t1700000000\t\tt\tt\tt\tf\n" % (h, hx("URL"), hx("https://example.org/objects/%d" % i)))
    out.write("%s\t2\t%s\t%s\t0\t86400\t1700000000\t\tt\tt\tt\tf\n" % (h, hx("EMAIL"), hx("owner%d@example.org" % (i % 977))))
' "$KEYS" | sql_as handleserver "copy handles from stdin" >/dev/null
sql_as handleserver "set maintenance_work_mem = '1GB'; alter table handles add primary key (handle, idx);
  create index dataindex on handles ( data ); create index handleindex on handles ( handle ); analyze handles;" >/dev/null
rows=$(( $(sql_as handleserver "select count(*) from handles") - before ))
[ "$rows" = $((2 * KEYS)) ] || die "COPY loaded $rows rows, not $((2 * KEYS))"
printf '{"handle": "TEST/ADMIN", "secret_key": {"index": 301, "secret": "benchsecret"}}\n' >"$WORK/sql-admin.json"
cat >"$WORK/handled-sql.toml" <<TOML
server_admins = ["300:TEST/ADMIN", "301:TEST/ADMIN"]
store = "sql"
[sql]
url = "$HANDLED_URL"
create_schema = true
${SQL_SETTINGS:-}
TOML
mkdir -p "$WORK/sql-data" "$WORK/embedded"
"$REPO/scripts/seed-data.sh" "$BIN" "$WORK/embedded" "$KEYS" 2>/dev/null

# bench SERVER ROUND WHAT PID ARGS...: one run, its JSON line tagged.
bench() {
  local server=$1 round=$2 what=$3 pid=$4; shift 4
  local db=(); [ "$server" = handled-embedded ] || db=(--db-pid "$PG_PID")
  in_ns "$BIN" bench --host 127.0.0.1 -c 16 -d "$SECONDS_PER_RUN" --warmup 3 \
    --server-pid "$pid" "${db[@]}" --json --quiet "$@" |
    python3 -c 'import json,sys; r=json.loads(sys.stdin.read().strip().splitlines()[-1]); r.update(server=sys.argv[1], round=int(sys.argv[2]), what=sys.argv[3]); print(json.dumps(r))' \
      "$server" "$round" "$what" | tee -a "$results" | python3 -c 'import json,sys; r=json.loads(sys.stdin.read()); print("   %-8s %9.0f/s  p99 %.2f ms  errors %s" % (r["what"], r["throughput"], r["latency_ms"]["p99"], r["errors"]), file=sys.stderr)'
}
# half SERVER ROUND WHAT: half the throughput of that run.
half() {
  python3 -c 'import json,sys; print(max(1, int([json.loads(l) for l in open(sys.argv[1]) if json.loads(l)["server"] == sys.argv[2] and json.loads(l)["round"] == int(sys.argv[3]) and json.loads(l)["what"] == sys.argv[4]][-1]["throughput"] / 2)))' \
    "$results" "$@"
}
measure() {
  local server=$1 round=$2 pid=$3 creds=$4 keys=(--key-prefix TEST --keys "$KEYS")
  bench "$server" "$round" udp "$pid" --transport udp --port "$HS_PORT" "${keys[@]}"
  bench "$server" "$round" udp-half "$pid" --transport udp --port "$HS_PORT" "${keys[@]}" --rate "$(half "$server" "$round" udp)"
  bench "$server" "$round" tcp "$pid" --transport tcp --port "$HS_PORT" "${keys[@]}"
  bench "$server" "$round" json "$pid" --transport json-api-https --insecure --port "$HS_HTTP_PORT" "${keys[@]}"
  bench "$server" "$round" json-half "$pid" --transport json-api-https --insecure --port "$HS_HTTP_PORT" "${keys[@]}" \
    --rate "$(half "$server" "$round" json)"
  bench "$server" "$round" create "$pid" --transport http --port "$HS_HTTP_PORT" --ops create --credentials "$creds"
}
# start_handled LOG ARGS...: serve in the namespace; returns once it says "ready", with the
# server's pid in $server_pid.
start_handled() {
  local out=$1; shift
  # ip netns exec (not the in_ns function) so that $! is handled itself, which execs.
  HANDLED_SQL_PASSWORD=hspass ip netns exec "$HS_NETNS" "$BIN" serve --listen 127.0.0.1 --port "$HS_PORT" --http-port "$HS_HTTP_PORT" \
    --prefix TEST "$@" >"$out" 2>"$out.err" </dev/null &
  server_pid=$!
  for _ in $(seq 600); do
    grep -qx ready "$out" 2>/dev/null && return 0
    kill -0 "$server_pid" 2>/dev/null || { cat "$out.err" >&2; die "handled exited"; }
    sleep 0.1
  done
  die "handled not ready after 60 s: $(cat "$out.err")"
}
stop_handled() { kill "$server_pid"; wait "$server_pid" 2>/dev/null || true; server_pid=; }

SERVERS=${SERVERS:-handle-net handled-sql handled-embedded}
runs() { [[ " $SERVERS " == *" $1 "* ]]; }
for round in $(seq "$ROUNDS"); do
  if runs handle-net; then
    log "round $round: Handle.Net 9.0.0 on PostgreSQL"
    "$PEER/start.sh" >"$WORK/start.log" 2>&1 || { cat "$WORK/start.log" >&2; die "Handle.Net start"; }
    measure handle-net "$round" "$(cat "$RUN_DIR/server.pid")" "$WORK/sql-admin.json"
    "$PEER/stop.sh" >/dev/null
  fi

  if runs handled-sql; then
    log "round $round: handled on PostgreSQL"
    start_handled "$WORK/handled-sql.out" --config "$WORK/handled-sql.toml" --data-dir "$WORK/sql-data"
    measure handled-sql "$round" "$server_pid" "$WORK/sql-admin.json"
    stop_handled
  fi

  if runs handled-embedded; then
    log "round $round: handled on its embedded store"
    start_handled "$WORK/handled-embedded.out" --data-dir "$WORK/embedded"
    measure handled-embedded "$round" "$server_pid" "$WORK/embedded/admin-TEST.json"
    stop_handled
  fi
done

python3 "$REPO/scripts/bench_sql_table.py" "$results"
