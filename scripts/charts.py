#!/usr/bin/env python3
"""Charts and figures for the load scripts (surge.sh, concurrency.sh).

  charts.py scrape URL OUT.csv          poll handled's /metrics every 100 ms until killed
  charts.py render OUT.csv START HOLD_FROM HOLD_TO PEAK_BEFORE PEAK_AFTER TITLE OUT.svg
  charts.py refusals URL                the server's own refusal times
  charts.py concurrency TITLE OUT.svg LABEL=RUNS.jsonl...
                                        throughput and latency vs clients
  charts.py rss RSS.csv TITLE OUT.svg   resident memory over time (soak.sh)
  charts.py capacity TITLE OUT.svg RUNS.jsonl...
                                        bench_capacity.py: resolution against store size

`render` (surge) draws admitted, queued and refused requests per second (100 ms
slices) and the queue depth over time, and prints the admitted rate during the
hold window [START+HOLD_FROM, START+HOLD_TO] as a fraction of the peak (the
throughput measured without overload, before and after the surge), and the
server's refusal times within the hold. `concurrency` reads `handled bench
--concurrency-sweep ... --json` output, one file per configuration, prints a
markdown table and draws throughput and p50/p99 latency against clients.
Standard library only.
"""
import json
import math
import re
import sys
import time
import urllib.request

COUNTERS = {
    "admitted": r"^handled_admission_admitted_total (\S+)",
    "queued": r"^handled_admission_queued_total (\S+)",
    "refused": r"^handled_admission_rejected_total\{[^}]*\} (\S+)",
    "waiting": r"^handled_admission_waiting (\S+)",
}


REFUSAL_BUCKETS = r'^handled_refusal_duration_seconds_bucket\{le="([^"]+)",transport="udp"\} (\S+)'


def scrape(url, out):
    """One row per 100 ms: the admission counters, then the UDP refusal
    histogram's cumulative buckets as `bound:count;...` (empty until the first
    refusal creates the series), so a window's refusal times can be read off."""
    with open(out, "w") as f:
        f.write(",".join(["t"] + list(COUNTERS) + ["refusal_buckets"]) + "\n")
        while True:
            t = time.time()
            try:
                text = urllib.request.urlopen(url, timeout=1).read().decode()
            except OSError:
                time.sleep(0.1)
                continue
            row = ["%.3f" % t]
            for pattern in COUNTERS.values():
                row.append("%g" % sum(float(v) for v in re.findall(pattern, text, re.M)))
            row.append(";".join("%s:%s" % b for b in re.findall(REFUSAL_BUCKETS, text, re.M)))
            f.write(",".join(row) + "\n")
            f.flush()
            time.sleep(max(0.0, 0.1 - (time.time() - t)))


def parse_buckets(field):
    """`bound:count;...` → [(bound, count)]."""
    return [(float(le), float(n)) for le, n in (b.split(":") for b in field.split(";") if b)]


def quantile_bounds(buckets):
    """[(upper bound, count)] of a window → (total, p50 bound, p99 bound, share ≤ 1 ms)."""
    total = buckets[-1][1] if buckets else 0
    if not total:
        return 0, None, None, None
    bound = lambda q: next(le for le, n in buckets if n >= q * total)
    within_1ms = max((n for le, n in buckets if le <= 0.001), default=0)
    return total, bound(0.5), bound(0.99), within_1ms / total


def refusals(url):
    """p50/p99 of handled_refusal_duration_seconds (UDP), as bucket upper bounds."""
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    buckets = [(float(le), float(n)) for le, n in re.findall(REFUSAL_BUCKETS, text, re.M)]
    total, p50, p99, _ = quantile_bounds(buckets)
    if not total:
        print("server: no refusals recorded")
        return
    print("server, whole run: %d refusals, time from arrival to answer p50 ≤ %g µs, p99 ≤ %g µs"
          % (total, p50 * 1e6, p99 * 1e6))


def rates(rows):
    """Per-second rates between consecutive samples: (t, admitted, queued, refused, waiting)."""
    out = []
    for a, b in zip(rows, rows[1:]):
        dt = b[0] - a[0]
        if dt <= 0:
            continue
        out.append((b[0], (b[1] - a[1]) / dt, (b[2] - a[2]) / dt, (b[3] - a[3]) / dt, b[4]))
    return out


