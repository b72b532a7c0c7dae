"""Hyperty routes (#4–#13 of the registry doc): create/update, ownership,
soft delete, lookups by user, url, guid and email, search, keep-alive, merge."""

import re
import time

from conftest import enc, hyperty_body, new_hyperty, new_user

HYPERTY_KEYS = {"descriptor", "resources", "dataSchemes", "expires", "status", "runtime", "p2pRequester",
                "p2pHandler", "guid", "startingTime", "lastModified", "hypertyID", "userID"}
TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


def create(client, user=None, hid=None, **over):
    user = user or new_user()
    hid = hid or new_hyperty()
    r = client.put(f"/hyperty/user/{enc(user)}/{enc(hid)}", hyperty_body(**over))
    assert r.status_code == 200, r.text
    assert r.json() == {"message": "Hyperty created"}
    return user, hid


def test_create_then_get_by_url(client):
    user, hid = create(client, extra_key="dropped")
    r = client.get(f"/hyperty/url/{enc(hid)}")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("application/json")
    h = r.json()
    assert set(h) == HYPERTY_KEYS, "13 keys; unknown keys are accepted but not kept"
    assert h["hypertyID"] == hid and h["userID"] == user
    assert h["resources"] == ["chat", "voice"] and h["status"] == "created"
    assert TIME.match(h["startingTime"]) and TIME.match(h["lastModified"])


def test_create_requires_every_required_key(client):
    for missing in ["expires", "dataSchemes", "resources", "runtime", "status", "descriptor"]:
        hid = new_hyperty()
        body = hyperty_body()
        del body[missing]
        r = client.put(f"/hyperty/user/{enc(new_user())}/{enc(hid)}", body)
        assert r.status_code == 400, missing
        assert r.text == "", "halt(400): no body"
        assert client.get(f"/hyperty/url/{enc(hid)}").status_code == 404
    # Optional keys may be missing.
    create(client, p2pRequester=None, p2pHandler=None, guid=None)
    # Not JSON / empty body.
    assert client.put(f"/hyperty/user/{enc(new_user())}/{enc(new_hyperty())}", raw="").status_code == 400
    assert client.put(f"/hyperty/user/{enc(new_user())}/{enc(new_hyperty())}", raw="nope").status_code == 400


def test_update_by_same_user_keeps_starting_time(client):
    user, hid = create(client)
    first = client.get(f"/hyperty/url/{enc(hid)}").json()
    time.sleep(1.1)
    user, hid = create(client, user=user, hid=hid, resources=["video"], status="live")
    second = client.get(f"/hyperty/url/{enc(hid)}").json()
    assert second["startingTime"] == first["startingTime"]
    assert second["lastModified"] > first["lastModified"]
    assert second["resources"] == ["video"] and second["status"] == "live"


def test_ownership_conflict(client):
    owner, hid = create(client)
    other = new_user()
    r = client.put(f"/hyperty/user/{enc(other)}/{enc(hid)}", hyperty_body())
    assert (r.status_code, r.json()) == (404, {"message": "Not Found"})
    assert client.get(f"/hyperty/url/{enc(hid)}").json()["userID"] == owner
    assert client.get(f"/hyperty/user/{enc(other)}").status_code == 404
    r = client.delete(f"/hyperty/user/{enc(other)}/{enc(hid)}")
    assert (r.status_code, r.json()) == (404, {"message": "Not Found"})
    assert client.get(f"/hyperty/url/{enc(hid)}").status_code == 200


def test_soft_delete(client):
    user, hid = create(client, status="live")
    r = client.delete(f"/hyperty/user/{enc(user)}/{enc(hid)}")
    assert (r.status_code, r.json()) == (200, {"message": "Hyperty deleted"})
    r = client.get(f"/hyperty/url/{enc(hid)}")
    assert r.status_code == 408, "a disconnected hyperty answers 408 with the full object"
    assert set(r.json()) == HYPERTY_KEYS and r.json()["status"] == "disconnected"
    # Unknown user, unknown hyperty.
    assert client.delete(f"/hyperty/user/{enc(new_user())}/{enc(hid)}").status_code == 404
    assert client.delete(f"/hyperty/user/{enc(user)}/{enc(new_hyperty())}").status_code == 404


