#!/usr/bin/env python3
"""F2 attack: many native-tunnel POSTs whose body never (fully) arrives.

Each connection sends the headers of a `POST` with `Content-Type:
application/x-hdl-message` and a Content-Length of a full message, then part of
the body (--partial bytes), and stalls. Before the fix the server held every such
socket forever and accepted without limit, until file descriptors ran out and
every listener stopped answering.

The tool measures how many sockets the server accepted and kept, how many it
refused (an HTTP 503 or a close at once), whether an ordinary `GET /healthz`
from another loopback address (127.0.0.2; the per-peer limit is not its
business) is answered during the attack, how many stalled sockets the server has
closed by the end of --hold seconds, and the server's RSS (--pid).

Bounded: at most 5000 connections, --hold at most 120 s, loopback only. Exits 0
when the server answered the ordinary request during and after the attack.

    tests/hostile/stalled_body.py 127.0.0.1:8000 --count 2000 --hold 25 --pid $(pidof handled)
"""
import argparse
import select
import socket
import sys
import time

from hostile_common import loopback_target, rss_kb

MESSAGE = 20 + 262_144  # envelope + largest message


def ordinary(host, port, source="127.0.0.2"):
    """Status line of GET /healthz from another loopback address, or the error."""
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(5)
        s.bind((source, 0))
        s.connect((host, port))
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        status = s.recv(256).split(b"\r\n")[0].decode(errors="replace")
        s.close()
        return status or "closed without an answer"
    except OSError as e:
        return f"error: {e}"


def answered_or_closed(sock):
    """What the server did with a stalled socket so far: None (still held), or its answer."""
    poller = select.poll()  # select() cannot watch descriptors above 1023
    poller.register(sock, select.POLLIN | select.POLLHUP | select.POLLERR)
    if not poller.poll(0):
        return None
    try:
        data = sock.recv(256)
    except OSError as e:
        return f"reset ({e.errno})"
    return data.split(b"\r\n")[0].decode(errors="replace") if data else "closed"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("target", help="HOST:PORT of the HTTP port")
    ap.add_argument("--count", type=int, default=1000, help="stalled connections (max 5000)")
    ap.add_argument("--partial", type=int, default=1024, help="body bytes sent before stalling")
    ap.add_argument("--hold", type=float, default=25, help="seconds to keep the sockets (max 120)")
    ap.add_argument("--pid", type=int, help="server process id, for its RSS")
    a = ap.parse_args()
    host, port = loopback_target(a.target)
    count, hold = min(a.count, 5000), min(a.hold, 120)
    head = (
        f"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-hdl-message\r\n"
        f"Content-Length: {MESSAGE}\r\n\r\n"
    ).encode()
    body = b"\0" * min(a.partial, MESSAGE - 1)
    rss_before = rss_kb(a.pid)
    socks, connect_failed = [], 0
    started = time.monotonic()
    for _ in range(count):
        try:
            s = socket.create_connection((host, port), timeout=2)
            s.sendall(head + body)
            socks.append(s)
        except OSError:
            connect_failed += 1
    time.sleep(0.5)
    refused = {}
    held = []
    for s in socks:
        what = answered_or_closed(s)
        if what is None:
            held.append(s)
        else:
            refused[what] = refused.get(what, 0) + 1
            s.close()
    during = ordinary(host, port)
    rss_during = rss_kb(a.pid)
    print(f"sent {count} stalled tunnel POSTs ({len(body)} of {MESSAGE} body bytes) in {time.monotonic() - started:.1f} s")
    print(f"  held by the server: {len(held)}; refused or answered at once: {refused or 0}; connect failed: {connect_failed}")
    print(f"  ordinary GET /healthz during the attack: {during}")
    deadline = started + hold
    while time.monotonic() < deadline and held:
        time.sleep(0.5)
        still = []
        for s in held:
            what = answered_or_closed(s)
            if what is None:
                still.append(s)
            else:
                refused[f"later: {what}"] = refused.get(f"later: {what}", 0) + 1
                s.close()
        held = still
    print(f"  after {hold:.0f} s still held: {len(held)}; ended by the server: "
          f"{ {k: v for k, v in refused.items() if k.startswith('later')} or 0}")
    for s in held:
        s.close()
    time.sleep(0.5)
    after = ordinary(host, port)
    print(f"  ordinary GET /healthz after the attack: {after}")
    if a.pid is not None:
        print(f"  server RSS: before {rss_before} kB, during {rss_during} kB, after {rss_kb(a.pid)} kB")
    sys.exit(0 if " 200" in during and " 200" in after else 1)


if __name__ == "__main__":
    main()
