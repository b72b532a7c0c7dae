#!/usr/bin/env bash
# Cassandra-backed store tests against a throw-away single Cassandra 5.0 node.
# Usage: tests/cassandra/run.sh [path/to/handled] [extra args for the test command]
#
# Fetches the jars (cached), starts one node with the test-only fast boot in a fresh
# temporary data directory, exports HANDLED_TEST_CASSANDRA=IP:9042, runs the tests and,
# whatever happens (failure, Ctrl-C), stops the node and removes the directory.
#
# Environment:
#   HANDLED_CASSANDRA_NODE_IP    loopback address of the node [127.0.0.1]
#   HANDLED_CASSANDRA_HEAP       node heap [1G: the suites make ~50 keyspaces, and 512M ran out of heap]
#   HANDLED_CASSANDRA_TEST_CMD   test command, run by bash in the repository root
#                                [cargo test --locked -p handled-store --features cassandra --test cassandra -- --test-threads=2]
#   HANDLED_CASSANDRA_KEEP=1     keep the temporary directory (node logs) after the run
#   HANDLED_CASSANDRA_HOME       jar cache, as for scripts/cassandra.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cass=$root/scripts/cassandra.sh
me="tests/cassandra/run.sh"
die() { echo "$me: $*" >&2; exit 1; }

# The binary is not needed by the store tests; it is accepted (and exported) like the other runners do.
if [ $# -gt 0 ]; then
  if [ -n "$1" ]; then
    HANDLED_BIN=$(realpath -e "$1") || die "no such binary: $1"
    export HANDLED_BIN
  fi
  shift
fi

ip=${HANDLED_CASSANDRA_NODE_IP:-127.0.0.1}
node=${ip##*.}
if ! [[ $ip =~ ^127\.[0-9]{1,3}\.[0-9]{1,3}\.[1-9][0-9]{0,2}$ ]] || [ "$node" -gt 254 ]; then
  die "HANDLED_CASSANDRA_NODE_IP must be a loopback address 127.x.y.N with N in 1..254, got '$ip'"
fi

port_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }
if port_open "$ip" 9042; then
  die "port $ip:9042 is already in use (a local Cassandra? see 'scripts/cassandra.sh status');" \
      "stop it or pick another loopback address with HANDLED_CASSANDRA_NODE_IP=127.0.0.N"
fi

# The node's local JMX port is on 127.0.0.1 whatever the node address: take a free one.
jmx=${HANDLED_CASSANDRA_JMX_PORT:-$((7099 + 100 * node))}
while port_open 127.0.0.1 "$jmx"; do
  jmx=$((jmx + 1))
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/handled-cassandra-test.XXXXXX")
export HANDLED_CASSANDRA_DATA=$tmp/nodes
export HANDLED_CASSANDRA_NET=${ip%.*}
export HANDLED_CASSANDRA_SEEDS=$ip
export HANDLED_CASSANDRA_JMX_PORT=$jmx
export HANDLED_CASSANDRA_CLUSTER=handled-test
export HANDLED_CASSANDRA_RF=1
export HANDLED_CASSANDRA_FAST=1
export HANDLED_CASSANDRA_HEAP=${HANDLED_CASSANDRA_HEAP:-1G}

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  set +e
  local log=$HANDLED_CASSANDRA_DATA/node$node/logs/system.log problems
  if [ "$rc" -ne 0 ] && [ -s "$log" ]; then
    problems=$(grep -E '^(WARN|ERROR)' "$log" | grep -v -e StartupChecks.java -e 'No host ID found' | tail -n 15)
    [ -z "$problems" ] || printf '%s\n%s\n' "---- last warnings/errors of the Cassandra node ($log):" "$problems" >&2
  fi
  "$cass" down
  if [ "${HANDLED_CASSANDRA_KEEP:-0}" = 1 ]; then
    echo "$me: kept $tmp"
  else
    rm -rf "$tmp"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

echo "== fetch Cassandra jars"
t0=$(date +%s%3N)
"$cass" fetch
ms=$(( $(date +%s%3N) - t0 ))
echo "$me: fetch took $((ms / 1000)).$((ms % 1000 / 100)) s"

echo "== start a single Cassandra node on $ip (heap $HANDLED_CASSANDRA_HEAP, data in $tmp)"
"$cass" start "$node"

export HANDLED_TEST_CASSANDRA=$ip:9042
cmd=${HANDLED_CASSANDRA_TEST_CMD:-cargo test --locked -p handled-store --features cassandra --test cassandra -- --test-threads=2}
echo "== HANDLED_TEST_CASSANDRA=$HANDLED_TEST_CASSANDRA $cmd${*:+ $*}"
cd "$root"
# Not exec: the trap must stop the node afterwards. Extra arguments go to the end of the command.
bash -c "$cmd \"\$@\"" run-cassandra-tests "$@"
