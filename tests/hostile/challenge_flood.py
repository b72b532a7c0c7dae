#!/usr/bin/env python3
"""F3 attack: anonymous challenged requests, each as big as allowed.

Every unauthenticated CREATE_HANDLE is answered with a challenge (402), and the
server keeps the request until the challenge is answered or expires. Before the
fix each kept request (up to 256 KiB) stayed for 60 s, 100,000 of them: 20 s of
this took RSS from 15 MB to 2.3 GB. Now a peer holds a bounded share and is
refused (SERVER_TOO_BUSY) beyond it. Bounded by --seconds and --count; from
--sources loopback addresses (127.0.0.2 and up) over TCP.

    tests/hostile/challenge_flood.py 127.0.0.1:2641 --pid $(pidof handled)
"""
import hdl


def main():
    args = hdl.arguments(__doc__, seconds=20.0, count=2000,
                         size_kib=(200, "size of the value in each request, KiB"),
                         sources=(1, "source addresses 127.0.0.2 … used in turn"))
    before = hdl.show_rss("before", args.pid)
    value = hdl.value(1, "URL", b"x" * (args.size_kib * 1024))
    sent, codes, survived = hdl.tcp_flood(
        args,
        lambda i, _: hdl.unit(hdl.CREATE_HANDLE, hdl.create(f"TEST/f3-{i}", [value]), i + 1, flags=hdl.REC),
        lambda i, _, code: code)
    print(f"sent {sent} requests of {args.size_kib} KiB: {dict(codes)}")
    after = hdl.show_rss("after", args.pid)
    if before and after:
        print(f"RSS grew by {(after - before) / 1024:.1f} MiB")
    hdl.finish(args, survived)


if __name__ == "__main__":
    main()
