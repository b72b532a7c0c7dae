#!/usr/bin/env python3
"""Contention across nodes, through the server (the store tests do it below it,
at 300 names): 3 stateless `handled` nodes on Cassandra, CLIENTS clients per
node, each client talking to its node directly (client j to node j mod 3) over
the JSON API with the admin's Basic credentials.

1. creates: every client creates the same NAMES names, in the same order
   (`PUT /api/handles/{name}?overwrite=false`, a URL value naming the client).
   Each name must be answered RC 1 exactly once, every other answer RC 101, and
   the record read back must be the winner's.
2. appends: every client adds PER_CLIENT values, at indexes of its own, to one
   handle (`PUT /api/handles/{h}?index=I`, a read-modify-write on the server).
   The record read back must hold every value whose add was acknowledged.

Prints the counts and exits 1 if a check fails.

    HANDLED_CLUSTER_NET=127.0.20 scripts/contention_cluster.py \\
        --cassandra 127.0.20.1:9042,127.0.20.2:9042,127.0.20.3:9042 --replication 3
"""
import argparse
import base64
import collections
import http.client
import json
import os
import sys
import tempfile
import threading
import time
import urllib.parse

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "common"))
import cluster  # noqa: E402


class Client:
    """One keep-alive HTTP connection to one node, Basic-authenticated as the admin."""

    def __init__(self, host, port, auth, timeout):
        self.host, self.port, self.auth, self.timeout = host, port, auth, timeout
        self.conn = None

    def request(self, method, path, body=None):
        """(HTTP status, JSON answer); a broken connection is reopened once."""
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Authorization": self.auth, "Content-Type": "application/json"}
        for attempt in (0, 1):
            if self.conn is None:
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            try:
                self.conn.request(method, path, body=data, headers=headers)
                r = self.conn.getresponse()
                return r.status, json.loads(r.read() or b"{}")
            except (OSError, http.client.HTTPException):
                self.conn.close()
                self.conn = None
                if attempt:
                    raise

    def put(self, path, body):
        """(HTTP status, response code), or (the exception's name, None) when no answer came."""
        try:
            status, answer = self.request("PUT", path, body)
            return status, answer.get("responseCode")
        except (OSError, http.client.HTTPException) as e:
            return type(e).__name__, None


def url_value(index, text):
    return {"index": index, "type": "URL", "data": {"format": "string", "value": text}}


def show(answers):
    """{(HTTP status, RC): count} as "HTTP 409 RC 101: 12, …"."""
    return ", ".join(f"HTTP {s} RC {rc}: {n}" for (s, rc), n in sorted(answers.items(), key=str))


