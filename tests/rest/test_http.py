"""HTTP-level pins of the JSON API (§4.5, §4.6): status codes and bodies of
the response-code mapping table, error shapes, sessions, CORS, JSONP,
keep-alive. Plain `requests`, as curl would see it."""
import base64
import hashlib
import hmac
import json
import re
import socket
import uuid

import pytest
import requests

from conftest import start


def h():
    return f"TEST/http-{uuid.uuid4().hex[:12]}"


URL_VALUE = {"index": 1, "type": "URL", "data": {"format": "string", "value": "https://example.org/x"}}
ADMIN_VALUE = {"index": 100, "type": "HS_ADMIN", "data": {"format": "admin", "value": {"handle": "TEST/ADMIN", "index": 300, "permissions": "111111111111"}}}


def put(server, handle, body, params="", auth=True):
    return requests.put(f"{server.https}/api/handles/{handle}{params}", json=body, auth=server.basic() if auth else None, verify=False)


def create(server, handle=None):
    handle = handle or h()
    r = put(server, handle, [URL_VALUE, ADMIN_VALUE])
    assert r.status_code == 201, r.text
    return handle


def test_resolution_shapes(server):
    handle = create(server)
    r = requests.get(f"{server.http}/api/handles/{handle}")
    assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
    body = r.json()
    assert list(body) == ["responseCode", "handle", "values"]
    assert body["values"][0]["data"] == {"format": "string", "value": "https://example.org/x"}
    assert body["values"][0]["ttl"] == 86400 and body["values"][0]["timestamp"].endswith("Z")
    r = requests.get(f"{server.http}/api/handles/{handle}?index=999")
    assert (r.status_code, r.json()) == (200, {"responseCode": 200, "values": [], "handle": handle})
    r = requests.get(f"{server.http}/api/handles/{handle}?type=HS_ADMIN&index=1")
    assert sorted(v["index"] for v in r.json()["values"]) == [1, 100]
    r = requests.get(f"{server.http}/api/handles/TEST/nothing-here")
    assert (r.status_code, r.json()) == (404, {"responseCode": 100, "handle": "TEST/nothing-here"})
    r = requests.get(f"{server.http}/api/handles/OTHER/x")
    assert (r.status_code, r.json()) == (400, {"responseCode": 301, "message": "That prefix doesn't live here", "handle": "OTHER/x"})
    r = requests.get(f"{server.http}/api/handles")
    assert (r.status_code, r.json()) == (400, {"responseCode": 102, "message": "Empty handle invalid"})
    r = requests.get(f"{server.http}/api/handles/{handle}?index=one")
    assert r.status_code == 400 and r.json()["responseCode"] == 4


def test_percent_encoded_handles_and_post_as_get(server):
    handle = create(server, f"TEST/a+b%20c-{uuid.uuid4().hex[:6]}")
    r = requests.get(f"{server.http}/api/handles/{handle.replace('/', '%2F')}")
    assert r.json()["handle"] == handle.replace("%20", " ")
    r = requests.post(f"{server.http}/api/handles/{handle}", json={"index": [100], "pretty": True})
    assert r.status_code == 200 and [v["index"] for v in r.json()["values"]] == [100]
    assert "\n  " in r.text, "pretty from the JSON body"


def test_jsonp_pretty_and_secret_values(server):
    r = requests.get(f"{server.http}/api/handles/TEST/ADMIN?callback=my.cb&pretty")
    assert r.headers["content-type"].startswith("application/javascript")
    assert r.text.startswith("my_cb({\n") and r.text.endswith("});")
    anon = requests.get(f"{server.https}/api/handles/TEST/ADMIN", verify=False).json()
    assert 300 not in [v["index"] for v in anon["values"]]
    authed = requests.get(f"{server.https}/api/handles/TEST/ADMIN", auth=server.basic(), verify=False).json()
    seckey = [v for v in authed["values"] if v["index"] == 300][0]
    assert seckey["permissions"] == "1100" and seckey["data"]["value"] == server.secret
    r = requests.get(f"{server.https}/api/handles/TEST/ADMIN?publicOnly=false", verify=False)
    assert r.status_code == 401 and r.json()["responseCode"] == 402


