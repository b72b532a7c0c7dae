#!/usr/bin/env python3
"""A local cluster on one machine, all on loopback:

    scripts/cluster.py up [--cassandra 3] [--nodes 3]   # start everything, print where it listens
    scripts/cluster.py status
    scripts/cluster.py kill-node I | start-node I        # SIGKILL / restart handled node I
    scripts/cluster.py down                              # stop everything it started

Cassandra nodes on 127.0.0.1…N (scripts/cassandra.sh, replication min(N, 3)),
`handled` nodes on 127.0.0.101… (native 2641 UDP+TCP, HTTP 8000, registry 8001,
record cache on, cluster channel on 265I),
and the balancer on 127.0.0.100 with the same ports: haproxy round-robin for TCP
and HTTP (health checks on /readyz and /live every 200 ms) and nginx's stream
module for UDP (haproxy has none; nginx needs no kernel modules or root
networking, unlike IPVS). Every node publishes 127.0.0.100 in its site record.
State (configs, logs, PIDs, the admin credentials) in $HANDLED_CLUSTER_DIR
(default /tmp/handled-cluster); Cassandra's data in its nodes/ subdirectory.
HANDLED_CLUSTER_FAST=1 boots Cassandra with its test-only fast flags."""
import argparse
import ipaddress
import json
import os
import shutil
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DIR = os.environ.get("HANDLED_CLUSTER_DIR", "/tmp/handled-cluster")
STATE = os.path.join(DIR, "state.json")
BALANCER = "127.0.0.100"
PORTS = {"native": 2641, "http": 8000, "registry": 8001}
sys.path.insert(0, os.path.join(ROOT, "tests", "common"))
import cluster  # noqa: E402  (the balancer configurations the test harness uses too)


def node_ip(i):
    return f"127.0.0.{100 + i}"


def cassandra(*args, env=None):
    e = dict(os.environ, HANDLED_CASSANDRA_DATA=os.path.join(DIR, "nodes"), **(env or {}))
    done = subprocess.run([os.path.join(ROOT, "scripts", "cassandra.sh"), *args], env=e)
    if done.returncode != 0:
        # cassandra.sh has said what went wrong; no Python traceback on top of it.
        raise SystemExit(f"scripts/cassandra.sh {' '.join(args)} failed (exit {done.returncode}): see above")


def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False


def start_node(st, i):
    out, err = os.path.join(DIR, f"node{i}.out"), os.path.join(DIR, f"node{i}.err")
    args = [st["binary"], "serve", "--config", os.path.join(DIR, "node.toml"), "--listen", node_ip(i),
            "--data-dir", os.path.join(DIR, f"data-{i}"), "--admin-credentials",
            os.path.join(DIR, "admin-TEST.json" if i == 1 else f"admin-node{i}.json"),
            # The record cache, kept coherent over each node's cluster channel (docs/cluster.md).
            "--cache-mb", "256", "--cluster-listen", f"{node_ip(i)}:{2650 + i}"]
    env = dict(os.environ, HANDLED_STORE="cassandra", HANDLED_CASSANDRA_CONTACT_POINTS=st["contact_points"],
               HANDLED_CASSANDRA_REPLICATION=str(st["rf"]), HANDLED_CASSANDRA_KEYSPACE="handled_cluster",
               HANDLED_LOG="warn")
    p = subprocess.Popen(args, stdout=open(out, "w"), stderr=open(err, "a"), env=env, start_new_session=True)
    deadline = time.time() + 60
    while time.time() < deadline:
        if "ready" in open(out).read():
            st["nodes"][str(i)] = p.pid
            return
        if p.poll() is not None:
            raise SystemExit(f"handled node {i} exited; see {err}")
        time.sleep(0.1)
    raise SystemExit(f"handled node {i} not ready after 60 s; see {err}")


