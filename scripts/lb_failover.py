#!/usr/bin/env python3
"""Load-balancer fail-over: two haproxy instances with keepalived (VRRP v3)
sharing a virtual address, each in its own network namespace, in front of 3
stateless `handled` nodes on Cassandra; a constant load of JSON API resolutions
(`GET /api/handles/TEST/ADMIN`) from a third namespace to the virtual address;
the active balancer is killed at t=KILL s. Prints the failed requests, when the
backup took the address over, and the 100 ms series around the kill.
Needs root, ip(8), haproxy, keepalived.

    scripts/lb_failover.py --cassandra 127.0.20.1:9042 --rate 500 --kill haproxy
    scripts/lb_failover.py --cassandra 127.0.20.1:9042 --rate 500 --kill box

--kill haproxy: SIGKILL the active haproxy; keepalived on that balancer notices
  through its check script (keepalived's shortest script interval is 1 s), goes
  to FAULT, and the backup takes the address.
--kill keepalived: SIGKILL the active keepalived alone; its haproxy keeps
  serving and the address stays on it too, but the backup takes the address
  when the adverts stop and its gratuitous ARPs steer the clients to it.
--kill box: cut the active balancer's link, then SIGKILL its haproxy and
  keepalived (the balancer machine dies: not even its sockets' FIN/RST get
  out); the backup takes the address when the adverts stop (3 × advert_int + skew).

Topology (all on this box, nothing routed out: a bridge with no uplink, and
ip_forward untouched): bridge lbfo-br in the root namespace holds the nodes'
addresses 10.213.0.101-103 (not loopback ones: another namespace cannot reach
the root namespace's loopback); namespaces lbfo-lb1 (10.213.0.11), lbfo-lb2
(10.213.0.12) and lbfo-cl (10.213.0.50) hang off it by veth pairs; the virtual
address is 10.213.0.100. Everything it creates is removed on exit (also after
an error or SIGTERM; logs are kept then), and leftovers of an earlier run are
removed first."""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# First on the path: `cluster` is tests/common/cluster.py (the harness), not scripts/cluster.py.
sys.path.insert(0, os.path.join(ROOT, "tests", "common"))
NET = "10.213.0"
os.environ["HANDLED_CLUSTER_NET"] = NET  # the nodes listen on the bridge, where the balancers reach them
import cluster  # noqa: E402

BRIDGE = "lbfo-br"
VIP = f"{NET}.100"
HOSTS = {"lbfo-lb1": f"{NET}.11", "lbfo-lb2": f"{NET}.12", "lbfo-cl": f"{NET}.50"}
ADVERT_S = 0.1
MONITOR_PORT = 8404  # haproxy's monitor-uri inside each balancer's namespace, for keepalived's check


