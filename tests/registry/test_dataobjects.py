"""Data-object routes (#14–#20): create/replace, keep-alive and merge under
/dataobject (no /hyperty prefix), lookups by url, name and reporter, search."""

import time
import uuid

from conftest import data_object_body, enc, new_hyperty

OBJECT_KEYS = {"name", "schema", "reporter", "resources", "dataSchemes", "status", "expires", "runtime",
               "p2pRequester", "url", "startingTime", "lastModified"}


def new_url():
    return f"comm://hybroker.rethink.ptinovacao.pt/{uuid.uuid4()}"


def create(client, url=None, **over):
    url = url or new_url()
    r = client.put(f"/hyperty/dataobject/{enc(url)}", data_object_body(**over))
    assert r.status_code == 200, r.text
    assert r.json() == {"message": "Data object created"}
    return url


def test_create_and_get(client):
    url = create(client, extra="dropped")
    r = client.get(f"/hyperty/dataobject/url/{enc(url)}")
    assert r.status_code == 200
    o = r.json()
    assert set(o) == OBJECT_KEYS, "a single object with 12 keys"
    assert o["url"] == url
    assert client.get(f"/hyperty/dataobject/url/{enc(new_url())}").json() == {"message": "Not Found"}


def test_create_requires_keys(client):
    for missing in ["schema", "name", "reporter", "resources", "dataSchemes", "status", "expires", "runtime"]:
        body = data_object_body()
        del body[missing]
        url = new_url()
        r = client.put(f"/hyperty/dataobject/{enc(url)}", body)
        assert r.status_code == 400 and r.text == "", missing
        assert client.get(f"/hyperty/dataobject/url/{enc(url)}").status_code == 404


def test_replace_keeps_starting_time(client):
    url = create(client)
    first = client.get(f"/hyperty/dataobject/url/{enc(url)}").json()
    time.sleep(1.1)
    create(client, url=url, name="renamed", resources=["video"])
    o = client.get(f"/hyperty/dataobject/url/{enc(url)}").json()
    assert o["startingTime"] == first["startingTime"] and o["lastModified"] > first["lastModified"]
    assert o["name"] == "renamed" and o["resources"] == ["video"], "full replace"
    # The old name no longer finds it; the new one does.
    assert client.get(f"/hyperty/dataobject/name/{enc(first['name'])}").status_code == 404
    assert url in client.get("/hyperty/dataobject/name/renamed").json()


def test_keep_alive_and_merge(client):
    url = create(client, status="created")
    r = client.put(f"/dataobject/url/{enc(url)}", raw="{}")
    assert (r.status_code, r.json()) == (200, {"message": "Keep alive"}), "no statusChanged for data objects"
    assert client.get(f"/hyperty/dataobject/url/{enc(url)}").json()["status"] == "live"
    r = client.put(f"/dataobject/url/{enc(url)}", {"resources": ["chat", "file"]})
    assert (r.status_code, r.json()) == (200, {"message": "data object updated"})
    o = client.get(f"/hyperty/dataobject/url/{enc(url)}").json()
    assert o["resources"] == ["chat", "file"] and o["schema"].endswith("Communication")
    assert client.put(f"/dataobject/url/{enc(new_url())}", raw="{}").status_code == 404
    assert client.put(f"/dataobject/url/{enc(new_url())}", {"x": 1}).status_code == 404
    # The /hyperty-prefixed form is not the keep-alive route.
    assert client.put(f"/hyperty/dataobject/url/{enc(url)}", raw="{}").status_code == 404


def test_by_name_and_reporter_with_search(client):
    name = "room-" + uuid.uuid4().hex[:6]
    reporter = new_hyperty()
    a = create(client, name=name, reporter=reporter, resources=["chat"], dataSchemes=["comm"])
    b = create(client, name=name, resources=["chat", "video"], dataSchemes=["comm", "ctxt"])
    r = client.get(f"/hyperty/dataobject/name/{enc(name)}")
    assert r.status_code == 200 and set(r.json()) == {a, b}
    assert set(r.json()[a]) == OBJECT_KEYS
    r = client.get(f"/hyperty/dataobject/name/{enc(name)}/do?resources=video")
    assert set(r.json()) == {b}
    assert client.get(f"/hyperty/dataobject/name/{enc(name)}/do?dataSchemes=none").status_code == 404
    assert client.get(f"/hyperty/dataobject/name/{enc(name)}/do?bad=1").status_code == 404
    assert client.get("/hyperty/dataobject/name/no-such-name").status_code == 404
    r = client.get(f"/hyperty/dataobject/reporter/{enc(reporter)}")
    assert r.status_code == 200 and set(r.json()) == {a}
    r = client.get(f"/hyperty/dataobject/reporter/{enc(reporter)}/x?resources=chat&dataSchemes=comm")
    assert set(r.json()) == {a}
    assert client.get(f"/hyperty/dataobject/reporter/{enc(reporter)}/x?resources=video").status_code == 404
    assert client.get(f"/hyperty/dataobject/reporter/{enc(new_hyperty())}").status_code == 404
    # By url with a search: a map of that one object, if it matches.
    r = client.get(f"/hyperty/dataobject/url/{enc(b)}/do?dataSchemes=ctxt")
    assert r.status_code == 200 and set(r.json()) == {b}
    assert client.get(f"/hyperty/dataobject/url/{enc(a)}/do?dataSchemes=ctxt").status_code == 404
    assert client.get(f"/hyperty/dataobject/url/{enc(a)}/do").status_code == 404


def test_disconnected_object_still_answers_200(client):
    url = create(client, expires=1, name="gone-" + uuid.uuid4().hex[:6])
    time.sleep(2.5)
    r = client.get(f"/hyperty/dataobject/url/{enc(url)}")
    assert r.status_code == 200 and r.json()["status"] == "disconnected"
    name = r.json()["name"]
    r = client.get(f"/hyperty/dataobject/name/{enc(name)}")
    assert r.status_code == 200 and r.json()[url]["status"] == "disconnected"
    assert url in client.feed()
    # Keep-alive revives it.
    client.put(f"/dataobject/url/{enc(url)}", raw="{}")
    assert client.get(f"/hyperty/dataobject/url/{enc(url)}").json()["status"] == "live"
