#!/usr/bin/env python3
"""F7 attack: multi-datagram UDP requests that never finish.

Each request announces 256 KiB and gets every datagram but the last. Before the
fix a socket kept 1,024 such requests (~300 MB), with no byte budget, dropping
stale ones only when full, so one peer also left no room for others'
multi-datagram requests. Now each peer has a share of a per-socket byte budget
and unfinished requests go by age. Sends --count datagrams at most (--rate per
second, --seconds) from 127.0.0.2, then checks that a two-datagram request from
127.0.0.1 is answered, as well as an ordinary resolution. With --kib 1 the
requests are small and many (fills a table bounded only in count).

    tests/hostile/udp_fragment_flood.py 127.0.0.1:2641 --pid $(pidof handled)
    tests/hostile/udp_fragment_flood.py 127.0.0.1:2641 --kib 1 --count 3000
"""
import socket
import struct
import time

import hdl

PAYLOAD = 492


def datagrams(message, request_id):
    """The datagrams of `message` with the truncated flag (§4.1)."""
    out = []
    for seq, start in enumerate(range(0, len(message), PAYLOAD)):
        envelope = bytes([2, 10, 0x22, 10]) + hdl.i32(0) + hdl.i32(request_id) + hdl.i32(seq) + hdl.u32(len(message))
        out.append(envelope + message[start:start + PAYLOAD])
    return out


def two_datagram_request(args):
    """A resolution of a 700-byte handle (two datagrams) from 127.0.0.1; True when answered."""
    unit = hdl.unit(hdl.RESOLUTION, hdl.resolution("TEST/" + "x" * 700), 777)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(2)
    # Sent again while unanswered (a datagram may be lost on a busy machine);
    # what is judged is that the request completes at all.
    for _ in range(5):
        for d in datagrams(unit[20:], 777):
            s.sendto(d, args.addr)
        try:
            while True:
                request_id, code, _ = hdl.response_code(s.recv(2048))
                if request_id == 777:
                    print(f"two-datagram request from another peer: {hdl.CODES.get(code, code)}")
                    return True
        except socket.timeout:
            continue
    print("two-datagram request from another peer: no answer in 5 tries")
    return False


def main():
    args = hdl.arguments(__doc__, seconds=10.0, count=200000, rate=(20000, "datagrams per second"),
                         kib=(256, "size each request announces, KiB (at most 256)"))
    hdl.show_rss("before", args.pid)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.2", 0))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
    template = datagrams(b"\x00" * min(args.kib * 1024, 262144), 0)[:-1]
    started = time.monotonic()
    sent, requests = 0, 0
    while sent < args.count and time.monotonic() - started < args.seconds:
        requests += 1
        for d in template:
            d = d[:8] + struct.pack(">i", requests) + d[12:]
            try:
                s.sendto(d, args.addr)
            except BlockingIOError:
                pass
            sent += 1
            if sent % 500 == 0:
                ahead = sent / args.rate - (time.monotonic() - started)
                if ahead > 0:
                    time.sleep(ahead)
            if sent >= args.count:
                break
    print(f"sent {sent} datagrams: {requests} unfinished requests of {args.kib} KiB"
          f" in {time.monotonic() - started:.1f} s")
    time.sleep(0.5)
    hdl.show_rss("after", args.pid)
    answered = two_datagram_request(args)
    hdl.finish(args, answered, udp=True)


if __name__ == "__main__":
    main()
