#!/usr/bin/env python3
"""F8 attack: expensive anonymous reverse-lookup searches from several clients.

--clients threads (max 16) repeat GET /hrls/handles?QUERY for --seconds (max 60);
meanwhile a probe resolves an ordinary handle (GET /api/handles/PROBE) every
0.1 s. Before the fix, with 200k handles `URL=*&page=100` cost 0.7 s of CPU
each and 8 such clients pushed everyone's latency from ~5 ms to 1-2.7 s.

Prints the attackers' answers by status with their median time, the probe's
median and worst latency and, with --pid, the server's RSS. Exits 0 when every
probe was answered 200 with a median latency under --max-median-ms (the server
survived and still serves others in time). Loopback only. Load the server with many handles first (see `handled serve --import`).

    tests/hostile/hrls_scan.py 127.0.0.1:8000 --clients 8 --seconds 10 --probe TEST/ADMIN --pid PID
"""
import argparse
import http.client
import statistics
import sys
import threading
import time

from hostile_common import loopback_target, rss_kb


def timed_get(host, port, path):
    started = time.monotonic()
    try:
        c = http.client.HTTPConnection(host, port, timeout=30)
        c.request("GET", path)
        r = c.getresponse()
        r.read()
        c.close()
        return r.status, time.monotonic() - started
    except OSError as e:
        return f"error {type(e).__name__}", time.monotonic() - started


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("target", help="HOST:PORT of the HTTP port")
    ap.add_argument("--query", default="URL=*&page=100", help="the search (after /hrls/handles?)")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--probe", default="TEST/ADMIN", help="handle the probe resolves")
    ap.add_argument("--pid", type=int, help="server process id, for its RSS")
    ap.add_argument("--max-median-ms", type=float, default=1000, help="probe median latency that counts as served")
    a = ap.parse_args()
    host, port = loopback_target(a.target)
    clients, seconds = min(a.clients, 16), min(a.seconds, 60)
    rss_before = rss_kb(a.pid)
    base_status, base_time = timed_get(host, port, f"/api/handles/{a.probe}")
    deadline = time.monotonic() + seconds
    answers, lock = {}, threading.Lock()

    def attacker():
        while time.monotonic() < deadline:
            status, took = timed_get(host, port, f"/hrls/handles?{a.query}")
            with lock:
                answers.setdefault(status, []).append(took)

    threads = [threading.Thread(target=attacker, daemon=True) for _ in range(clients)]
    for t in threads:
        t.start()
    probes = []
    while time.monotonic() < deadline:
        probes.append(timed_get(host, port, f"/api/handles/{a.probe}"))
        time.sleep(0.1)
    rss_during = rss_kb(a.pid)
    for t in threads:
        t.join(timeout=35)
    after_status, after_time = timed_get(host, port, f"/api/handles/{a.probe}")
    print(f"{clients} clients x {seconds:.0f} s of GET /hrls/handles?{a.query}")
    for status, times in sorted(answers.items(), key=lambda kv: str(kv[0])):
        print(f"  answered {status}: {len(times)} times, median {statistics.median(times) * 1000:.0f} ms")
    ok = [t for s, t in probes if s == 200]
    print(f"  probe before: {base_status} in {base_time * 1000:.1f} ms; during: {len(ok)}/{len(probes)} answered 200, "
          f"median {statistics.median(ok) * 1000 if ok else float('nan'):.1f} ms, "
          f"worst {max(ok) * 1000 if ok else float('nan'):.1f} ms; after: {after_status} in {after_time * 1000:.1f} ms")
    if a.pid is not None:
        print(f"  server RSS: before {rss_before} kB, during {rss_during} kB, after {rss_kb(a.pid)} kB")
    served = probes and len(ok) == len(probes) and statistics.median(ok) * 1000 <= a.max_median_ms
    sys.exit(0 if served and after_status == 200 else 1)


if __name__ == "__main__":
    main()
