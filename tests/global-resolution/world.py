#!/usr/bin/env python3
"""A global Handle System of `handled` servers on loopback (run inside a network
namespace by run.sh), resolved through a `handled` resolver and through the
official Java client's own global resolution; every value compared.

The system: a root homing 0.NA; A homing P1, P3, 21.T1, P5, P6; a site of two servers
(B1, B2) for P2, each handle only on the server the site's hash picks; D
homing 21 (the derived prefixes' handles 0.NA/21.*, and the service handle
21/SERVICE); the root's 0.NA/P3 names that service handle (HS_SERV), its
0.NA/P5 and 0.NA/P6 name A by the site attributes alt_addr.<id> and domain, its
0.NA/21 delegates 21.* to D (HS_SITE.PREFIX); M, a handled mirror of A, is
P1's second site (the last comparison stops A: P1 then comes from M alone).
With the Handle.Net harness (HANDLE_NET_PEER, found by run.sh), the original
Handle.Net 9.0.0 homes HN too (handle_net.py), and its own proxy, HDLProxy,
resolves the whole set through the same root, compared with the handled
resolver value by value.

usage: world.py HANDLED_BINARY JAVA_CLASSPATH WORKDIR
"""
import hashlib
import os
import json
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from handle_net import HandleNet, proxy_redirect

HANDLED, CLASSPATH, WORK = sys.argv[1], sys.argv[2], Path(sys.argv[3])
HERE = Path(__file__).resolve().parent
# Handles of P1 resolved once each for the cold-miss figure.
COLD = 40
# Handle.Net's JSON API's responseCode for a handle it cannot find, whether the handle or its
# prefix is missing (handle not found); anything else (an error) is a difference.
NOT_FOUND = {100}
# The Java client's HandleException codes for the same: HANDLE_DOES_NOT_EXIST, and
# SERVICE_NOT_FOUND when the root has no prefix handle.
JAVA_NOT_FOUND = {9, 2}
procs = []
by_port = {}
hn = None  # the Handle.Net server, with the harness


def start(name, port, prefixes, records=None, config=None):
    """`handled serve` on 127.0.0.1:port (native) and port+1 (HTTP), importing `records`."""
    cmd = [HANDLED, "serve", "--ephemeral", "--listen", "127.0.0.1", "--port", str(port),
           "--http-port", str(port + 1), "--admin-credentials", str(WORK / f"admin-{name}.json")]
    for p in prefixes:
        cmd += ["--prefix", p]
    if records:
        path = WORK / f"{name}.jsonl"
        path.write_text("".join(json.dumps({"handle": h, "values": v}) + "\n" for h, v in records))
        cmd += ["--import", str(path)]
    if config:
        path = WORK / f"{name}.toml"
        path.write_text(config)
        cmd += ["--config", str(path)]
    log = open(WORK / f"{name}.log", "w")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True)
    procs.append(proc)
    by_port[port] = proc
    deadline = time.time() + 30
    while time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            sys.exit(f"{name} stopped before it was ready (see {WORK}/{name}.log)")
        if line.strip() == "ready":
            return port
    sys.exit(f"{name}: not ready in 30 s")


def get(port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port + 1}{path}", timeout=20) as r:
        return json.load(r)


def site_of(port, prefix):
    """The HS_SITE value (site format) of a server's own prefix handle."""
    values = get(port, f"/api/handles/0.NA/{prefix}")["values"]
    return next(v["data"] for v in values if v["type"] == "HS_SITE")


