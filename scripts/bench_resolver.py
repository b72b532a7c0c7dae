#!/usr/bin/env python3
"""The global resolver under load (issue 31), on loopback, `handled` servers only:
a root homing 0.NA, a prefix server A homing P1 with N handles, and a resolver
(`[resolver]` enabled, `allow_recursion`) with a cache of a set size and its own
LOCAL/0..999. A benchmark, not a test: it prints a markdown table and JSON lines.

  python3 scripts/bench_resolver.py target/release/handled [--handles 1000000]
      [--cache-mb 16] [--seconds 10] [--fill-seconds S] [--zipf 1.0] [--askers 1000]
      [--trust require|prefer|off] [--server-cpus 0 --bench-cpus 1] [--open-loop 0.25,0.5]

Measured, each with `handled bench` (16 clients) against the resolver:
- cached: P1/0..999 after a warm-up that caches them, against LOCAL/0..999 homed on
  the resolver itself (UDP, and the JSON API), req/s, p99, req per server core-second;
  the web proxy's 302 for P1/0 against LOCAL/0 (with wrk, when installed); p99 of the
  cached UDP answers in open loops at fractions of the closed loop's rate (--open-loop);
- Zipf(S) over all N handles of P1 with the cache of --cache-mb, after one run of the
  same that fills it: hit ratio, upstream queries per second, cache entries and bytes,
  the resolver's RSS;
- coalescing: --askers clients (one HTTP connection each, opened first) ask the JSON API
  for one cold handle at the same moment; how many upstream queries that cost.
"""
import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

LOCAL_KEYS = 1000
ECHO_PORT = 26640


def main():
    p = argparse.ArgumentParser()
    p.add_argument("handled")
    p.add_argument("--handles", type=int, default=1_000_000)
    p.add_argument("--cache-mb", type=int, default=16)
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--zipf", type=float, default=1.0)
    p.add_argument("--askers", type=int, default=1000)
    p.add_argument("--fill-seconds", type=float, default=None, help="the Zipf run that fills the cache (default: --seconds)")
    p.add_argument("--trust", default="require", help="the resolver's trust policy: require (A signs every answer), off")
    p.add_argument("--server-cpus", help="pin the servers to these CPUs (taskset -c), so the bench cannot preempt them")
    p.add_argument("--bench-cpus", help="pin the bench (and wrk) to these CPUs")
    p.add_argument("--open-loop", default="0.5", help="fractions of the cached closed-loop peak for the open-loop rows")
    p.add_argument("--echo", help="the echo_reference example (cargo build --release -p handled-server --examples): "
                   "open-looped at the same rates, --raw, as what the box itself allows")
    a = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-resolver."))
    print(f"bench-resolver: logs in {work}", file=sys.stderr)
    w = World(a.handled, work, pin(a.server_cpus), pin(a.bench_cpus))
    try:
        run(a, w)
    finally:
        w.stop()


def pin(cpus):
    """The command prefix that runs a program on `cpus` (none: anywhere)."""
    return ["taskset", "-c", cpus] if cpus else []


class World:
    def __init__(self, handled, work, server_pin, bench_pin):
        self.handled, self.work, self.procs = handled, work, []
        self.server_pin, self.bench_pin = server_pin, bench_pin

    def start(self, name, port, prefixes, records=None, config=None, records_file=None):
        """`handled serve` on 127.0.0.1:port (native) and port+1 (HTTP)."""
        cmd = [self.handled, "serve", "--ephemeral", "--listen", "127.0.0.1", "--port", str(port),
               "--http-port", str(port + 1), "--admin-credentials", str(self.work / f"admin-{name}.json")]
        for prefix in prefixes:
            cmd += ["--prefix", prefix]
        if records is not None:
            records_file = self.work / f"{name}.jsonl"
            with open(records_file, "w") as f:
                for h, v in records:
                    f.write(json.dumps({"handle": h, "values": v}) + "\n")
        if records_file:
            cmd += ["--import", str(records_file)]
        if config:
            path = self.work / f"{name}.toml"
            path.write_text(config)
            cmd += ["--config", str(path)]
        log = open(self.work / f"{name}.log", "w")
        proc = subprocess.Popen(self.server_pin + cmd, stdout=subprocess.PIPE, stderr=log, text=True)
        self.procs.append(proc)
        deadline = time.time() + 900
        while time.time() < deadline:
            line = proc.stdout.readline()
            if not line:
                sys.exit(f"{name} stopped before it was ready (see {self.work}/{name}.log)")
            if line.strip() == "ready":
                return proc
        sys.exit(f"{name}: not ready in 900 s")

    def stop(self):
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()


def get(port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port + 1}{path}", timeout=30) as r:
        return r.read().decode()


def url(index, text):
    return {"index": index, "type": "URL", "data": {"format": "string", "value": text}, "ttl": 86400}


def site_of(port, prefix):
    values = json.loads(get(port, f"/api/handles/0.NA/{prefix}"))["values"]
    return next(v["data"] for v in values if v["type"] == "HS_SITE")