def test_create_overwrite_add_remove_delete(server):
    handle = h()
    assert put(server, handle, {"values": [URL_VALUE, ADMIN_VALUE], "handle": handle}).status_code == 201
    r = put(server, handle, [URL_VALUE, ADMIN_VALUE], "?overwrite=false")
    assert (r.status_code, r.json()) == (409, {"responseCode": 101, "message": f"Handle {handle} already exists", "handle": handle})
    r = put(server, handle, [URL_VALUE, ADMIN_VALUE])
    assert (r.status_code, r.json()) == (200, {"responseCode": 1, "handle": handle})
    email = {"index": 2, "type": "EMAIL", "data": "a@example.org"}
    r = put(server, handle, email, "?index=2")
    assert (r.status_code, r.json()) == (201, {"responseCode": 1, "handle": handle})
    r = put(server, handle, dict(email, data="b@example.org"), "?index=2&overwrite=false")
    assert r.status_code == 409 and r.json()["responseCode"] == 201
    r = put(server, handle, dict(email, data="b@example.org"), "?index=2")
    assert r.status_code == 200
    r = put(server, handle, [email], "?index=3")
    assert r.status_code == 400, "listed indexes must match the body"
    assert put(server, handle, [dict(email, index=7)], "?index=various").status_code == 201
    r = requests.delete(f"{server.https}/api/handles/{handle}?index=2&index=7", auth=server.basic(), verify=False)
    assert (r.status_code, r.json()) == (200, {"responseCode": 1, "handle": handle})
    r = requests.delete(f"{server.https}/api/handles/{handle}?index=2", auth=server.basic(), verify=False)
    assert r.status_code == 400 and r.json()["responseCode"] == 200
    r = requests.delete(f"{server.https}/api/handles/{handle}", auth=server.basic(), verify=False)
    assert (r.status_code, r.json()) == (200, {"responseCode": 1, "handle": handle})
    r = requests.delete(f"{server.https}/api/handles/{handle}", auth=server.basic(), verify=False)
    assert (r.status_code, r.json()) == (404, {"responseCode": 100, "handle": handle})


def test_mint_and_bad_bodies(server):
    r = put(server, "TEST/mint-", [URL_VALUE, ADMIN_VALUE], "?mintNewSuffix=true")
    assert r.status_code == 201 and r.json()["handle"].startswith("TEST/mint-") and len(r.json()["handle"]) == len("TEST/mint-") + 36
    handle = h()
    r = requests.put(f"{server.https}/api/handles/{handle}", data="{not json", auth=server.basic(), verify=False)
    assert r.status_code == 400 and r.json()["responseCode"] == 4 and r.json()["handle"] == handle
    r = put(server, handle, [dict(URL_VALUE, index=0)])
    assert (r.status_code, r.json()["responseCode"], r.json()["message"]) == (400, 202, "Value indexes must be positive")
    r = put(server, handle, [URL_VALUE, URL_VALUE])
    assert r.status_code == 409 and r.json()["responseCode"] == 201
    r = put(server, handle, {"handle": "TEST/other", "values": [URL_VALUE]})
    assert r.status_code == 400
    r = put(server, "OTHER/x", [URL_VALUE])
    assert r.status_code == 400 and r.json()["responseCode"] == 301


def test_authentication_mapping(server):
    handle = h()
    r = put(server, handle, [URL_VALUE], auth=False)
    assert (r.status_code, r.json()["responseCode"]) == (401, 402)
    challenges = r.headers["www-authenticate"]
    assert 'Handle sessionId="' in challenges and 'Basic realm="handle"' in challenges
    r = requests.put(f"{server.http}/api/handles/{handle}", json=[URL_VALUE], auth=server.basic())
    assert (r.status_code, r.json()["responseCode"]) == (403, 402), "credentials ignored over plain HTTP"
    assert "www-authenticate" not in r.headers
    r = requests.put(f"{server.https}/api/handles/{handle}", json=[URL_VALUE], auth=(server.basic()[0], "wrong"), verify=False)
    assert (r.status_code, r.json()["responseCode"]) == (401, 403)
    r = requests.put(f"{server.https}/api/handles/{handle}", json=[URL_VALUE], headers={"Authorization": "Handle sessionId=\"nope\"", "X-Requested-With": "XMLHttpRequest"}, verify=False)
    assert r.status_code == 401 and "Basic" not in r.headers["www-authenticate"]
    # An identity the prefix's HS_ADMIN does not name: 400 (INVALID_ADMIN) → 403.
    other = h()
    assert put(server, other, [{"index": 300, "type": "HS_SECKEY", "data": "s3cret", "permissions": "1100"}, ADMIN_VALUE]).status_code == 201
    intruder = (requests.utils.quote(f"300:{other}", safe=""), "s3cret")
    r = requests.put(f"{server.https}/api/handles/{handle}", json=[URL_VALUE], auth=intruder, verify=False)
    assert (r.status_code, r.json()["responseCode"]) == (403, 400)


