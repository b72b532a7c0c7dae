"""Figures of the global resolver (GLOBAL_RESOLUTION_BENCH=1 tests/global-resolution/run.sh),
in the world world.py builds, beside Handle.Net 9.0.0's HDLProxy when the harness is there:

- a cold miss through the JSON API (median of COLD handles of P1 asked for the first time)
  against asking P1's server directly, then the same handles again (cached);
- JSON API resolution of a cached remote handle under load (`handled bench`, 16 clients),
  req/s, p99 and requests per server core-second, through the handled resolver and through
  HDLProxy, and the resolver's local handle for reference;
- UDP (the bench sets REC, as the Java client does) for the cached remote handle, through the
  handled resolver and through the Handle.Net server itself (allow_recursion), and the
  resolver's local handle for reference.

A benchmark, not a test: it prints a markdown table and asserts nothing.
"""
import json
import statistics
import subprocess
import time


def bench(handled, work, get, cold, a, resolver, resolver_pid, hn):
    def took(port, path):
        t = time.perf_counter()
        try:
            get(port, path)
        except Exception:  # a not-found or a refusal still took its time
            pass
        return (time.perf_counter() - t) * 1000

    rows = []
    median = lambda xs: statistics.median(xs)
    paths = [f"/api/handles/P1/cold{i}" for i in range(cold)]
    direct = median([took(a, p) for p in paths])
    cold_r = median([took(resolver, p) for p in paths])
    warm_r = median([took(resolver, p) for p in paths])
    cold_h = warm_h = None
    if hn:
        # get() asks port + 1: HDLProxy's HTTP port is hn.port + 1.
        cold_h = median([took(hn.port, p) for p in paths])
        warm_h = median([took(hn.port, p) for p in paths])
    fmt = lambda v: "-" if v is None else f"{v:.2f}"
    # What the resolver's upstream exchange costs by itself: one certified UDP request at a
    # time to P1's server (signed there), as the bench measures it (p50 of 200).
    signed = subprocess.run([handled, "bench", "--host", "127.0.0.1", "--port", str(a), "--transport", "udp",
                             "--handle", "P1/doc", "--ops", "resolve-certified", "-c", "1", "--requests", "200",
                             "--warmup", "0", "--json", "--quiet"], capture_output=True, text=True, timeout=120)
    lines = signed.stdout.strip().splitlines()
    signed_p50 = json.loads(lines[-1])["latency_ms"]["p50"] if signed.returncode == 0 and lines else None
    rows.append(("one request, P1 handle asked of its own server, ms (median)", fmt(direct), "-"))
    rows.append(("one certified UDP request to P1's server (signed there), ms (p50)", fmt(signed_p50), "-"))
    rows.append(("cold miss through the JSON API, ms (median)", fmt(cold_r), fmt(cold_h)))
    rows.append(("the same handles again (cached), ms (median)", fmt(warm_r), fmt(warm_h)))

    def run(label, port, transport, handle, pid):
        out = subprocess.run([handled, "bench", "--host", "127.0.0.1", "--port", str(port), "--transport", transport,
                              "--handle", handle, "-c", "16", "-d", "5", "--warmup", "2", "--server-pid", str(pid),
                              "--json", "--quiet"], capture_output=True, text=True, timeout=120)
        (work / f"bench-{label}-{transport}-{handle.replace('/', '_')}.out").write_text(out.stdout + out.stderr)
        lines = out.stdout.strip().splitlines()
        if out.returncode != 0 or not lines:
            return None
        return json.loads(lines[-1])

    def cells(r):
        if r is None:
            return "failed", "-", "-"
        return f"{r['throughput']:,.0f}", f"{r['latency_ms']['p99']:.2f}", f"{r.get('per_server_core_second') or 0:,.0f}"

    hn_pid = int((work / "hn" / "run" / "server.pid").read_text()) if hn else None
    # Over UDP the Handle.Net server itself (allow_recursion) answers the REC requests.
    loads = [("cached remote P1/doc, JSON API", "json-api", "P1/doc", True),
             ("local LOCAL/doc, JSON API", "json-api", "LOCAL/doc", False),
             ("cached remote P1/doc, UDP (REC)", "udp", "P1/doc", True),
             ("local LOCAL/doc, UDP", "udp", "LOCAL/doc", False)]
    for name, transport, handle, both in loads:
        http = transport.startswith("json")
        ours = cells(run("resolver", resolver + http, transport, handle, resolver_pid))
        theirs = cells(run("hdlproxy", hn.port + http, transport, handle, hn_pid)) if (hn and both) else ("-",) * 3
        for i, what in enumerate(["req/s", "p99 ms", "req per server core-s"]):
            rows.append((f"{name}: {what}", ours[i], theirs[i]))

    print("| measured | handled resolver | HDLProxy (Handle.Net 9.0.0) |")
    print("|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} |")
