"""Handle.Net 9.0.0 in the global-resolution world (issue 31): a prefix server of the
original, and its own proxy (HDLProxy) resolving every handle through the test root.

It runs inside world.py's loopback-only namespace, through the shared harness's own
scripts (setup.sh, start.sh, stop.sh) with HS_NETNS empty, i.e. "run here": the
namespace is already ours, and the harness's own (ip netns) would be a second, separate
loopback. The server's embedded resolver, which HDLProxy uses for handles it does not
hold once "allow_recursion" = "yes", reads its client configuration from
-Dnet.handle.configDir (start.sh passes svr/client-config): bootstrap_handles naming the
test root there, auto_update_root_info = no (setup.sh writes it).
"""
import base64
import http.client
import json
import os
import re
import ssl
import subprocess
import urllib.parse
from pathlib import Path

PREFIX = "HN"
ADMIN = f"{PREFIX}/ADMIN"
SECRET = "benchsecret"  # the harness's HS_SECRET: 301:HN/ADMIN's HS_SECKEY


class HandleNet:
    def __init__(self, peer, work, port):
        self.peer, self.work, self.port, self.http_port = Path(peer), Path(work), port, port + 1
        self.svr = self.work / "hn" / "svr"
        self.env = dict(os.environ, HS_PEER=str(self.work / "hn"), HS_NETNS="", HS_PORT=str(port),
                        HS_HTTP_PORT=str(port + 1), HS_PREFIX=PREFIX, HS_ADMIN_HANDLE=ADMIN,
                        HS_HEAP="-Xms64m -Xmx384m")
        self.started = False

    def _script(self, name, timeout, *args):
        out = subprocess.run([str(self.peer / f"{name}.sh"), *args], env=self.env, capture_output=True,
                             text=True, timeout=timeout)
        (self.work / f"hn-{name}.log").write_text(out.stdout + out.stderr)
        if out.returncode != 0:
            raise SystemExit(f"Handle.Net {name}.sh failed (see {self.work}/hn-{name}.log)")
        return out.stdout

    def setup(self):
        """A server directory homing 0.NA/HN (hdl-setup-server with the harness's answers), with
        recursion on so that HDLProxy resolves any handle; returns its site record (siteinfo.json)."""
        self._script("setup", 300, "--force")
        cfg = self.svr / "config.dct"
        text, n = re.subn(r'"allow_recursion" = "no"', '"allow_recursion" = "yes"', cfg.read_text())
        if n != 1:
            raise SystemExit(f"{cfg}: no allow_recursion line to turn on")
        cfg.write_text(text)
        return json.loads((self.svr / "siteinfo.json").read_text())

    def start(self, bootstrap):
        """Start with `bootstrap` (the bootstrap_handles document naming the test root) as the
        embedded resolver's; start.sh waits (at most 120 s) until the server answers."""
        (self.svr / "client-config" / "bootstrap_handles").write_text(json.dumps(bootstrap))
        self.started = True
        return json.loads(self._script("start", 180).strip().splitlines()[-1])

    def stop(self):
        if self.started:
            subprocess.run([str(self.peer / "stop.sh")], env=self.env, capture_output=True, timeout=60)

    def put(self, handle, values):
        """Create a handle through the JSON API over HTTPS (port unification) as 301:HN/ADMIN."""
        c = http.client.HTTPSConnection("127.0.0.1", self.http_port, context=ssl._create_unverified_context(),
                                        timeout=30)
        auth = base64.b64encode(f"301%3A{urllib.parse.quote(ADMIN, safe='')}:{SECRET}".encode()).decode()
        c.request("PUT", "/api/handles/" + handle, json.dumps({"values": values}).encode(),
                  {"Authorization": "Basic " + auth, "Content-Type": "application/json"})
        r = c.getresponse()
        body = r.read().decode(errors="replace")
        if r.status not in (200, 201):
            raise SystemExit(f"creating {handle} on Handle.Net: HTTP {r.status} {body}")

    def resolve(self, handle):
        """HDLProxy's JSON form of `handle` (/api/handles/, the same as ?action=api): the set of
        (index, type, value) of a found handle, or (HTTP status, responseCode) of any other answer."""
        c = http.client.HTTPConnection("127.0.0.1", self.http_port, timeout=60)
        c.request("GET", "/api/handles/" + handle)
        r = c.getresponse()
        doc = json.loads(r.read() or b"{}")
        if r.status != 200 or doc.get("responseCode") != 1:
            return r.status, doc.get("responseCode")
        return {(v["index"], v["type"], v["data"]["value"] if isinstance(v["data"]["value"], str)
                 else json.dumps(v["data"]["value"], sort_keys=True)) for v in doc["values"]}

    def redirect(self, handle):
        """What HDLProxy's plain proxy URL answers a browser: (status, Location)."""
        return proxy_redirect(self.http_port, handle)


def proxy_redirect(http_port, handle):
    """(status, Location) of GET /<handle> on a web proxy (HDLProxy's, or handled's)."""
    c = http.client.HTTPConnection("127.0.0.1", http_port, timeout=60)
    c.request("GET", "/" + handle)
    r = c.getresponse()
    r.read()
    return r.status, r.getheader("Location")