def polyline(points, color, width=1.5, dash=None):
    d = " ".join("%.1f,%.1f" % p for p in points)
    extra = ' stroke-dasharray="%s"' % dash if dash else ""
    return '<polyline fill="none" stroke="%s" stroke-width="%s"%s points="%s"/>' % (color, width, extra, d)


def render(csv, start, hold_from, hold_to, peak_before, peak_after, title, svg):
    """The peak without overload is measured before and after the surge; the
    hold is compared with their mean, so a host that drifts between the two
    measurements does not decide the figure."""
    rows, buckets = [], []
    for line in open(csv).read().splitlines()[1:]:
        fields = line.split(",")
        rows.append(tuple(float(x) for x in fields[:5]))
        buckets.append(parse_buckets(fields[5]))
    series = [r for r in rates(rows) if r[0] >= start - 1]
    if not series:
        sys.exit("no samples after the start time")
    t0 = start
    peak = (peak_before + peak_after) / 2
    # Counters read at the window's ends, not a mean of the 100 ms slices
    # (a late scrape makes one slice short and the next long).
    hold = [(r, b) for r, b in zip(rows, buckets) if start + hold_from <= r[0] <= start + hold_to]
    if len(hold) < 2:
        sys.exit("no samples in the hold window")
    (first, first_buckets), (last, last_buckets) = hold[0], hold[-1]
    span = last[0] - first[0]
    admitted = (last[1] - first[1]) / span
    refused = (last[3] - first[3]) / span
    print("hold window: admitted %.0f/s = %.1f%% of peak %.0f/s (before %.0f, after %.0f); refused %.0f/s; "
          "offered ≈ %.0f/s (%.1f× peak)" % (admitted, 100 * admitted / peak, peak, peak_before, peak_after,
                                             refused, admitted + refused, (admitted + refused) / peak))
    if last_buckets:
        before = dict(first_buckets)
        total, p50, p99, within = quantile_bounds([(le, n - before.get(le, 0)) for le, n in last_buckets])
        if total:
            print("hold window, server: %d refusals, time from arrival to answer p50 ≤ %g µs, p99 ≤ %g µs; "
                  "%.3f%% within 1 ms" % (total, p50 * 1e6, p99 * 1e6, 100 * within))

    # Top panel: everything; bottom panel (below h): admitted against the peak.
    w, h, left, right, top, bottom = 820, 400, 70, 70, 40, 50
    h2 = 190
    tmax = max(r[0] for r in series) - t0
    ymax = max(max(r[1], r[2], r[3]) for r in series) * 1.05 or 1
    qmax = max(max(r[4] for r in series) * 1.2, 1)
    x = lambda t: left + (t - t0) / max(tmax, 1e-9) * (w - left - right)
    y = lambda v: h - bottom - v / ymax * (h - top - bottom)
    yq = lambda v: h - bottom - v / qmax * (h - top - bottom)
    parts = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">' % (w, h + h2, w, h + h2),
             '<rect width="100%" height="100%" fill="white"/>',
             '<text x="%d" y="20" text-anchor="middle" font-size="14">%s</text>' % (w / 2, title)]
    amax = 1.5 * peak
    ya = lambda v: h + h2 - 30 - min(v, amax) / amax * (h2 - 60)
    parts.append('<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="#eef5ff"/>' % (x(t0 + hold_from), h + 30, x(t0 + hold_to) - x(t0 + hold_from), h2 - 60))
    parts.append('<text x="%d" y="%d" text-anchor="middle" font-size="12">admitted vs the peak without overload (shaded: the hold window, admitted %.1f%% of peak)</text>' % (w / 2, h + 20, 100 * admitted / peak))
    for frac in (0, 0.5, 1.0, 1.5):
        parts.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/>' % (left, w - right, ya(frac * peak), ya(frac * peak)))
        parts.append('<text x="%d" y="%.1f" text-anchor="end">%.0f</text>' % (left - 5, ya(frac * peak) + 4, frac * peak))
    parts.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#2a7" stroke-dasharray="6,4"/>' % (left, w - right, ya(peak), ya(peak)))
    parts.append(polyline([(x(r[0]), ya(r[1])) for r in series], "#06c", 2))
    # Axes and grid.
    for i in range(6):
        v = ymax * i / 5
        parts.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/>' % (left, w - right, y(v), y(v)))
        parts.append('<text x="%d" y="%.1f" text-anchor="end">%.0f</text>' % (left - 5, y(v) + 4, v))
        parts.append('<text x="%d" y="%.1f" fill="#888">%.0f</text>' % (w - right + 5, yq(qmax * i / 5) + 4, qmax * i / 5))
    step = max(1, int(tmax / 10))
    for s in range(0, int(tmax) + 1, step):
        parts.append('<text x="%.1f" y="%d" text-anchor="middle">%d</text>' % (x(t0 + s), h - bottom + 15, s))
    parts.append('<text x="%d" y="%d" text-anchor="middle">seconds</text>' % (w / 2, h - 12))
    parts.append('<text transform="translate(15,%d) rotate(-90)" text-anchor="middle">requests per second (100 ms slices)</text>' % (h / 2))
    parts.append('<text transform="translate(%d,%d) rotate(90)" text-anchor="middle" fill="#888">requests waiting in the queue</text>' % (w - 15, h / 2))
    parts.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#2a7" stroke-dasharray="6,4"/>' % (left, w - right, y(peak), y(peak)))
    parts.append('<text x="%d" y="%.1f" fill="#2a7">peak without overload</text>' % (left + 5, y(peak) - 4))
    parts.append(polyline([(x(r[0]), y(r[3])) for r in series], "#d33"))
    parts.append(polyline([(x(r[0]), y(r[2])) for r in series], "#e90", 1.2))
    parts.append(polyline([(x(r[0]), y(r[1])) for r in series], "#06c", 2))
    parts.append(polyline([(x(r[0]), yq(r[4])) for r in series], "#888", 1, "2,2"))
    legend = [("#06c", "admitted"), ("#e90", "queued (entered the queue)"), ("#d33", "refused (too busy)"), ("#888", "queue depth (right axis)")]
    for i, (c, label) in enumerate(legend):
        parts.append('<rect x="%d" y="%d" width="12" height="3" fill="%s"/><text x="%d" y="%d">%s</text>' % (left + 10 + i * 175, top - 6, c, left + 26 + i * 175, top - 2, label))
    parts.append("</svg>")
    open(svg, "w").write("\n".join(parts) + "\n")


