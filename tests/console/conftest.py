"""A `handled serve --ephemeral` for the console suite, and a headless Chromium."""

import json
import os
import re
import subprocess
import threading
import time

import pytest
from playwright.sync_api import sync_playwright

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
LISTENING = re.compile(r" on udp \S+ tcp \S+ http [\d.]+:(\d+)")
CREDENTIALS = re.compile(r"admin credentials written to (\S+)")


class Server:
    def __init__(self, proc, http_port, credentials):
        self.proc = proc
        self.http_port = http_port
        self.base = f"https://127.0.0.1:{http_port}"
        self.credentials = credentials


@pytest.fixture(scope="session")
def server():
    binary = os.environ["HANDLED_BIN"]
    proc = subprocess.Popen(
        [binary, "serve", "--ephemeral", "--port", "0", "--http-port", "0"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    found = {}
    ready = threading.Event()

    def read():
        for line in proc.stderr:
            if m := CREDENTIALS.search(line):
                found["credentials"] = m.group(1)
            if m := LISTENING.search(line):
                found["port"] = int(m.group(1))
                ready.set()
        ready.set()

    threading.Thread(target=read, daemon=True).start()
    if not ready.wait(30) or "port" not in found or "credentials" not in found:
        proc.kill()
        pytest.fail(f"handled serve did not start (stderr so far gave {found})")
    with open(found["credentials"]) as f:
        credentials = json.load(f)
    os.remove(found["credentials"])
    try:
        yield Server(proc, found["port"], credentials)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture(scope="session")
def browser():
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture()
def page(browser, server):
    """A fresh tab (no session), failing the test on any CSP violation or script error."""
    context = browser.new_context(ignore_https_errors=True, viewport={"width": 1200, "height": 900})
    tab = context.new_page()
    problems = []
    tab.on("pageerror", lambda e: problems.append(f"script error: {e}"))
    tab.on(
        "console",
        lambda m: problems.append(m.text) if "Content Security Policy" in m.text or "Refused" in m.text else None,
    )
    tab.set_default_timeout(15_000)
    yield tab
    context.close()
    assert not problems, problems


def wait_until(check, timeout=10):
    end = time.time() + timeout
    while time.time() < end:
        if check():
            return True
        time.sleep(0.1)
    return False
