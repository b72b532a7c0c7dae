#!/usr/bin/env bash
# Everything on Apache Cassandra, against one throw-away node (tests/cassandra/run.sh):
#   1. the store conformance suite and the cross-node create/append races;
#   2. the domain-registry, JSON API and Java interop suites through a round-robin
#      balancer (haproxy for TCP/HTTP, nginx's stream module for UDP) in front of
#      $HANDLED_TEST_CLUSTER_NODES (default 3) stateless `handled` nodes sharing one keyspace.
# Usage: tests/cluster/run.sh [path/to/handled]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=$(realpath -e "${1:-${CARGO_TARGET_DIR:-$root/target}/release/handled}")
for tool in haproxy nginx java mvn; do
  command -v "$tool" >/dev/null || { echo "tests/cluster/run.sh: $tool is missing (.ci/run installs it)" >&2; exit 1; }
done
[ -f /usr/lib/nginx/modules/ngx_stream_module.so ] ||
  { echo "tests/cluster/run.sh: nginx's stream module is missing (apt-get install libnginx-mod-stream)" >&2; exit 1; }
export HANDLED_TEST_CLUSTER_NODES=${HANDLED_TEST_CLUSTER_NODES:-3}
export HANDLED_CASSANDRA_TEST_CMD="tests/cluster/suites.sh '$bin'"
exec "$root/tests/cassandra/run.sh" "$bin"