def xy_panel(parts, geometry, x0, xs, xlabel, xfmt, label, values, fmt):
    """One chart of `values` [(name, [(x, y, (color, dash))])] against xs on a log
    scale, at x0 in an SVG of geometry (height, panel width, top, bottom margins)."""
    h, pw, top, bottom = geometry
    ymax = max(v for _, series in values for _, v, _ in series) * 1.1 or 1
    lo, hi = math.log(xs[0]), math.log(xs[-1])
    x = lambda c: x0 + (math.log(c) - lo) / max(1e-9, hi - lo) * pw
    y = lambda v: h - bottom - v / ymax * (h - top - bottom)
    for i in range(6):
        v = ymax * i / 5
        parts.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/>' % (x0, x0 + pw, y(v), y(v)))
        parts.append('<text x="%d" y="%.1f" text-anchor="end">%s</text>' % (x0 - 5, y(v) + 4, fmt(v)))
    for c in xs:
        parts.append('<text x="%.1f" y="%d" text-anchor="middle">%s</text>' % (x(c), h - bottom + 15, xfmt(c)))
    parts.append('<text x="%d" y="%d" text-anchor="middle">%s</text>' % (x0 + pw / 2, h - bottom + 32, xlabel))
    parts.append('<text x="%d" y="%d" text-anchor="middle" font-size="12">%s</text>' % (x0 + pw / 2, top - 12, label))
    for name, series in values:
        color, dash = series[0][2]
        parts.append(polyline([(x(c), y(v)) for c, v, _ in series], color, 2, dash))
        for c, v, _ in series:
            parts.append('<circle cx="%.1f" cy="%.1f" r="2.5" fill="%s"/>' % (x(c), y(v), color))


def svg_start(w, h, title):
    return ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">' % (w, h, w, h),
            '<rect width="100%" height="100%" fill="white"/>',
            '<text x="%d" y="20" text-anchor="middle" font-size="14">%s</text>' % (w / 2, title)]


