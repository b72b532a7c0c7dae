"""The admin console, as an administrator uses it, in headless Chromium."""

import base64
import json
import os
import pathlib
import re
import ssl
import urllib.error
import urllib.request

import pytest
from playwright.sync_api import expect

HERE = pathlib.Path(__file__).parent
SHOTS = os.environ.get("CONSOLE_SCREENSHOTS")


def shot(page, name, full_page=True):
    if SHOTS:
        pathlib.Path(SHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=os.path.join(SHOTS, f"{name}.png"), full_page=full_page)


def api(server, method, path, body=None):
    """The JSON API over HTTPS with Basic auth as 300:TEST/ADMIN (test set-up only)."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    secret = server.credentials["secret_key"]["secret"]
    token = base64.b64encode(f"300%3ATEST%2FADMIN:{secret}".encode()).decode()
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(server.base + path, data=data, method=method)
    req.add_header("Authorization", f"Basic {token}")
    req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=10) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def open_console(page, server):
    page.goto(server.base + "/admin/")
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()


def sign_in_secret(page, identity, secret):
    page.get_by_label("Admin identity (index:handle)").fill(identity)
    page.get_by_label("a secret key").check()
    page.get_by_label("Secret key", exact=True).fill(secret)
    page.get_by_role("button", name="Sign in").click()


def sign_in_key(page, identity, key_path, passphrase=None):
    page.get_by_label("Admin identity (index:handle)").fill(identity)
    page.get_by_label("a private key file").check()
    page.get_by_label("Private key file", exact=True).set_input_files(str(key_path))
    if passphrase is not None:
        page.get_by_label("Key file passphrase").fill(passphrase)
    page.get_by_role("button", name="Sign in").click()


def expect_signed_in(page, identity):
    expect(page.get_by_role("heading", name="Homed prefixes")).to_be_visible()
    expect(page.locator("#whoami")).to_have_text(identity)


def new_value(page, value_type, index):
    """Open the value form of a record page for a new value of this type and index."""
    page.get_by_role("button", name="Add a value").click()
    page.get_by_label("Type", exact=True).select_option(value_type)
    page.get_by_label("Index", exact=True).fill(str(index))


def expect_refused(page, words):
    expect(page.locator("#message")).to_contain_text(words)
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    assert page.evaluate("sessionStorage.length") == 0


def sign_in_as_admin(page, server):
    open_console(page, server)
    sign_in_secret(page, "300:TEST/ADMIN", server.credentials["secret_key"]["secret"])
    expect_signed_in(page, "300:TEST/ADMIN")


def test_plain_http_points_to_https(server):
    url = f"http://127.0.0.1:{server.http_port}/admin/"
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(url, timeout=10)
    assert e.value.code == 403
    page = e.value.read().decode()
    assert f"https://127.0.0.1:{server.http_port}/admin/" in page
    assert "frame-ancestors 'none'" in e.value.headers["Content-Security-Policy"]


def test_wrong_secret_is_refused(page, server):
    open_console(page, server)
    sign_in_secret(page, "300:TEST/ADMIN", "not-the-secret")
    expect_refused(page, "Sign-in refused")


def test_keyboard_sign_in_browse_create_edit_search_delete(page, server):
    open_console(page, server)
    shot(page, "sign-in")
    # Keyboard only: the identity field has the focus; Tab to the secret, Enter.
    page.keyboard.press("Control+A")
    page.keyboard.type("300:TEST/ADMIN")
    page.keyboard.press("Tab")  # the checked radio button (secret key)
    page.keyboard.press("Tab")  # the secret field
    page.keyboard.type(server.credentials["secret_key"]["secret"])
    page.keyboard.press("Enter")
    expect_signed_in(page, "300:TEST/ADMIN")
    # Nothing but the session id is kept, and only for this tab.
    stored = page.evaluate("JSON.stringify(sessionStorage)")
    assert server.credentials["secret_key"]["secret"] not in stored
    assert page.evaluate("localStorage.length") == 0 and page.evaluate("document.cookie") == ""

    page.get_by_role("link", name="TEST", exact=True).click()
    expect(page.get_by_role("heading", name="Handles under TEST")).to_be_visible()
    expect(page.get_by_role("link", name="TEST/ADMIN")).to_be_visible()

    # Create TEST/console-1 with a URL and an HS_ADMIN value.
    page.get_by_role("link", name="New handle under TEST").click()
    expect(page.get_by_role("heading", name="New handle")).to_be_visible()
    page.get_by_label("Suffix", exact=True).fill("console-1")
    page.get_by_label("Address (URL)").fill("https://example.org/one")
    page.get_by_role("button", name="Create handle").click()
    expect(page.get_by_role("heading", name="TEST/console-1")).to_be_visible()
    expect(page.locator("#message")).to_have_text("Created TEST/console-1.")
    expect(page.locator("table.values")).to_contain_text("https://example.org/one")
    expect(page.locator("table.values")).to_contain_text("300:TEST/ADMIN may do everything")
    status, record = api(server, "GET", "/api/handles/TEST/console-1")
    assert status == 200
    types = {v["type"]: v for v in record["values"]}
    assert types["URL"]["data"]["value"] == "https://example.org/one"
    assert types["HS_ADMIN"]["data"]["value"] == {"handle": "TEST/ADMIN", "index": 300, "permissions": "111111111111"}

    # Creating it again is refused, in words.
    page.goto(server.base + "/admin/#/new?prefix=TEST")
    page.get_by_label("Suffix", exact=True).fill("console-1")
    page.get_by_label("Address (URL)").fill("https://example.org/again")
    page.get_by_role("button", name="Create handle").click()
    expect(page.locator("#message")).to_contain_text("already exists")

    # Edit the URL value.
    page.goto(server.base + "/admin/#/record/TEST%2Fconsole-1")
    page.get_by_role("button", name="Edit value 1 (URL)").click()
    shot(page, "record-editor")
    page.get_by_label("Address (URL)").fill("https://example.org/two")
    page.get_by_label("TTL (seconds)").fill("3600")
    page.get_by_role("button", name="Save value 1").click()
    expect(page.locator("#message")).to_contain_text("Saved value 1")
    expect(page.locator("table.values")).to_contain_text("https://example.org/two")
    _, record = api(server, "GET", "/api/handles/TEST/console-1?index=1")
    assert record["values"][0]["data"]["value"] == "https://example.org/two"
    assert record["values"][0]["ttl"] == 3600

    # Add a 10320/loc value with the location editor, and an EMAIL.
    new_value(page, "10320/loc", 2)
    page.get_by_label("Address (href)").fill("https://mirror.example.org/x")
    page.get_by_role("button", name="Add value").click()
    expect(page.locator("table.values")).to_contain_text("mirror.example.org")
    _, record = api(server, "GET", "/api/handles/TEST/console-1?index=2")
    assert 'href="https://mirror.example.org/x"' in record["values"][0]["data"]["value"]

    # The handle list, paged (50 a page) and filtered.
    for i in range(55):
        status, _ = api(server, "PUT", f"/api/handles/TEST/page-{i:02}", [{"index": 1, "type": "URL", "data": f"https://example.org/p/{i}"}])
        assert status == 201
    page.goto(server.base + "/admin/#/handles/TEST")
    expect(page.get_by_text("57 handles, showing 1–50")).to_be_visible()
    expect(page.locator("ul.handles li")).to_have_count(50)
    shot(page, "handle-list", full_page=False)
    page.get_by_role("link", name="Next page").click()
    expect(page.get_by_text("57 handles, showing 51–57")).to_be_visible()
    expect(page.get_by_text("Page 2 of 2")).to_be_visible()
    page.get_by_label("Filter (part of the handle)").fill("console")
    page.keyboard.press("Enter")
    expect(page.get_by_role("link", name="TEST/console-1")).to_be_visible()
    expect(page.locator("ul.handles li")).to_have_count(1)

    # Search by value finds it.
    page.get_by_role("link", name="Search").click()
    page.get_by_label("Value pattern").fill("*example.org/two*")
    page.get_by_role("button", name="Search").click()
    expect(page.get_by_role("link", name="TEST/console-1")).to_be_visible()

    # Delete it, confirming in place.
    page.get_by_role("link", name="TEST/console-1").click()
    page.get_by_role("button", name="Delete handle").click()
    page.get_by_role("button", name="Yes, delete handle").click()
    expect(page.get_by_role("heading", name="Handles under TEST")).to_be_visible()
    expect(page.locator("#message")).to_have_text(re.compile(r"Deleted TEST/console-1\.", re.I))
    assert api(server, "GET", "/api/handles/TEST/console-1")[0] == 404

    # Status.
    page.get_by_role("link", name="Status").click()
    expect(page.get_by_role("heading", name="Server status")).to_be_visible()
    for caption in ["Admission", "Requests", "Cache", "Store"]:
        expect(page.locator("caption", has_text=caption)).to_be_visible()
    # The second reading (5 s later) has request rates.
    expect(page.get_by_text("per second").first).to_be_visible(timeout=12_000)
    shot(page, "status")

    # Sign out ends the session on the server too.
    session_id = json.loads(page.evaluate("sessionStorage.getItem('handled.console.session')"))["sessionId"]
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    req = urllib.request.Request(server.base + "/api/sessions/this")
    req.add_header("Authorization", f'Handle sessionId="{session_id}"')
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, context=ctx, timeout=10)
    assert e.value.code == 403


def test_sign_in_with_pkcs8_pem_file(page, server, tmp_path):
    der = base64.b64decode(server.credentials["public_key"]["private_key_pkcs8"])
    body = base64.encodebytes(der).decode()
    pem = tmp_path / "admin.pem"
    pem.write_text(f"-----BEGIN PRIVATE KEY-----\n{body}-----END PRIVATE KEY-----\n")
    open_console(page, server)
    sign_in_key(page, "301:TEST/ADMIN", pem)
    expect_signed_in(page, "301:TEST/ADMIN")
    # A DER file works too.
    page.get_by_role("button", name="Sign out").click()
    raw = tmp_path / "admin.der"
    raw.write_bytes(der)
    sign_in_key(page, "301:TEST/ADMIN", raw)
    expect_signed_in(page, "301:TEST/ADMIN")


def test_handle_net_key_file_after_pasting_its_public_key(page, server):
    """hdl-keygen's own files: the public key pasted into an HS_PUBKEY value, then a sign-in with privkey.bin."""
    sign_in_as_admin(page, server)
    page.goto(server.base + "/admin/#/record/TEST%2FADMIN")
    new_value(page, "HS_PUBKEY", 302)
    pub = base64.b64encode((HERE / "fixtures/hdl-keygen-pub.bin").read_bytes()).decode()
    page.get_by_label("Public key").fill(pub)
    page.get_by_role("button", name="Add value").click()
    expect(page.locator("table.values")).to_contain_text("RSA public key")
    page.get_by_role("button", name="Sign out").click()
    sign_in_key(page, "302:TEST/ADMIN", HERE / "fixtures/hdl-keygen-priv.bin")
    expect_signed_in(page, "302:TEST/ADMIN")


