#!/usr/bin/env python3
"""App-node failure, the reThink method: constant GET load through haproxy on 3
stateless nodes on Cassandra; node 2 is SIGKILLed at t=KILL s and started again at
t=RESTART s. Prints the bench's figures (failed requests, recovery time) and the
latency in the seconds after the restart; writes the bench's HTML report (100 ms
time series of answers, errors and latency).

    scripts/failover_cluster.py --cassandra 127.0.0.1:9042 --rate 500 --html docs/charts/cluster-node-kill.html

The nodes listen on 127.0.0.101-103, or $HANDLED_CLUSTER_NET.101-103.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

import requests

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
# Before scripts/: `cluster` is tests/common/cluster.py (the harness), not scripts/cluster.py.
sys.path.insert(0, os.path.join(ROOT, "tests", "common"))
import cluster  # noqa: E402
from bench_cluster import HYPERTY, USER  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", default=os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release", "handled"))
    ap.add_argument("--cassandra", default=os.environ.get("HANDLED_TEST_CASSANDRA", "127.0.0.1:9042"),
                    help="contact points, comma-separated")
    ap.add_argument("--replication", default="1", help="the keyspace's replication (3 on a 3-node Cassandra)")
    ap.add_argument("--rate", default="500")
    ap.add_argument("--duration", type=int, default=70)
    ap.add_argument("--kill-at", type=float, default=20)
    ap.add_argument("--restart-at", type=float, default=50)
    ap.add_argument("--html", default=None)
    a = ap.parse_args()
    os.environ["HANDLED_TEST_CASSANDRA"] = a.cassandra
    tmp = tempfile.mkdtemp(prefix="failover-")
    c = cluster.Cluster(a.binary, tmp, 3, "", {"HANDLED_LOG": "warn", "HANDLED_CASSANDRA_REPLICATION": a.replication},
                        registry=True,
                        creds_path=os.path.join(tmp, "admin.json"))
    try:
        base = f"http://127.0.0.1:{c.registry_port}"
        for i in range(3):
            requests.put(f"{base}/hyperty/user/{USER}/hyperty%3A%2F%2Finesc-id.pt%2Fbench-h%2F{i}",
                         json=HYPERTY).raise_for_status()
        victim = c.procs[1].pid
        cmd = [a.binary, "bench", "--url", f"{base}/hyperty/user/{USER}", "--rate", a.rate, "-d", str(a.duration),
               "-c", "32", "--timeout", "2", "--warmup", "0", "--json",
               "--induce", f"kill -9 {victim}", "--induce-at", str(a.kill_at)]
        if a.html:
            cmd += ["--html", a.html]
        restart = {}

        def restart_later(t0):
            time.sleep(max(0.0, t0 + a.restart_at - time.time()))
            restart["at"] = time.time() - t0
            restart["ready_after_s"] = c.restart(2)

        t0 = time.time()
        threading.Thread(target=restart_later, args=(t0,), daemon=True).start()
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        print(f"node 2 (pid {victim}) killed at {a.kill_at} s; restarted at {restart.get('at', 0):.1f} s, "
              f"ready after {restart.get('ready_after_s', 0):.2f} s")
        for line in out.splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if "series_100ms" not in row:
                continue
            lat = row["latency_ms"]
            print(f"requests {row['requests']}, errors {row['errors']}, first error at {row['first_error_s']} s, "
                  f"recovery {row['recovery_s']} s; latency mean {lat['mean']:.2f} ms, p99 {lat['p99']:.2f} ms, "
                  f"max {lat['max']:.1f} ms")
            series = row["series_100ms"]
            for label, at in (("kill", a.kill_at), ("restart", a.restart_at)):
                print(f"around the {label} (per second: answers, errors, worst latency ms):")
                for sec in range(int(at) - 2, int(at) + 6):
                    sl = series[sec * 10:(sec + 1) * 10]
                    if sl:
                        print(f"  t={sec:3d}s  {sum(b[0] for b in sl):4d}  {sum(b[1] for b in sl):3d}  "
                              f"{max(b[2] for b in sl) / 1000:8.1f}")
    finally:
        c.terminate()
        c.wait(timeout=30)


if __name__ == "__main__":
    main()
