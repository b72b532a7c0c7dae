"""What the attack tools here share (Python 3 stdlib only)."""
import base64
import http.client
import json
import ssl
import sys
import urllib.parse

CTX = ssl._create_unverified_context()  # the server's self-signed certificate


def loopback_target(text):
    """HOST:PORT, refusing anything but a loopback host."""
    host, port = text.rsplit(":", 1)
    if not host.startswith("127.") and host != "localhost":
        sys.exit("loopback targets only")
    return host, int(port)


def rss_kb(pid):
    """Resident set size of process `pid` in kB (None without a pid or /proc)."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    except (OSError, StopIteration):
        return None


def https_request(addr, method, path, user=None, secret=None, headers=None, body=None, timeout=10):
    """One request over HTTPS (Basic credentials when `user` is given, `body` sent
    as JSON): (status, headers with lower-case names, body bytes)."""
    c = http.client.HTTPSConnection(*addr, timeout=timeout, context=CTX)
    h = dict(headers or {})
    if user:
        token = base64.b64encode(f"{urllib.parse.quote(user, safe='')}:{secret}".encode()).decode()
        h["Authorization"] = "Basic " + token
    if body is not None:
        h["Content-Type"] = "application/json"
        body = json.dumps(body)
    c.request(method, path, body=body, headers=h)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, {k.lower(): v for k, v in r.getheaders()}, data
