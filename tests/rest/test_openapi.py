"""/api/openapi.json is kept true: schemathesis generates requests for every
documented operation and checks status codes, content types, headers and
bodies against the document — anonymously over plain HTTP, then as the admin
over HTTPS (a server of its own: the fuzzer deletes and unhomes things)."""
import base64
import os
import shutil
import subprocess
import sys

import pytest
import requests

from conftest import start

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.environ.get("SCHEMATHESIS_EXAMPLES", "25")
# Business errors (a schema-valid handle that does not exist → 404/400) are
# not "rejections"; missing credentials on plain HTTP are 403 as in Handle.Net.
EXCLUDED = "positive_data_acceptance,missing_required_header"


def schemathesis():
    exe = shutil.which("schemathesis", path=os.path.dirname(sys.executable)) or shutil.which("schemathesis")
    if exe is None:
        pytest.fail("schemathesis is not installed (tests/rest/run.sh installs it)")
    return exe


def run(base, *extra):
    cmd = [schemathesis(), "--config-file", os.path.join(HERE, "schemathesis.toml"), "run", f"{base}/api/openapi.json",
           "--url", base, "--checks", "all", "--exclude-checks", EXCLUDED, "--max-examples", EXAMPLES, "--seed", "1", *extra]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-6000:] + p.stderr[-2000:]


@pytest.fixture(scope="module")
def own_server():
    s = start()
    yield s
    s.proc.terminate()
    s.proc.wait(timeout=10)


def test_document_is_served(own_server):
    doc = requests.get(f"{own_server.http}/api/openapi.json").json()
    assert doc["openapi"].startswith("3.") and "/api/handles/{handle}" in doc["paths"]


def test_anonymous_over_http(own_server):
    run(own_server.http)


def test_admin_over_https(own_server):
    user = requests.utils.quote(own_server.user, safe="")
    token = base64.b64encode(f"{user}:{own_server.secret}".encode()).decode()
    run(own_server.https, "--tls-verify", "false", "-H", f"Authorization: Basic {token}")
