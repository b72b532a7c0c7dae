#!/usr/bin/env python3
"""After the nemesis has healed everything: does the multi-primary group (and
its proxied mirror) converge? docs/multi-primary.md promises that every member
settles on the same record for every handle, and a mirror applies each
member's log in order, once.

    converge.py --sites TEST/SITES --member a=HOST:PORT:HTTP ... [--mirror m=...] \
        --history H.jsonl [--shared-log S.jsonl] [--seconds 180]

Members in priority order (the sites handle's indexes 1, 2, 3). Waits until
  1. every member's position in every peer's log, and the mirror's in its
     source's log, is that log's last transaction id (nothing skipped, nothing
     left behind), then
  2. every node serves the same record (values and their timestamps) for
     every handle the clients touched, plus the group's own handles.
Prints what still differs on timeout and exits 1.
"""

import argparse
import json
import sys
import time

from nodes import metrics, node_arg, record

POSITION = "handled_replication_last_txn_id"
LAST_ID = "handled_txn_log_last_id"


def handles_touched(paths):
    found = set()
    for path in paths:
        with open(path) as f:
            for line in f:
                handle = json.loads(line).get("handle")
                if handle:
                    found.add(handle)
    return sorted(found)


def position_gaps(members, mirror, mirror_of, sites):
    """What is behind: [(who, whose log, position, last id)]. A member's position
    in each peer's log is in its metrics under the peer's queue name; a proxied
    mirror shows only its position in its source's own log (the other queues'
    positions are kept in its store, not published), so those are judged by
    the records alone."""
    scraped = {n["name"]: metrics(n) for n in members + ([mirror] if mirror else [])}
    gaps = []
    for priority, member in enumerate(members, start=1):
        own = scraped[member["name"]]
        if own is None:
            return [(member["name"], "-", "no answer", "-")]
        last = own.get(LAST_ID, 0)
        readers = [(m, f'"0:{priority}:{sites}"') for m in members if m is not member]
        if mirror and member["name"] == mirror_of:
            readers.append((mirror, f'"{priority}:{sites}"'))
        for reader, label in readers:
            seen = scraped[reader["name"]]
            position = None
            if seen is not None:
                position = next((v for k, v in seen.items() if k.startswith(POSITION) and label in k), None)
            if position != last:
                gaps.append((reader["name"], member["name"], position, last))
    return gaps


def record_differences(nodes, handles):
    diffs = []
    for handle in handles:
        answers = {n["name"]: record(n, handle) for n in nodes}
        if len({json.dumps(a, sort_keys=True) for a in answers.values()}) > 1:
            diffs.append((handle, answers))
    return diffs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sites", required=True)
    ap.add_argument("--member", action="append", required=True, type=node_arg)
    ap.add_argument("--mirror", type=node_arg, help="a proxied mirror")
    ap.add_argument("--mirror-of", help="the member the mirror pulls from")
    ap.add_argument("--history", required=True)
    ap.add_argument("--shared-log")
    ap.add_argument("--seconds", type=float, default=180)
    args = ap.parse_args()

    nodes = args.member + ([args.mirror] if args.mirror else [])
    handles = handles_touched([args.history] + ([args.shared_log] if args.shared_log else []))
    handles += [args.sites, "TEST/ADMIN", "0.NA/TEST"]
    started = time.monotonic()
    deadline = started + args.seconds
    gaps, diffs = [("-", "-", "never checked", "-")], []
    while time.monotonic() < deadline:
        gaps = position_gaps(args.member, args.mirror, args.mirror_of, args.sites)
        if not gaps:
            diffs = record_differences(nodes, handles)
            if not diffs:
                break
        time.sleep(1)
    took = time.monotonic() - started
    if gaps or diffs:
        print(f"converge: NOT converged after {took:.0f} s")
        for g in gaps:
            print(f"  {g[0]} at {g[2]} in the log of {g[1]}, whose last id is {g[3]}")
        for handle, answers in diffs[:10]:
            print(f"  {handle}: " + json.dumps(answers, sort_keys=True)[:600])
        sys.exit(1)
    print(f"converge: {len(nodes)} nodes agree on {len(handles)} handles and on every log position, "
          f"{took:.0f} s after healing")


if __name__ == "__main__":
    main()