def test_unknown_endpoints_and_methods(server):
    r = requests.get(f"{server.http}/api/nothing")
    assert (r.status_code, r.json()) == (404, {"responseCode": 4, "message": "Unknown HTTP API endpoint GET /api/nothing"})
    r = requests.put(f"{server.http}/api/site")
    assert (r.status_code, r.json()) == (405, {"responseCode": 4, "message": "Unknown HTTP API endpoint PUT /api/site"})
    r = requests.request("PATCH", f"{server.http}/api/handles/TEST/x")
    assert (r.status_code, r.json()) == (501, {"responseCode": 4, "message": "Unknown method PATCH"})
    # Other paths are the web handle proxy: TEST/ADMIN has no URL, so its record is shown.
    r = requests.get(f"{server.http}/TEST/ADMIN", allow_redirects=False)
    assert r.status_code == 200 and "Handle Values for: TEST/ADMIN" in r.text


def test_cors_preflight(server):
    r = requests.options(f"{server.http}/api/handles/TEST/ADMIN", headers={"Origin": "https://app.example", "Access-Control-Request-Method": "PUT"})
    assert r.status_code == 200
    assert r.headers["access-control-allow-origin"] == "*"
    assert "PUT" in r.headers["access-control-allow-methods"]
    assert "Authorization" in r.headers["access-control-allow-headers"]
    r = requests.get(f"{server.http}/api/site", headers={"Origin": "https://app.example"})
    assert "Server-Timing" in r.headers["access-control-expose-headers"]


def test_site_listing_prefixes(server):
    site = requests.get(f"{server.http}/api/site").json()
    assert site["responseCode"] == 1 and site["site"]["servers"][0]["publicKey"]["format"] == "key"
    a, b = create(server), create(server)
    r = requests.get(f"{server.https}/api/handles?prefix=TEST", auth=server.basic(), verify=False)
    body = r.json()
    assert r.status_code == 200 and body["prefix"] == "TEST" and isinstance(body["totalCount"], str)
    assert {a.upper(), b.upper()} <= {x.upper() for x in body["handles"]}
    r = requests.get(f"{server.https}/api/handles?prefix=TEST&page=0&pageSize=0", auth=server.basic(), verify=False)
    assert r.json()["handles"] == [] and r.json()["pageSize"] == 0 and int(r.json()["totalCount"]) >= 2
    r = requests.get(f"{server.http}/api/handles?prefix=TEST")
    assert (r.status_code, r.json()["responseCode"]) == (403, 402)
    # On a single-prefix server TEST/ADMIN is also a server administrator (as
    # Handle.Net's setup makes it): it lists the homed prefixes.
    r = requests.get(f"{server.https}/api/prefixes", auth=server.basic(), verify=False)
    assert r.status_code == 200 and r.json()["prefixes"] == ["0.NA/TEST"]


def test_prefix_admins_only_with_empty_server_admins():
    # server_admins = []: TEST/ADMIN administers its own prefix only; homing
    # another prefix is for server administrators.
    s = start(config_text="server_admins = []\n")
    try:
        r = requests.get(f"{s.https}/api/prefixes", auth=s.basic(), verify=False)
        assert r.status_code == 200 and r.json()["prefixes"] == ["0.NA/TEST"]
        r = requests.post(f"{s.https}/api/prefixes/NEWPFX", auth=s.basic(), verify=False)
        assert r.status_code == 403
    finally:
        s.proc.terminate()
        s.proc.wait(timeout=10)