def mirror(a, site_a):
    """M, a handled mirror of A (everything A homes, pulled from its dump and log, with
    P1/ADMIN's secret key): P1's second site. Returns its HS_SITE value once it holds the
    handles of A the comparison asks for (polled, at most 60 s)."""
    (WORK / "siteinfo-a.json").write_text(json.dumps(site_a["value"]))
    m = start("m", 26490, [], config=(
        f"replication_source = \"{WORK / 'siteinfo-a.json'}\"\n"
        f"replication_credentials = \"{WORK / 'admin-a-P1.json'}\"\n"
        "replication_credentials_key = \"secret\"\nreplication_interval_ms = 500\n"))
    deadline = time.time() + 60
    for h in ["P1/doc", "P3/doc", "21.T1/doc", "P1/mirrored"]:
        while True:
            try:
                get(m, f"/api/handles/{h}")
                break
            except (urllib.error.URLError, OSError):
                if time.time() > deadline:
                    sys.exit(f"the mirror did not get {h} from A in 60 s (see {WORK}/m.log)")
                time.sleep(0.2)
    return {"format": "site", "value": get(m, "/api/site")["site"]}


def value(index, type_, data):
    return {"index": index, "type": type_, "data": data, "ttl": 3600}


def url(index, text):
    return value(index, "URL", {"format": "string", "value": text})


def elsewhere(site, how):
    """`site` (one server) moved: to 127.0.0.2, where nothing listens, with its real address as
    `alt_addr.<id>` ("alt_addr"), or to the all-zero address with `domain` = localhost ("domain")."""
    moved = json.loads(json.dumps(site))
    server = moved["value"]["servers"][0]
    real, server["address"] = server["address"], "127.0.0.2" if how == "alt_addr" else "0.0.0.0"
    extra = {"name": f"alt_addr.{server['serverId']}", "value": real} if how == "alt_addr" \
        else {"name": "domain", "value": "localhost"}
    moved["value"]["attributes"] = moved["value"].get("attributes", []) + [extra]
    return moved


def server_index(handle, servers):
    """§2.7: MD5 of the upper-cased whole handle, last 4 bytes as a signed int, Java's abs, modulo."""
    n = int.from_bytes(hashlib.md5(handle.upper().encode()).digest()[-4:], "big", signed=True)
    n = abs(n) if n != -(2 ** 31) else n
    return n % servers if n >= 0 else -((-n) % servers)


