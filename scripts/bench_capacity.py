#!/usr/bin/env python3
"""How `handled` on the embedded store holds up as it grows (issue 29 part 1).

    python3 scripts/bench_capacity.py [--sizes 1000000,10000000] [--work DIR]
                                      [--seconds 5] [--bin target/release/handled]
                                      [--no-key-directory] [--churn F] [--mirror] [--no-backup] [--cold]

For 10k handles and then each size (ascending), in one run on this box:
* import: the records (TEST/<n>, a URL and an EMAIL value each, as
  scripts/seed-data.sh makes them) in a fixed pseudo-random order, in one
  `handled import` (or, with --slices K, K imports of n/K records each into the
  growing store: the rate per slice is the curve of incremental loads): wall
  time, handles/s, peak RSS;
* disk: bytes per handle (the store file, its log, the whole directory);
* the store alone: point reads of uniform keys on one thread
  (`keydir_bench`, when the example is built: `cargo build --release
  --examples`), the store's share of a lookup without the network and the
  protocol: through the key directory and through redb (the server's default
  64 MiB page cache) on the same data directory, and after a restart with its
  files dropped from the OS page cache; with --no-key-directory redb's alone
  (`store_bench --reads-on`);
* `serve`: time to its "ready" line and to `/readyz` answering 200 (a restart
  with the files in the page cache), RSS at rest, RSS after the load;
* resolution: UDP and the JSON API, keys uniform over all handles and Zipf
  (s = 1.0), req/s and req per server core-second (the ratio to the 10k figure
  is the result: the CPU-normalised figure stays meaningful on a busy box), and
  p99 of UDP at half of its peak (open loop);
* `/hrls` exact-URL lookups (indexed reverse lookup): p50/p99;
* durable creates (tcp-persistent, admin session), against the same into the
  10k store;
* `handled backup` (unthrottled) and `handled restore`: time and MB/s;
* churn (--churn F, default 0.1): a fraction F of the handles deleted through
  the JSON API, then re-added the same way (PUT, the same two values), rates
  and bytes per handle on disk after;
* a mirror (--mirror): a second `handled` with `replication_source` set to the
  first, its initial dump timed from start to the `pulling` phase, handles/s,
  the mirror's peak RSS, its bytes per handle;
* a cold start (--cold, as root): the OS page cache dropped
  (`/proc/sys/vm/drop_caches`), `serve` started again: its "ready" line,
  `/readyz` answering 200, and UDP uniform resolution in one-second windows
  from the spawn on, each against the warm rate measured the same way (a
  fresh client's second, no warm-up) on a restart with the files cached.
With --alternate K (after a run with --keep left the data directories): no
import, only resolution, K rounds alternating 10k and each size, a fresh
`serve` for each, UDP and the JSON API uniform and Zipf; per round the ratio
of each size's per-core rate to the 10k one just before it, and the medians
(on a shared box one pass of 5-s runs swings by ±20%); --pin keeps `serve`
on CPU 0 and the load on CPU 1.
With --no-key-directory every `import` and `serve` runs with `store_key_directory
= false` (the key directory, issue 45, is on by default): lookups walk redb's tree.
Prints a markdown table per size and one JSON line per size to --json-out.
A benchmark, not a test: nothing here asserts a figure.
"""
import argparse
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import base64
import http.client
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

PORT, HTTP = 26641, 26800
MIRROR_PORT, MIRROR_HTTP = 26642, 26801
MULTIPLIER = 2654435761  # odd, so a bijection of 0..n-1 once coprime with n


def permutation(n):
    a = MULTIPLIER
    while math.gcd(a, n) != 1:
        a += 2
    return lambda i: (a * i + 7919) % n


def values_json(k):
    """The two values of TEST/k, as the import and the JSON API take them."""
    return ('[{"index":1,"type":"URL","data":{"format":"string","value":"https://example.org/objects/%d"}},'
            '{"index":2,"type":"EMAIL","data":{"format":"string","value":"owner%d@example.org"}}]' % (k, k % 977))


def write_slice(path, n, lo, hi):
    perm = permutation(n)
    with open(path, "w") as f:
        for i in range(lo, hi):
            k = perm(i)
            f.write('{"handle":"TEST/%d","values":%s}\n' % (k, values_json(k)))


