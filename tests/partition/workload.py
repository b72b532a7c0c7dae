#!/usr/bin/env python3
"""Clients for the partition suites: random operations on a few handles, each
recorded before it is sent and when its answer comes (tests/partition/checker
reads the history).

    workload.py --handled BIN --credentials CREDS --seconds S --history OUT.jsonl \
        --node a=10.77.0.1:2641:8000 --node b=... [--threads 3] [--keys 3] \
        [--shared-log SHARED.jsonl] [--replica m=... --replica-log REPLICAS.jsonl]

Each node owns its handles (TEST/lin-<node>-<k>); its clients write and read
them on that node only, half over the native protocol (the `handled` client
subcommands, one process per operation) and half over the JSON API. Those
histories are what the checker holds to linearizability: one node's view of
its own handles. A further client writes TEST/shared-<k> on every node in
turn (the multi-primary conflict rule settles them, docs/multi-primary.md);
those are not linearizable by design and only checked for convergence, so
they go to --shared-log, not to the history. With --replica-log, one more
client reads every node's handles on the other nodes and the --replica ones
(a mirror), for monotonic.py.

With --anywhere (the Cassandra cluster, tests/partition/cassandra.sh) every
client writes and reads the same handles (TEST/lin-<k>) on any node, half of
its operations through the first --node (the balancer), the rest on one of the
others at random: all nodes share one store, and the promise is one
linearizable register per handle whichever node is asked.

An operation that times out or loses its connection is recorded "info"
(outcome unknown), never "fail": only an answer that says what happened
(exists, not found) is a refusal. Values are unique per operation, so a read
names the one write it saw.
"""

import argparse
import json
import random
import subprocess
import threading
import time

from nodes import basic_auth, http, node_arg

OPS_NATIVE = ["create", "modify", "delete", "read", "read"]
OPS_JSON = ["create", "put", "delete", "read", "read"]
NATIVE_TIMEOUT_S = 5  # the client's own wait for an answer
PROCESS_TIMEOUT_S = 20  # connect, session and answer, with the link cut


class History:
    """Events appended as JSON lines, in the order they happen, from every thread."""

    def __init__(self, path):
        self.file = open(path, "w", buffering=1)
        self.lock = threading.Lock()
        self.next_id = 0

    def invoke(self, client, node, api, op, handle, value):
        with self.lock:
            self.next_id += 1
            event = dict(type="invoke", id=self.next_id, client=client, node=node, api=api, op=op,
                         handle=handle, value=value, t=time.monotonic_ns())
            self.file.write(json.dumps(event) + "\n")
            return self.next_id

    def complete(self, op_id, kind, found=False, value=""):
        with self.lock:
            event = dict(type=kind, id=op_id, t=time.monotonic_ns(), found=found, value=value)
            self.file.write(json.dumps(event) + "\n")


class Node:
    def __init__(self, spec):
        self.spec = node_arg(spec)
        self.name, self.host, self.port = self.spec["name"], self.spec["host"], self.spec["port"]


class Native:
    """The `handled` client subcommands; (kind, found, value) per operation."""

    def __init__(self, binary, credentials):
        self.binary, self.credentials = binary, credentials

    def _run(self, node, args):
        cmd = [self.binary] + args + ["--host", node.host, "--port", node.port, "--timeout", str(NATIVE_TIMEOUT_S)]
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=PROCESS_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return None

    def _admin(self, node, args, refusal_exit, refusal_words):
        p = self._run(node, args + ["--credentials", self.credentials, "--no-session"])
        if p is None:
            return ("info", False, "")
        if p.returncode == 0:
            return ("ok", False, "")
        # Only the refusal the operation can meet counts as one; any other
        # error (busy, storage error, connection) leaves the outcome unknown.
        if p.returncode == refusal_exit and any(w in p.stderr.upper() for w in refusal_words):
            return ("fail", False, "")
        return ("info", False, "")

    def run(self, node, op, handle, value):
        if op == "create":
            return self._admin(node, ["create", handle, f"1:URL:{value}"], 3, ["ALREADY_EXISTS", "ALREADY EXISTS"])
        if op == "modify":
            return self._admin(node, ["modify-value", handle, f"1:URL:{value}"], 2, ["NOT_FOUND", "NOT FOUND"])
        if op == "delete":
            return self._admin(node, ["delete", handle], 2, ["NOT_FOUND", "NOT FOUND"])
        if op == "read":
            p = self._run(node, ["resolve", handle, "--tcp", "--index", "1"])
            if p is None:
                return ("info", False, "")
            return read_answer(p)
        raise ValueError(op)


