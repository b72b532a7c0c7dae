"""What the partition suites' tools read from a running node over HTTP: a
handle's record (JSON API), the site record, the Prometheus metrics."""

import base64
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from http.client import HTTPException


def node_arg(spec):
    """NAME=HOST:PORT:HTTP_PORT -> dict."""
    name, rest = spec.split("=", 1)
    host, port, http_port = rest.split(":")
    return dict(name=name, host=host, port=port, http_port=http_port)


def http(node, method, path, body=None, auth=None, timeout=10):
    """(status, parsed JSON or text); status None when the node did not answer."""
    url = f"http://{node['host']}:{node['http_port']}{path}"
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    if auth:
        req.add_header("Authorization", auth)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            raw, status = r.read(), r.status
    except urllib.error.HTTPError as e:
        raw, status = e.read(), e.code
    except (OSError, HTTPException):  # refused, cut, reset, or cut off mid-answer
        return None, None
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, raw.decode(errors="replace")


def basic_auth(credentials_path):
    """The admin of a credentials file `handled serve` wrote, by its secret key."""
    with open(credentials_path) as f:
        creds = json.load(f)
    user = urllib.parse.quote(f'{creds["secret_key"]["index"]}:{creds["handle"]}', safe="")
    return "Basic " + base64.b64encode(f'{user}:{creds["secret_key"]["secret"]}'.encode()).decode()


def record(node, handle):
    """A handle's record as served: (status, values sorted by index), None when no answer."""
    status, body = http(node, "GET", f"/api/handles/{handle}")
    if status is None:
        return None
    if status == 200 and isinstance(body, dict):
        return (status, sorted(body.get("values", []), key=lambda v: v.get("index", 0)))
    return (status, body.get("responseCode") if isinstance(body, dict) else None)


def metrics(node):
    """{series: value} from /metrics, series with their labels, e.g. 'x{source="a"}'."""
    status, text = http(node, "GET", "/metrics")
    if status != 200 or not isinstance(text, str):
        return None
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            series, _, value = line.rpartition(" ")
            try:
                out[series] = float(value)
            except ValueError:
                pass
    return out


def wait(what, check, seconds):
    """Poll `check` until it returns something true; raise naming `what` after `seconds`."""
    deadline = time.monotonic() + seconds
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {seconds} s waiting for {what}")
        time.sleep(0.5)
