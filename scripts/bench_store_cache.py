#!/usr/bin/env python3
"""How much of uniform resolution over a large embedded store a larger page
cache (`store_cache_mb`) wins back (issue 29): a store of 10k handles (the
reference, default cache) and one of N, made as scripts/bench_capacity.py makes
them, then, for each cache size, `handled serve` on the large one and UDP resolution with keys uniform over all N (16 clients): a
first run that warms the cache, then the measured one; req/s, req per server
core-second, p99, RSS after, and the server's `pread64` calls per request
when strace is there (each a page the cache did not hold).

    python3 scripts/bench_store_cache.py [--handles 3000000]
        [--cache-mbs 64,256,1024,2048] [--seconds 5] [--bin target/release/handled]

A benchmark, not a test: it prints a markdown table.
"""
import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_capacity import PORT, Server, bench, import_store  # noqa: E402


def preads_per_request(bin_, pid, udp, requests=20000):
    """strace -c on the server for a fixed number of requests: pread64 calls per request."""
    if not shutil.which("strace"):
        return None
    trace = subprocess.Popen(["strace", "-f", "-c", "-e", "trace=pread64", "-p", str(pid)],
                             stderr=subprocess.PIPE, text=True)
    subprocess.run([bin_, "bench", "-c", "16", "--requests", str(requests), "--warmup", "0", "--quiet"] + udp,
                   capture_output=True, text=True)
    trace.terminate()
    out = trace.communicate(timeout=30)[1]
    for line in out.splitlines():
        if line.strip().endswith("pread64"):
            return round(int(line.split()[3]) / requests, 2)
    return 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--handles", type=int, default=3_000_000)
    ap.add_argument("--cache-mbs", default="64,256,1024,2048")
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--work", default="/tmp/handled-store-cache")
    ap.add_argument("--bin", default=os.path.join(os.environ.get("CARGO_TARGET_DIR", "target"), "release/handled"))
    a = ap.parse_args()
    work = Path(a.work)
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    data = work / "data"
    rows = []
    # The reference: 10k handles with the default cache, measured the same way.
    for n, mbs in [(10_000, [64]), (a.handles, [int(x) for x in a.cache_mbs.split(",")])]:
        data = work / f"data-{n}"
        made = import_store(a.bin, work, data, n, 1)
        print(f"# {n:,} handles imported in {made['import_s']} s", file=sys.stderr)
        # The first start bootstraps the store (server key, admin handle).
        Server(a.bin, data, work / f"admin-{n}.json").stop()
        udp = ["--port", str(PORT), "--transport", "udp", "--key-prefix", "TEST", "--keys", str(n)]
        for mb in mbs:
            config = work / f"cache-{mb}.toml"
            config.write_text(f"store_cache_mb = {mb}\n")
            srv = Server(a.bin, data, work / "unused.json", config=config)
            bench(a.bin, srv.proc.pid, udp, a.seconds)  # warms the cache
            r = bench(a.bin, srv.proc.pid, udp, a.seconds)
            preads = preads_per_request(a.bin, srv.proc.pid, udp)
            rows.append((n, mb, r, srv.rss_mb(), preads))
            srv.stop()
            print(f"# {n:,} handles, store_cache_mb = {mb}: {r}", file=sys.stderr)
        shutil.rmtree(data)
    shutil.rmtree(work)
    base = rows[0][2].get("per_core") or 1
    print("| handles | store_cache_mb | UDP req/s | req per server core-s | vs 10k | p99 ms | RSS after MB |"
          " pread64 per request |")
    print("|---|---|---|---|---|---|---|---|")
    for n, mb, r, rss, preads in rows:
        print(f"| {n:,} | {mb} | {r.get('rps', 0):,} | {r.get('per_core', 0):,} | {r.get('per_core', 0) / base:.2f} | "
              f"{r.get('p99_ms', '-')} | {rss} | {'-' if preads is None else preads} |")


if __name__ == "__main__":
    main()
