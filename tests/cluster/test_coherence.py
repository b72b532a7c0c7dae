"""The record cache kept coherent across nodes on Cassandra (docs/cluster.md,
"A record cache coherent across nodes"): 3 nodes with their caches on, each
written and read directly (not through the balancer) so that a read on one
node right after a write answered by another is what is tested.

Needs $HANDLED_TEST_CASSANDRA (tests/cluster/run.sh starts a node and runs this
through tests/cluster/suites.sh); skips without it. Run alone:
    HANDLED_TEST_CASSANDRA=127.0.10.1:9042 HANDLED_CLUSTER_NET=127.0.10 \\
      python3 -m pytest -q tests/cluster/test_coherence.py
"""
import json
import os
import re
import shutil
import socket
import sys
import tempfile
import time
import uuid
from urllib.parse import quote

import pytest
import requests
import urllib3

urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "common"))
import cluster  # noqa: E402

if not os.environ.get("HANDLED_TEST_CASSANDRA"):
    pytest.skip("needs $HANDLED_TEST_CASSANDRA (tests/cluster/run.sh)", allow_module_level=True)
if os.environ.get("HANDLED_TEST_CLUSTER_CACHE") == "0":
    pytest.skip("the record cache is off (HANDLED_TEST_CLUSTER_CACHE=0)", allow_module_level=True)