def read_answer(p):
    """`handled resolve` prints the record as JSON, or says not found (exit 2)."""
    if p.returncode == 2 and "NOT_FOUND" in (p.stdout + p.stderr).upper():
        return ("ok", False, "")
    if p.returncode != 0:
        return ("info", False, "")
    try:
        answer = json.loads(p.stdout)
    except ValueError:
        return ("info", False, "")
    values = answer.get("values", answer) if isinstance(answer, dict) else answer
    return url_of(values)


def url_of(values):
    for v in values or []:
        if v.get("index") == 1:
            data = v.get("data")
            if isinstance(data, dict):
                data = data.get("value")
            return ("ok", True, str(data))
    return ("ok", False, "")


class JsonApi:
    """Handle.Net 9's /api/handles over plain HTTP, as an admin with a secret key."""

    def __init__(self, credentials):
        self.auth = basic_auth(credentials)

    def _call(self, node, method, handle, query="", body=None):
        status, answer = http(node.spec, method, f"/api/handles/{handle}{query}", body, auth=self.auth,
                              timeout=PROCESS_TIMEOUT_S)
        return status, answer if isinstance(answer, dict) else {}

    def run(self, node, op, handle, value):
        values = {"values": [{"index": 1, "type": "URL", "data": {"format": "string", "value": value}}]}
        if op == "read":
            status, body = self._call(node, "GET", handle, "?index=1")
            if status == 200:
                return url_of(body.get("values"))
            if status == 404 and body.get("responseCode") == 100:
                return ("ok", False, "")
            return ("info", False, "")
        if op in ("create", "put"):
            overwrite = "false" if op == "create" else "true"
            status, body = self._call(node, "PUT", handle, f"?overwrite={overwrite}", values)
            if status in (200, 201):
                return ("ok", False, "")
            if op == "create" and status == 409 and body.get("responseCode") == 101:
                return ("fail", False, "")
            return ("info", False, "")
        if op == "delete":
            status, body = self._call(node, "DELETE", handle)
            if status == 200:
                return ("ok", False, "")
            if status == 404 and body.get("responseCode") == 100:
                return ("fail", False, "")
            return ("info", False, "")
        raise ValueError(op)


def run_client(history, apis, client_id, deadline, seed, pick):
    """Random operations until `deadline`; `pick(rng, n)` gives the node, the
    handle and the value to write for the n-th one."""
    rng = random.Random(seed)
    n = 0
    while time.monotonic() < deadline:
        api_name = rng.choice(["native", "json"])
        op = rng.choice(OPS_NATIVE if api_name == "native" else OPS_JSON)
        n += 1
        node, handle, value = pick(rng, n)
        if op in ("read", "delete"):
            value = ""
        op_id = history.invoke(client_id, node.name, api_name, op, handle, value)
        kind, found, seen = apis[api_name].run(node, op, handle, value)
        history.complete(op_id, kind, found, seen)
        if kind == "info":
            time.sleep(0.5)  # the link is probably cut: do not spin


def owned_client(history, apis, client_id, node, keys, deadline, seed):
    """The node's own handles, on that node only."""
    pick = lambda rng, n: (node, f"TEST/lin-{node.name}-{rng.randrange(keys)}", f"{node.name}{client_id}-{n}")
    run_client(history, apis, client_id, deadline, seed, pick)


