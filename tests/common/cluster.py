"""Cluster mode of the black-box suites: N stateless `handled` nodes on one
Cassandra keyspace (127.0.0.101…, the same ports; $HANDLED_CLUSTER_NET
replaces 127.0.0), behind haproxy on 127.0.0.1, round-robin with no stickiness
and health checks on /readyz. Each node runs with its record cache on and its
cluster channel on its own address (HANDLED_TEST_CLUSTER_CACHE=0: no cache).
Used when $HANDLED_TEST_CLUSTER_NODES (>= 2) and $HANDLED_TEST_CASSANDRA are
set (tests/cassandra/run.sh sets both)."""

import os
import shutil
import socket
import subprocess
import time
import uuid

import requests


def nodes() -> int:
    n = os.environ.get("HANDLED_TEST_CLUSTER_NODES", "")
    return int(n) if n.strip() and os.environ.get("HANDLED_TEST_CASSANDRA") else 1


def cassandra_env(prefix: str) -> dict:
    return {
        "HANDLED_STORE": "cassandra",
        "HANDLED_CASSANDRA_CONTACT_POINTS": os.environ["HANDLED_TEST_CASSANDRA"],
        "HANDLED_CASSANDRA_KEYSPACE": prefix + uuid.uuid4().hex[:16],
        "HANDLED_CASSANDRA_REPLICATION": "1",
    }


_handed_out = set()


def free_port() -> int:
    """A port free now and not handed out before by this process: the nodes bind
    these on their own addresses, where 127.0.0.1's kernel could give the same
    number twice (a node's cluster channel once got its own HTTP port)."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _handed_out:
            _handed_out.add(port)
            return port


def node_address(i: int) -> str:
    """Node i's address: NET.(100 + i), NET from $HANDLED_CLUSTER_NET (default 127.0.0),
    so runs sharing a box can keep their nodes apart."""
    return f"{os.environ.get('HANDLED_CLUSTER_NET', '127.0.0')}.{100 + i}"


def cache_args(i: int) -> list:
    """The record cache and the cluster channel of node i (a port of its own)."""
    if os.environ.get("HANDLED_TEST_CLUSTER_CACHE") == "0":
        return []
    return ["--cache-mb", "64", "--cluster-listen", f"{node_address(i)}:{free_port()}"]


def haproxy_config(bind: str, ports: dict, nodes: list, http_port: int) -> str:
    """haproxy in TCP mode, round-robin, no stickiness: one frontend per named
    port on `bind`, each over the same port of every node; health checks on the
    HTTP port's /readyz (the registry port's own /live for "registry")."""
    cfg = ["global", "  maxconn 4096", "", "defaults", "  mode tcp", "  timeout connect 2s",
           "  timeout client 60s", "  timeout server 60s", "  timeout check 1s", ""]
    for name, port in ports.items():
        check, check_port = ("/live", port) if name == "registry" else ("/readyz", http_port)
        cfg += [f"frontend {name}", f"  bind {bind}:{port}", f"  default_backend {name}_nodes", "",
                f"backend {name}_nodes", "  balance roundrobin", f"  option httpchk GET {check}"]
        cfg += [f"  server n{i} {ip}:{port} check port {check_port} inter 200ms fall 2 rise 2"
                for i, ip in enumerate(nodes, 1)]
        cfg.append("")
    return "\n".join(cfg)


# nginx's stream module (Debian: libnginx-mod-stream), which the UDP balancer loads.
NGINX_STREAM_MODULE = "/usr/lib/nginx/modules/ngx_stream_module.so"
NGINX_STREAM_PACKAGE = "libnginx-mod-stream"


def nginx_udp_config(state_dir: str, bind: str, port: int, nodes: list) -> str:
    """nginx's stream module spreading UDP datagrams over the nodes (haproxy has
    no UDP; nginx needs neither kernel modules nor root networking, unlike IPVS)."""
    ups = "".join(f"    server {ip}:{port};\n" for ip in nodes)
    return (f"load_module {NGINX_STREAM_MODULE};\ndaemon off;\nworker_processes 1;\n"
            f"pid {state_dir}/nginx.pid;\nerror_log {state_dir}/nginx.error.log warn;\n"
            "events { worker_connections 4096; }\n"
            f"stream {{\n  upstream nodes {{\n{ups}  }}\n  server {{\n    listen {bind}:{port} udp;\n"
            "    proxy_pass nodes;\n    proxy_timeout 3s;\n  }\n}\n")


class _Stderr:
    """All nodes' stderr, read back from their log files."""

    def __init__(self, paths):
        self.paths = paths

    def read(self) -> str:
        return "".join(open(p, errors="replace").read() for p in self.paths if os.path.exists(p))


