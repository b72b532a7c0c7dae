#!/usr/bin/env bash
# The Cassandra cluster under partitions (issue 43; docs/cluster.md, "Partition
# tests"): 3 Cassandra 5 nodes (c1, c2, c3; RF 3, Paxos v2), 3 stateless
# `handled` nodes (a, b, c) on store = "cassandra" with the coherent record
# cache (64 MB, cluster channel), and the balancer (lb: haproxy, round-robin,
# health checks on /readyz), each in its own network namespace. Cassandra is
# started once (scripts/cassandra.sh, the jars as CI fetches them); each round
# starts the `handled` nodes and the balancer on a fresh keyspace, lets the
# clients (workload.py --anywhere: the same handles through the balancer and on
# every node) record a history while one nemesis strikes, heals everything, and
#   - holds every handle to linearizability (porcupine, tests/partition/checker),
#   - checks that every node then serves the same value for every handle
#     (cassandra_converge.py; those reads go into the history too).
#
# Usage: tests/partition/cassandra.sh HANDLED SECONDS ROUNDS OUT_DIR NEMESIS...
#   NEMESIS: cass-cut (a Cassandra node cut from every other node for 15 s),
#            store-cut (a `handled` node cut from the three Cassandra nodes, 10 s),
#            lb-cut (the balancer cut from a `handled` node, 10 s),
#            pause (a `handled` or Cassandra node SIGSTOPped 8 s, four leases),
#            kill (a `handled` node killed and restarted 2 s later, or a
#                  Cassandra node killed and restarted on its data),
#            cass-skew (a Cassandra node's clock stepped 0.5-5 s ahead or back
#                  for 15 s, then back: its Paxos ballots and write timestamps),
#            skew (a `handled` node killed and restarted with its clock off by
#                  up to 120 ms either way, so that two nodes stay within the
#                  leases' 250 ms margin as docs/cluster.md asks)
# One line per round in OUT_DIR/results.tsv. Exit 0 every round linearizable
# and converged, 1 not, 77 cannot run here.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=$(realpath -e "$1")
seconds=$2 rounds=$3 out=$(realpath -m "$4")
shift 4
nemeses=("$@")
export HANDLED_PARTITION_TAG=${HANDLED_PARTITION_TAG:-hdc} HANDLED_PARTITION_NET=${HANDLED_PARTITION_NET:-10.78.0}
. "$root/tests/skip.sh"
. "$here/netns.sh"

for n in "${nemeses[@]}"; do
  case $n in cass-cut | store-cut | lb-cut | pause | kill | cass-skew | skew) ;; *) echo "cassandra.sh: unknown nemesis $n" >&2; exit 2 ;; esac
done
why=$(net_missing)
[ -z "$why" ] || skip_suite "partition (cassandra)" "$why"
for tool in java haproxy mvn; do
  command -v $tool >/dev/null || skip_suite "partition (cassandra)" "needs $tool (scripts/install-test-deps.sh installs it)"
done
checker=${HANDLED_PARTITION_CHECKER:-}
[ -x "$checker" ] || { echo "cassandra.sh: HANDLED_PARTITION_CHECKER must name the built checker" >&2; exit 1; }
ip link show "${NET_TAG}br" >/dev/null 2>&1 &&
  { echo "cassandra.sh: bridge ${NET_TAG}br exists: another run is going on (or left it: ip link del ${NET_TAG}br)" >&2; exit 1; }

NATIVE=2641 HTTP=8000 CHANNEL=7070
CACHE_MB=${HANDLED_PARTITION_CACHE_MB:-0}  # the coherent record cache: off unless asked for (docs/cluster.md)
PAUSE_SECONDS=8  # four times cluster_lease_ms (2 s)
cass=$root/scripts/cassandra.sh
mkdir -p "$out"
export HANDLED_CASSANDRA_DATA=$out/cassandra HANDLED_CASSANDRA_NET=$NET_PREFIX HANDLED_CASSANDRA_SEEDS=$NET_PREFIX.1
export HANDLED_CASSANDRA_CLUSTER=handled-partition HANDLED_CASSANDRA_RF=3 HANDLED_CASSANDRA_FAST=1 HANDLED_CASSANDRA_NETNS=1
export HANDLED_CASSANDRA_HEAP=${HANDLED_CASSANDRA_HEAP:-768M} HANDLED_CASSANDRA_START_TIMEOUT=240