def test_server_admins_home_prefixes():
    s = start(config_text='server_admins = ["TEST/ADMIN"]\n')
    try:
        r = requests.get(f"{s.https}/api/prefixes", auth=s.basic(), verify=False)
        assert r.json() == {"responseCode": 1, "totalCount": "1", "prefixes": ["0.NA/TEST"]}
        r = requests.post(f"{s.https}/api/prefixes/NEWPFX", auth=s.basic(), verify=False)
        assert r.status_code == 200
        assert "0.NA/NEWPFX" in requests.get(f"{s.https}/api/prefixes", auth=s.basic(), verify=False).json()["prefixes"]
        assert requests.delete(f"{s.https}/api/prefixes/NEWPFX", auth=s.basic(), verify=False).status_code == 200
    finally:
        s.proc.terminate()
        s.proc.wait(timeout=10)


def test_listing_disabled_is_501():
    s = start(config_text="allow_list_handles = false\n")
    try:
        r = requests.get(f"{s.https}/api/handles?prefix=TEST", auth=s.basic(), verify=False)
        assert (r.status_code, r.json()["responseCode"]) == (501, 5)
    finally:
        s.proc.terminate()
        s.proc.wait(timeout=10)


def handle_header(session_id, nonce_b64, identity, secret, **extra):
    cnonce = bytes(range(16))
    mac = hmac.new(secret.encode(), base64.b64decode(nonce_b64) + cnonce, hashlib.sha256).digest()
    fields = {"sessionId": session_id, "id": requests.utils.quote(identity, safe=""), "type": "HS_SECKEY",
              "cnonce": base64.b64encode(cnonce).decode(), "alg": "HMAC-SHA256", "signature": base64.b64encode(mac).decode(), **extra}
    return "Handle " + ", ".join(f'{k}="{v}"' for k, v in fields.items())


def test_sessions(server):
    assert requests.post(f"{server.http}/api/sessions").status_code == 403
    r = requests.post(f"{server.https}/api/sessions", verify=False)
    assert r.status_code == 201 and r.headers["location"] == "/api/sessions/this"
    s = r.json()
    assert s["authenticated"] is False and len(base64.b64decode(s["nonce"])) == 16
    name = f'Handle sessionId="{s["sessionId"]}"'
    assert requests.get(f"{server.https}/api/sessions/this", headers={"Authorization": name}, verify=False).json()["authenticated"] is False
    bad = handle_header(s["sessionId"], s["nonce"], server.user, "wrong")
    r = requests.put(f"{server.https}/api/sessions/this", headers={"Authorization": bad}, verify=False)
    assert r.status_code == 401 and "error" in r.json()
    good = handle_header(s["sessionId"], s["nonce"], server.user, server.secret)
    r = requests.put(f"{server.https}/api/sessions/this", headers={"Authorization": good}, verify=False)
    assert r.json()["authenticated"] is True and r.json()["id"] == server.user
    # Later requests name only the session.
    handle = h()
    r = requests.put(f"{server.https}/api/handles/{handle}", json=[URL_VALUE, ADMIN_VALUE], headers={"Authorization": name}, verify=False)
    assert r.status_code == 201
    assert requests.delete(f"{server.https}/api/sessions/this", headers={"Authorization": name}, verify=False).status_code == 204
    r = requests.put(f"{server.https}/api/handles/{handle}", json=[URL_VALUE], headers={"Authorization": name}, verify=False)
    assert r.status_code == 401
    assert requests.get(f"{server.https}/api/sessions/this", headers={"Authorization": name}, verify=False).status_code == 403
    assert requests.get(f"{server.https}/api/sessions/other", verify=False).status_code == 403
    # Basic authenticates a new session at once; cnonce without id asks the server to sign.
    r = requests.post(f"{server.https}/api/sessions", auth=server.basic(), verify=False)
    assert r.json()["authenticated"] is True
    r = requests.post(f"{server.https}/api/sessions", headers={"Authorization": 'Handle cnonce="AAEC"'}, verify=False)
    assert r.json()["serverAlg"] == "SHA256" and r.json()["serverSignature"]


def test_verifications(server):
    nonce, cnonce = base64.b64encode(b"n" * 16).decode(), b"c" * 16
    mac = hmac.new(server.secret.encode(), b"n" * 16 + cnonce, hashlib.sha256).digest()
    q = {"nonce": nonce, "cnonce": base64.b64encode(cnonce).decode(), "alg": "HMAC-SHA256", "signature": base64.b64encode(mac).decode()}
    r = requests.get(f"{server.http}/api/verifications/{server.user}", params=q)
    assert r.json() == {"responseCode": 1, "isValid": True}
    q["signature"] = base64.b64encode(b"x" * 32).decode()
    assert requests.get(f"{server.http}/api/verifications/{server.user}", params=q).json()["isValid"] is False