def test_encrypted_handle_net_key_file_with_its_passphrase(page, server):
    """hdl-keygen's passphrase-encrypted privkey.bin: refused without or with a wrong passphrase, then signs in."""
    sign_in_as_admin(page, server)
    page.goto(server.base + "/admin/#/record/TEST%2FADMIN")
    new_value(page, "HS_PUBKEY", 303)
    pub = base64.b64encode((HERE / "fixtures/hdl-keygen-enc-pub.bin").read_bytes()).decode()
    page.get_by_label("Public key").fill(pub)
    page.get_by_role("button", name="Add value").click()
    expect(page.locator("table.values")).to_contain_text("RSA public key")
    page.get_by_role("button", name="Sign out").click()
    key = HERE / "fixtures/hdl-keygen-enc-priv.bin"
    sign_in_key(page, "303:TEST/ADMIN", key)
    expect_refused(page, "encrypted: type its passphrase")
    sign_in_key(page, "303:TEST/ADMIN", key, "wrong horse")
    expect_refused(page, "Wrong passphrase")
    sign_in_key(page, "303:TEST/ADMIN", key, "correct horse")
    expect_signed_in(page, "303:TEST/ADMIN")


def test_non_admin_identity_is_refused(page, server):
    status, _ = api(
        server,
        "PUT",
        "/api/handles/TEST/someone?overwrite=false",
        {
            "values": [
                {"index": 300, "type": "HS_SECKEY", "data": "someones-secret", "permissions": "01100"},
                {
                    "index": 100,
                    "type": "HS_ADMIN",
                    "data": {"format": "admin", "value": {"handle": "TEST/ADMIN", "index": 300, "permissions": "111111111111"}},
                },
            ]
        },
    )
    assert status == 201
    open_console(page, server)
    sign_in_secret(page, "300:TEST/someone", "someones-secret")
    expect_refused(page, "may not administer this server")