def main():
    global hn
    hn_site = None
    if os.environ.get("HANDLE_NET_PEER"):
        # Set up first: its site record goes into the root's 0.NA/HN; it starts once the
        # root exists (its resolver's bootstrap names the root).
        hn = HandleNet(os.environ["HANDLE_NET_PEER"], WORK, 26480)
        hn_site = hn.setup()
    else:
        print(f"global-resolution: the Handle.Net part (a prefix server and HDLProxy) skipped: "
              f"{os.environ.get('HANDLE_NET_WHY', 'no harness')}; the handled-only part runs")
    a = start("a", 26410, ["P1", "P3", "21.T1", "P5", "P6"], [
        ("P1/doc", [url(1, "https://example.org/p1"), value(2, "EMAIL", {"format": "string", "value": "p1@example.org"})]),
        ("P3/doc", [url(1, "https://example.org/p3")]),
        ("21.T1/doc", [url(1, "https://example.org/derived")]),
        ("P1/mirrored", [url(1, "https://example.org/mirrored")]),
        ("P5/doc", [url(1, "https://example.org/p5")]),
        ("P6/doc", [url(1, "https://example.org/p6")]),
    ] + [(f"P1/cold{i}", [url(1, f"https://example.org/cold{i}")]) for i in range(COLD)],
        config='replication_admins = ["300:P1/ADMIN"]  # the mirror M pulls as P1/ADMIN\n')
    site_a = site_of(a, "P1")
    site_m = mirror(a, site_a)
    p2 = {}
    n = 0
    while len(p2) < 2:
        h = f"P2/doc{n}"
        p2.setdefault(server_index(h, 2), h)
        n += 1
    b = [start(f"b{i}", 26420 + 10 * i, ["P2"], [(p2[i], [url(1, f"https://example.org/{p2[i]}")])]) for i in range(2)]
    two = json.loads(json.dumps(site_of(b[0], "P2")))
    second = site_of(b[1], "P2")["value"]["servers"][0]
    second["serverId"] = 2
    two["value"]["servers"].append(second)
    d = start("d", 26450, ["21"], [
        ("0.NA/21.T1", [value(1, "HS_SITE", site_a)]),
        ("21/SERVICE", [value(1, "HS_SITE", site_a)]),
    ])
    site_d = site_of(d, "21")
    root = start("root", 26460, ["0.NA"], [
        ("0.NA/P1", [value(1, "HS_SITE", site_a), value(2, "HS_SITE", site_m)]),
        ("0.NA/P2", [value(1, "HS_SITE", two)]),
        ("0.NA/P3", [value(1, "HS_SERV", {"format": "string", "value": "21/SERVICE"})]),
        # A's site at an address where nothing listens, with the right one as alt_addr.<id>;
        # and A named by the domain attribute only (address all zeros).
        ("0.NA/P5", [value(1, "HS_SITE", elsewhere(site_a, "alt_addr"))]),
        ("0.NA/P6", [value(1, "HS_SITE", elsewhere(site_a, "domain"))]),
        # 21's own handles (the service handle) at D, and its derived prefixes delegated to D.
        ("0.NA/21", [value(1, "HS_SITE", site_d), value(2, "HS_SITE.PREFIX", site_d)]),
    ] + ([("0.NA/HN", [value(1, "HS_SITE", {"format": "site", "value": hn_site})])] if hn else []))
    root_site = site_of(root, "0.NA")
    (WORK / "root_info.json").write_text(json.dumps(root_site["value"]))
    resolver = start("resolver", 26470, ["LOCAL"], [("LOCAL/doc", [url(1, "https://example.org/local")])], config=(
        "[resolver]\nenabled = true\nallow_recursion = true\n"
        f"root_info = \"{WORK / 'root_info.json'}\"\n"))

    # The Java client bootstraps from bootstrap_handles: the trust root 0.0/0.0
    # (the root's key) and 0.NA/0.NA with the root's HS_SITE.
    config = WORK / "client-config"
    config.mkdir(exist_ok=True)
    root_key = root_site["value"]["servers"][0]["publicKey"]
    bootstrap = {"lastUpdate": int(time.time() * 1000), "handles": {
        "0.0/0.0": {"handle": "0.0/0.0", "values": [value(300, "HS_PUBKEY", root_key)]},
        "0.NA/0.NA": {"handle": "0.NA/0.NA", "values": [value(1, "HS_SITE", root_site)]},
    }}
    (config / "bootstrap_handles").write_text(json.dumps(bootstrap))
    (config / "config.dct").write_text('{\n  "auto_update_root_info" = "no"\n}\n')

    handles = ["P1/doc", "P3/doc", "21.T1/doc", p2[0], p2[1], "P1/missing", "NOWHERE/x", "P5/doc", "P6/doc"]
    expected_found = 7
    if hn:
        started = hn.start(bootstrap)
        print(f"Handle.Net 9.0.0 homing HN on 127.0.0.1:{hn.port}, started in {started['startup_ms']} ms")
        hn.put("HN/doc", [url(1, "https://example.org/hn"),
                          value(2, "EMAIL", {"format": "string", "value": "hn@example.org"})])
        handles += ["HN/doc", "HN/missing"]
        expected_found += 1
    same, different = compare("Java client", handles, expected_found, config, resolver)
    if os.environ.get("GLOBAL_RESOLUTION_BENCH"):
        from bench import bench
        bench(HANDLED, WORK, get, COLD, a, resolver, by_port[resolver].pid, hn)
    # P1's primary site down: handles no one asked yet must come from its mirror, through
    # every resolver (each tries the next HS_SITE of 0.NA/P1).
    by_port[a].terminate()
    by_port[a].wait(timeout=10)
    s, d = compare("Java client, P1's primary down", ["P1/mirrored", "P1/missing2"], 1, config, resolver)
    same, different = same + s, different + d
    print(f"global-resolution: {same} same, {different} different")
    return 1 if different else 0