def test_reverse_lookup(server):
    marker = uuid.uuid4().hex
    handles = []
    for i in range(3):
        handle = h()
        v = dict(URL_VALUE, data=f"https://rl.example.org/{marker}/{i}")
        assert put(server, handle, [v, ADMIN_VALUE, {"index": 2, "type": "EMAIL", "data": f"{i % 2}@{marker}.org"}]).status_code == 201
        handles.append(handle)  # found under the name as created, not upper-cased
    r = requests.get(f"{server.http}/hrls/handles", params={"URL": f"https://RL.example.org/{marker}/*"})
    assert r.status_code == 200 and sorted(r.json()) == sorted(handles)
    r = requests.get(f"{server.http}/hrls/handles", params={"URL": f"*{marker}*", "EMAIL": f"1@{marker}.org"})
    assert r.json() == [handles[1]]
    r = requests.get(f"{server.http}/hrls/handles/TEST", params={"URL": f"*{marker}/2", "retrieverecords": "true"})
    (only,) = r.json().items()
    assert only[0] == handles[2] and {v["type"] for v in only[1]} == {"URL", "HS_ADMIN", "EMAIL"}
    assert requests.get(f"{server.http}/hrls/handles/OTHER", params={"URL": f"*{marker}*"}).json() == []
    page0 = requests.get(f"{server.http}/hrls/handles", params={"URL": f"*{marker}*", "limit": 2}).json()
    page1 = requests.get(f"{server.http}/hrls/handles", params={"URL": f"*{marker}*", "limit": 2, "page": 1}).json()
    assert len(page0) == 2 and len(page1) == 1 and sorted(page0 + page1) == sorted(handles)
    assert requests.get(f"{server.http}/hrls/handles").status_code == 400
    # Secret values are never searchable.
    assert requests.get(f"{server.http}/hrls/handles", params={"HS_SECKEY": server.secret}).json() == []


def raw(port, request):
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(request)
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return data
            data += chunk


def test_keep_alive_headers_and_connection_close(server):
    port = int(server.http.rsplit(":", 1)[1])
    with requests.Session() as sess:
        r1 = sess.get(f"{server.http}/api/site")
        r2 = sess.get(f"{server.http}/api/site")
    assert r1.headers["keep-alive"].startswith("timeout=") and "max=" in r1.headers["keep-alive"]
    assert int(r2.headers["keep-alive"].split("max=")[1]) == int(r1.headers["keep-alive"].split("max=")[1]) - 1
    assert r1.headers["server-timing"].startswith("app;dur=")
    assert int(r1.headers["content-length"]) == len(r1.content)
    # Connection: close is honoured: the server closes after one response (recv returns EOF).
    data = raw(port, b"GET /api/site HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert data.count(b"HTTP/1.1 200") == 1 and b"keep-alive:" not in data.lower()
    # HTTP/1.0 without keep-alive: one answer, then close.
    data = raw(port, b"GET /api/site HTTP/1.0\r\n\r\n")
    assert data.startswith(b"HTTP/1.0 200")


def test_plain_http_admin_when_configured_and_access_log():
    s = start(config_text="allow_plain_http_admin = true\n", env={"HANDLED_LOG": "warn,access=info"})
    try:
        handle = h()
        r = requests.put(f"{s.http}/api/handles/{handle}", json=[URL_VALUE, ADMIN_VALUE], auth=s.basic())
        assert (r.status_code, r.json()) == (201, {"responseCode": 1, "handle": handle})
        r = requests.put(f"{s.http}/api/handles/{handle}", json=[URL_VALUE])
        assert (r.status_code, r.json()["responseCode"]) == (401, 402), "401 (not 403) once credentials count"
        timing = requests.get(f"{s.http}/api/handles/{handle}").headers["server-timing"]
    finally:
        s.proc.terminate()
        s.proc.wait(timeout=10)
    log = re.sub(r"\x1b\[[0-9;]*m", "", s.proc.stderr.read())
    # The access log line carries the same figure as the Server-Timing header.
    ms = timing.split("dur=")[1]
    line = [l for l in log.splitlines() if "access" in l and f"/api/handles/{handle}" in l and f"dur_ms={ms}" in l]
    assert line, log[-2000:]