def write_balancers(n):
    ips = [node_ip(i) for i in range(1, n + 1)]
    open(os.path.join(DIR, "haproxy.cfg"), "w").write(cluster.haproxy_config(BALANCER, PORTS, ips, PORTS["http"]))
    open(os.path.join(DIR, "nginx.conf"), "w").write(cluster.nginx_udp_config(DIR, BALANCER, PORTS["native"], ips))


def spawn(name, args):
    log = open(os.path.join(DIR, f"{name}.log"), "w")
    return subprocess.Popen(args, stdout=log, stderr=log, start_new_session=True).pid


def up(a):
    if os.path.exists(STATE):
        raise SystemExit(f"a cluster is recorded in {DIR}: scripts/cluster.py down first")
    for tool in ("haproxy", "nginx", "java"):
        if not shutil.which(tool):
            raise SystemExit(f"{tool} is missing (scripts/install-test-deps.sh installs it)")
    if not os.path.exists(cluster.NGINX_STREAM_MODULE):
        raise SystemExit(f"nginx's stream module (the UDP balancer) is not installed: "
                         f"apt-get install {cluster.NGINX_STREAM_PACKAGE}")
    binary = os.path.abspath(a.binary)
    if not os.access(binary, os.X_OK):
        raise SystemExit(f"no handled binary at {binary}: cargo build --release -p handled")
    os.makedirs(DIR, exist_ok=True)
    t0 = time.time()
    env = {"HANDLED_CASSANDRA_FAST": "1"} if os.environ.get("HANDLED_CLUSTER_FAST") == "1" else {}
    env["HANDLED_CASSANDRA_RF"] = str(min(a.cassandra, 3))
    # The jars come from Maven Central on first use (skipped when already fetched).
    cassandra("fetch")
    cassandra("up", str(a.cassandra), env=env)
    st = {"binary": binary, "rf": min(a.cassandra, 3), "nodes": {}, "cassandra": a.cassandra,
          "contact_points": ",".join(f"127.0.0.{i}:9042" for i in range(1, a.cassandra + 1))}
    open(os.path.join(DIR, "node.toml"), "w").write(
        f'public_address = "{BALANCER}"\nport = {PORTS["native"]}\nhttp_port = {PORTS["http"]}\n'
        f'registry_port = {PORTS["registry"]}\n')
    json.dump(st, open(STATE, "w"))
    for i in range(1, a.nodes + 1):
        start_node(st, i)  # node 1 first: it makes the keyspace, site key and admin
        json.dump(st, open(STATE, "w"))
    write_balancers(a.nodes)
    st["haproxy"] = spawn("haproxy", ["haproxy", "-db", "-f", os.path.join(DIR, "haproxy.cfg")])
    st["nginx"] = spawn("nginx", ["nginx", "-c", os.path.join(DIR, "nginx.conf"), "-p", DIR])
    json.dump(st, open(STATE, "w"))
    # "up" only once each balancer runs and listens: nginx without its stream
    # module dies at start, and once said "up" all the same.
    for name, proto, port in (("haproxy", "tcp", PORTS["http"]), ("nginx", "udp", PORTS["native"])):
        why = wait_serving(st[name], proto, BALANCER, port)
        if why:
            log = os.path.join(DIR, f"{name}.log")
            text = ""
            if os.path.exists(log):
                with open(log, errors="replace") as f:
                    text = f.read()
            raise SystemExit(f"{name} {why}; {diagnosis(name, text)}; "
                             f"scripts/cluster.py down stops the rest")
    print(f"cluster up in {time.time() - t0:.0f} s")
    status(a)


def listening(proto, ip, port, proc_net="/proc/net"):
    """Is a socket bound to ip:port ({proto}: tcp listening, udp bound)?"""
    want = f"{ipaddress.IPv4Address(ip).packed[::-1].hex().upper()}:{port:04X}"
    try:
        with open(os.path.join(proc_net, proto)) as f:
            lines = f.read().splitlines()[1:]
    except OSError:
        return False
    # Columns: sl local_address rem_address st ...; 0A is TCP's LISTEN (UDP: 07).
    return any(f[1] == want and (proto == "udp" or f[3] == "0A") for f in (line.split() for line in lines))


