"""pyhandle 1.5.0's REST client (RESTHandleClient) against handled: the calls
EUDAT services make, over HTTPS with Basic authentication."""
import uuid

import pytest
from pyhandle.client.resthandleclient import RESTHandleClient
from pyhandle.handleexceptions import (
    GenericHandleError,
    HandleAlreadyExistsException,
    HandleAuthenticationError,
    HandleNotFoundException,
    IllegalOperationException,
)


@pytest.fixture(scope="module")
def client(server):
    return RESTHandleClient.instantiate_with_username_and_password(
        server.https, server.user, server.secret, HTTPS_verify=False
    )


def fresh():
    return f"TEST/py-{uuid.uuid4().hex[:12]}"


def test_retrieve(client):
    record = client.retrieve_handle_record_json("TEST/ADMIN")
    assert record["handle"] == "TEST/ADMIN"
    types = {v["type"] for v in record["values"]}
    assert "HS_ADMIN" in types and "HS_PUBKEY" in types
    assert "HS_SECKEY" not in types, "secret keys are hidden from anonymous-default reads"
    assert client.retrieve_handle_record_json("TEST/does-not-exist") is None


def test_register_without_and_with_overwrite(client):
    h = fresh()
    assert client.register_handle(h, "https://example.org/one") == h
    assert client.get_value_from_handle(h, "URL") == "https://example.org/one"
    with pytest.raises(HandleAlreadyExistsException):
        client.register_handle(h, "https://example.org/two")
    assert client.register_handle(h, "https://example.org/two", overwrite=True) == h
    assert client.get_value_from_handle(h, "URL") == "https://example.org/two"


def test_modify_add_remove_values(client):
    h = fresh()
    client.register_handle(h, "https://example.org/m", checksum="abc")
    client.modify_handle_value(h, URL="https://example.org/changed")
    assert client.get_value_from_handle(h, "URL") == "https://example.org/changed"
    client.add_handle_value(h, EMAIL="someone@example.org")
    assert client.get_value_from_handle(h, "EMAIL") == "someone@example.org"
    client.delete_handle_value(h, "CHECKSUM")
    assert client.get_value_from_handle(h, "CHECKSUM") is None
    assert client.get_value_from_handle(h, "URL") == "https://example.org/changed"


def test_delete(client):
    h = fresh()
    client.register_handle(h, "https://example.org/d")
    assert client.delete_handle(h) == h
    assert client.retrieve_handle_record_json(h) is None
    with pytest.raises(HandleNotFoundException):
        client.delete_handle(h)


def test_generate_and_register(client):
    h = client.generate_and_register_handle("TEST", "https://example.org/generated")
    assert h.startswith("TEST/") and len(h) > len("TEST/") + 30
    assert client.get_value_from_handle(h, "URL") == "https://example.org/generated"


def test_search(server, client):
    marker = uuid.uuid4().hex
    h1, h2 = fresh(), fresh()
    client.register_handle(h1, f"https://search.example.org/{marker}/a")
    client.register_handle(h2, f"https://search.example.org/{marker}/b")
    searcher = RESTHandleClient.instantiate_for_read_and_search(
        server.https, server.user, server.secret, HTTPS_verify=False
    )
    found = searcher.search_handle(URL=f"https://search.example.org/{marker}/a")
    assert found == [h1]  # as created, not upper-cased
    found = searcher.search_handle(URL=f"*{marker}*", prefix="TEST")
    assert sorted(found) == sorted([h1, h2])
    client.delete_handle(h1)
    assert searcher.search_handle(URL=f"*{marker}*") == [h2]


def test_unauthenticated_write_refused(server):
    h = fresh()
    wrong = RESTHandleClient.instantiate_with_username_and_password(
        server.https, server.user, "not-the-secret", HTTPS_verify=False
    )
    with pytest.raises((HandleAuthenticationError, GenericHandleError)):
        wrong.register_handle(h, "https://example.org/x")
    # Credentials over plain HTTP are ignored, as by Handle.Net: refused too.
    plain = RESTHandleClient.instantiate_with_username_and_password(
        server.http, server.user, server.secret, HTTPS_verify=False
    )
    with pytest.raises((HandleAuthenticationError, GenericHandleError)):
        plain.register_handle(h, "https://example.org/x")
    reader = RESTHandleClient.instantiate_for_read_access(server.https, HTTPS_verify=False)
    assert reader.retrieve_handle_record_json(h) is None


def test_hs_admin_protected(server, client):
    h = fresh()
    client.register_handle(h, "https://example.org/admin")
    with pytest.raises(IllegalOperationException):
        client.modify_handle_value(h, HS_ADMIN="x")
    # Another identity, not named by the handle's HS_ADMIN, may not change it.
    other = fresh()
    client.register_handle_json(other, [{"index": 300, "type": "HS_SECKEY", "data": "other-secret", "permissions": "1100"}])
    intruder = RESTHandleClient.instantiate_with_username_and_password(
        server.https, f"300:{other}", "other-secret", HTTPS_verify=False
    )
    with pytest.raises(GenericHandleError) as e:
        intruder.modify_handle_value(h, URL="https://evil.example.org")
    assert e.value.response.status_code == 403
    assert client.get_value_from_handle(h, "URL") == "https://example.org/admin"