def test_phone_width_record_page_fits(browser, server):
    context = browser.new_context(ignore_https_errors=True, viewport={"width": 390, "height": 844}, is_mobile=True)
    page = context.new_page()
    sign_in_as_admin(page, server)
    page.goto(server.base + "/admin/#/record/TEST%2FADMIN")
    expect(page.get_by_role("heading", name="TEST/ADMIN")).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
    # The admin's secret key is not shown, even to an administrator.
    expect(page.locator("table.values")).to_contain_text("secret key (hidden)")
    expect(page.locator("table.values")).not_to_contain_text(server.credentials["secret_key"]["secret"])
    shot(page, "record-phone")
    context.close()


def test_desktop_record_page_sizes_columns_to_content(browser, server):
    """At 1280 px the data column takes what the short ones leave: a 60-character
    URL on one line, `86400 s` and the date never wrapped."""
    url = "https://repository.example.org/collections/2026/records/abc"
    status, _ = api(
        server,
        "PUT",
        "/api/handles/TEST/wide",
        {"values": [{"index": 1, "type": "URL", "data": url, "ttl": 86400}]},
    )
    assert status in (200, 201)
    context = browser.new_context(ignore_https_errors=True, viewport={"width": 1280, "height": 900})
    page = context.new_page()
    sign_in_as_admin(page, server)
    page.goto(server.base + "/admin/#/record/TEST%2Fwide")
    expect(page.locator("table.values")).to_contain_text(url)
    lines = page.evaluate(
        """() => [...document.querySelectorAll('table.values tbody tr:first-child td')].slice(0, 6).map((td) => {
            const tops = new Set();
            const walk = document.createTreeWalker(td, NodeFilter.SHOW_TEXT);
            for (let n = walk.nextNode(); n; n = walk.nextNode()) {
                const r = document.createRange(); r.selectNodeContents(n);
                for (const box of r.getClientRects()) tops.add(Math.round(box.top));
            }
            return tops.size; })"""
    )
    index, kind, data, ttl, _access, changed = lines
    assert (index, kind, data, ttl, changed) == (1, 1, 1, 1, 1), lines
    shot(page, "record-desktop")
    context.close()


