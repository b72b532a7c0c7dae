"""Starts `handled serve` with the domain registry enabled, once per backend:
the embedded store (temporary data directory), --ephemeral, and Cassandra when
$HANDLED_TEST_CASSANDRA names a node.

The binary is $HANDLED_BIN (default: $CARGO_TARGET_DIR/release/handled, target/ by default)."""

import json
import sys
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from urllib.parse import quote

import pytest
import requests

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "common"))
import cluster  # noqa: E402
BINARY = os.environ.get("HANDLED_BIN", str(Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")) / "release" / "handled"))
SWEEP_SECS = 1


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One `handled serve` process; `url` is the registry's root."""

    def __init__(self, ephemeral: bool, data_dir: str | None = None, sweep_secs: int = SWEEP_SECS, env=None,
                 nodes: int = 1):
        self.tmp = tempfile.mkdtemp(prefix="handled-registry-")
        self.data_dir = data_dir or os.path.join(self.tmp, "data")
        self.ephemeral = ephemeral
        on_cassandra = nodes > 1 or (env or {}).get("HANDLED_STORE") == "cassandra"
        # What /live reports as Storage_type.
        self.storage_type = "Ram" if ephemeral else ("Cassandra" if on_cassandra else "Embedded")
        config_text = f"registry_sweep_secs = {sweep_secs}\nregistry_expires_max = 3600\n"
        if nodes > 1:
            # Several stateless nodes on Cassandra behind a round-robin balancer.
            self.proc = cluster.Cluster(BINARY, self.tmp, nodes, config_text, dict(env or {}, HANDLED_LOG="warn"),
                                        registry=True)
            self.port = self.proc.registry_port
            self.url = f"http://127.0.0.1:{self.port}"
            return
        config = os.path.join(self.tmp, "handled.toml")
        with open(config, "w") as f:
            f.write(config_text)
        self.port = free_port()
        args = [BINARY, "serve", "--config", config, "--listen", "127.0.0.1", "--port", "0", "--http-port", "0",
                "--registry-port", str(self.port), "--data-dir", self.data_dir]
        if ephemeral:
            args.append("--ephemeral")
        full_env = dict(os.environ, HANDLED_LOG="warn", HANDLED_ADMIN_CREDENTIALS=os.path.join(self.tmp, "admin.json"))
        full_env.update(env or {})
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=full_env, text=True)
        deadline = time.time() + 60
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if line.strip() == "ready":
                break
            if not line and self.proc.poll() is not None:
                raise RuntimeError(f"handled serve exited with {self.proc.returncode}")
        else:
            raise RuntimeError("handled serve did not become ready")
        self.url = f"http://127.0.0.1:{self.port}"
        # The registry task may need a moment after "ready" (it counts stored hyperties first).
        for _ in range(100):
            try:
                requests.get(self.url + "/live", timeout=2)
                break
            except requests.ConnectionError:
                time.sleep(0.05)

    def stop(self, cleanup=True):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if cleanup:
            shutil.rmtree(self.tmp, ignore_errors=True)


# With a Cassandra node at $HANDLED_TEST_CASSANDRA (tests/cassandra/run.sh), the
# suite also runs on the Cassandra store, in a keyspace of its own.
BACKENDS = ["embedded", "ephemeral"] + (["cassandra"] if os.environ.get("HANDLED_TEST_CASSANDRA") else []) + (
    ["cluster"] if cluster.nodes() > 1 else [])


def cassandra_env() -> dict:
    return {
        "HANDLED_STORE": "cassandra",
        "HANDLED_CASSANDRA_CONTACT_POINTS": os.environ["HANDLED_TEST_CASSANDRA"],
        "HANDLED_CASSANDRA_KEYSPACE": "reg_" + uuid.uuid4().hex[:16],
        "HANDLED_CASSANDRA_REPLICATION": "1",
    }


@pytest.fixture(scope="session", params=BACKENDS)
def server(request):
    env = cassandra_env() if request.param == "cassandra" else None
    nodes = cluster.nodes() if request.param == "cluster" else 1
    s = Server(ephemeral=request.param == "ephemeral", env=env, nodes=nodes)
    yield s
    s.stop()


class Client:
    """The registry connector's view: ids percent-encoded with `/` as %2F."""

    def __init__(self, server: Server):
        self.server = server
        self.http = requests.Session()

    def req(self, method, path, **kw):
        kw.setdefault("timeout", 10)
        kw.setdefault("allow_redirects", False)
        return self.http.request(method, self.server.url + path, **kw)

    def get(self, path, **kw):
        return self.req("GET", path, **kw)

    def put(self, path, body=None, raw=None):
        data = raw if raw is not None else (None if body is None else json.dumps(body))
        return self.req("PUT", path, data=data, headers={"Content-Type": "application/json"})

    def delete(self, path):
        return self.req("DELETE", path)

    def feed(self):
        r = self.get("/registry/updated")
        assert r.status_code == 200, r.text
        return r.json()


@pytest.fixture
def client(server):
    return Client(server)


def enc(s: str) -> str:
    return quote(s, safe="")


def new_user(domain="inesc-id.pt") -> str:
    return f"user://{domain}/u{uuid.uuid4().hex[:10]}"


def new_hyperty(domain="ua.pt") -> str:
    return f"hyperty://{domain}/{uuid.uuid4()}"


def hyperty_body(**over):
    body = {
        "descriptor": "hyperty-catalogue://catalogue.ua.pt/.well-known/hyperty/HypertyChat",
        "resources": ["chat", "voice"],
        "dataSchemes": ["comm"],
        "expires": 3600,
        "status": "created",
        "runtime": "runtime://ua.pt/8aeb2d1b",
        "p2pRequester": "runtime://ua.pt/8aeb2d1b/p2prequester",
        "p2pHandler": "runtime://ua.pt/8aeb2d1b/p2phandler",
        "guid": "guid-" + uuid.uuid4().hex[:8],
    }
    body.update(over)
    return {k: v for k, v in body.items() if v is not None}


def data_object_body(**over):
    body = {
        "name": "chat-" + uuid.uuid4().hex[:6],
        "schema": "hyperty-catalogue://catalogue.ua.pt/.well-known/dataschema/Communication",
        "reporter": new_hyperty(),
        "resources": ["chat"],
        "dataSchemes": ["comm"],
        "status": "live",
        "expires": 3600,
        "runtime": "runtime://ua.pt/8aeb2d1b",
        "p2pRequester": "runtime://ua.pt/8aeb2d1b/p2prequester",
    }
    body.update(over)
    return {k: v for k, v in body.items() if v is not None}
