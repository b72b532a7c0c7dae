#!/usr/bin/env bash
# The suites tests/cluster/run.sh runs once $HANDLED_TEST_CASSANDRA names a node.
set -euo pipefail
bin=$1
: "${HANDLED_TEST_CASSANDRA:?needs a Cassandra node (tests/cluster/run.sh starts one)}"
echo "== store conformance and cross-node races on Cassandra ($HANDLED_TEST_CASSANDRA)"
cargo test --locked -p handled-store --features cassandra --test cassandra -- --test-threads=2
echo "== domain registry suite: Cassandra store, and $HANDLED_TEST_CLUSTER_NODES nodes behind the balancer"
tests/registry/run.sh "$bin" -k "cassandra or cluster"
echo "== JSON API suite through the balancer ($HANDLED_TEST_CLUSTER_NODES nodes)"
tests/rest/run.sh "$bin"
echo "== Java interop suite through the balancer ($HANDLED_TEST_CLUSTER_NODES nodes)"
tests/interop-java/run.sh "$bin"