def test_mint_admin_bits_vlist_and_hex(page, server):
    sign_in_as_admin(page, server)
    # Mint: the server picks the suffix; no URL value; an HS_ADMIN that may not delete the handle.
    page.get_by_role("link", name="New handle", exact=True).click()
    page.get_by_label("Mint a new suffix").check()
    expect(page.get_by_label("Suffix", exact=True)).to_be_hidden()
    page.get_by_label("With a URL value").uncheck()
    page.get_by_label("Delete handle").uncheck()
    page.get_by_role("button", name="Create handle").click()
    expect(page.locator("#message")).to_contain_text("Created TEST/")
    expect(page.locator("main h1")).to_have_text(re.compile(r"TEST/.{8,}"))
    minted = page.locator("main h1").inner_text()
    _, record = api(server, "GET", f"/api/handles/{minted}")
    admin = [v for v in record["values"] if v["type"] == "HS_ADMIN"][0]
    assert admin["data"]["value"]["permissions"] == "111111111101"
    assert [v["type"] for v in record["values"]] == ["HS_ADMIN"]
    expect(page.locator("table.values")).to_contain_text("300:TEST/ADMIN may list handles")

    # An HS_VLIST and a hex value of a type of its own.
    new_value(page, "HS_VLIST", 200)
    page.get_by_label("Members, one index:handle a line").fill("300:TEST/ADMIN\n301:TEST/ADMIN")
    page.get_by_role("button", name="Add value").click()
    expect(page.locator("table.values")).to_contain_text("300:TEST/ADMIN, 301:TEST/ADMIN")
    page.get_by_role("button", name="Add a value").click()
    page.get_by_label("Type", exact=True).select_option("other")
    page.get_by_label("Type name").fill("CHECKSUM")
    page.get_by_label("Index", exact=True).fill("5")
    page.get_by_label("Data format").select_option("hex")
    page.get_by_label("Data", exact=True).fill("zz")
    page.get_by_role("button", name="Add value").click()
    expect(page.locator(".form-error")).to_have_text("Hex data needs pairs of hex digits.")
    page.get_by_label("Data", exact=True).fill("00ff10")
    page.get_by_role("button", name="Add value").click()
    expect(page.locator("table.values")).to_contain_text("CHECKSUM")
    _, record = api(server, "GET", f"/api/handles/{minted}?index=5&index=200")
    by_index = {v["index"]: v for v in record["values"]}
    assert by_index[5]["data"] == {"format": "base64", "value": "AP8Q"}
    assert by_index[200]["data"]["value"] == [{"handle": "TEST/ADMIN", "index": 300}, {"handle": "TEST/ADMIN", "index": 301}]
    # A value index taken already: the server's refusal, in words.
    page.get_by_role("button", name="Add a value").click()
    page.get_by_label("Index", exact=True).fill("5")
    page.get_by_label("Address (URL)").fill("https://example.org/clash")
    page.get_by_role("button", name="Add value").click()
    expect(page.locator(".form-error")).to_contain_text("A value with that index already exists")


def test_ended_session_leads_back_to_sign_in(page, server):
    sign_in_as_admin(page, server)
    session_id = json.loads(page.evaluate("sessionStorage.getItem('handled.console.session')"))["sessionId"]
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    req = urllib.request.Request(server.base + "/api/sessions/this", method="DELETE")
    req.add_header("Authorization", f'Handle sessionId="{session_id}"')
    with urllib.request.urlopen(req, context=ctx, timeout=10) as r:
        assert r.status == 204
    # The page already shown, chosen again, asks the server again.
    page.get_by_role("link", name="Handles", exact=True).click()
    expect(page.get_by_text("Your session ended")).to_be_visible()
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    assert page.evaluate("sessionStorage.length") == 0