def legend(parts, h, left, entries, step=200):
    for i, (label, color, dash) in enumerate(entries):
        x = left + i * step
        extra = ' stroke-dasharray="%s"' % dash if dash else ""
        parts.append('<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-width="3"%s/><text x="%d" y="%d">%s</text>'
                     % (x, x + 14, h - 6, h - 6, color, extra, x + 18, h - 2, label))


def handles_label(n):
    return f"{n / 1e6:g}M" if n >= 1e6 else f"{n / 1e3:g}k"


def capacity(title, svg, paths):
    """`scripts/bench_capacity.py --json-out` files, one per run (each run's
    first size is its reference): resolution per server core-second relative
    to it, and where a UDP request's time goes (the store's lookup alone
    against the whole). A size in several files: the last file's."""
    kinds = ("udp", "udp_zipf", "json", "json_zipf")
    by_size = {}
    for p in paths:
        # Each run's ratios against its own first (smallest) size.
        run = sorted((r for r in map(json.loads, open(p)) if "udp" in r), key=lambda r: r["handles"])
        for r in run:
            r["rel"] = {k: r[k]["per_core"] / run[0][k]["per_core"] for k in kinds if r[k].get("per_core")}
            by_size[r["handles"]] = r
    rows = [by_size[n] for n in sorted(by_size)]
    sizes = [r["handles"] for r in rows]
    colors = {"udp": "#06c", "udp_zipf": "#06c", "json": "#d33", "json_zipf": "#d33"}
    rel = []
    for k, name in zip(kinds, ["UDP uniform", "UDP Zipf 1.0", "JSON uniform", "JSON Zipf 1.0"]):
        pts = [(r["handles"], r["rel"][k], (colors[k], "5,3" if "zipf" in k else None)) for r in rows if k in r["rel"]]
        rel.append((name, pts))
    cost = [("server, µs per UDP request", [(r["handles"], 1e6 / r["udp"]["per_core"], ("#06c", None)) for r in rows]),
            ("store alone, µs per get", [(r["handles"], r["store_get_us"], ("#2a7", None)) for r in rows if "store_get_us" in r])]
    print("| handles | " + " | ".join(n for n, _ in rel) + " | server µs/UDP request | store µs/get |")
    print("|---|" + "---:|" * (len(rel) + 2))
    for r in rows:
        cells = [f"{r['rel'].get(k, float('nan')):.2f}" for k in kinds]
        print(f"| {r['handles']:,} | " + " | ".join(cells) + f" | {1e6 / r['udp']['per_core']:.2f} | {r.get('store_get_us', '-')} |")
    w, h, pw, top, bottom, left = 950, 400, 360, 50, 70, 70
    parts = svg_start(w, h, title)
    geometry = (h, pw, top, bottom)
    xl = "handles in the store (log scale)"
    xy_panel(parts, geometry, left, sizes, xl, handles_label, "req per server core-second, relative to %s" % handles_label(sizes[0]),
             rel, lambda v: "%.2f" % v)
    xy_panel(parts, geometry, left + pw + 110, sizes, xl, handles_label, "µs of one lookup: the server's against the store's",
             cost, lambda v: "%.1f" % v)
    legend(parts, h, left, [("UDP", "#06c", None), ("JSON API", "#d33", None), ("Zipf keys: dashed", "#777", "5,3"),
                            ("store alone (right)", "#2a7", None)], step=170)
    parts.append("</svg>")
    open(svg, "w").write("\n".join(parts) + "\n")