def run_child(args):
    """Run a command to its end: (seconds, its stderr); exits naming it if it fails."""
    started = time.monotonic()
    p = subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    err = p.stderr
    if p.returncode != 0:
        sys.exit(f"{' '.join(map(str, args))} failed: {err.strip()[-500:]}")
    return time.monotonic() - started, err


def peak_rss_mb(args):
    """Run under /usr/bin/time -f %M: (seconds, peak RSS MB)."""
    secs, err = run_child(["/usr/bin/time", "-f", "PEAK %M"] + args)
    peak = int(re.findall(r"PEAK (\d+)", err)[-1])
    return secs, peak / 1024


def import_store(bin_, work, data, n, slices, config=None):
    rates, total, peak = [], 0.0, 0.0
    extra = ["--config", str(config)] if config else []
    per = max(1, n // slices)
    for s in range(slices):
        lo, hi = s * per, (n if s == slices - 1 else (s + 1) * per)
        src = work / "slice.jsonl"
        write_slice(src, n, lo, hi)
        secs, mb = peak_rss_mb([bin_, "import", str(src), "--data-dir", str(data)] + extra)
        src.unlink()
        rates.append(round((hi - lo) / secs))
        total += secs
        peak = max(peak, mb)
    return {"import_s": round(total, 1), "import_rates": rates, "import_peak_rss_mb": round(peak)}


def store_reads(bin_, data, n, seconds):
    """The store's own lookup cost (store_bench --reads-on), if the example is built."""
    exe = Path(bin_).parent / "examples" / "store_bench"
    if not exe.exists():
        print(f"# {exe} not built: no store-only reads", file=sys.stderr)
        return {}
    out = subprocess.run([str(exe), "--reads-on", str(data / "handles.redb"), str(n), "--cache-mb", "64",
                          "--secs", str(seconds)], capture_output=True, text=True)
    if out.returncode != 0:
        return {"store_reads_error": out.stderr.strip()[-300:]}
    r = json.loads(out.stdout.strip().splitlines()[-1])
    return {"store_get_us": r["mean_us"], "store_get_p99_us": r["p99_us"], "store_gets_per_s": r["gets_per_s"]}


def disk(data, n):
    """Bytes per handle actually allocated (redb grows its file sparsely, so
    the apparent size says more than the disk holds)."""
    allocated = {p: p.stat().st_blocks * 512 for p in data.rglob("*") if p.is_file()}
    store = sum(size for p, size in allocated.items() if p.name == "handles.redb")
    total = sum(allocated.values())
    return {"store_bytes_per_handle": round(store / n), "dir_bytes_per_handle": round(total / n),
            "dir_mb": round(total / 2**20)}


class Server:
    def __init__(self, bin_, data, creds, config=None, ports=(PORT, HTTP)):
        """`handled serve` on `data`; `config`: a handled.toml file to start with;
        `creds`: where its admin credentials go (None: a mirror, which makes no admin)."""
        self.started = time.monotonic()
        extra = ["--config", str(config)] if config else []
        if creds:
            extra += ["--prefix", "TEST", "--admin-credentials", str(creds)]
        self.proc = subprocess.Popen(SERVER_CPUS + [bin_, "serve", "--data-dir", str(data), "--listen", "127.0.0.1", "--port", str(ports[0]),
                                      "--http-port", str(ports[1])] + extra,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        said = []
        for line in self.proc.stdout:
            said.append(line)
            if line.strip() == "ready":
                self.ready_ms = (time.monotonic() - self.started) * 1000
                break
        else:
            sys.exit(f"serve on {data} stopped before ready: {''.join(said[-5:])}")
        # Keep draining its output so that logging never blocks the server.
        threading.Thread(target=lambda: [None for _ in self.proc.stdout], daemon=True).start()

    def readyz_ms(self, timeout=600):
        """Poll `/readyz` until it answers 200: ms from the spawn (None: it never did)."""
        while time.monotonic() - self.started < timeout and self.proc.poll() is None:
            try:
                if urllib.request.urlopen(f"http://127.0.0.1:{HTTP}/readyz", timeout=5).status == 200:
                    return round((time.monotonic() - self.started) * 1000)
            except OSError:
                pass  # 503 while warming (HTTPError is an OSError), or not listening yet
            time.sleep(0.05)
        return None

    def rss_mb(self, field="VmRSS"):
        """Resident memory now (VmRSS) or at its peak so far (VmHWM), MB."""
        for line in open(f"/proc/{self.proc.pid}/status"):
            if line.startswith(field):
                return round(int(line.split()[1]) / 1024, 1)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=60)


# --pin: `serve` on CPU 0, `handled bench` on CPU 1 (less scheduling noise on a 2-core box).
SERVER_CPUS, CLIENT_CPUS = [], []


def bench(bin_, pid, extra, seconds, clients=16, warmup=1):
    out = subprocess.run(CLIENT_CPUS + [bin_, "bench", "-c", str(clients), "-d", str(seconds), "--warmup", str(warmup), "--server-pid", str(pid),
                          "--json", "--quiet"] + extra, capture_output=True, text=True)
    if out.returncode != 0 or not out.stdout.strip():
        return {"error": out.stderr.strip()[-300:]}
    r = json.loads(out.stdout.strip().splitlines()[-1])
    return {"rps": round(r["throughput"]), "per_core": round(r.get("per_server_core_second") or 0),
            "p99_ms": r["latency_ms"]["p99"], "errors": sum(r["errors"].values())}


def churn_keys(n, fraction):
    """Every (1/fraction)-th key: spread over the whole tree, as TEST/<k> sort."""
    step = max(1, round(1 / fraction))
    return range(3 % step, n, step)


def json_api_each(creds, method, keys, threads=8):
    """`method` /api/handles/TEST/<k> for every k, `threads` keep-alive
    connections with Basic authentication: (seconds, requests that failed)."""
    c = json.load(open(creds))
    user = urllib.parse.quote(f"{c['secret_key']['index']}:{c['handle']}", safe="")
    auth = "Basic " + base64.b64encode(f"{user}:{c['secret_key']['secret']}".encode()).decode()
    failed = [0] * threads
    said = []

    def run(t):
        conn = http.client.HTTPConnection("127.0.0.1", HTTP, timeout=30)
        for k in keys[t::threads]:
            body = '{"values":%s}' % values_json(k) if method == "PUT" else None
            conn.request(method, f"/api/handles/TEST/{k}", body=body,
                         headers={"Authorization": auth, "Content-Type": "application/json"})
            r = conn.getresponse()
            answer = r.read()
            if r.status not in (200, 201):
                failed[t] += 1
                said[:1] = [f"{r.status} {answer[:200]!r}"]
        conn.close()

    started = time.monotonic()
    workers = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    if said:
        print(f"# {method}: {sum(failed)} failed, e.g. {said[0]}", file=sys.stderr)
    return time.monotonic() - started, sum(failed)


def churn(creds, data, n, fraction):
    """Delete a fraction of the handles and add them again (JSON API, durable
    one by one), then the bytes per handle on disk."""
    keys = churn_keys(n, fraction)
    res = {"churn_handles": len(keys), "churn_before_store_bytes_per_handle": disk(data, n)["store_bytes_per_handle"]}
    secs, failed = json_api_each(creds, "DELETE", keys)
    res["churn_delete_per_s"], res["churn_delete_failed"] = round(len(keys) / secs), failed
    secs, failed = json_api_each(creds, "PUT", keys)
    res["churn_readd_per_s"], res["churn_readd_failed"] = round(len(keys) / secs), failed
    after = disk(data, n)
    res["churn_store_bytes_per_handle"], res["churn_dir_bytes_per_handle"] = (
        after["store_bytes_per_handle"], after["dir_bytes_per_handle"])
    return res


def mirror_dump(bin_, work, creds, n):
    """A second `handled` mirroring this one: its initial dump, start to the
    `pulling` phase: seconds, handles/s, peak RSS, bytes per handle."""
    data = work / "mirror"
    shutil.rmtree(data, ignore_errors=True)
    config = work / "mirror.toml"
    config.write_text(f'replication_source = "127.0.0.1:{PORT}"\nreplication_credentials = "{creds}"\n'
                      'replication_credentials_key = "public_key"\nreplication_interval_ms = 1000\n')
    mirror = Server(bin_, data, None, config, ports=(MIRROR_PORT, MIRROR_HTTP))
    started = time.monotonic()
    pulling = f'handled_replication_phase{{source="127.0.0.1:{PORT}",phase="pulling"}} 1'
    while True:
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{MIRROR_HTTP}/metrics", timeout=10).read().decode()
        if pulling in metrics:
            break
        if mirror.proc.poll() is not None:
            sys.exit("the mirror stopped during its dump")
        time.sleep(0.2)
    secs = time.monotonic() - started
    res = {"mirror_dump_s": round(secs, 1), "mirror_dump_per_s": round(n / secs),
           "mirror_peak_rss_mb": mirror.rss_mb("VmHWM")}
    mirror.stop()
    res["mirror_store_bytes_per_handle"] = disk(data, n)["store_bytes_per_handle"]
    shutil.rmtree(data)
    return res


def store_config(work, key_directory):
    """The store's options every import and serve of the run shares (None: defaults)."""
    if key_directory:
        return None
    config = work / "store.toml"
    config.write_text("store_key_directory = false\n")
    return config


def primary_config(work, creds, store):
    """The admin `serve` wrote may pull dumps (a mirror authenticates as it),
    and may administer over plain HTTP (loopback: no TLS cost in the churn);
    `store`: the run's store options, if any."""
    c = json.load(open(creds))
    ids = sorted({f"{c[k]['index']}:{c['handle']}" for k in ("secret_key", "public_key")})
    config = work / "primary.toml"
    shared = store.read_text() if store else ""
    config.write_text(shared + "replication_admins = [%s]\nallow_plain_http_admin = true\n" % ", ".join(f'"{i}"' for i in ids))
    return config


def resolution_rates(bin_, work, data, n, seconds, store):
    """Per server core-second: UDP and the JSON API, uniform and Zipf, on a fresh `serve`."""
    srv = Server(bin_, data, work / "unused.json", store)
    srv.readyz_ms()  # lookups at speed are promised from /readyz on, not from "ready"
    rates = {name: bench(bin_, srv.proc.pid, extra, seconds).get("per_core", 0)
             for name, extra in resolution_runs(n).items()}
    srv.stop()
    return rates


def alternate(bin_, work, sizes, seconds, rounds, store):
    """Ratios to 10k of kept data directories, `rounds` alternations: see --alternate."""
    ratios = {n: [] for n in sizes}
    for r in range(rounds):
        base = None
        for n in [10_000] + sizes:
            data = work / f"data-{n}"
            if not data.exists():
                sys.exit(f"{data} is missing: run once with --keep and these --sizes first")
            rates = resolution_rates(bin_, work, data, n, seconds, store)
            if n == 10_000:
                base = rates
                print(f"# round {r + 1}: 10k {rates}", file=sys.stderr)
                continue
            ratio = {k: round(v / base[k], 3) if base[k] else None for k, v in rates.items()}
            ratios[n].append(ratio)
            print(f"# round {r + 1}: {n:,} {rates} ratio {ratio}", file=sys.stderr)
    for n, rs in ratios.items():
        med = {k: statistics.median([x[k] for x in rs if x[k] is not None] or [0]) for k in rs[0]}
        print(json.dumps({"handles": n, "rounds": rounds, "median_ratio_to_10k": med, "ratios": rs}))


def measure(bin_, work, data, n, seconds, churn_fraction=0.0, with_mirror=False, store=None, with_backup=True):
    creds = work / f"admin-{n}.json"
    creds.unlink(missing_ok=True)
    # The first start bootstraps the imported store (server key, admin
    # handle); the second is the one timed, as an operator's restart.
    Server(bin_, data, creds, store).stop()
    srv = Server(bin_, data, work / "unused.json", primary_config(work, creds, store))
    pid = srv.proc.pid
    res = {"ready_ms": round(srv.ready_ms), "readyz_ms": srv.readyz_ms(), "rss_rest_mb": srv.rss_mb()}
    udp = udp_args(n)
    keys = key_args(n)
    for name, extra in resolution_runs(n).items():
        res[name] = bench(bin_, pid, extra, seconds)
    if res["udp"].get("rps"):
        half = bench(bin_, pid, udp + ["--rate", str(res["udp"]["rps"] // 2)], seconds)
        res["udp_half_peak_p99_ms"] = half.get("p99_ms")
    url = f"http://127.0.0.1:{HTTP}/hrls/handles?URL=https://example.org/objects/{{seq}}"
    res["hrls"] = bench(bin_, pid, ["--url", url] + keys, seconds, clients=4)
    res["rss_load_mb"] = srv.rss_mb()
    res["create"] = bench(bin_, pid, ["--port", str(PORT), "--transport", "tcp-persistent", "--ops", "create",
                                      "--credentials", str(creds)], seconds)
    backup = work / "backup.hdb"
    if with_backup:
        secs, _ = run_child([bin_, "backup", str(backup), "--http-port", str(HTTP), "--credentials", str(creds),
                             "--insecure", "--max-rate-mib", "0", "--force"])
    if churn_fraction > 0:
        res.update(churn(creds, data, n, churn_fraction))
    if with_mirror:
        res.update(mirror_dump(bin_, work, creds, n))
    srv.stop()
    if not with_backup:
        return res
    size = backup.stat().st_size / 2**20
    res["backup_s"], res["backup_mb"] = round(secs, 1), round(size)
    restored = work / "restored"
    secs, _ = run_child([bin_, "restore", str(backup), "--data-dir", str(restored)])
    res["restore_s"] = round(secs, 1)
    backup.unlink()
    shutil.rmtree(restored)
    return res


def key_args(n):
    return ["--key-prefix", "TEST", "--keys", str(n)]


def resolution_runs(n):
    """The four resolution loads, by result name: UDP and the JSON API, uniform and Zipf."""
    udp, json_api = udp_args(n), ["--port", str(HTTP), "--transport", "json-api"] + key_args(n)
    return {"udp": udp, "udp_zipf": udp + ["--zipf", "1.0"], "json": json_api, "json_zipf": json_api + ["--zipf", "1.0"]}


def udp_args(n):
    return ["--port", str(PORT), "--transport", "udp"] + key_args(n)


def keydir_store_reads(bin_, data, n, seconds):
    """The store alone with its key directory (`keydir_bench` on this data
    directory, the server stopped): gets through the directory, opens timed,
    and gets after a restart with the files dropped from the OS page cache.
    (Not through redb alone: since redb holds the records' locations in the
    directory, a store opened without it first moves every record back.)"""
    exe = Path(bin_).parent / "examples" / "keydir_bench"
    if not exe.exists():
        print(f"# {exe} not built: no store-only reads", file=sys.stderr)
        return {}
    out = subprocess.run([str(exe), str(data), str(n), "--secs", str(seconds), "--rounds", "1", "--cold-secs", "3",
                          "--keydir-only"], capture_output=True, text=True)
    if out.returncode != 0:
        return {"store_reads_error": out.stderr.strip()[-300:]}
    res = {}
    for line in out.stdout.splitlines():
        r = json.loads(line)
        if "candidate" in r:
            name = {"keydir-warm-0": "keydir", "redb-warm-0": "redb", "keydir-after-cold-restart": "keydir_cold"}[r["candidate"]]
            res[f"store_{name}_us"] = {k: r[k] for k in ("mean_us", "p50_us", "p99_us", "p999_us", "gets")}
        elif "open" in r:
            res[f"store_open_{r['open']}_s"] = r["secs"]
        elif "keydir" in r:
            res["keydir_memory_b_per_handle"] = r["memory_b_per_handle"]
    return res


def udp_windows(bin_, srv, n, until_s):
    """UDP uniform req/s in one-second windows, each a fresh `handled bench`
    without warm-up, until `until_s` after `srv` was spawned: [[s, req/s]]."""
    windows = []
    while time.monotonic() - srv.started < until_s:
        r = bench(bin_, srv.proc.pid, udp_args(n), 1, warmup=0)
        windows.append([round(time.monotonic() - srv.started, 1), r.get("rps", 0)])
    return windows


def cold_start(bin_, work, data, n, store, seconds=15, reference_windows=5):
    """`serve` restarted with the OS page cache dropped: ready line, `/readyz`,
    and UDP uniform req/s in one-second windows from the spawn on, as shares of
    the warm rate measured the same way (a fresh client's second without
    warm-up is not a 5-s run's: the windows at 10k never reached 0.9 of that)."""
    warm = Server(bin_, data, work / "unused.json", store)
    ready_s = (warm.readyz_ms() or 0) / 1000
    # The files are in the page cache: past two seconds of settling, the median.
    reference = udp_windows(bin_, warm, n, ready_s + 2 + reference_windows)[-reference_windows:]
    warm.stop()
    warm_rps = statistics.median(rps for _, rps in reference)
    try:
        subprocess.run(["sync"], check=True)
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
    except OSError as e:
        print(f"# cold start skipped: cannot drop the page cache ({e})", file=sys.stderr)
        return {}
    srv = Server(bin_, data, work / "unused.json", store)
    readyz = {}
    poll = threading.Thread(target=lambda: readyz.update(ms=srv.readyz_ms()))
    poll.start()
    windows = [[at, rps, round(rps / warm_rps, 2) if warm_rps else None]
               for at, rps in udp_windows(bin_, srv, n, seconds)]
    poll.join()
    srv.stop()
    reached = next((at for at, _, share in windows if share and share >= 0.9), None)
    return {"cold_ready_ms": round(srv.ready_ms), "cold_readyz_ms": readyz.get("ms"), "cold_windows": windows,
            "cold_90pct_at_s": reached, "cold_reference_rps": round(warm_rps)}


def backup_cell(r):
    if "backup_s" not in r:
        return "not run"
    return f"{r['backup_s']} s ({r['backup_mb']} MB), {r['restore_s']} s"


def table(rows):
    base = rows[0]
    print("| handles | import (s, handles/s by slice) | peak RSS import | bytes/handle (store, dir) | ready | RSS rest / load "
          "| UDP uniform | UDP Zipf | JSON uniform | JSON Zipf | UDP p99 at ½ peak | /hrls p99 | creates | backup, restore |")
    print("|" + "---|" * 14)
    for r in rows:
        def rel(k):
            x, b = r[k].get("per_core"), base[k].get("per_core")
            if not x:
                return r[k].get("error", "?")[:60]
            return f"{r[k]['rps']:,}/s, {x:,}/core-s ({x / b:.0%})" if b else f"{x:,}"
        rates = ", ".join(f"{x // 1000}k" for x in r["import_rates"])
        print(f"| {r['handles']:,} | {r['import_s']} ({rates}) | {r['import_peak_rss_mb']} MB "
              f"| {r['store_bytes_per_handle']}, {r['dir_bytes_per_handle']} | {r['ready_ms']} ms "
              f"| {r['rss_rest_mb']} / {r['rss_load_mb']} MB | {rel('udp')} | {rel('udp_zipf')} | {rel('json')} "
              f"| {rel('json_zipf')} | {r.get('udp_half_peak_p99_ms', '?')} ms | {r['hrls'].get('p99_ms', '?')} ms "
              f"| {rel('create')} | {backup_cell(r)} |")

    if any("store_get_us" in r for r in rows):
        print()
        print("| handles | store alone: get µs mean (p99), gets/s on one thread | server: µs per UDP request (1/per core-s) |")
        print("|---|---|---|")
        for r in rows:
            per = r["udp"].get("per_core")
            print(f"| {r['handles']:,} | {r.get('store_get_us', '–')} ({r.get('store_get_p99_us', '–')}), "
                  f"{r.get('store_gets_per_s', 0):,} | {1e6 / per:.2f} |" if per else "| ? |")
    if any("store_keydir_us" in r or "cold_windows" in r for r in rows):
        print()
        print("| handles | store alone µs p50 / p99 / p99.9: directory | redb | directory after a cold restart "
              "| directory memory B/handle | restart: ready line, /readyz | cold: ready line, /readyz, ≥ 90% of warm UDP at "
              "| cold UDP windows (s from spawn: share of warm) |")
        print("|" + "---|" * 8)
        for r in rows:
            def us(k):
                x = r.get(k)
                return f"{x['p50_us']} / {x['p99_us']} / {x['p999_us']}" if x else "–"
            windows = ", ".join(f"{at}: {share}" for at, _, share in r.get("cold_windows", []))
            print(f"| {r['handles']:,} | {us('store_keydir_us')} | {us('store_redb_us')} | {us('store_keydir_cold_us')} "
                  f"| {r.get('keydir_memory_b_per_handle', '–')} | {r['ready_ms']} ms, {r.get('readyz_ms')} ms "
                  f"| {r.get('cold_ready_ms', '–')} ms, {r.get('cold_readyz_ms', '–')} ms, {r.get('cold_90pct_at_s', '–')} s "
                  f"| {windows or '–'} |")
    if any("churn_handles" in r or "mirror_dump_s" in r for r in rows):
        print()
        print("| handles | deleted and re-added | delete /s | re-add /s | bytes/handle before → after (store; before: after the creates) "
              "| mirror dump | mirror peak RSS | mirror bytes/handle |")
        print("|" + "---|" * 8)
        for r in rows:
            g = lambda k: f"{r[k]:,}" if k in r else "–"
            print(f"| {r['handles']:,} | {g('churn_handles')} | {g('churn_delete_per_s')} | {g('churn_readd_per_s')} "
                  f"| {g('churn_before_store_bytes_per_handle')} → {g('churn_store_bytes_per_handle')} "
                  f"| {r.get('mirror_dump_s', '–')} s ({g('mirror_dump_per_s')}/s) | {r.get('mirror_peak_rss_mb', '–')} MB "
                  f"| {g('mirror_store_bytes_per_handle')} |")

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1000000,10000000")
    ap.add_argument("--work", default="/tmp/handled-capacity")
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--slices", type=int, default=1)
    ap.add_argument("--bin", default=os.path.join(os.environ.get("CARGO_TARGET_DIR", "target"), "release/handled"))
    ap.add_argument("--json-out", default=None)
    ap.add_argument("--keep", action="store_true", help="keep each size's data directory")
    ap.add_argument("--churn", type=float, default=0.1, help="fraction deleted and re-added (0: none)")
    ap.add_argument("--mirror", action="store_true", help="time a mirror's initial dump of each size")
    ap.add_argument("--no-backup", action="store_true",
                    help="skip backup and restore (at 30M they need twice the store's disk again)")
    ap.add_argument("--no-key-directory", dest="key_directory", action="store_false",
                    help="store_key_directory = false for every import and serve")
    ap.add_argument("--cold", action="store_true", help="restart with the OS page cache dropped (root) and time the recovery")
    ap.add_argument("--alternate", type=int, default=0, metavar="K",
                    help="no import: K rounds of resolution alternating 10k and each size on kept data directories")
    ap.add_argument("--pin", action="store_true", help="serve on CPU 0 and the load on CPU 1 (taskset)")
    a = ap.parse_args()
    if a.pin:
        SERVER_CPUS[:], CLIENT_CPUS[:] = ["taskset", "-c", "0"], ["taskset", "-c", "1"]
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    store = store_config(work, a.key_directory)
    if a.alternate:
        alternate(a.bin, work, [int(s) for s in a.sizes.split(",")], a.seconds, a.alternate, store)
        return
    rows = []
    for n in [10_000] + [int(s) for s in a.sizes.split(",")]:
        data = work / f"data-{n}"
        if data.exists():
            shutil.rmtree(data)
        free = shutil.disk_usage(work).free / 2**30
        print(f"# {n:,} handles ({free:.0f} GB free)", file=sys.stderr)
        row = {"handles": n, "key_directory": a.key_directory}
        row.update(import_store(a.bin, work, data, n, a.slices if n > 10_000 else 1, store))
        row.update(disk(data, n))
        if a.key_directory:
            row.update(keydir_store_reads(a.bin, data, n, a.seconds))
        else:
            row.update(store_reads(a.bin, data, n, a.seconds))
        row.update(measure(a.bin, work, data, n, a.seconds, a.churn, a.mirror, store, not a.no_backup))
        if a.cold:
            row.update(cold_start(a.bin, work, data, n, store))
        rows.append(row)
        print(json.dumps(row), file=sys.stderr)
        if a.json_out:
            with open(a.json_out, "a") as f:
                f.write(json.dumps(row) + "\n")
        if not a.keep:
            shutil.rmtree(data)
    table(rows)


if __name__ == "__main__":
    main()