cleanup() {
  set +e
  [ -n "${nemesis_pid:-}" ] && kill "$nemesis_pid" 2>/dev/null
  [ -n "${workload_pid:-}" ] && kill "$workload_pid" 2>/dev/null
  net_kill_all
  wait 2>/dev/null
  net_down
  rm -rf "$HANDLED_CASSANDRA_DATA"  # a few hundred MB; the nodes' logs are copied into the rounds
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"$cass" fetch
net_up c1 c2 c3 a b c lb   # c1..c3 get .1..3: scripts/cassandra.sh puts node N at NET.N
# For cass-skew, Cassandra's clock is one the nemesis shifts through a file per
# node (tests/partition/skewed-clock); offset 0 until a strike writes one.
if [[ " ${nemeses[*]} " == *" cass-skew "* ]]; then
  javac -d "$out/skewed-clock" -cp "$("$cass" lib)/*" "$here/skewed-clock/handled/partition/SkewedClock.java"
  export HANDLED_CASSANDRA_CLASSPATH=$out/skewed-clock HANDLED_CASSANDRA_JVM_OPTS=-Dcassandra.clock=handled.partition.SkewedClock
fi
# cass_skew N MS: node N's clock MS ms off from now on (written whole: the node reads it every 100 ms).
cass_skew() {
  local file=$HANDLED_CASSANDRA_DATA/node$1/clock-offset-ms
  echo "$2" > "$file.new" && mv -f "$file.new" "$file"
}
contact=$(node_ip c1):9042,$(node_ip c2):9042,$(node_ip c3):9042

# cass_start N: Cassandra node N in cN's namespace, waits for CQL and "Startup complete".
cass_start() { node_exec "c$1" "$cass" start "$1" > "$out/c$1.start.log" 2>&1 || { cat "$out/c$1.start.log"; return 1; }; }
cass_pid() { cat "$HANDLED_CASSANDRA_DATA/node$1/pid"; }
# up_count: Cassandra nodes c1 sees up and normal.
up_count() { node_exec c1 "$cass" nodetool 1 status 2>/dev/null | grep -c '^UN' || true; }
wait_up() {
  local tries=0
  until [ "$(up_count)" -ge "$1" ]; do
    tries=$((tries + 1))
    [ $tries -lt 240 ] || { echo "cassandra.sh: $1 Cassandra nodes not up after 120 s"; return 1; }
    sleep 0.5
  done
}
started=$SECONDS
for n in 1 2 3; do
  cass_start $n
  wait_up $n
done
echo "cassandra.sh: 3 Cassandra nodes up and normal in $((SECONDS - started)) s (heap $HANDLED_CASSANDRA_HEAP)"

# start NAME [CLOCK_MS]: `handled serve` in NAME's namespace on this round's
# keyspace (its pid in NAME.pid), its clock CLOCK_MS off (default 0), waits for
# "ready". The first node bootstraps TEST.
start() {
  local name=$1 clock_ms=${2:-0} ip waited=0
  ip=$(node_ip "$name")
  local cache=()
  [ "$CACHE_MB" = 0 ] || cache=(--cache-mb "$CACHE_MB" --cluster-listen "$ip:$CHANNEL")
  rm -f "$dir/$name.pid"
  HANDLED_STORE=cassandra HANDLED_CASSANDRA_CONTACT_POINTS=$contact HANDLED_CASSANDRA_KEYSPACE=$keyspace \
    HANDLED_CASSANDRA_REPLICATION=3 HANDLED_CLOCK_OFFSET_MS=$clock_ms \
    node_spawn "$name" "$dir/$name.pid" "$bin" serve --config "$dir/node.toml" --data-dir "$dir/data-$name" \
    --listen "$ip" --port $NATIVE --http-port $HTTP --public-address "$(node_ip lb)" \
    --prefix TEST --admin-credentials "$dir/creds-$name.json" \
    "${cache[@]}" > "$dir/$name.out" 2>> "$dir/$name.log" &
  until grep -q '^ready' "$dir/$name.out" 2>/dev/null; do
    [ -s "$dir/$name.pid" ] && ! kill -0 "$(cat "$dir/$name.pid")" 2>/dev/null &&
      { echo "$name exited at start:"; tail -20 "$dir/$name.log"; return 1; }
    sleep 0.2
    waited=$((waited + 1))
    [ $waited -lt 600 ] || { echo "$name not ready after 120 s"; tail -20 "$dir/$name.log"; return 1; }
  done
}

# restart NAME [CLOCK_MS]: kill NAME if it runs, start it again, and keep
# trying, 3 s apart, 24 times at most, as a supervisor would: a node exits at start when the
# store cannot answer its bootstrap (e.g. through a Cassandra coordinator whose
# clock is behind: the other nodes drop its requests as expired).
restart() {
  local try=0 pid
  while :; do
    pid=$(cat "$dir/$1.pid" 2>/dev/null || true)
    if [ -n "$pid" ]; then
      kill -9 "$pid" 2>/dev/null || true
      while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
    fi
    [ $try = 0 ] || { echo "$1: start $try failed"; sleep 3; }
    try=$((try + 1))
    start "$@" && return 0
    [ $try -lt 24 ] || return 1
  done
}

balancer() {
  local name
  {
    printf 'global\n  maxconn 4096\n\ndefaults\n  mode tcp\n  timeout connect 2s\n  timeout client 30s\n'
    printf '  timeout server 30s\n  timeout check 1s\n\n'
    for port in $NATIVE $HTTP; do
      printf 'frontend f%s\n  bind %s:%s\n  default_backend b%s\n\nbackend b%s\n  balance roundrobin\n' \
        "$port" "$(node_ip lb)" "$port" "$port" "$port"
      printf '  option httpchk GET /readyz\n'
      for name in a b c; do
        printf '  server %s %s:%s check port %s inter 200ms fall 2 rise 2\n' "$name" "$(node_ip $name)" "$port" $HTTP
      done
      printf '\n'
    done
  } > "$dir/haproxy.cfg"
  node_spawn lb "$dir/lb.pid" haproxy -db -f "$dir/haproxy.cfg" > "$dir/lb.log" 2>&1 &
  local tries=0
  until curl -sf -o /dev/null --max-time 2 "http://$(node_ip lb):$HTTP/readyz"; do
    tries=$((tries + 1))
    [ $tries -lt 100 ] || { echo "the balancer did not come up"; cat "$dir/lb.log"; return 1; }
    sleep 0.2
  done
}

# One strike after another, each healed before the next (as nemesis.sh).
strike() {
  local nemesis=$1 target pid n
  case $nemesis in
    cass-cut)
      target=c$((RANDOM % 3 + 1))
      echo "strike cass-cut $target at $((SECONDS - t0)) s"
      net_isolate "$target"; sleep 15; net_heal ;;
    store-cut)
      target=$(printf 'a\nb\nc\n' | shuf -n 1)
      echo "strike store-cut $target at $((SECONDS - t0)) s"
      for n in c1 c2 c3; do net_cut "$target" $n; done
      sleep 10; net_heal ;;
    lb-cut)
      target=$(printf 'a\nb\nc\n' | shuf -n 1)
      echo "strike lb-cut $target at $((SECONDS - t0)) s"
      net_cut lb "$target"; sleep 10; net_heal ;;
    pause)
      target=$(printf 'a\nb\nc\nc1\nc2\nc3\n' | shuf -n 1)
      case $target in c?) pid=$(cass_pid "${target#c}") ;; *) pid=$(cat "$dir/$target.pid") ;; esac
      echo "strike pause $target at $((SECONDS - t0)) s"
      kill -STOP "$pid"; sleep $PAUSE_SECONDS; kill -CONT "$pid" ;;
    kill)
      target=$(printf 'a\nb\nc\nc1\nc2\nc3\n' | shuf -n 1)
      echo "strike kill $target at $((SECONDS - t0)) s"
      case $target in
        c?)
          n=${target#c}
          pid=$(cass_pid "$n")
          kill -9 "$pid"
          while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
          sleep 2
          cass_start "$n"
          ;;
        *)
          pid=$(cat "$dir/$target.pid")
          kill -9 "$pid" 2>/dev/null || true
          while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
          sleep 2
          restart "$target"
          ;;
      esac ;;
    cass-skew)
      target=c$((RANDOM % 3 + 1))
      n=$(( (RANDOM % 4501 + 500) * (RANDOM % 2 * 2 - 1) ))
      echo "strike cass-skew $target at $((SECONDS - t0)) s: its clock $n ms off for 15 s"
      cass_skew "${target#c}" "$n"; sleep 15; cass_skew "${target#c}" 0 ;;
    skew)
      target=$(printf 'a\nb\nc\n' | shuf -n 1)
      n=$((RANDOM % 241 - 120))
      echo "strike skew $target at $((SECONDS - t0)) s: killed, restarted with its clock $n ms off"
      restart "$target" "$n" ;;
  esac
  echo "healed $target at $((SECONDS - t0)) s"
}

