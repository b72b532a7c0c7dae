#!/usr/bin/env bash
# The suites tests/cluster/run.sh runs once $HANDLED_TEST_CASSANDRA names a node.
set -euo pipefail
bin=$1
: "${HANDLED_TEST_CASSANDRA:?needs a Cassandra node (tests/cluster/run.sh starts one)}"
echo "== store conformance and cross-node races on Cassandra ($HANDLED_TEST_CASSANDRA)"
cargo test --locked -p handled-store --features cassandra --test cassandra -- --test-threads=2
echo "== the replication battery on Cassandra (a source, and a mirror, each in a keyspace of its own)"
cargo test --locked -p handled-server --test replication_battery cassandra
echo "== a handled mirror (embedded) of a source on Cassandra, through the binary"
cargo test --locked -p handled --test replication_mirror a_mirror_pulls_from_a_source_on_cassandra
echo "== record cache coherence across 3 nodes (write on one, read on another; kill -9 one)"
. tests/python.sh
HANDLED_BIN="$bin" "$TEST_PYTHON" -m pytest -q -p no:cacheprovider tests/cluster/test_coherence.py
echo "== domain registry suite: Cassandra store, and $HANDLED_TEST_CLUSTER_NODES nodes behind the balancer"
tests/registry/run.sh "$bin" -k "cassandra or cluster"
echo "== JSON API suite through the balancer ($HANDLED_TEST_CLUSTER_NODES nodes)"
tests/rest/run.sh "$bin"
echo "== Java interop suite through the balancer ($HANDLED_TEST_CLUSTER_NODES nodes)"
# UDP goes through nginx's stream proxy here: on 2026-11-25 one UDP answer was lost once in
# four runs (CertifiedResponseTest over UDP, "Receive timed out"; not seen without the proxy).
# A failing test runs once more: a real failure fails twice, a lost datagram shows in the
# Surefire report as a flake (grep flakyFailure in tests/interop-java/target/surefire-reports).
tests/interop-java/run.sh "$bin" -Dsurefire.rerunFailingTestsCount=1