BINARY = os.environ.get("HANDLED_BIN", os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release", "handled"))
NODES = 3
ROUNDS = int(os.environ.get("HANDLED_TEST_COHERENCE_ROUNDS", "150"))


@pytest.fixture(scope="module")
def site():
    tmp = tempfile.mkdtemp(prefix="handled-coherence-")
    creds_path = os.path.join(tmp, "admin.json")
    # A generous driver timeout: the box running the tests may be loaded (schema changes take seconds).
    config = "[cassandra]\nrequest_timeout_ms = 30000\n"
    c = cluster.Cluster(BINARY, tmp, NODES, config, {"HANDLED_LOG": "warn"}, registry=True, creds_path=creds_path)
    c.creds = json.load(open(creds_path))
    yield c
    c.terminate()
    c.wait(timeout=20)
    shutil.rmtree(tmp, ignore_errors=True)


def http(c, i):
    return f"http://{cluster.node_address(i)}:{c.http_port}"


def https(c, i):
    return f"https://{cluster.node_address(i)}:{c.http_port}"


def registry(c, i):
    return f"http://{cluster.node_address(i)}:{c.registry_port}"


def auth(c):
    user = f'{c.creds["secret_key"]["index"]}:{c.creds["handle"]}'
    return (quote(user, safe=""), c.creds["secret_key"]["secret"])


def put_handle(c, i, handle, n):
    body = [{"index": 1, "type": "URL", "data": {"format": "string", "value": f"v{n}"}},
            {"index": 100, "type": "HS_ADMIN",
             "data": {"format": "admin", "value": {"handle": "TEST/ADMIN", "index": 300, "permissions": "111111111111"}}}]
    r = requests.put(f"{https(c, i)}/api/handles/{handle}", json=body, auth=auth(c), verify=False, timeout=10)
    assert r.status_code in (200, 201), r.text


def handle_value(c, i, handle):
    r = requests.get(f"{http(c, i)}/api/handles/{handle}?index=1", timeout=10)
    assert r.status_code == 200, r.text
    return r.json()["values"][0]["data"]["value"]


def put_hyperty(c, i, user, hid, n):
    body = {"descriptor": "hyperty-catalogue://catalogue.ua.pt/.well-known/hyperty/HypertyChat",
            "resources": [f"r{n}"], "dataSchemes": ["comm"], "expires": 3600, "status": "created",
            "runtime": "runtime://ua.pt/1"}
    r = requests.put(f"{registry(c, i)}/hyperty/user/{quote(user, safe='')}/{quote(hid, safe='')}", json=body,
                     timeout=10)
    assert r.status_code == 200, r.text


def hyperty_resources(c, i, user):
    r = requests.get(f"{registry(c, i)}/hyperty/user/{quote(user, safe='')}", timeout=10)
    assert r.status_code == 200, r.text
    return {hid: h["resources"] for hid, h in r.json().items()}


def metric(c, i, name):
    text = requests.get(f"{http(c, i)}/metrics", timeout=10).text
    m = re.search(rf"^{name} (\d+)", text, re.M)
    return int(m.group(1)) if m else 0


def test_a_write_answered_on_one_node_is_never_read_old_on_another(site):
    handle = f"TEST/coherence-{uuid.uuid4().hex[:8]}"
    user, hid = f"user://ua.pt/c{uuid.uuid4().hex[:8]}", f"hyperty://ua.pt/{uuid.uuid4()}"
    put_handle(site, 1, handle, 0)
    put_hyperty(site, 1, user, hid, 0)
    time.sleep(1)  # the nodes' leases are live (serving from the cache starts view_refresh + margin after)
    hits_before = sum(metric(site, i, "handled_cache_hits_total") for i in range(1, NODES + 1))
    for n in range(1, ROUNDS + 1):
        writer, reader = n % NODES + 1, (n + 1) % NODES + 1
        # The reader has the current answers cached (asked twice: the second is a hit)…
        for _ in range(2):
            assert handle_value(site, reader, handle) == f"v{n - 1}"
            assert hyperty_resources(site, reader, user) == {hid: [f"r{n - 1}"]}
        # …the writer answers a change…
        put_handle(site, writer, handle, n)
        put_hyperty(site, writer, user, hid, n)
        # …and from then on the reader answers the new value.
        assert handle_value(site, reader, handle) == f"v{n}", f"round {n}: old handle on node {reader}"
        assert hyperty_resources(site, reader, user) == {hid: [f"r{n}"]}, f"round {n}: old hyperty on node {reader}"
    hits = sum(metric(site, i, "handled_cache_hits_total") for i in range(1, NODES + 1)) - hits_before
    assert hits >= ROUNDS, f"the nodes answered from their caches ({hits} hits)"
    received = sum(metric(site, i, "handled_cluster_invalidations_received_total") for i in range(1, NODES + 1))
    assert received >= 2 * ROUNDS, received


def cluster_listen(c, i):
    """Node i's cluster channel address, as its command line gives it."""
    with open(f"/proc/{c.procs[i - 1].pid}/cmdline") as f:
        args = f.read().split("\0")
    host, port = args[args.index("--cluster-listen") + 1].rsplit(":", 1)
    return host, int(port)


def test_strangers_crowding_the_cluster_channel_fence_no_one(site):
    """Issue 25 R7, replayed on a real cluster: idle connections from a stranger
    made a node drop its peers' channel connections, and the peers then fenced
    it (writes waited out its lease). 128 idle connections from an address that
    is no node, held while node 1 writes and node 2 reads: every read is fresh
    and no node is fenced."""
    host, port = cluster_listen(site, 2)
    stranger = f"{os.environ.get('HANDLED_CLUSTER_NET', '127.0.0')}.250"
    fences = sum(metric(site, i, "handled_cluster_fences_total") for i in range(1, NODES + 1))
    held = []
    try:
        for _ in range(128):
            s = socket.socket()
            s.settimeout(2)
            try:
                s.bind((stranger, 0))
                s.connect((host, port))
                held.append(s)
            except OSError:
                s.close()
        assert held, "no stranger connection was accepted at all"
        handle = f"TEST/crowded-{uuid.uuid4().hex[:8]}"
        put_handle(site, 1, handle, 0)
        for n in range(1, 21):
            put_handle(site, 1, handle, n)
            assert handle_value(site, 2, handle) == f"v{n}", f"round {n}: old value on the crowded node"
        after = sum(metric(site, i, "handled_cluster_fences_total") for i in range(1, NODES + 1))
        assert after == fences, f"{after - fences} fences while strangers crowded node 2's channel"
    finally:
        for s in held:
            s.close()


def test_a_killed_node_delays_writes_at_most_about_a_lease(site):
    """kill -9 one node: the next write on another waits for its lease (2 s +
    0.25 s margin) once, later writes do not wait, and reads stay fresh."""
    handle = f"TEST/killed-{uuid.uuid4().hex[:8]}"
    put_handle(site, 1, handle, 0)
    assert handle_value(site, 2, handle) == "v0"
    site.procs[NODES - 1].kill()
    site.procs[NODES - 1].wait()
    times = []
    for n in range(1, 11):
        started = time.time()
        put_handle(site, 1, handle, n)
        times.append(time.time() - started)
        assert handle_value(site, 2, handle) == f"v{n}", f"write {n} after the kill: old value on node 2"
    assert max(times) < 4.0, f"a write waited longer than about a lease: {times}"
    assert sum(t > 1.0 for t in times) <= 1, f"more than one write waited: {times}"
    assert metric(site, 1, "handled_cluster_fences_total") >= 1
    # The node comes back: it serves fresh values too.
    site.restart(NODES)
    time.sleep(1)
    for n in range(11, 21):
        put_handle(site, n % 2 + 1, handle, n)
        assert handle_value(site, NODES, handle) == f"v{n}"