class Cluster:
    """Looks like one `subprocess.Popen` of `handled serve` (terminate, wait, poll,
    stderr.read) whose HTTP port (and registry port) are the balancer's."""

    def __init__(self, binary, tmp, count, config_text="", env=None, registry=False, creds_path=None):
        self.tmp = tmp
        self.http_port = free_port()
        self.native_port = free_port()
        self.registry_port = free_port() if registry else None
        config = os.path.join(tmp, "node.toml")
        with open(config, "w") as f:
            # Top-level keys first: config_text may open a table ([cassandra]).
            f.write('public_address = "127.0.0.1"\n')
            if registry:
                f.write(f"registry_port = {self.registry_port}\n")
            f.write(config_text or "")
        node_env = {**os.environ, **cassandra_env("cl_"), **(env or {})}
        self.node_env, self.node_args, self.procs, errs = node_env, [], [], []
        for i in range(1, count + 1):
            err = os.path.join(tmp, f"node{i}.stderr.log")
            errs.append(err)
            creds = creds_path if (i == 1 and creds_path) else os.path.join(tmp, f"admin-node{i}.json")
            args = [binary, "serve", "--config", config, "--listen", node_address(i), "--port", str(self.native_port),
                    "--http-port", str(self.http_port), "--data-dir", os.path.join(tmp, f"data-{i}"),
                    "--admin-credentials", creds, *cache_args(i)]
            self.node_args.append((args, err))
            p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=open(err, "w"), env=node_env, text=True)
            self.procs.append(p)
            if p.stdout.readline().strip() != "ready":
                self.terminate()
                raise RuntimeError(f"cluster node {i} did not start: {open(err).read()[-2000:]}")
        self.stderr = _Stderr(errs)
        self.procs.append(self._haproxy(count))
        self._await_balancer()

    def restart(self, i: int) -> float:
        """Start node i (1-based) again after it died; seconds until it said ready."""
        args, err = self.node_args[i - 1]
        started = time.time()
        p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=open(err, "a"), env=self.node_env, text=True)
        self.procs[i - 1] = p
        if p.stdout.readline().strip() != "ready":
            raise RuntimeError(f"node {i} did not restart")
        return time.time() - started

    def _haproxy(self, count):
        ports = {"http": self.http_port, "native": self.native_port}
        if self.registry_port:
            ports["registry"] = self.registry_port
        path = os.path.join(self.tmp, "haproxy.cfg")
        with open(path, "w") as f:
            f.write(haproxy_config("127.0.0.1", ports, [node_address(i) for i in range(1, count + 1)], self.http_port))
        log = open(os.path.join(self.tmp, "haproxy.log"), "w")
        return subprocess.Popen([shutil.which("haproxy") or "haproxy", "-db", "-f", path], stdout=log, stderr=log)

    def _await_balancer(self):
        deadline = time.time() + 90
        while time.time() < deadline:
            try:
                if requests.get(f"http://127.0.0.1:{self.http_port}/readyz", timeout=2).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.1)
        self.terminate()
        raise RuntimeError("the balancer did not come up")

    def terminate(self):
        for p in self.procs:
            if p.poll() is None:
                p.terminate()

    def kill(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()

    def wait(self, timeout=None):
        for p in self.procs:
            p.wait(timeout=timeout)
        return self.procs[0].returncode

    def poll(self):
        return next((p.returncode for p in self.procs if p.poll() is not None), None)

    def send_signal(self, sig):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(sig)