def test_get_by_user(client):
    user, h1 = create(client, status="live")
    _, h2 = create(client, user=user, status="live")
    r = client.get(f"/hyperty/user/{enc(user)}")
    assert r.status_code == 200
    assert set(r.json()) == {h1, h2}
    assert r.json()[h1]["resources"] == ["chat", "voice"]
    # One disconnected: still 200 with both.
    client.delete(f"/hyperty/user/{enc(user)}/{enc(h1)}")
    r = client.get(f"/hyperty/user/{enc(user)}")
    assert r.status_code == 200 and r.json()[h1]["status"] == "disconnected"
    # All disconnected: 408, body = the map.
    client.delete(f"/hyperty/user/{enc(user)}/{enc(h2)}")
    r = client.get(f"/hyperty/user/{enc(user)}")
    assert r.status_code == 408 and set(r.json()) == {h1, h2}
    r = client.get(f"/hyperty/user/{enc(new_user())}")
    assert (r.status_code, r.json()) == (404, {"message": "Not Found"})


def test_search_by_resources_and_data_schemes(client):
    user, chat = create(client, resources=["chat"], dataSchemes=["comm"], status="live")
    _, av = create(client, user=user, resources=["voice", "video", "chat"], dataSchemes=["comm", "ctxt"], status="live")
    base = f"/hyperty/user/{enc(user)}/hyperty"

    def found(query, status=200):
        r = client.get(base + query)
        assert r.status_code == status, (query, r.text)
        return set(r.json()) if status in (200, 408) else r.json()

    assert found("?resources=chat") == {chat, av}
    assert found("?resources=video,voice") == {av}
    assert found("?resources=chat,chat") == {chat, av}, "set semantics"
    assert found("?dataSchemes=ctxt") == {av}
    assert found("?resources=chat&dataSchemes=comm") == {chat, av}
    assert found("?resources=voice&dataSchemes=comm") == {av}
    assert found("?resources=fax", 404) == {"message": "Not Found"}
    assert found("?resources=chat&dataSchemes=nope", 404)
    # Anything but exactly resources / dataSchemes / both: 404.
    assert found("", 404)
    assert found("?resources=chat&x=1", 404)
    assert found("?other=chat", 404)
    # The 5th segment's name is not checked.
    r = client.get(f"/hyperty/user/{enc(user)}/whatever?dataSchemes=ctxt")
    assert r.status_code == 200 and set(r.json()) == {av}
    # Unknown user.
    assert client.get(f"/hyperty/user/{enc(new_user())}/hyperty?resources=chat").status_code == 404
    # All matches disconnected: 408.
    client.delete(f"/hyperty/user/{enc(user)}/{enc(av)}")
    assert found("?resources=video", 408) == {av}
    assert found("?resources=chat") == {chat, av}


def test_raw_percent_2f_routing(client):
    # Ids with '/' route only because the path is split before decoding.
    user, hid = create(client)
    assert "%2F" in enc(hid)
    assert client.get(f"/hyperty/url/{enc(hid)}").status_code == 200
    # The same id unencoded is a different (longer) path: no such lookup.
    assert client.get(f"/hyperty/url/{hid.replace('://', '%3A%2F%2F')}").status_code == 404
    # A trailing slash is ignored, as Java's split drops trailing empty segments.
    assert client.get(f"/hyperty/url/{enc(hid)}/").status_code == 200
    # '+' decodes as a space, like java.net.URLDecoder.
    spaced = "user://x.org/a b"
    create(client, user=spaced)
    assert client.get("/hyperty/user/user%3A%2F%2Fx.org%2Fa+b").status_code == 200


