#!/usr/bin/env python3
"""F9 attack: fill the domain registry, then delete everything.

Creates --records hyperties (max 200,000) from one client address, spread over
--users users, deletes them all, and reads the change feed once. Before the fix
there was no quota and DELETE only marked records `disconnected`: 1M records
grew the data directory by 473 MB and it stayed 467 MB after deleting them all.

Prints how many creates were accepted (200) and refused (403, quota), the
feed size, `/live`'s Hyperties_stored, the data directory's size (--data-dir)
at each step and the server's RSS (--pid). Exits 0 when the server still
answers /live. Purging happens on the server's sweep after
`registry_retention_secs`: rerun with --wait S to see it. Loopback only.

    tests/hostile/registry_fill.py 127.0.0.1:8001 --records 20000 --data-dir DIR --pid PID --wait 5
"""
import argparse
import http.client
import json
import os
import sys
import time
import urllib.parse

from hostile_common import loopback_target, rss_kb

BODY = json.dumps({"expires": 3600, "dataSchemes": ["comm"], "resources": ["chat"], "runtime": "r",
                   "status": "created", "descriptor": "https://catalogue.example/" + "d" * 200})


def size_mb(path):
    if not path:
        return None
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(root, f))
            except OSError:
                pass
    return round(total / 1e6, 1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("target", help="HOST:PORT of the registry port")
    ap.add_argument("--records", type=int, default=20000)
    ap.add_argument("--users", type=int, default=10)
    ap.add_argument("--data-dir")
    ap.add_argument("--pid", type=int)
    ap.add_argument("--wait", type=float, default=0, help="seconds to wait for the purge at the end (max 600)")
    a = ap.parse_args()
    host, port = loopback_target(a.target)
    n = min(a.records, 200_000)
    # Reading the feed writes every record it hands out: allow it time.
    c = http.client.HTTPConnection(host, port, timeout=300)

    def call(method, path, body=None):
        c.request(method, path, body=body, headers={"Content-Type": "application/json"})
        r = c.getresponse()
        return r.status, r.read()

    q = lambda s: urllib.parse.quote(s, safe="")
    ids = [(q(f"user://attack.example/u{i % a.users}"), q(f"hyperty://attack.example/h{i}")) for i in range(n)]
    print(f"data dir {size_mb(a.data_dir)} MB, RSS {rss_kb(a.pid)} kB before")
    answers = {}
    for user, hid in ids:
        status, _ = call("PUT", f"/hyperty/user/{user}/{hid}", BODY)
        answers[status] = answers.get(status, 0) + 1
    print(f"created {n}: answers {answers}; /live {call('GET', '/live')[1].decode()}; data dir {size_mb(a.data_dir)} MB")
    deleted = sum(call("DELETE", f"/hyperty/user/{user}/{hid}")[0] == 200 for user, hid in ids)
    feed = json.loads(call("GET", "/registry/updated")[1])
    print(f"deleted {deleted}; change feed handed out {len(feed)}; data dir {size_mb(a.data_dir)} MB")
    deadline = time.monotonic() + min(a.wait, 600)
    while True:
        live = call("GET", "/live")
        stored = json.loads(live[1]).get("Hyperties_stored") if live[0] == 200 else None
        if stored == "0" or time.monotonic() >= deadline:
            break
        time.sleep(1)
    print(f"after {min(a.wait, 600):.0f} s: /live {live[0]} Hyperties_stored {stored}; data dir {size_mb(a.data_dir)} MB;"
          f" RSS {rss_kb(a.pid)} kB")
    sys.exit(0 if live[0] == 200 else 1)


if __name__ == "__main__":
    main()