def wait_serving(pid, proto, ip, port, timeout=5.0):
    """None once `pid` runs and listens on ip:port, else what is wrong."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if not alive(pid):
            return f"(pid {pid}) exited at start"
        if listening(proto, ip, port):
            return None
        time.sleep(0.1)
    return f"(pid {pid}) does not listen on {ip}:{port}/{proto} after {timeout:.0f} s"


def diagnosis(name, log):
    """What a balancer's log says went wrong, and the package that fixes it."""
    if name == "nginx" and "ngx_stream_module" in log:
        return f"its stream module did not load: apt-get install {cluster.NGINX_STREAM_PACKAGE}"
    last = [line for line in log.splitlines() if line.strip()][-3:]
    return f"its log {DIR}/{name}.log says: " + (" / ".join(last) if last else "nothing")


def status(_):
    if not os.path.exists(STATE):
        print(f"no cluster recorded in {DIR}")
        return
    st = json.load(open(STATE))
    print(f"balancer {BALANCER}: native {PORTS['native']} (UDP via nginx, TCP via haproxy), "
          f"HTTP {PORTS['http']}, registry {PORTS['registry']}")
    for i, pid in sorted(st["nodes"].items()):
        print(f"handled node {i}: {node_ip(int(i))} pid {pid} {'up' if alive(pid) else 'DOWN'}, log {DIR}/node{i}.err")
    for name in ("haproxy", "nginx"):
        if name in st:
            print(f"{name}: pid {st[name]} {'up' if alive(st[name]) else 'DOWN'}, log {DIR}/{name}.log")
    print(f"Cassandra: {st['contact_points']} (replication {st['rf']}); admin credentials {DIR}/admin-TEST.json")
    print(f"try: {st['binary']} resolve --host {BALANCER} TEST/ADMIN; curl http://{BALANCER}:{PORTS['http']}/readyz")


def kill_node(a):
    st = json.load(open(STATE))
    os.kill(st["nodes"][str(a.i)], signal.SIGKILL)
    print(f"handled node {a.i} SIGKILLed")


def start_node_cmd(a):
    st = json.load(open(STATE))
    t0 = time.time()
    start_node(st, a.i)
    json.dump(st, open(STATE, "w"))
    print(f"handled node {a.i} ready in {time.time() - t0:.2f} s")


def down(_):
    if os.path.exists(STATE):
        st = json.load(open(STATE))
        for pid in [*st["nodes"].values(), st.get("haproxy"), st.get("nginx")]:
            if pid and alive(pid):
                os.kill(pid, signal.SIGTERM)
        time.sleep(1)
        for pid in [*st["nodes"].values(), st.get("haproxy"), st.get("nginx")]:
            if pid and alive(pid):
                os.kill(pid, signal.SIGKILL)
        os.remove(STATE)
    if os.path.isdir(os.path.join(DIR, "nodes")):
        cassandra("down")
    print("cluster down")


def main():
    ap = argparse.ArgumentParser(description="A local handled cluster on Cassandra behind haproxy/nginx")
    sub = ap.add_subparsers(dest="cmd", required=True)
    u = sub.add_parser("up")
    u.add_argument("--cassandra", type=int, default=3)
    u.add_argument("--nodes", type=int, default=3)
    u.add_argument("--binary", default=os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release", "handled"))
    u.set_defaults(fn=up)
    sub.add_parser("status").set_defaults(fn=status)
    sub.add_parser("down").set_defaults(fn=down)
    for name, fn in (("kill-node", kill_node), ("start-node", start_node_cmd)):
        p = sub.add_parser(name)
        p.add_argument("i", type=int)
        p.set_defaults(fn=fn)
    a = ap.parse_args()
    a.fn(a)


if __name__ == "__main__":
    main()
