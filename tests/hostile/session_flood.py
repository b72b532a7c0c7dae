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
import hdl


def main():
    args = hdl.arguments(__doc__, seconds=20.0, count=8000,
                         identity_kib=(64, "size of the big claimed identity, KiB"),
                         sources=(1, "source addresses 127.0.0.2 … used in turn"))
    before = hdl.show_rss("before", args.pid)
    big = b"TEST/" + b"x" * (args.identity_kib * 1024)

    def is_big(i, peers):
        return (i // peers) % 2 == 0

    def setup(i, peers):
        identity = big if is_big(i, peers) else b"TEST/ADMIN"
        return hdl.unit(hdl.SESSION_SETUP, hdl.session_setup(identity, 300), i + 1, flags=hdl.REC)

    sent, codes, survived = hdl.tcp_flood(
        args, setup, lambda i, peers, code: f"{'big' if is_big(i, peers) else 'ordinary'} identity: {code}")
    print(f"sent {sent} session setups: {dict(codes)}")
    after = hdl.show_rss("after", args.pid)
    if before and after:
        print(f"RSS grew by {(after - before) / 1024:.1f} MiB")
    hdl.finish(args, survived)


if __name__ == "__main__":
    main()
