#!/usr/bin/env python3
"""F4 attack: anonymous Diffie-Hellman session setups with big claimed identities.

Before the fix each setup was kept for the 24 h the client asked for, with its
claimed identity of any size, up to 200,000 sessions: 8k setups took RSS to
1.9 GB, and a full table refused everyone. Now identities are bounded, an
unauthenticated session lives briefly, a peer holds a few, and a spent budget
ends the oldest unauthenticated one. Bounded by --seconds and --count; from
--sources loopback addresses (127.0.0.2 and up) over TCP. Sends half its
setups with an --identity-kib identity, half with an ordinary one.

    tests/hostile/session_flood.py 127.0.0.1:2641 --pid $(pidof handled) --sources 8
"""
import collections
import time

import hdl


def main():
    args = hdl.arguments(__doc__, seconds=20.0, count=8000,
                         identity_kib=(64, "size of the big claimed identity, KiB"),
                         sources=(1, "source addresses 127.0.0.2 … used in turn"))
    before = hdl.show_rss("before", args.pid)
    big = b"TEST/" + b"x" * (args.identity_kib * 1024)
    codes = collections.Counter()
    conns = [hdl.tcp_connect(args.addr, f"127.0.0.{2 + i}") for i in range(max(1, min(args.sources, 250)))]
    deadline = time.monotonic() + args.seconds
    sent = 0
    survived = True
    try:
        while sent < args.count and time.monotonic() < deadline:
            s = conns[sent % len(conns)]
            is_big = (sent // len(conns)) % 2 == 0
            identity = big if is_big else b"TEST/ADMIN"
            s.sendall(hdl.unit(hdl.SESSION_SETUP, hdl.session_setup(identity, 300), sent + 1, flags=hdl.REC))
            _, code, _ = hdl.response_code(hdl.read_unit(s))
            codes[f"{'big' if is_big else 'ordinary'} identity: {hdl.CODES.get(code, code)}"] += 1
            sent += 1
    except OSError as e:
        print(f"attack stopped by the server side after {sent} setups: {e}")
        survived = False
    for s in conns:
        s.close()
    print(f"sent {sent} session setups: {dict(codes)}")
    after = hdl.show_rss("after", args.pid)
    if before and after:
        print(f"RSS grew by {(after - before) / 1024:.1f} MiB")
    hdl.finish(args, survived)


if __name__ == "__main__":
    main()
