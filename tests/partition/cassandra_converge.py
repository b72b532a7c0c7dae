#!/usr/bin/env python3
"""After the last strike is healed on the Cassandra cluster
(tests/partition/cassandra.sh): every `handled` node serves the same value for
every handle of the history, within --seconds. The reads of the pass where all
agree are appended to the history as ordinary reads (client 10000 + node), so
the checker also holds them to linearizability: after healing, no node may
serve anything but the register's last state.

    cassandra_converge.py --history H.jsonl --node a=IP:PORT:HTTP [--node ...] [--seconds 120]

Exit status 0 when they agree, 1 when they never did (the last disagreement
printed).
"""

import argparse
import json
import time

from workload import JsonApi, Node


def handles_of(path):
    handles, last_id = set(), 0
    with open(path) as f:
        for line in f:
            event = json.loads(line)
            last_id = max(last_id, event["id"])
            if event["type"] == "invoke":
                handles.add(event["handle"])
    return sorted(handles), last_id


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--history", required=True)
    ap.add_argument("--credentials", required=True)
    ap.add_argument("--node", action="append", required=True, help="NAME=HOST:PORT:HTTP_PORT")
    ap.add_argument("--seconds", type=float, default=120)
    args = ap.parse_args()
    nodes = [Node(s) for s in args.node]
    api = JsonApi(args.credentials)
    handles, last_id = handles_of(args.history)
    deadline = time.monotonic() + args.seconds
    started = time.monotonic()
    attempt = 0
    while True:
        attempt += 1
        events, seen, differ = [], {}, []
        for h in handles:
            for i, node in enumerate(nodes):
                invoked = time.monotonic_ns()
                kind, found, value = api.run(node, "read", h, "")
                done = time.monotonic_ns()
                seen.setdefault(h, {})[node.name] = (kind, value if found else None)
                events.append((h, node.name, 10000 + i, invoked, done, found, value))
            answers = set(seen[h].values())
            if len(answers) != 1 or next(iter(answers))[0] != "ok":
                differ.append(h)
        if not differ:
            break
        if time.monotonic() > deadline:
            for h in differ:
                print(f"converge: {h} differs: {seen[h]}")
            print(f"converge: NOT converged after {args.seconds:.0f} s ({len(differ)} of {len(handles)} handles)")
            raise SystemExit(1)
        time.sleep(1)
    with open(args.history, "a") as f:
        for h, node, client, invoked, done, found, value in events:
            last_id += 1
            f.write(json.dumps(dict(type="invoke", id=last_id, client=client, node=node, api="json", op="read",
                                    handle=h, value="", t=invoked)) + "\n")
            f.write(json.dumps(dict(type="ok", id=last_id, t=done, found=found, value=value)) + "\n")
    print(f"converge: {len(handles)} handles, all {len(nodes)} nodes agree "
          f"({time.monotonic() - started:.0f} s, {attempt} pass(es)); their reads appended to the history")


if __name__ == "__main__":
    main()
