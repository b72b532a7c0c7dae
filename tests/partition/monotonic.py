#!/usr/bin/env python3
"""Did a copy ever go back? Reads the replica log of workload.py: for each
node and handle, the values it served, in order. Every value the clients write
is new (unique per operation) and each handle is written on one node only, so
once a copy has served value X and then something else, serving X again means
it applied an old change again (or served older state after newer): a mirror
or member that applies a change twice. Lagging and skipping intermediate
values are allowed; absence may come back (deleted, created, deleted).

    monotonic.py REPLICA_LOG
Exit 1 with the first reversal of each (node, handle).
"""

import json
import sys


def reversals(lines):
    last = {}  # (node, handle) -> value served last
    left = {}  # (node, handle) -> values served before it and moved past
    found = []
    for line in lines:
        e = json.loads(line)
        key, value = (e["node"], e["handle"]), e["value"]
        if value == last.get(key, "\0"):
            continue
        gone = left.setdefault(key, set())
        if value is not None and value in gone:
            found.append((key, value))
        if key in last and last[key] is not None:
            gone.add(last[key])
        last[key] = value
    return found, len(last)


def main():
    with open(sys.argv[1]) as f:
        lines = f.readlines()
    found, pairs = reversals(lines)
    seen = set()
    for (node, handle), value in found:
        if (node, handle) not in seen:
            seen.add((node, handle))
            print(f"WENT BACK: {node} served {handle} = {value} again after moving past it")
    if found:
        sys.exit(1)
    print(f"monotonic: {len(lines)} reads of {pairs} (node, handle) pairs, no copy went back")


if __name__ == "__main__":
    main()