def concurrency(title, svg, runs):
    """runs: [(label, path)]; each path holds one JSON line per sweep step."""
    data = []
    for label, path in runs:
        steps = [json.loads(l) for l in open(path) if l.strip().startswith("{")]
        data.append((label, [(s["clients"], s["throughput"], s["latency_ms"]["p50"], s["latency_ms"]["p99"],
                              s.get("per_server_core_second")) for s in steps]))
    print("| configuration | clients | req/s | p50 ms | p99 ms | req per server core-s |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, steps in data:
        for c, t, p50, p99, per in steps:
            print("| %s | %d | %s | %.3f | %.3f | %s |" % (label, c, f"{t:,.0f}", p50, p99, f"{per:,.0f}" if per else "-"))
    colors = ["#06c", "#d33", "#2a7", "#e90"]
    w, h, pw, top, bottom, left = 950, 400, 360, 50, 70, 70
    parts = svg_start(w, h, title)
    clients = sorted({c for _, steps in data for c, *_ in steps})
    geometry = (h, pw, top, bottom)
    def panel(x0, label, values, fmt):
        xy_panel(parts, geometry, x0, clients, "clients (log scale)", str, label, values, fmt)
    thr = [(label, [(c, t, (colors[i], None)) for c, t, *_ in steps]) for i, (label, steps) in enumerate(data)]
    lat = []
    for i, (label, steps) in enumerate(data):
        lat.append((label + " p50", [(c, p50, (colors[i], None)) for c, _, p50, _, _ in steps]))
        lat.append((label + " p99", [(c, p99, (colors[i], "5,3")) for c, _, _, p99, _ in steps]))
    panel(left, "throughput (requests/s)", thr, lambda v: f"{v:,.0f}")
    panel(left + pw + 110, "latency (ms): p50 solid, p99 dashed", lat, lambda v: "%.2f" % v)
    legend(parts, h, left, [(label, colors[i], None) for i, (label, _) in enumerate(data)])
    parts.append("</svg>")
    open(svg, "w").write("\n".join(parts) + "\n")


def rss(csv, title, svg):
    rows = [tuple(float(x) for x in l.split(",")) for l in open(csv).read().splitlines()[1:]]
    print("| minute | RSS MB |")
    print("|---:|---:|")
    for t, mb in rows:
        if t % 60 < 10 or t == rows[-1][0]:
            print("| %.1f | %.1f |" % (t / 60, mb))
    loaded = [mb for t, mb in rows[1:-1]]
    if len(loaded) >= 4:
        half = len(loaded) // 2
        print("under load: min %.1f, max %.1f MB; mean of the first half %.1f, of the second half %.1f MB"
              % (min(loaded), max(loaded), sum(loaded[:half]) / half, sum(loaded[half:]) / (len(loaded) - half)))
    w, h, left, right, top, bottom = 820, 320, 70, 30, 40, 50
    tmax = max(t for t, _ in rows) or 1
    ymax = max(mb for _, mb in rows) * 1.2
    x = lambda t: left + t / tmax * (w - left - right)
    y = lambda v: h - bottom - v / ymax * (h - top - bottom)
    parts = svg_start(w, h, title)
    for i in range(6):
        v = ymax * i / 5
        parts.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/>' % (left, w - right, y(v), y(v)))
        parts.append('<text x="%d" y="%.1f" text-anchor="end">%.0f MB</text>' % (left - 5, y(v) + 4, v))
    for m in range(0, int(tmax / 60) + 1):
        parts.append('<text x="%.1f" y="%d" text-anchor="middle">%d</text>' % (x(m * 60), h - bottom + 15, m))
    parts.append('<text x="%d" y="%d" text-anchor="middle">minutes</text>' % (w / 2, h - 12))
    parts.append(polyline([(x(t), y(mb)) for t, mb in rows], "#06c", 2))
    parts.append("</svg>")
    open(svg, "w").write("\n".join(parts) + "\n")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "scrape":
        scrape(sys.argv[2], sys.argv[3])
    elif len(sys.argv) >= 5 and sys.argv[1] == "concurrency":
        concurrency(sys.argv[2], sys.argv[3], [tuple(a.rsplit("=", 1)) for a in sys.argv[4:]])
    elif len(sys.argv) >= 5 and sys.argv[1] == "capacity":
        capacity(sys.argv[2], sys.argv[3], sys.argv[4:])
    elif len(sys.argv) == 5 and sys.argv[1] == "rss":
        rss(sys.argv[2], sys.argv[3], sys.argv[4])
    elif len(sys.argv) == 3 and sys.argv[1] == "refusals":
        refusals(sys.argv[2])
    elif len(sys.argv) == 10 and sys.argv[1] == "render":
        render(sys.argv[2], *map(float, sys.argv[3:8]), sys.argv[8], sys.argv[9])
    else:
        sys.exit(__doc__)
