#!/usr/bin/env python3
"""F15 attack: a small UDP request for a big record, and an oversized value.

Before the fix a 71-byte UDP resolution of a 240-value record brought back
257 KB (3,624 datagrams), to whatever source address the request claimed, and
a JSON API value over 1 MiB got HTTP 500. Now an answer over the UDP limit is
one short "ask over TCP" datagram (RC 500), answer bytes per source address are
rate-limited (not for loopback sources, which cannot be spoofed), and the big
value gets HTTP 400 with a message.

The record must exist: write an import file and start the server with it,

    tests/hostile/udp_amplification.py 127.0.0.1:2641 --write-import /tmp/amp.jsonl
    handled serve --ephemeral --port 2641 --prefix TEST --import /tmp/amp.jsonl &
    tests/hostile/udp_amplification.py 127.0.0.1:2641 --pid $(pidof handled)

With --http-port and --admin-secret (of 300:TEST/ADMIN) it also PUTs a 1.1 MB
value over HTTPS on the HTTP port and reports the status.
"""
import base64
import json
import socket
import ssl
import sys
import time
import urllib.error
import urllib.request

import hdl

HANDLE = "TEST/AMP240"


def write_import(path):
    values = [{"index": i, "type": "URL", "data": {"format": "string", "value": "https://example.org/" + "v" * 1000}}
              for i in range(1, 241)]
    with open(path, "w") as f:
        f.write(json.dumps({"handle": HANDLE, "values": values}) + "\n")
    print(f"wrote {path}: {HANDLE} with 240 values")


def amplification(args):
    request = hdl.unit(hdl.RESOLUTION, hdl.resolution(HANDLE), 71)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.2", 0))
    s.settimeout(0.5)
    started = time.monotonic()
    sent = datagrams = received = 0
    codes = {}
    while sent < min(args.count, 50) and time.monotonic() - started < args.seconds:
        s.sendto(request, args.addr)
        sent += 1
        try:
            while True:
                data = s.recv(2048)
                datagrams += 1
                received += len(data)
                _, code, _ = hdl.response_code(data)
                if code is not None:
                    codes[hdl.CODES.get(code, code)] = codes.get(code, 0) + 1
        except socket.timeout:
            pass
    print(f"{sent} UDP requests of {len(request)} bytes for {HANDLE}: {received} bytes back in {datagrams} datagrams"
          f" ({received / max(1, sent * len(request)):.1f}× amplification); first datagrams' codes: {codes}")


def big_value(args):
    body = json.dumps({"values": [{"index": 1, "type": "URL",
                                   "data": {"format": "string", "value": "x" * 1_100_000}}]}).encode()
    auth = base64.b64encode(f"300%3ATEST%2FADMIN:{args.admin_secret}".encode()).decode()
    url = f"https://{args.addr[0]}:{args.http_port}/api/handles/TEST/f15-big"
    req = urllib.request.Request(url, data=body, method="PUT",
                                 headers={"Authorization": "Basic " + auth, "Content-Type": "application/json"})
    context = ssl._create_unverified_context()  # the server's self-signed certificate
    try:
        with urllib.request.urlopen(req, context=context, timeout=30) as r:
            status, text = r.status, r.read()
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read()
    print(f"PUT of a 1.1 MB value: HTTP {status} {text[:160].decode(errors='replace')}")
    return 400 <= status < 500


def main():
    args = hdl.arguments(__doc__, seconds=10.0, count=50,
                         write_import=("", "write the import file with the 240-value record and exit"),
                         http_port=(0, "HTTP port, to also try a 1.1 MB value"),
                         admin_secret=("", "secret of 300:TEST/ADMIN, for the value test"))
    if args.write_import:
        write_import(args.write_import)
        sys.exit(0)
    hdl.show_rss("before", args.pid)
    amplification(args)
    ok = True
    if args.http_port and args.admin_secret:
        ok = big_value(args)
    hdl.show_rss("after", args.pid)
    hdl.finish(args, ok, udp=True)


if __name__ == "__main__":
    main()
