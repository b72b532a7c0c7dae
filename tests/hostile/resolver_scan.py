#!/usr/bin/env python3
"""S4 (issue 41): a prefix owner steering the global resolver at ports of their choosing.

The root holds 0.NA/EVIL whose HS_SITE values name a site on 127.0.0.4 (which the
server's configuration denies: deny_upstream), one on 192.0.2.1 (documentation, never
routable: refused unless allowed) and 16 on 127.0.0.3 (one port each, TCP and HTTP
interfaces, an alt_addr doubling each; the root is on loopback, so these are allowed). This tool listens on those loopback ports,
counting connections and closing them, and asks the resolver's JSON API for EVIL/x0,
EVIL/x1, ... from 127.0.0.2 for --seconds (at most --max-requests), a CR/LF handle
among them. Before the fix one request made 128 connections to the 16 ports and the
next did it again.

    resolver_scan.py --write-root-import FILE --ports 127.0.0.3:P1,...,P16 --denied 127.0.0.4:P
        the root's records (import JSON lines): 0.NA/EVIL as above
    resolver_scan.py HOST:HTTP_PORT --ports ... --denied ... [--seconds S] [--pid PID]
        the attack, against a server whose [resolver] root holds those records

Exit 0 when the server answered throughout (429 "rate limited" counts as an answer),
nothing connected to the denied port, the CR/LF handle got 400 without any connection,
and the connections to the 16 ports stayed within one budget of attempts (8) per
5-second window (the time sites that failed are left alone), plus one window.
"""
import argparse
import base64
import http.client
import json
import math
import os
import selectors
import socket
import struct
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hdl  # noqa: E402

BUDGET = 8
REMEMBERED_SECS = 5


def rsa_key_bytes():
    """A public key that decodes (Handle.Net's HS_PUBKEY form): trust = "require" gets
    as far as connecting, as it would with the prefix owner's real key."""
    def put(b):
        return struct.pack(">I", len(b)) + b
    return put(b"RSA_PUB_KEY") + struct.pack(">H", 0) + put(b"\x01\x00\x01") + put(b"\xc5" * 256)


def site(address, port, alt=True):
    interfaces = [{"query": True, "admin": True, "protocol": p, "port": port} for p in ("TCP", "HTTP")]
    return {
        "version": 1, "protocolVersion": "2.10", "serialNumber": 1, "primarySite": True, "multiPrimary": False,
        "hashOption": 2,
        "attributes": [{"name": "alt_addr.1", "value": address}] if alt else [],
        "servers": [{"serverId": 1, "address": address,
                     "publicKey": {"format": "base64", "value": base64.b64encode(rsa_key_bytes()).decode()},
                     "interfaces": interfaces}],
    }


def endpoints(text):
    host, ports = text.rsplit(":", 1)
    return host, [int(p) for p in ports.split(",")]


def root_records(ports, denied):
    host, numbers = endpoints(ports)
    dhost, dport = endpoints(denied)
    # The refused ones first: every walk meets them before its budget is spent.
    sites = [site(dhost, dport[0]), site("192.0.2.1", 2641, alt=False)] + [site(host, p) for p in numbers]
    values = [{"index": n + 1, "type": "HS_SITE", "ttl": 3600, "data": {"format": "site", "value": s}}
              for n, s in enumerate(sites)]
    return [{"handle": "0.NA/EVIL", "values": values}]


class Counting(threading.Thread):
    """TCP listeners that count connections and close them at once."""

    def __init__(self, host, ports):
        super().__init__(daemon=True)
        self.selector, self.count, self.lock = selectors.DefaultSelector(), 0, threading.Lock()
        for p in ports:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((host, p))
            s.listen(64)
            s.setblocking(False)
            self.selector.register(s, selectors.EVENT_READ)

    def run(self):
        while True:
            for key, _ in self.selector.select():
                try:
                    c, _ = key.fileobj.accept()
                except OSError:
                    continue
                with self.lock:
                    self.count += 1
                c.close()

    def seen(self):
        with self.lock:
            return self.count


def get(http_addr, path):
    host, port = http_addr.rsplit(":", 1)
    c = http.client.HTTPConnection(host, int(port), timeout=15, source_address=("127.0.0.2", 0))
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def metric(text, name):
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0


def rss_mib(pid):
    kib = hdl.rss_kib(pid)
    return None if kib is None else kib / 1024


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("http", nargs="?", help="the resolver's HTTP port, HOST:PORT")
    ap.add_argument("--ports", required=True, help="127.0.0.3:P1,...: the 16 sites' ports, listened on here")
    ap.add_argument("--denied", required=True, help="127.0.0.4:P: the site on a denied address")
    ap.add_argument("--write-root-import", help="write the root's import records here and exit")
    ap.add_argument("--seconds", type=float, default=8)
    ap.add_argument("--max-requests", type=int, default=400)
    ap.add_argument("--pid", type=int)
    a = ap.parse_args()
    if a.write_root_import:
        with open(a.write_root_import, "w") as f:
            for r in root_records(a.ports, a.denied):
                f.write(json.dumps(r) + "\n")
        return 0
    if not a.http:
        ap.error("the resolver's HOST:PORT is needed")
    host, ports = endpoints(a.ports)
    dhost, dports = endpoints(a.denied)
    allowed, denied = Counting(host, ports), Counting(dhost, dports)
    allowed.start()
    denied.start()
    statuses, failures, requests = {}, [], 0
    t0 = time.monotonic()
    peak = rss_mib(a.pid) or 0
    while time.monotonic() - t0 < min(a.seconds, 60) and requests < a.max_requests:
        try:
            status, _ = get(a.http, f"/api/handles/EVIL/x{requests}")
            statuses[status] = statuses.get(status, 0) + 1
        except Exception as e:  # any failure to answer is what this tool looks for
            failures.append(str(e))
        requests += 1
        peak = max(peak, rss_mib(a.pid) or 0)
        time.sleep(0.02)
    elapsed = time.monotonic() - t0
    before = allowed.seen()
    crlf, _ = get(a.http, "/api/handles/EVIL/crlf%0D%0AFLUSHALL%0D%0AQUIT%0D%0A")
    time.sleep(0.3)
    crlf_connections = allowed.seen() - before
    metrics = get(a.http, "/metrics")[1].decode(errors="replace")
    windows = math.ceil(elapsed / REMEMBERED_SECS) + 1
    bound = BUDGET * windows
    seen = allowed.seen()
    print(f"{requests} lookups of EVIL/* in {elapsed:.1f} s: HTTP {dict(sorted(statuses.items()))}, "
          f"{len(failures)} unanswered")
    print(f"connections to the 16 ports: {seen} (bound {bound}: {BUDGET} per {REMEMBERED_SECS} s window); "
          f"to the denied address: {denied.seen()}; CR/LF handle: HTTP {crlf}, {crlf_connections} connections")
    for name in ("upstream_refused", "upstream_cut", "upstream_skipped", "upstream_queries"):
        print(f"  handled_resolver_{name}_total {metric(metrics, f'handled_resolver_{name}_total'):.0f}")
    if a.pid:
        print(f"server RSS peak {peak:.1f} MiB")
    ok = not failures and denied.seen() == 0 and seen <= bound and crlf == 400 and crlf_connections == 0
    for f in failures[:3]:
        print(f"  failed: {f}")
    print("survived" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
