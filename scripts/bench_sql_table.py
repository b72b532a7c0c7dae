#!/usr/bin/env python3
"""The markdown table of scripts/bench-sql-vs-handle-net.sh from its JSON lines.

Each figure is the span over rounds (min–max); ratios are of medians. Per core-second
figures count the server's CPU and, for the servers on PostgreSQL, the database's.
"""
import json
import statistics
import sys

SERVERS = [("handle-net", "Handle.Net 9.0.0 on PostgreSQL"), ("handled-sql", "handled on PostgreSQL"),
           ("handled-embedded", "handled, embedded store")]


def main(path):
    rows = [json.loads(line) for line in open(path) if line.strip()]
    for r in rows:
        if isinstance(r.get("errors"), dict):
            r["errors"] = sum(r["errors"].values())
        r["per_core"] = r.get("per_server_and_db_core_second") or r.get("per_server_core_second")
        r["p99"] = r["latency_ms"]["p99"]
        cpu = (r.get("server_cpu_s") or 0) + (r.get("db_cpu_s") or 0)
        r["db_share"] = 100 * r["db_cpu_s"] / cpu if r.get("db_cpu_s") is not None and cpu else None

    def values(server, what, key):
        return [r[key] for r in rows if r["server"] == server and r["what"] == what and r.get(key) is not None]

    def span(vals, fmt):
        if not vals:
            return "-"
        lo, hi = min(vals), max(vals)
        return fmt(lo) if fmt(lo) == fmt(hi) else f"{fmt(lo)}–{fmt(hi)}"

    def ratio(a, b):
        if not a or not b or not statistics.median(a):
            return "-"
        return f"{statistics.median(b) / statistics.median(a):.2f}×"

    n = lambda v: f"{v:,.0f}"
    ms = lambda v: f"{v:.2f}"
    print("| measured | " + " | ".join(label for _, label in SERVERS)
          + " | handled on PostgreSQL ÷ Handle.Net (medians) |")
    print("|---|" + "---|" * (len(SERVERS) + 1))

    def line(label, what, key, fmt=n, compare=True):
        cols = [values(s, what, key) for s, _ in SERVERS]
        r = ratio(cols[0], cols[1]) if compare else "-"
        print(f"| {label} | " + " | ".join(span(c, fmt) for c in cols) + f" | {r} |")

    for what, label in [("udp", "UDP"), ("tcp", "TCP, a connection per request"), ("json", "JSON API (HTTPS)")]:
        line(f"resolution over {label}, req/s", what, "throughput")
        line(f"resolution over {label}, req per server(+database) core-s", what, "per_core")
        line("  PostgreSQL's share of that CPU, %", what, "db_share", compare=False)
    line("UDP p99 at half of peak, ms", "udp-half", "p99", ms)
    line("JSON API p99 at half of peak, ms", "json-half", "p99", ms)
    line("durable creates (16 sessions, HTTP tunnel), /s", "create", "throughput")
    line("durable creates per server(+database) core-s", "create", "per_core")
    # Errors of every run of a round (timeouts count), per server.
    per_round = [[sum(r["errors"] for r in rows if r["server"] == s and r["round"] == k)
                  for k in sorted({r["round"] for r in rows})] for s, _ in SERVERS]
    print("| errors, all runs of a round | " + " | ".join(span(c, n) for c in per_round) + " | - |")


if __name__ == "__main__":
    main(sys.argv[1])