def metrics(port):
    """handled_resolver_* counters and gauges, by name."""
    out = {}
    for line in get(port, "/metrics").splitlines():
        m = re.match(r"^(handled_resolver_[a-z_]+) ([0-9.e+]+)$", line)
        if m:
            out[m.group(1)] = float(m.group(2))
    return out


def rss_mb(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def bench(w, port, pid, transport, keys, seconds, label, zipf=None, count=LOCAL_KEYS, warmup=2, rate=None, extra=()):
    cmd = w.bench_pin + [w.handled, "bench", "--host", "127.0.0.1", "--port", str(port if transport == "udp" else port + 1),
           "--transport", transport, "--key-prefix", keys, "--keys", str(count), "-c", "16",
           "-d", str(seconds), "--warmup", str(warmup), "--server-pid", str(pid), "--json", "--quiet"]
    if zipf:
        cmd += ["--zipf", str(zipf)]
    if rate:
        cmd += ["--rate", str(int(rate))]
    cmd += list(extra)
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 120)
    (w.work / f"bench-{label}.out").write_text(out.stdout + out.stderr)
    lines = out.stdout.strip().splitlines()
    if out.returncode != 0 or not lines:
        sys.exit(f"bench {label} failed (see {w.work}/bench-{label}.out)")
    return json.loads(lines[-1])


