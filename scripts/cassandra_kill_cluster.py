#!/usr/bin/env python3
"""A Cassandra node SIGKILLed under mixed load: 3 `handled` nodes behind haproxy
on a 3-node RF 3 Cassandra (QUORUM). Writer threads register hyperties with
unique ids (each acknowledged id is recorded), reader threads GET them back;
Cassandra node KILL_NODE is SIGKILLed at t=KILL_AT s. Afterwards every
acknowledged write is read back through the balancer. Prints failed requests
by kind and the acknowledged writes that are missing (must be 0).

    HANDLED_CASSANDRA_DATA=/tmp/c3 scripts/cassandra.sh up 3
    HANDLED_CASSANDRA_DATA=/tmp/c3 scripts/cassandra_kill_cluster.py --seconds 30 --kill-at 10
"""
import argparse
import collections
import os
import random
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
from bench_cluster import HYPERTY  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", default=os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release", "handled"))
    ap.add_argument("--contact-points", default="127.0.0.1:9042,127.0.0.2:9042,127.0.0.3:9042")
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--kill-at", type=float, default=10)
    ap.add_argument("--kill-node", type=int, default=2)
    ap.add_argument("--writers", type=int, default=8)
    ap.add_argument("--readers", type=int, default=8)
    a = ap.parse_args()
    os.environ["HANDLED_TEST_CASSANDRA"] = a.contact_points.split(",")[0]
    tmp = tempfile.mkdtemp(prefix="cass-kill-")
    env = {"HANDLED_LOG": "warn", "HANDLED_CASSANDRA_CONTACT_POINTS": a.contact_points,
           "HANDLED_CASSANDRA_REPLICATION": "3"}
    c = cluster.Cluster(a.binary, tmp, 3, "", env, registry=True, creds_path=os.path.join(tmp, "admin.json"))
    base = f"http://127.0.0.1:{c.registry_port}"
    acked, failures, reads = [], collections.Counter(), collections.Counter()
    lock = threading.Lock()
    stop = time.time() + a.seconds

    def url(w, n):
        return f"{base}/hyperty/user/user%3A%2F%2Fk.pt%2Fu{w}/hyperty%3A%2F%2Fk.pt%2Fw{w}-{n}"

    def writer(w):
        s, n = requests.Session(), 0
        while time.time() < stop:
            n += 1
            try:
                r = s.put(url(w, n), json=HYPERTY, timeout=5)
                kind = None if r.status_code == 200 else f"http {r.status_code}"
            except requests.RequestException as e:
                kind = type(e).__name__
            with lock:
                if kind:
                    failures["write " + kind] += 1
                else:
                    acked.append((w, n))

    def reader(_):
        s = requests.Session()
        while time.time() < stop:
            with lock:
                pick = random.choice(acked) if acked else None
            if not pick:
                time.sleep(0.01)
                continue
            try:
                r = s.get(f"{base}/hyperty/user/user%3A%2F%2Fk.pt%2Fu{pick[0]}", timeout=5)
                kind = "ok" if r.status_code == 200 else f"http {r.status_code}"
            except requests.RequestException as e:
                kind = type(e).__name__
            with lock:
                reads[kind] += 1

    def killer():
        time.sleep(a.kill_at)
        subprocess.run([os.path.join(ROOT, "scripts", "cassandra.sh"), "kill", str(a.kill_node)], check=True)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(a.writers)]
    threads += [threading.Thread(target=reader, args=(r,)) for r in range(a.readers)]
    threads.append(threading.Thread(target=killer))
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        missing = 0
        s = requests.Session()
        for w, n in acked:
            r = s.get(f"{base}/hyperty/url/hyperty%3A%2F%2Fk.pt%2Fw{w}-{n}", timeout=10)
            missing += r.status_code != 200
        print(f"writes acknowledged {len(acked)}, failed {dict((k, v) for k, v in failures.items())}")
        print(f"reads {dict(reads)}")
        print(f"acknowledged writes missing afterwards: {missing} of {len(acked)}")
    finally:
        c.terminate()
        c.wait(timeout=30)


if __name__ == "__main__":
    main()