def anywhere_client(history, apis, client_id, nodes, keys, deadline, seed):
    """Any handle on any node: the balancer (nodes[0]) half the time."""

    def pick(rng, n):
        node = nodes[0] if len(nodes) == 1 or rng.random() < 0.5 else rng.choice(nodes[1:])
        return node, f"TEST/lin-{rng.randrange(keys)}", f"c{client_id}-{n}"

    run_client(history, apis, client_id, deadline, seed, pick)


def shared_client(log, native, nodes, keys, deadline, seed):
    """Writes the shared handles on every node in turn (convergence only)."""
    rng = random.Random(seed)
    n = 0
    while time.monotonic() < deadline:
        node = rng.choice(nodes)
        handle = f"TEST/shared-{rng.randrange(keys)}"
        n += 1
        op = rng.choice(["create", "modify", "modify", "delete"])
        kind, _, _ = native.run(node, op, handle, f"s{node.name}-{n}")
        log.write(json.dumps(dict(node=node.name, op=op, handle=handle, outcome=kind)) + "\n")
        time.sleep(0.2)


def replica_reader(log, json_api, replicas, owners, keys, deadline):
    """Reads every owned handle on the nodes that do not own it (the other
    members, the mirror), one after the other, for monotonic.py: a copy may
    lag, but never shows a value again once it has moved past it."""
    while time.monotonic() < deadline:
        for replica in replicas:
            for owner in owners:
                if owner.name == replica.name:
                    continue
                for k in range(keys):
                    handle = f"TEST/lin-{owner.name}-{k}"
                    kind, found, value = json_api.run(replica, "read", handle, "")
                    if kind == "ok":
                        log.write(json.dumps(dict(node=replica.name, handle=handle, value=value if found else None,
                                                  t=time.monotonic_ns())) + "\n")
        time.sleep(0.05)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--handled", required=True)
    ap.add_argument("--credentials", required=True)
    ap.add_argument("--seconds", type=float, required=True)
    ap.add_argument("--history", required=True)
    ap.add_argument("--node", action="append", required=True, help="NAME=HOST:PORT:HTTP_PORT")
    ap.add_argument("--threads", type=int, default=3, help="clients per node")
    ap.add_argument("--keys", type=int, default=3, help="handles per node")
    ap.add_argument("--shared-log")
    ap.add_argument("--replica", action="append", default=[], help="NAME=HOST:PORT:HTTP_PORT of a read-only copy")
    ap.add_argument("--replica-log", help="reads of owned handles on the other nodes (monotonic.py)")
    ap.add_argument("--anywhere", action="store_true",
                    help="every client on the same handles, on any node (--threads clients in all)")
    ap.add_argument("--seed", type=int, default=int(time.time()))
    args = ap.parse_args()

    nodes = [Node(s) for s in args.node]
    native = Native(args.handled, args.credentials)
    apis = {"native": native, "json": JsonApi(args.credentials)}
    history = History(args.history)
    deadline = time.monotonic() + args.seconds
    threads = []
    client_id = 0
    for node in nodes if not args.anywhere else []:
        for _ in range(args.threads):
            t = threading.Thread(target=owned_client,
                                 args=(history, apis, client_id, node, args.keys, deadline, args.seed + client_id))
            threads.append(t)
            client_id += 1
    for _ in range(args.threads if args.anywhere else 0):
        threads.append(threading.Thread(target=anywhere_client,
                                        args=(history, apis, client_id, nodes, args.keys, deadline, args.seed + client_id)))
        client_id += 1
    shared = open(args.shared_log, "w", buffering=1) if args.shared_log else None
    if shared:
        threads.append(threading.Thread(target=shared_client,
                                        args=(shared, native, nodes, args.keys, deadline, args.seed - 1)))
    replica_log = open(args.replica_log, "w", buffering=1) if args.replica_log else None
    if replica_log:
        replicas = nodes + [Node(s) for s in args.replica]
        threads.append(threading.Thread(target=replica_reader,
                                        args=(replica_log, apis["json"], replicas, nodes, args.keys, deadline)))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(f"workload: {history.next_id} operations recorded (seed {args.seed})")


if __name__ == "__main__":
    main()