def cpu_seconds(pid):
    """utime + stime of a process, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proxy(w, port, pid, path, seconds, label):
    """wrk (16 keep-alive connections) on the web proxy's `path`: req/s, p99 ms, req per
    resolver core-second and the count of answers other than 2xx/3xx."""
    before = cpu_seconds(pid)
    out = subprocess.run(w.bench_pin + ["wrk", "-t1", "-c16", f"-d{int(seconds)}s", "--latency",
                          f"http://127.0.0.1:{port + 1}{path}"], capture_output=True, text=True, timeout=seconds + 60)
    cpu = cpu_seconds(pid) - before
    (w.work / f"wrk-{label}.out").write_text(out.stdout + out.stderr)
    rps = float(re.search(r"Requests/sec:\s+([0-9.]+)", out.stdout).group(1))
    total = int(re.search(r"(\d+) requests in", out.stdout).group(1))
    m = re.search(r"^\s+99%\s+([0-9.]+)(us|ms|s)$", out.stdout, re.M)
    p99 = float(m.group(1)) * {"us": 0.001, "ms": 1, "s": 1000}[m.group(2)]
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out.stdout)
    return {"throughput": rps, "latency_ms": {"p99": p99}, "per_server_core_second": total / cpu if cpu else 0,
            "errors": int(bad.group(1)) if bad else 0}


def ask_together(port, path, askers):
    """`askers` HTTP/1.1 connections, all opened first, each sending one GET for
    `path` at the same moment; returns the status lines' codes."""
    conns = [socket.create_connection(("127.0.0.1", port + 1), timeout=30) for _ in range(askers)]
    request = f"GET {path} HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n".encode()
    gate = threading.Barrier(askers)
    codes = [None] * askers

    def ask(i):
        gate.wait()
        conns[i].sendall(request)
        head = b""
        while b"\r\n" not in head:
            chunk = conns[i].recv(4096)
            if not chunk:
                break
            head += chunk
        codes[i] = head.split(b" ")[1].decode() if head else "none"
        conns[i].close()

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(askers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return codes


def run(a, w):
    records = w.work / "a.jsonl"
    with open(records, "w") as f:
        for n in range(a.handles):
            f.write(json.dumps({"handle": f"P1/{n}", "values": [url(1, f"https://example.org/p1/{n}")]}) + "\n")
        f.write(json.dumps({"handle": "P1/cold", "values": [url(1, "https://example.org/cold")]}) + "\n")
    started = time.time()
    w.start("a", 26610, ["P1"], records_file=records)
    print(f"bench-resolver: A holds {a.handles:,} handles of P1 (started in {time.time() - started:.0f} s)",
          file=sys.stderr)
    root = 26620
    w.start("root", root, ["0.NA"], [("0.NA/P1", [{"index": 1, "type": "HS_SITE", "data": site_of(26610, "P1"),
                                                    "ttl": 86400}])])
    (w.work / "root_info.json").write_text(json.dumps(site_of(root, "0.NA")["value"]))
    port = 26630
    resolver = w.start("resolver", port, ["LOCAL"],
                       [(f"LOCAL/{n}", [url(1, f"https://example.org/local/{n}")]) for n in range(LOCAL_KEYS)],
                       config=("[resolver]\nenabled = true\nallow_recursion = true\n"
                               f"root_info = \"{w.work / 'root_info.json'}\"\n"
                               f"cache_mb = {a.cache_mb}\nper_client = {max(a.askers, 32) * 2}\n"
                               f"client_rate = 0\ntrust = \"{a.trust}\"\n"))
    pid = resolver.pid
    rss_start = rss_mb(pid)
    rows = []
    def cell(r):
        errors = r.get("errors") or 0
        errors = sum(errors.values()) if isinstance(errors, dict) else errors
        return (f"{r['throughput']:,.0f}", f"{r['latency_ms']['p99']:.2f}",
                f"{r.get('per_server_core_second') or 0:,.0f}", str(errors))
    for transport in ["udp", "json-api"]:
        local = bench(w, port, pid, transport, "LOCAL", a.seconds, f"local-{transport}")
        cached = bench(w, port, pid, transport, "P1", a.seconds, f"cached-{transport}")
        rows.append((f"{transport}: LOCAL/0..999, homed on the resolver", *cell(local), "-"))
        ratio = cached["throughput"] / local["throughput"]
        rows.append((f"{transport}: P1/0..999 from the resolver's cache", *cell(cached), f"{ratio:.2f} of local"))
    if shutil.which("wrk"):
        local = proxy(w, port, pid, "/LOCAL/0", a.seconds, "local")
        cached = proxy(w, port, pid, "/P1/0", a.seconds, "cached")
        rows.append(("web proxy (wrk, GET /LOCAL/0, 302)", *cell(local), "-"))
        rows.append(("web proxy (wrk, GET /P1/0 from the cache, 302)", *cell(cached),
                     f"{cached['throughput'] / local['throughput']:.2f} of local"))
    else:
        print("bench-resolver: no wrk, the web proxy rows skipped", file=sys.stderr)
    # p99 below saturation: open loops at fractions of the closed loop's rate, the local
    # handle at the same rates beside (what the box and the bench's open loop allow).
    peak = next(float(r[1].replace(",", "")) for r in rows if r[0].startswith("udp: P1/0..999"))
    echo = None
    if a.echo:
        echo = subprocess.Popen(w.server_pin + [a.echo, "127.0.0.1", str(ECHO_PORT), str(ECHO_PORT + 1)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        w.procs.append(echo)
        time.sleep(0.5)
    for fraction in [float(f) for f in a.open_loop.split(",")]:
        rate = peak * fraction
        targets = [("LOCAL", "LOCAL/0..999", port, pid, []), ("P1", "P1/0..999 from the cache", port, pid, [])]
        if echo:
            targets.append(("LOCAL", "the echo reference (no protocol work)", ECHO_PORT, echo.pid, ["--raw"]))
        for keys, what, at, who, extra in targets:
            r = bench(w, at, who, "udp", keys, a.seconds, f"open-{fraction}-{at}-{keys}", rate=rate, extra=extra)
            rows.append((f"udp: {what}, open loop at {rate:,.0f}/s ({fraction:g} of the cached peak)", *cell(r),
                         f"p99 of service {r['service_ms']['p99']:.2f} ms"))
    # A first run fills the cache (not reported); the second is measured with no warm-up,
    # so the counters' differences cover exactly its requests.
    bench(w, port, pid, "udp", "P1", a.fill_seconds or a.seconds, "zipf-fill", zipf=a.zipf, count=a.handles)
    before = metrics(port)
    zipf = bench(w, port, pid, "udp", "P1", a.seconds, "zipf", zipf=a.zipf, count=a.handles, warmup=0)
    after = metrics(port)
    d = lambda name: after.get(f"handled_resolver_{name}", 0) - before.get(f"handled_resolver_{name}", 0)
    hits, misses = d("hits_total"), d("misses_total")
    seconds = zipf.get("elapsed_s") or a.seconds
    rows.append((f"udp: Zipf({a.zipf}) over {a.handles:,} P1 handles, cache {a.cache_mb} MiB, trust {a.trust}",
                 *cell(zipf),
                 f"hit ratio {hits / max(hits + misses, 1):.3f}"))
    # Coalescing: one cold handle, all askers at once.
    queries = metrics(port).get("handled_resolver_upstream_queries_total", 0)
    codes = ask_together(port, "/api/handles/P1/cold", a.askers)
    coalesced = metrics(port).get("handled_resolver_upstream_queries_total", 0) - queries
    print("| | req/s | p99 ms | req per resolver core-s | errors | |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print()
    ok = sum(1 for c in codes if c == "200")
    print(f"- Zipf run: {hits + misses:,.0f} lookups, {hits:,.0f} hits, {misses:,.0f} misses; "
          f"{d('upstream_queries_total'):,.0f} upstream queries ({d('upstream_queries_total') / seconds:,.0f}/s); "
          f"cache {after.get('handled_resolver_cache_entries', 0):,.0f} entries, "
          f"{after.get('handled_resolver_cache_bytes', 0) / 2**20:.1f} MiB; resolver RSS "
          f"{rss_start:.0f} MB at start, {rss_mb(pid):.0f} MB after")
    print(f"- Coalescing: {a.askers} clients asked for one cold handle at once: {ok} answered 200, "
          f"{coalesced:.0f} upstream quer{'y' if coalesced == 1 else 'ies'}")
    print(json.dumps({"rows": rows, "hits": hits, "misses": misses, "upstream": d("upstream_queries_total"),
                      "seconds": seconds, "askers": a.askers, "answered": ok, "coalesced_upstream": coalesced}))


if __name__ == "__main__":
    main()