def sh(*args, check=True):
    r = subprocess.run(args, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise SystemExit(f"{' '.join(args)}: {r.stderr.strip() or f'exit {r.returncode}'}")
    return r


def in_ns(ns, *args):
    return ["ip", "netns", "exec", ns, *args]


def host_end(ns):
    """The root-namespace end of a namespace's veth pair, on the bridge."""
    return ns.replace("lbfo-", "lbfo-h-")


def cleanup():
    """Remove what this script creates (only names with our prefix)."""
    for ns in HOSTS:
        for pid in sh("ip", "netns", "pids", ns, check=False).stdout.split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except OSError:
                pass
        # Deleting the root end takes its peer with it at once (a namespace's links go asynchronously).
        sh("ip", "link", "del", host_end(ns), check=False)
        sh("ip", "netns", "del", ns, check=False)
    sh("ip", "link", "del", BRIDGE, check=False)


def build_network():
    sh("ip", "link", "add", BRIDGE, "type", "bridge")
    sh("ip", "link", "set", BRIDGE, "up")
    for i in range(1, 4):
        sh("ip", "addr", "add", f"{cluster.node_address(i)}/24", "dev", BRIDGE)
    for ns, ip in HOSTS.items():
        sh("ip", "netns", "add", ns)
        sh("ip", "link", "add", host_end(ns), "type", "veth", "peer", "name", "eth0", "netns", ns)
        sh("ip", "link", "set", host_end(ns), "master", BRIDGE, "up")
        sh(*in_ns(ns, "ip", "link", "set", "lo", "up"))
        sh(*in_ns(ns, "ip", "addr", "add", f"{ip}/24", "dev", "eth0"))
        sh(*in_ns(ns, "ip", "link", "set", "eth0", "up"))
        # haproxy binds the virtual address before keepalived puts it on the balancer.
        sh(*in_ns(ns, "sysctl", "-qw", "net.ipv4.ip_nonlocal_bind=1"))


def keepalived_config(ns, priority, tmp):
    """VRRP v3 with sub-second adverts; both start as BACKUP and the higher
    priority wins the election; the check script (every second, keepalived's
    shortest) fails when haproxy no longer answers on its monitor URI."""
    notify = os.path.join(tmp, f"{ns}-notify.sh")
    with open(notify, "w") as f:  # keepalived calls it with: INSTANCE name STATE priority
        f.write(f'#!/bin/sh\necho "$(date +%s.%N) $3" >> {tmp}/{ns}.states\n')
    os.chmod(notify, 0o755)
    return f"""global_defs {{
  router_id {ns}
  enable_script_security
  script_user root
  vrrp_garp_master_delay 1
  vrrp_garp_master_repeat 3
}}
vrrp_script haproxy_alive {{
  script "/usr/bin/curl -sf -m 0.5 -o /dev/null http://127.0.0.1:{MONITOR_PORT}/alive"
  interval 1
  timeout 1
  fall 1
  rise 1
}}
vrrp_instance balancer {{
  state BACKUP
  interface eth0
  virtual_router_id 51
  version 3
  priority {priority}
  advert_int {ADVERT_S}
  virtual_ipaddress {{
    {VIP}/24 dev eth0
  }}
  track_script {{
    haproxy_alive
  }}
  notify {notify}
}}
"""


def start_balancer(ns, priority, c, tmp):
    ports = {"http": c.http_port, "native": c.native_port}
    nodes = [cluster.node_address(i) for i in range(1, 4)]
    cfg = os.path.join(tmp, f"{ns}-haproxy.cfg")
    with open(cfg, "w") as f:
        f.write(cluster.haproxy_config(VIP, ports, nodes, c.http_port))
        f.write(f"\nfrontend monitor\n  mode http\n  bind 127.0.0.1:{MONITOR_PORT}\n  monitor-uri /alive\n")
    log = open(os.path.join(tmp, f"{ns}-haproxy.log"), "w")
    haproxy = subprocess.Popen(in_ns(ns, "haproxy", "-db", "-f", cfg), stdout=log, stderr=log)
    kcfg = os.path.join(tmp, f"{ns}-keepalived.conf")
    with open(kcfg, "w") as f:
        f.write(keepalived_config(ns, priority, tmp))
    klog = open(os.path.join(tmp, f"{ns}-keepalived.log"), "w")
    pids = {k: os.path.join(tmp, f"{ns}-{k}.pid") for k in ("main", "vrrp")}
    keepalived = subprocess.Popen(in_ns(ns, "keepalived", "--vrrp", "--dont-fork", "--log-console", "--log-detail",
                                        "-f", kcfg, "-p", pids["main"], "-r", pids["vrrp"]), stdout=klog, stderr=klog)
    return {"haproxy": haproxy, "keepalived": keepalived, "pidfiles": pids}


def states(tmp, ns):
    path = os.path.join(tmp, f"{ns}.states")
    if not os.path.exists(path):
        return []
    return [(float(t), s) for t, s in (line.split() for line in open(path) if line.strip())]


def wait_master(tmp, ns, timeout=15):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if any(s == "MASTER" for _, s in states(tmp, ns)):
            return
        time.sleep(0.1)
    raise SystemExit(f"{ns} did not become MASTER in {timeout} s; see {tmp}/{ns}-keepalived.log")


def kill_script(tmp, mode, lb):
    """The command the bench runs at --induce-at: note the time, then kill."""
    keepalived = [open(p).read().strip() for p in lb["pidfiles"].values()]
    pids = {"haproxy": [str(lb["haproxy"].pid)], "keepalived": keepalived,
            "box": [str(lb["haproxy"].pid), *keepalived]}[mode]
    path = os.path.join(tmp, "kill.sh")
    with open(path, "w") as f:
        f.write(f"date +%s.%N > {tmp}/killed_at\n")
        if mode == "box":
            # The link first: a dead machine sends nothing, not even the FIN/RST of its closing sockets.
            f.write("ip netns exec lbfo-lb1 ip link set eth0 down\n")
        f.write(f"kill -9 {' '.join(pids)}\n")
    return f"sh {path}"


def report(row, kill_at, rate, takeover_s):
    lat = row["latency_ms"]
    series = row["series_100ms"]
    k = int(kill_at * 10)
    err_buckets = [i for i in range(k, len(series)) if series[i][1] > 0]
    per_bucket = rate / 10
    # Answers back at the full rate with none failing, for a whole second from here on.
    steady = next((i for i in range(k, len(series) - 9)
                   if all(b[1] == 0 and b[0] >= 0.8 * per_bucket for b in series[i:i + 10])), None)
    print(f"requests {row['requests']}, failed {sum(row['errors'].values())} {row['errors']}")
    print(f"latency mean {lat['mean']:.2f} ms, p99 {lat['p99']:.2f} ms, max {lat['max']:.1f} ms")
    print(f"backup became MASTER {takeover_s:.3f} s after the kill" if takeover_s is not None
          else "backup did not become MASTER")
    if err_buckets:
        print(f"failures answered between t={err_buckets[0] / 10:.1f} s and t={(err_buckets[-1] + 1) / 10:.1f} s")
    if steady is not None:
        print(f"from the kill to the first 100 ms slice of a whole second with no errors and >= 80 % of the "
              f"rate in each slice: {(steady - k) / 10:.1f} s")
    print(f"bench: first error at {row['first_error_s']} s, recovery {row['recovery_s']} s")
    # Stalls away from the kill tell the box's own hiccups (shared CPU, GC) from the fail-over.
    idle = [i for i in range(10, len(series) - 1) if series[i][0] == 0 and series[i][1] == 0]
    away = [i for i in idle if not k <= i < k + 30]
    print(f"100 ms slices with no answer at all: {len(idle)}, of which {len(away)} not within 3 s after the kill"
          + (f" (at t={', '.join(f'{i / 10:.1f}' for i in away[:10])} s)" if away else ""))
    print("per 100 ms from 1 s before the kill (answers, errors, worst latency ms):")
    for i in range(max(0, k - 10), min(len(series), k + 40)):
        b = series[i]
        print(f"  t={i / 10:5.1f}s  {b[0]:3d}  {b[1]:3d}  {b[2] / 1000:8.1f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", default=os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release", "handled"))
    ap.add_argument("--cassandra", default=os.environ.get("HANDLED_TEST_CASSANDRA", "127.0.20.1:9042"))
    ap.add_argument("--replication", default="1")
    ap.add_argument("--rate", type=int, default=500)
    ap.add_argument("--duration", type=float, default=25)
    ap.add_argument("--kill-at", type=float, default=10)
    ap.add_argument("--kill", choices=("haproxy", "keepalived", "box"), default="haproxy")
    ap.add_argument("--html", default=None)
    ap.add_argument("--keep-logs", action="store_true", help="keep configurations and logs (kept anyway on failure)")
    a = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # clean up on `timeout` / kill too
    if os.geteuid() != 0:
        raise SystemExit("needs root (network namespaces)")
    for tool in ("ip", "haproxy", "keepalived"):
        if not shutil.which(tool):
            raise SystemExit(f"{tool} is missing (apt-get install iproute2 haproxy keepalived)")
    binary = os.path.abspath(a.binary)
    os.environ["HANDLED_TEST_CASSANDRA"] = a.cassandra
    # Under /run (root's alone): keepalived runs only scripts no other user could have changed.
    tmp = tempfile.mkdtemp(prefix="lbfo-", dir="/run")
    cleanup()
    c, done = None, False
    try:
        build_network()
        c = cluster.Cluster(binary, tmp, 3, "", {"HANDLED_LOG": "warn", "HANDLED_CASSANDRA_REPLICATION": a.replication},
                            creds_path=os.path.join(tmp, "admin.json"))
        admin = json.load(open(os.path.join(tmp, "admin.json")))["handle"]
        lb1 = start_balancer("lbfo-lb1", 150, c, tmp)
        wait_master(tmp, "lbfo-lb1")
        lb2 = start_balancer("lbfo-lb2", 100, c, tmp)
        time.sleep(1)
        # One record read per request (a QUORUM read): the balancer, not the store, is under test.
        url = f"http://{VIP}:{c.http_port}/api/handles/{admin}"
        probe = sh(*in_ns("lbfo-cl", "curl", "-sf", "-o", "/dev/null", "-w", "%{http_code}", url), check=False)
        if probe.stdout != "200":
            raise SystemExit(f"no answer through the virtual address {VIP}: {probe.stdout} {probe.stderr}")
        cmd = in_ns("lbfo-cl", binary, "bench", "--url", url, "--rate", str(a.rate), "-d", str(a.duration),
                    "-c", "32", "--timeout", "2", "--warmup", "0", "--json",
                    "--induce", kill_script(tmp, a.kill, lb1), "--induce-at", str(a.kill_at))
        if a.html:
            cmd += ["--html", os.path.abspath(a.html)]
        print(f"haproxy+keepalived on lbfo-lb1 (MASTER) and lbfo-lb2, VIP {VIP}, advert {ADVERT_S} s; "
              f"{a.rate} GET/s for {a.duration:.0f} s; kill {a.kill} of lbfo-lb1 at {a.kill_at} s", flush=True)
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=a.duration + 60)
        if out.returncode != 0:
            raise SystemExit(f"bench failed: {out.stderr[-2000:]}")
        killed_at = float(open(os.path.join(tmp, "killed_at")).read())
        mastered = [t for t, s in states(tmp, "lbfo-lb2") if s == "MASTER" and t >= killed_at]
        takeover = mastered[0] - killed_at if mastered else None
        print("lbfo-lb1 states:", [(round(t - killed_at, 3), s) for t, s in states(tmp, "lbfo-lb1")])
        for line in out.stdout.splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if "series_100ms" in row:
                report(row, a.kill_at, a.rate, takeover)
        done = True
    finally:
        if c:
            c.terminate()
            c.wait(timeout=30)
        cleanup()
        if done and not a.keep_logs:
            shutil.rmtree(tmp)
        else:
            print(f"logs and configurations in {tmp}")


if __name__ == "__main__":
    main()
