"""Expiry (on read, by the sweeper, `expires` clamping), keep-alive reviving an
expired endpoint, and the destructive change feed /registry/updated."""

import time

import pytest

from conftest import Client, Server, enc, hyperty_body, new_hyperty, new_user


def create(client, user=None, **over):
    user = user or new_user()
    hid = new_hyperty()
    r = client.put(f"/hyperty/user/{enc(user)}/{enc(hid)}", hyperty_body(**over))
    assert r.status_code == 200, r.text
    return user, hid


def test_expires_is_clamped(client):
    _, hid = create(client, expires=10**9)
    assert client.get(f"/hyperty/url/{enc(hid)}").json()["expires"] == 3600
    client.put(f"/hyperty/url/{enc(hid)}", {"expires": 7200})
    assert client.get(f"/hyperty/url/{enc(hid)}").json()["expires"] == 3600
    _, hid = create(client, expires="120")
    assert client.get(f"/hyperty/url/{enc(hid)}").json()["expires"] == 120


def test_expiry_and_keep_alive_revival(client):
    user, hid = create(client, expires=1, status="live")
    assert client.get(f"/hyperty/url/{enc(hid)}").status_code == 200
    time.sleep(2.5)
    r = client.get(f"/hyperty/url/{enc(hid)}")
    assert r.status_code == 408 and r.json()["status"] == "disconnected"
    assert client.get(f"/hyperty/user/{enc(user)}").status_code == 408
    # Keep-alive revives it: the status changed.
    r = client.put(f"/hyperty/url/{enc(hid)}", raw="{}")
    assert r.json() == {"statusChanged": "true", "message": "Keep alive"}
    r = client.get(f"/hyperty/url/{enc(hid)}")
    assert r.status_code == 200 and r.json()["status"] == "live"
    # Kept alive in time, it stays live.
    for _ in range(3):
        time.sleep(0.8)
        assert client.put(f"/hyperty/url/{enc(hid)}", raw="{}").json()["statusChanged"] == "false"
    assert client.get(f"/hyperty/url/{enc(hid)}").status_code == 200


def test_expires_zero_is_disconnected_on_next_read(client):
    _, hid = create(client, expires=0, status="live")
    time.sleep(1.1)
    assert client.get(f"/hyperty/url/{enc(hid)}").status_code == 408


def test_sweeper_feeds_the_change_feed_without_reads(client):
    _, hid = create(client, expires=1, status="live")
    deadline = time.time() + 10
    seen = {}
    while time.time() < deadline and hid not in seen:
        time.sleep(0.5)
        seen.update(client.feed())
    assert hid in seen, "the sweeper marks expired records and queues them"
    assert seen[hid]["status"] == "disconnected"


def test_change_feed_is_destructive_and_fed_by_deletes(client):
    user, h1 = create(client, status="live")
    _, h2 = create(client, user=user, status="live")
    _, h3 = create(client, user=user, status="live")
    for h in (h1, h2, h3):
        assert client.delete(f"/hyperty/user/{enc(user)}/{enc(h)}").status_code == 200
    # Keep-alive (or update) before the read takes a record out of the feed.
    client.put(f"/hyperty/url/{enc(h3)}", raw="{}")
    feed = client.feed()
    assert h1 in feed and h2 in feed and h3 not in feed
    assert feed[h1]["status"] == "disconnected" and feed[h1]["hypertyID"] == h1
    again = client.feed()
    assert h1 not in again and h2 not in again, "the read clears the set"
    # Live records never appear.
    _, live = create(client, status="live")
    assert live not in client.feed()


@pytest.fixture(scope="module")
def no_sweeper():
    """A server whose sweeper is off: expiry then happens only on reads."""
    s = Server(ephemeral=True, sweep_secs=0, env={"DOMAIN_ENV": "DEVELOPMENT"})
    yield Client(s)
    s.stop()


def test_expiry_is_applied_on_read(no_sweeper):
    c = no_sweeper
    _, hid = create(c, expires=1, status="live")
    time.sleep(2.5)
    assert hid not in c.feed(), "nothing marks it before it is read"
    assert c.get(f"/hyperty/url/{enc(hid)}").status_code == 408
    assert hid in c.feed(), "the read marked it and queued it"


def test_dev_status_page(no_sweeper):
    r = no_sweeper.get("/live", headers={"Accept": "text/html"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert "Hyperties stored" in r.text
    assert no_sweeper.get("/live").json()["status"] == "up"