def java_resolve(handles, config, name):
    """The Java client's own global resolution of `handles`: {handle: values}, and
    {handle: HandleException code} of those it could not resolve."""
    java = subprocess.run(
        ["java", f"-Dnet.handle.configDir={config}", "-cp", CLASSPATH, str(HERE / "GlobalResolve.java"), *handles],
        capture_output=True, text=True, timeout=180)
    (WORK / f"java-{name}.out").write_text(java.stdout + java.stderr)
    if "DONE" not in java.stdout:
        sys.exit(f"the Java client did not finish (see {WORK}/java-{name}.out)")
    by_java = {h: set() for h in handles}
    failed_java = {}
    for line in java.stdout.splitlines():
        f = line.split("\t")
        if f[0] == "VALUE":
            by_java[f[1]].add((int(f[2]), f[3], bytes.fromhex(f[4]).decode("utf-8", "replace")))
        elif f[0] == "FAIL":
            failed_java[f[1]] = int(f[2])
    return by_java, failed_java


def compare(what, handles, expected_found, config, resolver):
    """`handles` through the Java client and the handled resolver, then (with the harness)
    HDLProxy; prints a line a handle and one a comparison; returns (same, different)."""
    by_java, failed_java = java_resolve(handles, config, "down" if "down" in what else "all")
    failures = 0
    by_handled = {}
    for h in handles:
        try:
            ours = sorted({(v["index"], v["type"], v["data"]["value"])
                           for v in get(resolver, f"/api/handles/{h}")["values"]})
        except urllib.error.HTTPError as e:
            # 404: the handle or its prefix not found; anything else is an error.
            ours = "not found" if e.code == 404 else f"error (HTTP {e.code})"
        by_handled[h] = ours
        java_side = sorted(by_java[h])
        if h in failed_java:
            code = failed_java[h]
            java_side = "not found" if code in JAVA_NOT_FOUND else f"error (HandleException code {code})"
        same = java_side == ours  # an error on either side never matches
        failures += not same
        print(f"{'same' if same else 'DIFFERENT'}\t{h}\tjava: {java_side}\thandled: {ours}")
    same, different = len(handles) - failures, failures
    found = sum(1 for h in handles if by_java[h])
    if found != expected_found:
        print(f"the Java client found {found} of {expected_found} handles (see {WORK})")
        different += 1
    print(f"global-resolution, {what}: {same} same, {different} different")
    if hn:
        d = compare_hdlproxy(what.replace("Java client", "HDLProxy"), handles, by_handled, resolver)
        same, different = same + len(handles) - d, different + d
    return same, different


def compare_hdlproxy(what, handles, by_handled, resolver):
    """HDLProxy (allow_recursion) resolving every handle through the same root, against the
    handled resolver: the values of its JSON API (a not-found must be Handle.Net's
    responseCode 100, not an error), and what its proxy URL answers a browser (status and
    Location of GET /<handle>) against handled's web proxy. Returns the differences."""
    different = 0
    for h in handles:
        theirs = hn.resolve(h)
        ours = by_handled[h]
        if isinstance(theirs, set):
            hdl = sorted(theirs)
        else:
            hdl = f"{'not found' if theirs[1] in NOT_FOUND else 'error'} (HTTP {theirs[0]}, responseCode {theirs[1]})"
        same = hdl == ours or (ours == "not found" and hdl.startswith("not found"))
        proxied = hn.redirect(h), proxy_redirect(resolver + 1, h)
        same = same and proxied[0] == proxied[1]
        different += not same
        print(f"{'same' if same else 'DIFFERENT'}\t{h}\tHDLProxy: {hdl} {proxied[0]}\thandled: {ours} {proxied[1]}")
    print(f"global-resolution, {what}: {len(handles) - different} same, {different} different")
    return different


if __name__ == "__main__":
    # Terminated (a timeout): still stop every server, Handle.Net's JVM included.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        code = main()
    finally:
        if hn:
            hn.stop()
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
    sys.exit(code)