run_nemesis() {
  # A strike takes up to ~20 s (a Cassandra restart up to a minute); none starts
  # in the clients' last 25 s, so every round ends healed.
  while [ $((SECONDS - t0 + 25)) -lt "$seconds" ]; do
    sleep 3
    strike "$1"
  done
}

results=$out/results.tsv
[ -f "$results" ] || printf 'nemesis\tround\tseconds\toperations\tstrikes\tlinearizable\tconverged\n' > "$results"
failed=0
count() { grep -c "$1" "$2" 2>/dev/null || true; }
for nemesis in "${nemeses[@]}"; do
  for r in $(seq 1 "$rounds"); do
    dir=$out/cassandra-$nemesis-$r
    keyspace=part_${nemesis//-/_}_${r}_$$
    mkdir -p "$dir"
    echo
    echo "== cassandra $nemesis, round $r of $rounds ($seconds s), keyspace $keyspace"
    printf 'allow_plain_http_admin = true  # the JSON API clients, on the test bridge\n' > "$dir/node.toml"
    # More of the nodes' configuration, e.g. HANDLED_PARTITION_TOML=$'[cassandra]\nrequest_timeout_ms = 300'.
    printf '%s\n' "${HANDLED_PARTITION_TOML:-}" >> "$dir/node.toml"
    setup=ok
    start a && start b && start c && balancer || setup=failed
    specs=()
    for name in lb a b c; do specs+=(--node "$name=$(node_ip $name):$NATIVE:$HTTP"); done
    rc=0
    if [ $setup = failed ]; then
      rc=1
    else
      t0=$SECONDS
      timeout $((seconds + 120)) python3 "$here/workload.py" --handled "$bin" --credentials "$dir/creds-a.json" \
        --seconds "$seconds" --history "$dir/history.jsonl" --anywhere --threads 6 --keys 5 "${specs[@]}" \
        > "$dir/workload.out" 2>&1 &
      workload_pid=$!
      run_nemesis "$nemesis" > "$dir/nemesis.log" 2>&1 &
      nemesis_pid=$!
      wait "$workload_pid" || { echo "the workload failed:"; tail -20 "$dir/workload.out"; rc=1; }
      workload_pid=
      wait "$nemesis_pid" || { echo "the nemesis failed:"; tail -20 "$dir/nemesis.log"; rc=1; }
      nemesis_pid=
      cat "$dir/workload.out"
      echo "nemesis: $(count '^strike' "$dir/nemesis.log") strikes ($(grep '^strike' "$dir/nemesis.log" | tr '\n' ';'))"
      timeout 200 python3 "$here/cassandra_converge.py" --history "$dir/history.jsonl" --credentials "$dir/creds-a.json" \
        --seconds 120 "${specs[@]:2}" | tee "$dir/converge.out" || rc=1
      timeout 600 "$checker" -html "$dir" "$dir/history.jsonl" | tee "$dir/checker.out" || rc=1
    fi
    # The round's `handled` nodes and balancer go; Cassandra stays for the next.
    for name in a b c lb; do
      [ -s "$dir/$name.pid" ] && kill -9 "$(cat "$dir/$name.pid")" 2>/dev/null || true
    done
    sleep 1
    for n in 1 2 3; do cp "$HANDLED_CASSANDRA_DATA/node$n/logs/system.log" "$dir/c$n.system.log" 2>/dev/null || true; done
    [ $rc = 0 ] || failed=$((failed + 1))
    lin=$(grep -q '^linearizable' "$dir/checker.out" 2>/dev/null && echo yes || echo NO)
    conv=$(grep -q '^converge: .* agree' "$dir/converge.out" 2>/dev/null && echo yes || echo NO)
    printf 'cassandra-%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$nemesis" "$r" "$seconds" "$(count '"invoke"' "$dir/history.jsonl")" \
      "$(count '^strike' "$dir/nemesis.log")" "$lin" "$conv" >> "$results"
    # A Cassandra node a strike left down (it should not) fails the round; the next one needs all three.
    wait_up 3 || exit 1
  done
done
[ $failed = 0 ]