def run_clients(count, work):
    threads = [threading.Thread(target=work, args=(j,)) for j in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def creates(a, clients, prefix):
    answers = collections.Counter()
    winners = collections.defaultdict(list)
    unknown = collections.defaultdict(set)  # clients answered neither RC 1 nor RC 101 (e.g. RC 7), by name
    lock = threading.Lock()
    deadline = time.time() + a.max_seconds

    def work(j):
        c, mine, unsure, seen = clients[j], [], [], collections.Counter()
        for i in range(a.names):
            if time.time() > deadline:
                seen[("not sent: time limit", None)] += a.names - i
                break
            status, rc = c.put(f"/api/handles/{prefix}{i}?overwrite=false", {"values": [url_value(1, f"client-{j}")]})
            seen[(status, rc)] += 1
            if rc == 1:
                mine.append(i)
            elif rc != 101:
                unsure.append(i)
        with lock:
            answers.update(seen)
            for i in mine:
                winners[i].append(j)
            for i in unsure:
                unknown[i].add(j)

    t0 = time.time()
    run_clients(len(clients), work)
    took = time.time() - t0
    sent = sum(v for (status, _), v in answers.items() if status != "not sent: time limit")
    print(f"creates: {sent} requests in {took:.0f} s ({sent / took:.0f}/s); answers {show(answers)}")
    twice = {i: w for i, w in winners.items() if len(w) > 1}
    wrong = unacked = missing = 0
    for i in range(a.names):  # the stored record is the one winner's
        status, body = clients[i % len(clients)].request("GET", f"/api/handles/{prefix}{i}")
        owner = [v["data"]["value"] for v in body.get("values", []) if v["type"] == "URL"] if status == 200 else []
        if i in winners:
            wrong += owner != [f"client-{winners[i][0]}"]
        elif owner and owner[0].removeprefix("client-") in {str(j) for j in unknown[i]}:
            unacked += 1  # created by a client whose answer said the outcome was unknown
        else:
            missing += 1
    other = sum(v for (_, rc), v in answers.items() if rc not in (1, 101))
    ok = not twice and not wrong and not missing
    print(f"creates: names answered RC 1 exactly once {len(winners) - len(twice)}, more than once {len(twice)}; "
          f"created but their creator answered otherwise (RC 7, outcome unknown) {unacked}; not created or "
          f"created by nobody who tried {missing}; records not their RC 1 winner's {wrong}; answers other than "
          f"RC 1/101 {other} -> {'OK' if ok else 'FAILED'}")
    return ok


def appends(a, clients, handle):
    status, body = clients[0].request("PUT", f"/api/handles/{handle}?overwrite=false",
                                      {"values": [url_value(1, "hot")]})
    if body.get("responseCode") != 1:
        raise SystemExit(f"could not create {handle}: {status} {body}")
    acked, answers = set(), collections.Counter()
    lock = threading.Lock()

    def work(j):
        c, mine, seen = clients[j], [], collections.Counter()
        for k in range(a.per_client):
            index = 1000 + j * a.per_client + k
            status, rc = c.put(f"/api/handles/{handle}?index={index}", [url_value(index, f"client-{j}-{k}")])
            seen[(status, rc)] += 1
            if rc == 1:
                mine.append(index)
        with lock:
            answers.update(seen)
            acked.update(mine)

    t0 = time.time()
    run_clients(len(clients), work)
    took = time.time() - t0
    status, body = clients[1 % len(clients)].request("GET", f"/api/handles/{handle}")
    stored = {v["index"] for v in body.get("values", [])} - {1}  # index 1: the value it was created with
    lost = acked - stored
    extra = stored - acked
    print(f"appends: {len(clients) * a.per_client} adds in {took:.0f} s; answers {show(answers)}")
    print(f"appends: acknowledged {len(acked)}, in the record {len(stored)}, acknowledged but missing "
          f"{len(lost)}, present but not acknowledged {len(extra)} -> {'OK' if not lost else 'FAILED'}")
    return not lost


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", default=os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release", "handled"))
    ap.add_argument("--cassandra", default=os.environ.get("HANDLED_TEST_CASSANDRA", "127.0.0.1:9042"),
                    help="contact points, comma-separated")
    ap.add_argument("--replication", default="1")
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("--clients", type=int, default=32, help="clients per node")
    ap.add_argument("--names", type=int, default=10000)
    ap.add_argument("--per-client", type=int, default=10, help="values each client adds")
    ap.add_argument("--max-seconds", type=float, default=1800, help="stop sending creates after this long")
    a = ap.parse_args()
    os.environ["HANDLED_TEST_CASSANDRA"] = a.cassandra
    tmp = tempfile.mkdtemp(prefix="contention-")
    creds_path = os.path.join(tmp, "admin.json")
    c = cluster.Cluster(a.binary, tmp, a.nodes, "allow_plain_http_admin = true\n",
                        {"HANDLED_LOG": "warn", "HANDLED_CASSANDRA_REPLICATION": a.replication}, creds_path=creds_path)
    try:
        creds = json.load(open(creds_path))
        user = urllib.parse.quote(f'{creds["secret_key"]["index"]}:{creds["handle"]}', safe="")
        auth = "Basic " + base64.b64encode(f'{user}:{creds["secret_key"]["secret"]}'.encode()).decode()
        prefix = creds["handle"].split("/")[0]
        clients = [Client(cluster.node_address(j % a.nodes + 1), c.http_port, auth, 30)
                   for j in range(a.nodes * a.clients)]
        print(f"{a.nodes} nodes ({', '.join(cluster.node_address(i + 1) for i in range(a.nodes))}) x {a.clients} "
              f"clients; Cassandra {a.cassandra}, replication {a.replication}", flush=True)
        run = f"{int(time.time()):x}"
        ok = creates(a, clients, f"{prefix}/race-{run}-")
        ok = appends(a, clients, f"{prefix}/hot-{run}") and ok
    finally:
        c.terminate()
        c.wait(timeout=30)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
