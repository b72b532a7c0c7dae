"""Starts one `handled serve --ephemeral` for the suite and hands tests its
addresses and admin credentials (the file `--admin-credentials` writes)."""
import atexit
import json
import sys
import uuid
import os
import re
import shutil
import subprocess
import tempfile
import time

import pytest
import requests
import urllib3

urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "common"))
import cluster  # noqa: E402


class Server:
    def __init__(self, proc, http_port, creds):
        self.proc = proc
        self.http = f"http://127.0.0.1:{http_port}"
        self.https = f"https://127.0.0.1:{http_port}"
        self.creds = creds
        self.secret = creds["secret_key"]["secret"]
        self.user = f'{creds["secret_key"]["index"]}:{creds["handle"]}'

    def basic(self):
        """requests auth tuple: percent-encoded index:handle, as pyhandle sends it."""
        return (requests.utils.quote(self.user, safe=""), self.secret)


def start(extra_args=(), config_text=None, env=None):
    binary = os.environ.get("HANDLED_BIN", os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release", "handled"))
    tmp = tempfile.mkdtemp(prefix="handled-rest-")
    # Its data directories and logs go when the test run ends (servers are stopped by then).
    atexit.register(shutil.rmtree, tmp, True)
    creds_path = os.path.join(tmp, "admin.json")
    if cluster.nodes() > 1:
        proc = cluster.Cluster(binary, tmp, cluster.nodes(), config_text, env, creds_path=creds_path)
        with open(creds_path) as f:
            return Server(proc, proc.http_port, json.load(f))
    args = [binary, "serve", "--port", "0", "--http-port", "0", "--admin-credentials", creds_path]
    env = dict(env or {})
    if os.environ.get("HANDLED_TEST_CASSANDRA"):
        # The whole suite on the Cassandra store (tests/cassandra/run.sh), a keyspace per server.
        env.update(HANDLED_STORE="cassandra", HANDLED_CASSANDRA_CONTACT_POINTS=os.environ["HANDLED_TEST_CASSANDRA"],
                   HANDLED_CASSANDRA_KEYSPACE="rest_" + uuid.uuid4().hex[:16], HANDLED_CASSANDRA_REPLICATION="1")
        args += ["--data-dir", os.path.join(tmp, "data")]
    else:
        args.append("--ephemeral")
    if config_text is not None:
        cfg = os.path.join(tmp, "handled.toml")
        with open(cfg, "w") as f:
            f.write(config_text)
        args += ["--config", cfg]
    proc = subprocess.Popen(args + list(extra_args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, **(env or {})))
    port = None
    deadline = time.time() + 30
    while time.time() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        m = re.search(r"http 127\.0\.0\.1:(\d+)", line)
        if m:
            port = int(m.group(1))
            break
    assert port, "server did not report its HTTP port"
    assert proc.stdout.readline().strip() == "ready"
    with open(creds_path) as f:
        creds = json.load(f)
    return Server(proc, port, creds)


@pytest.fixture(scope="session")
def server():
    s = start()
    yield s
    s.proc.terminate()
    s.proc.wait(timeout=10)
