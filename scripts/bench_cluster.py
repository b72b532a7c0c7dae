#!/usr/bin/env python3
"""Domain-registry GET rate sweep (the reThink method: 10 requests per connection,
highest rate whose mean stays under 50 ms) through haproxy in front of N stateless
`handled` nodes on Cassandra, or against one embedded node as the reference.

    scripts/bench_cluster.py --nodes 3 --cassandra 127.0.0.1:9042 --rates 1000,6000,500
    scripts/bench_cluster.py --nodes 3 --cassandra 127.0.0.1:9042,127.0.0.2:9042,127.0.0.3:9042 --replication 3
    scripts/bench_cluster.py --reference --rates 2000,20000,2000

The cluster is started with tests/common/cluster.py (nodes on 127.0.0.101…, haproxy
on 127.0.0.1); the registry holds one user with 3 live hyperties, as in BENCHMARKS.md."""
import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time

import requests

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "common"))
import cluster  # noqa: E402

HYPERTY = {"descriptor": "hyperty-catalogue://catalogue.inesc-id.pt/.well-known/hyperty/Connector",
           "resources": ["audio", "video", "chat"], "dataSchemes": ["connection"], "expires": 3600,
           "status": "live", "runtime": "runtime://inesc-id.pt/1"}
USER = "user%3A%2F%2Finesc-id.pt%2Fbench"


def reference(binary, tmp):
    port = cluster.free_port()
    p = subprocess.Popen([binary, "serve", "--data-dir", os.path.join(tmp, "data"), "--listen", "127.0.0.1",
                          "--port", "0", "--http-port", "0", "--registry-port", str(port),
                          "--admin-credentials", os.path.join(tmp, "admin.json")],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                         env=dict(os.environ, HANDLED_LOG="warn"))
    if p.stdout.readline().strip() != "ready":
        raise SystemExit("the reference server did not start")
    time.sleep(0.3)
    return p, port


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", default=os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release", "handled"))
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("--cassandra", default=os.environ.get("HANDLED_TEST_CASSANDRA", "127.0.0.1:9042"))
    ap.add_argument("--replication", default="1", help="the keyspace's replication factor (3 on a 3-node Cassandra)")
    ap.add_argument("--reference", action="store_true", help="one embedded node instead of the cluster")
    ap.add_argument("--rates", default="1000,6000,500", help="FROM,TO,STEP demanded requests/s")
    ap.add_argument("--step-duration", default="3")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="bench-cluster-")
    if a.reference:
        server, port = reference(a.binary, tmp)
    else:
        os.environ["HANDLED_TEST_CASSANDRA"] = a.cassandra
        env = {"HANDLED_LOG": "warn", "HANDLED_CASSANDRA_REPLICATION": a.replication}
        server = cluster.Cluster(a.binary, tmp, a.nodes, "", env, registry=True,
                                 creds_path=os.path.join(tmp, "admin.json"))
        port = server.registry_port
    try:
        base = f"http://127.0.0.1:{port}"
        for i in range(3):
            r = requests.put(f"{base}/hyperty/user/{USER}/hyperty%3A%2F%2Finesc-id.pt%2Fbench-h%2F{i}", json=HYPERTY)
            r.raise_for_status()
        url = f"{base}/hyperty/user/{USER}"
        requests.get(url).raise_for_status()
        label = "reference: one embedded node" if a.reference else f"{a.nodes} node(s) on Cassandra {a.cassandra}"
        print(f"== {label}; load average before: {os.getloadavg()[0]:.1f}", flush=True)
        subprocess.run([a.binary, "bench", "--url", url, "--rate-sweep", a.rates, "--per-conn", "10",
                        "--step-duration", a.step_duration], check=True)
        print(f"== load average after: {os.getloadavg()[0]:.1f}")
    finally:
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
