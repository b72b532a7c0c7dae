#!/usr/bin/env bash
# One round of the multi-primary partition test: members a, b, c of one group
# (docs/multi-primary.md) and a proxied mirror m of b, each `handled` in its own
# network namespace; clients on the host record a history while a nemesis
# strikes one member at a time; then everything is healed and
#   - the checker holds each member's own handles to linearizability,
#   - every member and the mirror must converge (converge.py),
#   - no copy (a member for its peers' handles, the mirror) ever serves a value
#     again after moving past it (monotonic.py: nothing applied twice).
#
# Usage: tests/partition/multi_primary.sh HANDLED NEMESIS SECONDS OUT_DIR
#   NEMESIS: partition (a member cut from the other members and the mirror),
#            pause (SIGSTOP longer than the peers' replication timeout), kill
#            (kill -9, restarted on the same data directory), skew (killed and
#            restarted with its clock up to 2 minutes off)
# Exit status: 0 linearizable and converged, 1 not, 77 cannot run here.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$(realpath -e "$1")
nemesis=$2 seconds=$3 out=$(realpath -m "$4")
. "$here/../skip.sh"
. "$here/netns.sh"
. "$here/nemesis.sh"

case $nemesis in partition | pause | kill | skew) ;; *) echo "unknown nemesis $nemesis" >&2; exit 1 ;; esac
why=$(net_missing)
[ -z "$why" ] || skip_suite "partition ($nemesis)" "$why"
checker=${HANDLED_PARTITION_CHECKER:-}
[ -x "$checker" ] || { echo "multi_primary.sh: HANDLED_PARTITION_CHECKER must name the built checker" >&2; exit 1; }

NATIVE_PORT=2641 HTTP_PORT=8000 SITES=TEST/SITES
REPLICATION_TIMEOUT_MS=4000  # a pull waits this long on a peer that went silent
PAUSE_SECONDS=$((REPLICATION_TIMEOUT_MS / 1000 * 3))
mkdir -p "$out"
creds=$out/creds.json

# Every process left in the namespaces (restarted ones too), then the network.
cleanup() {
  [ -n "${nemesis_pid:-}" ] && kill "$nemesis_pid" 2>/dev/null
  [ -n "${workload_pid:-}" ] && kill "$workload_pid" 2>/dev/null
  net_kill_all
  wait 2>/dev/null
  net_down
}
trap cleanup EXIT
trap 'exit 130' INT TERM  # so that an interrupted round cleans up too

net_up a b c m

# The configuration of each node: members pull every peer; m pulls all the
# group's queues from b (proxied mirroring).
write_config() {
  local name=$1 resolver
  resolver=$(node_ip a):$NATIVE_PORT
  {
    echo 'server_admins = ["300:TEST/ADMIN"]'
    echo 'replication_admins = ["300:TEST/ADMIN", "301:TEST/ADMIN"]'
    echo 'allow_plain_http_admin = true  # the JSON API clients and make_group.py, on the test bridge'
    echo "replication_credentials = \"$creds\""
    echo 'replication_credentials_key = "public_key"'
    echo 'replication_interval_ms = 500'
    echo "replication_timeout_ms = $REPLICATION_TIMEOUT_MS"
    echo "replication_resolver = \"$resolver\""
    case $2 in
      member) echo "replication_sites_handle = \"$SITES\""; echo 'multi_primary = true' ;;
      mirror) echo "replication_source = \"2:$SITES\""; echo 'replication_pull_other_transactions = true' ;;
      plain) ;;
    esac
  } > "$out/$name.toml"
}

# start NAME ROLE: `handled serve` in NAME's namespace (its pid in NAME.pid),
# waits for its "ready" line.
start() {
  local name=$1 waited=0
  write_config "$name" "$2"
  mkdir -p "$out/data-$name"
  rm -f "$out/$name.pid"
  node_spawn "$name" "$out/$name.pid" "$bin" serve --config "$out/$name.toml" --data-dir "$out/data-$name" \
    --listen "$(node_ip "$name")" --port $NATIVE_PORT --http-port $HTTP_PORT \
    --prefix TEST --admin-credentials "$creds" > "$out/$name.out" 2>> "$out/$name.log" &
  until grep -q '^ready' "$out/$name.out" 2>/dev/null; do
    [ -s "$out/$name.pid" ] && ! kill -0 "$(cat "$out/$name.pid")" 2>/dev/null && { echo "$name exited at start:"; tail -20 "$out/$name.log"; return 1; }
    sleep 0.2
    waited=$((waited + 1))
    [ $waited -lt 600 ] || { echo "$name not ready after 120 s"; tail -20 "$out/$name.log"; return 1; }
  done
}

# stop NAME: SIGTERM, and wait until it is gone (its ports free).
stop() {
  local pid
  pid=$(cat "$out/$1.pid")
  kill "$pid"
  while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
}

spec() { echo "$1=$(node_ip "$1"):$NATIVE_PORT:$HTTP_PORT"; }

# The group as docs/multi-primary.md makes it: a plain primary first (it makes
# TEST, TEST/ADMIN and the credentials), the sites handle there, then every
# member in the group; the mirror once b holds the sites handle.
start a plain
start b member
start c member
python3 "$here/make_group.py" --credentials "$creds" --sites $SITES --on "$(spec a)" \
  --member "$(spec a)" --member "$(spec b)" --member "$(spec c)"
stop a
start a member
python3 - "$here" "$(spec b)" "$(spec c)" <<'EOF'
import sys
sys.path.insert(0, sys.argv[1])
from nodes import node_arg, record, wait
for spec in sys.argv[2:]:
    node = node_arg(spec)
    for handle in ("TEST/SITES", "TEST/ADMIN"):
        wait(f"{handle} on {node['name']}", lambda: (record(node, handle) or (0,))[0] == 200, 120)
EOF
start m mirror

echo "partition: $nemesis for $seconds s on members a, b, c and mirror m (of b); out: $out"
python3 "$here/workload.py" --handled "$bin" --credentials "$creds" --seconds "$seconds" \
  --history "$out/history.jsonl" --shared-log "$out/shared.jsonl" \
  --replica "$(spec m)" --replica-log "$out/replicas.jsonl" \
  --node "$(spec a)" --node "$(spec b)" --node "$(spec c)" > "$out/workload.out" 2>&1 &
workload_pid=$!
run_nemesis "$nemesis" "$seconds" "$PAUSE_SECONDS" a:member b:member c:member m:mirror > "$out/nemesis.log" 2>&1 &
nemesis_pid=$!
wait "$workload_pid" || { echo "the workload failed:"; tail -20 "$out/workload.out"; exit 1; }
workload_pid=
wait "$nemesis_pid" || { echo "the nemesis failed:"; tail -20 "$out/nemesis.log"; exit 1; }
nemesis_pid=
cat "$out/workload.out"
echo "nemesis: $(grep -c '^strike' "$out/nemesis.log") strikes ($(grep '^strike' "$out/nemesis.log" | tr '\n' ';'))"

# Healed by now (run_nemesis ends each strike healed): the verdicts.
status=0
"$checker" -html "$out" "$out/history.jsonl" | tee "$out/checker.out" || status=1
python3 "$here/converge.py" --sites $SITES --member "$(spec a)" --member "$(spec b)" --member "$(spec c)" \
  --mirror "$(spec m)" --mirror-of b --history "$out/history.jsonl" --shared-log "$out/shared.jsonl" --seconds 180 \
  | tee "$out/converge.out" || status=1
python3 "$here/monotonic.py" "$out/replicas.jsonl" | tee "$out/monotonic.out" || status=1
exit $status
