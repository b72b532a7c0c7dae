#!/usr/bin/env python3
"""Ask two servers for the status handle 0.SITE/status as the same callers, and
compare what comes back: response codes, value indexes, types, permissions,
TTLs and the field names inside each value (the figures themselves differ).

    compare.py --probe-cp CLASSPATH \\
        --server NAME,HOST,PORT,HTTP_PORT,ADMIN_ID,ADMIN_SECRET ...   (two of them)

Each server must hold TEST/WATCHER (in its status_handle_admins) and
TEST/OTHER (nobody in particular), both with HS_SECKEY 300 = the secrets
below; --create makes them first through the JSON API as the admin. Native
requests go through StatusProbe (the official Java client library) over TCP,
UDP (the library retries) and the HTTP tunnel; JSON API requests over HTTPS.
Exit 1 when the two differ.
"""
import argparse
import base64
import json
import ssl
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request

WATCHER = ("300:TEST/WATCHER", "watcher secret")
OTHER = ("300:TEST/OTHER", "other secret")
TLS = ssl.create_default_context()
TLS.check_hostname = False
TLS.verify_mode = ssl.CERT_NONE  # both servers present self-signed certificates on loopback


class Server:
    def __init__(self, spec):
        parts = spec.split(",")
        if len(parts) != 6:
            sys.exit(f"--server needs NAME,HOST,PORT,HTTP_PORT,ADMIN_ID,ADMIN_SECRET: {spec!r}")
        self.name, self.host, self.port, self.http_port, admin_id, secret = parts
        self.admin = (admin_id, secret)

    def api(self, method, path, who=None, body=None):
        headers = {"Content-Type": "application/json"}
        if who:
            user = urllib.parse.quote(who[0], safe="") + ":" + who[1]
            headers["Authorization"] = "Basic " + base64.b64encode(user.encode()).decode()
        data = json.dumps(body).encode() if body is not None else None
        url = f"https://{self.host}:{self.http_port}{path}"
        req = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, context=TLS, timeout=20) as r:
                status, text = r.status, r.read()
        except urllib.error.HTTPError as e:
            status, text = e.code, e.read()
        try:
            return status, json.loads(text) if text else None
        except ValueError:
            return status, text.decode(errors="replace")


def create_identities(server):
    for who in (WATCHER, OTHER):
        handle = who[0].split(":", 1)[1]
        values = [
            {"index": 100, "type": "HS_ADMIN",
             "data": {"format": "admin", "value": {"handle": handle, "index": 300, "permissions": "111111111111"}}},
            {"index": 300, "type": "HS_SECKEY", "data": {"format": "string", "value": who[1]}, "permissions": "1100"},
        ]
        status, body = server.api("PUT", f"/api/handles/{handle}", server.admin, {"values": values})
        if status not in (200, 201):
            sys.exit(f"{server.name}: creating {handle} failed: HTTP {status} {body}")


def value_shape(index, vtype, data, permissions, ttl):
    """What must agree for one value: everything but the figures."""
    shape = {"index": index, "type": vtype, "permissions": permissions, "ttl": ttl}
    if "=" in data and not data.startswith("{"):
        shape["keys"] = [kv.split("=", 1)[0] for kv in data.split("; ")]
    else:
        try:
            shape["json"] = json_shape(json.loads(data))
        except ValueError:
            shape["text"] = "not JSON, not key=value"
    return shape


def json_shape(v):
    """Field names (in order) and value kinds, recursively; lists by their first element."""
    if isinstance(v, dict):
        return [[k, json_shape(x)] for k, x in v.items()]
    if isinstance(v, list):
        return [json_shape(v[0])] if v else []
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):
        return "number"
    return type(v).__name__


def native(server, cp, protocol, who, all_values=False):
    cmd = ["java", "-cp", cp, "StatusProbe", server.host, server.port, "0.SITE/status", protocol]
    if who:
        cmd += list(who)
    env = {"PATH": "/usr/bin:/bin:/usr/local/bin"}
    if all_values:
        env["STATUS_PROBE_ALL_VALUES"] = "1"
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    lines = [line for line in run.stdout.splitlines() if line.startswith("{")]
    if run.returncode != 0 or not lines:
        return {"probe failed": (run.stderr or run.stdout).strip().splitlines()[-1:]}
    out = json.loads(lines[-1])
    if "clientError" in out:
        return {"clientError": out["clientError"]}
    values = [value_shape(v["index"], v["type"], v["data"], v["permissions"], v["ttl"]) for v in out["values"]]
    return {"rc": out["rc"], "message": out.get("message"), "values": values}


def json_api(server, who, query=""):
    status, body = server.api("GET", "/api/handles/0.SITE/status" + query, who)
    if not isinstance(body, dict):
        return {"http": status, "body": body}
    shaped = {k: v for k, v in body.items() if k != "values"}
    if "values" in body:
        shaped["values"] = [
            value_shape(v["index"], v["type"], v["data"]["value"], v.get("permissions", "1110"), v["ttl"])
            for v in body["values"]
        ]
    return {"http": status, "body": shaped, "key order": list(body)}


def cases(server, cp):
    out = {}
    for protocol in ("tcp", "udp", "http"):
        out[f"native {protocol}, anonymous"] = native(server, cp, protocol, None)
        out[f"native {protocol}, server admin"] = native(server, cp, protocol, server.admin)
    out["native tcp, anonymous asking for restricted values"] = native(server, cp, "tcp", None, all_values=True)
    out["native tcp, status_handle_admins member"] = native(server, cp, "tcp", WATCHER)
    out["native tcp, another identity"] = native(server, cp, "tcp", OTHER)
    out["JSON API, anonymous"] = json_api(server, None)
    out["JSON API, server admin"] = json_api(server, server.admin)
    out["JSON API, server admin, ?index=3"] = json_api(server, server.admin, "?index=3")
    out["JSON API, status_handle_admins member"] = json_api(server, WATCHER)
    out["JSON API, another identity"] = json_api(server, OTHER)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--probe-cp", required=True, help="classpath with StatusProbe and the Handle.Net jars")
    ap.add_argument("--server", action="append", required=True, help="NAME,HOST,PORT,HTTP_PORT,ADMIN_ID,SECRET")
    ap.add_argument("--create", action="store_true", help="create TEST/WATCHER and TEST/OTHER first")
    args = ap.parse_args()
    servers = [Server(s) for s in args.server]
    if len(servers) != 2:
        sys.exit("give exactly two --server")
    if args.create:
        for s in servers:
            create_identities(s)
    results = [cases(s, args.probe_cp) for s in servers]
    differences = 0
    for case in results[0]:
        a, b = results[0][case], results[1][case]
        same = a == b
        differences += not same
        print(f"{'same' if same else 'DIFFERENT'}: {case}")
        if not same or case.endswith("server admin"):
            for s, r in zip(servers, (a, b)):
                print(f"    {s.name}: {json.dumps(r)}")
    print(f"status-handle compare: {len(results[0]) - differences} same, {differences} different")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
