#!/usr/bin/env python3
"""Round-3 attacks (issue 41) through template handles, replayed against one server:

* S1  a `<def>` doubling its parameter 40 times after a 1 KiB seed (2^40 KiB),
      stored as HS_NAMESPACE on 0.NA/TEST: each anonymous GET of TEST/x@y built
      it until allocation failed and the process aborted;
* S2  3,000 nested `<if>` (27 KB): the builder's recursion overflowed a
      worker's stack and aborted the process;
* S3  a `<foreach>` making 60 values of each of 2,000 base values (18 s a GET),
      and a `matches` expression over the 2,000 (compiled at every value,
      28-30 s a GET): a few clients pinned every core.

Needs the admin's secret (`--admin-secret`) to store the namespaces (as a prefix
admin would). Each namespace is then asked for by `--clients` anonymous clients
for `--seconds` (at most 500 requests each, 2,000 in all). Bounded, loopback only; the
namespace is removed from 0.NA/TEST at the end.
Exit 0 when every bomb was refused at once (HTTP 500 naming the bound, each in
under a second), the harmless expression was answered, and the server answers on.

    tests/hostile/template_bombs.py 127.0.0.1:8000 --admin-secret S [--pid PID]
"""
import argparse
import sys
import threading
import time

from hostile_common import https_request, loopback_target, rss_kb

ADMIN = "300:TEST/ADMIN"
MAX_REQUESTS = 2000


def request(addr, method, path, secret=None, body=None):
    status, _, data = https_request(addr, method, path, ADMIN if secret else None, secret, body=body, timeout=60)
    return status, data.decode(errors="replace")


def value(index, kind, text):
    return {"index": index, "type": kind, "data": {"format": "string", "value": text}}


def namespace(template):
    return f'<namespace><template delimiter="@">{template}</template></namespace>'


def bombs():
    seed = "s" * 1024
    doubling = '<def parameter="x"><value type="T" data="${x}${x}"/></def>' * 40
    nested = '<if value="extension" test="equals" expression="x">' * 3000
    return [
        ("S1 doubling def", "TEST/anything@x", 500,
         f'<def parameter="x"><value type="T" data="{seed}"/></def>{doubling}<value type="URL" data="${{x}}"/>'),
        ("S2 3,000 nested if", "TEST/anything@x", 500, nested + '<value type="URL" data="deep"/>' + "</if>" * 3000),
        ("S3 foreach x60 over 2,000", "TEST/bomb-many@x", 500, "<foreach>" + "<value/>" * 60 + "</foreach>"),
        ("S3 matches over 2,000", "TEST/bomb-many@x", 200,
         '<foreach><if value="data" test="matches" expression="(?:[a-z]{1,50}\\w{1,50}){1,8}"><value/></if>'
         '<else><value/></else></foreach>'),
    ]


def hammer(addr, path, clients, seconds, budget):
    """GET `path` from `clients` threads for `seconds`; [(status, seconds)]."""
    results, lock, end = [], threading.Lock(), time.monotonic() + seconds

    def client():
        while time.monotonic() < end:
            with lock:
                if budget[0] <= 0:
                    return
                budget[0] -= 1
            started = time.monotonic()
            try:
                status, _ = request(addr, "GET", path)
            except OSError as e:
                status = f"error {e}"
            with lock:
                results.append((status, time.monotonic() - started))

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("addr", type=loopback_target, help="HOST:PORT of the HTTP port (HTTPS on the same port)")
    ap.add_argument("--admin-secret", required=True)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=3, help="per bomb")
    ap.add_argument("--pid", type=int)
    a = ap.parse_args()
    failures = []
    many = [value(i, "URL", f"https://e.org/item{i}") for i in range(1, 2001)]
    status, text = request(a.addr, "PUT", "/api/handles/TEST/bomb-many?overwrite=true", a.admin_secret,
                           {"values": many})
    if status not in (200, 201):
        sys.exit(f"could not store TEST/bomb-many: {status} {text[:200]}")
    rss_before = rss_kb(a.pid)
    try:
        for name, path, expected, template in bombs():
            status, text = request(a.addr, "PUT", "/api/handles/0.NA/TEST?index=5&overwrite=true", a.admin_secret,
                                   {"values": [value(5, "HS_NAMESPACE", namespace(template))]})
            if status not in (200, 201):
                sys.exit(f"could not store the namespace on 0.NA/TEST: {status} {text[:200]}")
            budget = [MAX_REQUESTS // 4]
            results = hammer(a.addr, "/api/handles/" + path, a.clients, a.seconds, budget)
            statuses = sorted({str(s) for s, _ in results})
            slowest = max((t for _, t in results), default=0)
            ok = bool(results) and all(s == expected for s, _ in results) and slowest < 1.0
            rss = rss_kb(a.pid)
            print(f"{name}: {len(results)} GETs, statuses {statuses}, slowest {slowest * 1000:.0f} ms"
                  + (f", RSS {rss / 1024:.0f} MiB" if rss else "") + ("" if ok else f"  <-- expected {expected}"))
            if not ok:
                failures.append(name)
    finally:
        request(a.addr, "DELETE", "/api/handles/0.NA/TEST?index=5", a.admin_secret)
        request(a.addr, "DELETE", "/api/handles/TEST/bomb-many", a.admin_secret)
    if rss_before and rss_kb(a.pid):
        print(f"RSS {rss_before / 1024:.0f} -> {rss_kb(a.pid) / 1024:.0f} MiB")
    status, _ = request(a.addr, "GET", "/api/handles/TEST/ADMIN")
    alive = status == 200
    print(f"server {'answers' if alive else 'DOES NOT ANSWER'} (GET TEST/ADMIN: {status})")
    if failures or not alive:
        print("NOT SURVIVED: " + ", ".join(failures))
        return 1
    print("survived: every template bomb refused at once")
    return 0


if __name__ == "__main__":
    sys.exit(main())
