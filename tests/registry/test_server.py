"""Server-level behaviour: /, /live, /error, unknown routes, Server-Timing,
keep-alive connections, LOAD_BALANCER_IP, persistence on the embedded store."""

import socket

from conftest import Client, Server, enc, hyperty_body, new_hyperty, new_user


def test_root_redirects_to_live(client):
    r = client.get("/")
    assert r.status_code == 302 and r.headers["location"] == "/live"


def test_live_shape_and_count(client, server):
    r = client.get("/live")
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
    live = r.json()
    assert set(live) == {"status", "Storage_type", "Hyperties_stored"}
    assert all(isinstance(v, str) for v in live.values()), "all values are strings"
    assert live["status"] == "up"
    assert live["Storage_type"] == server.storage_type
    n = int(live["Hyperties_stored"])
    user, hid = new_user(), new_hyperty()
    client.put(f"/hyperty/user/{enc(user)}/{enc(hid)}", hyperty_body())
    client.put(f"/hyperty/user/{enc(user)}/{enc(hid)}", hyperty_body())  # an update is not a new one
    assert int(client.get("/live").json()["Hyperties_stored"]) == n + 1


def test_error_route(client):
    r = client.get("/error")
    assert (r.status_code, r.json()) == (401, {"message": "Unauthorized."})


def test_unknown_routes(client):
    r = client.get("/nothing/here")
    assert r.status_code == 404 and "404 Not found" in r.text
    assert client.req("POST", "/hyperty/user/a/b").status_code == 404
    # Known prefixes with segment counts no controller handles: the JSON 404.
    assert client.get("/hyperty/url/a/b/c").json() == {"message": "Not Found"}


def test_server_timing_on_every_response(client):
    for method, path in [("GET", "/live"), ("GET", "/"), ("GET", "/nothing"), ("GET", "/hyperty/url/x"),
                         ("PUT", "/hyperty/user/a/b"), ("GET", "/registry/updated")]:
        r = client.req(method, path)
        timing = r.headers.get("server-timing", "")
        assert timing.startswith("app;dur="), (method, path, timing)
        float(timing.split("=", 1)[1])


def test_keep_alive_connection(server):
    """Several requests on one HTTP/1.1 connection."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        for _ in range(3):
            s.sendall(b"GET /live HTTP/1.1\r\nHost: x\r\n\r\n")
            data = b""
            while b"\r\n\r\n" not in data:
                data += s.recv(4096)
            head, _, body = data.partition(b"\r\n\r\n")
            length = int([l for l in head.split(b"\r\n") if l.lower().startswith(b"content-length")][0].split(b":")[1])
            while len(body) < length:
                body += s.recv(4096)
            assert head.startswith(b"HTTP/1.1 200")


def test_load_balancer_ip_filter():
    s = Server(ephemeral=True, env={"LOAD_BALANCER_IP": "10.255.255.1"})
    try:
        r = Client(s).get("/live")
        assert r.status_code == 401 and r.text == "Unauthorized request"
        assert r.headers["content-type"].startswith("text/plain")
    finally:
        s.stop()


def test_embedded_store_persists_across_restart():
    first = Server(ephemeral=False)
    try:
        c = Client(first)
        user, hid = new_user(), new_hyperty()
        c.put(f"/hyperty/user/{enc(user)}/{enc(hid)}", hyperty_body(status="live"))
        c.delete(f"/hyperty/user/{enc(user)}/{enc(hid)}")
    finally:
        first.stop(cleanup=False)
    second = Server(ephemeral=False, data_dir=first.data_dir)
    try:
        c = Client(second)
        assert c.get(f"/hyperty/url/{enc(hid)}").status_code == 408
        assert c.get("/live").json()["Hyperties_stored"] == "1"
        assert hid in c.feed(), "the change feed is durable too"
    finally:
        second.stop()
        first.stop()