def test_keep_alive(client):
    user, hid = create(client, status="live")
    before = client.get(f"/hyperty/url/{enc(hid)}").json()
    time.sleep(1.1)
    r = client.put(f"/hyperty/url/{enc(hid)}", raw="{}")
    assert r.status_code == 200
    assert r.json() == {"statusChanged": "false", "message": "Keep alive"}, "statusChanged is a string"
    after = client.get(f"/hyperty/url/{enc(hid)}").json()
    assert after["lastModified"] > before["lastModified"] and after["status"] == "live"
    # From another status, keep-alive sets live and reports the change.
    _, created = create(client, status="created")
    r = client.put(f"/hyperty/url/{enc(created)}", raw="{}")
    assert r.json() == {"statusChanged": "true", "message": "Keep alive"}
    assert client.get(f"/hyperty/url/{enc(created)}").json()["status"] == "live"
    # A deleted (disconnected) hyperty is revived by keep-alive.
    client.delete(f"/hyperty/user/{enc(user)}/{enc(hid)}")
    assert client.get(f"/hyperty/url/{enc(hid)}").status_code == 408
    assert client.put(f"/hyperty/url/{enc(hid)}", raw="{}").json()["statusChanged"] == "true"
    assert client.get(f"/hyperty/url/{enc(hid)}").status_code == 200
    r = client.put(f"/hyperty/url/{enc(new_hyperty())}", raw="{}")
    assert (r.status_code, r.json()) == (404, {"message": "Not Found"})


def test_update_is_a_shallow_merge(client):
    user, hid = create(client, status="live")
    time.sleep(1.1)
    r = client.put(f"/hyperty/url/{enc(hid)}", {"resources": ["video"], "runtime": "runtime://new"})
    assert r.status_code == 200
    assert r.json() == {"statusChanged": "false", "message": "Hyperty updated"}
    h = client.get(f"/hyperty/url/{enc(hid)}").json()
    assert h["resources"] == ["video"] and h["runtime"] == "runtime://new"
    assert h["dataSchemes"] == ["comm"] and h["userID"] == user and h["status"] == "live"
    assert h["lastModified"] > h["startingTime"]
    # A key spelled with whitespace is a merge, not a keep-alive (raw-string comparison).
    r = client.put(f"/hyperty/url/{enc(hid)}", raw="{ }")
    assert r.json()["message"] == "Hyperty updated"
    r = client.put(f"/hyperty/url/{enc(hid)}", {"status": "busy"})
    assert r.json() == {"statusChanged": "true", "message": "Hyperty updated"}
    assert client.put(f"/hyperty/url/{enc(new_hyperty())}", {"status": "x"}).status_code == 404


def test_get_by_guid(client):
    user, h1 = create(client, guid="guid-shared-" + new_user()[-6:], status="live")
    guid = client.get(f"/hyperty/url/{enc(h1)}").json()["guid"]
    _, h2 = create(client, user=user, guid=None, status="live")
    r = client.get(f"/hyperty/guid/{enc(guid)}")
    assert r.status_code == 200 and set(r.json()) == {h1, h2}, "all of that user's hyperties"
    assert client.get("/hyperty/guid/no-such-guid").status_code == 404
    for h in (h1, h2):
        client.delete(f"/hyperty/user/{enc(user)}/{enc(h)}")
    assert client.get(f"/hyperty/guid/{enc(guid)}").status_code == 408


def test_get_by_email(client):
    email = f"e{new_user()[-8:]}@gmail.com"
    u1, u2 = f"user://google.com/{email}", f"user://other.org/{email}"
    _, h1 = create(client, user=u1, status="live", resources=["chat"])
    _, h2 = create(client, user=u2, status="live", resources=["chat", "video"])
    create(client, user=f"user://google.com/x{email}", status="live")
    r = client.get(f"/hyperty/email/{enc(email)}")
    assert r.status_code == 200 and set(r.json()) == {h1, h2}
    r = client.get(f"/hyperty/email/{enc(email)}/hyperty?resources=video")
    assert r.status_code == 200 and set(r.json()) == {h2}
    assert client.get(f"/hyperty/email/{enc(email)}/hyperty?resources=fax").status_code == 404
    assert client.get(f"/hyperty/email/{enc(email)}/hyperty?nope=1").status_code == 404
    assert client.get("/hyperty/email/nobody%40nowhere").status_code == 404
    client.delete(f"/hyperty/user/{enc(u1)}/{enc(h1)}")
    client.delete(f"/hyperty/user/{enc(u2)}/{enc(h2)}")
    assert client.get(f"/hyperty/email/{enc(email)}").status_code == 408
    assert client.get(f"/hyperty/email/{enc(email)}/h?resources=chat").status_code == 408
