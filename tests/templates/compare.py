#!/usr/bin/env python3
"""Template handles side by side: create the same base handles on two servers
(the original Handle.Net 9.0.0 and handled, both with template delimiter "@"),
resolve the same template handles through each JSON API, and compare status,
response code and every value (index, type, data, TTL, permissions).

    compare.py --server NAME,HOST,PORT,HTTP_PORT,ADMIN_ID,ADMIN_SECRET ...   (two of them)

Exit 1 when the two differ.
"""
import argparse
import importlib.util
import json
import os
import sys
import urllib.parse

# The JSON API client of the status-handle comparison.
_spec = importlib.util.spec_from_file_location(
    "status_compare", os.path.join(os.path.dirname(__file__), "..", "status-handle", "compare.py"))
status_compare = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(status_compare)

# The Technical Manual's example (§11.2), shared with the Rust tests and scripts/bench-templates.sh.
MANUAL = open(os.path.join(os.path.dirname(__file__), "manual-namespace.xml")).read().strip()

# def, equality with notfound, submatches by $N and ${extension[N]}, an index
# attribute on a new value, data as element text.
RULES = """<namespace><template>
  <def parameter="site"><value type="x" data="https://${extension}.example"/></def>
  <if value="extension" test="equals" expression="gone"><notfound/></if>
  <if value="extension" test="matches" expression="([a-z]+)-([0-9]+)">
    <value index="7" type="URL" data="${site}/$1/${extension[2]}"/>
    <value type="DESC">item $2 of ${base}</value>
  </if>
  <else><value type="URL" data="${site}/other"/></else>
</template></namespace>"""


def value(index, vtype, text):
    return {"index": index, "type": vtype, "data": {"format": "string", "value": text}}


BASES = {
    "TEST/abc": [value(1, "URL", "http://example.org/data/abc"), value(2, "EMAIL", "contact@example.org"),
                 value(3, "HS_NAMESPACE", MANUAL)],
    "TEST/rules": [value(1, "EMAIL", "rules@example.org"), value(2, "HS_NAMESPACE", RULES)],
    "TEST/plain": [value(1, "URL", "https://example.org/plain")],
}

ASKED = [
    "TEST/abc@box(10,20,30,40)", "TEST/abc@page7", "TEST/abc@BOX(1,2,3,4)", "TEST/abc",
    "TEST/abc@box(1,2,3,4)?type=URL", "TEST/abc@box(1,2,3,4)?index=2",
    "TEST/rules@foo-12", "TEST/rules@gone", "TEST/rules@UPPER", "TEST/rules@a-1@b",
    "TEST/plain@x", "TEST/missing@x", "TEST/abcx",
]


def create(server):
    for handle, values in BASES.items():
        status, body = server.api("PUT", f"/api/handles/{handle}", server.admin, {"values": values})
        if status not in (200, 201):
            sys.exit(f"{server.name}: creating {handle} failed: HTTP {status} {body}")


def resolve(server, asked):
    handle, _, query = asked.partition("?")
    path = "/api/handles/" + urllib.parse.quote(handle, safe="/@(),") + ("?" + query if query else "")
    status, body = server.api("GET", path)
    if not isinstance(body, dict):
        return {"http": status, "body": body}
    values = [
        {k: v.get(k) for k in ("index", "type", "data", "ttl", "permissions")}
        for v in body.get("values", [])
    ]
    return {"http": status, "responseCode": body.get("responseCode"), "values": values}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", action="append", required=True, help="NAME,HOST,PORT,HTTP_PORT,ADMIN_ID,SECRET")
    args = ap.parse_args()
    servers = [status_compare.Server(s) for s in args.server]
    if len(servers) != 2:
        sys.exit("give exactly two --server")
    for s in servers:
        create(s)
    differences = 0
    for asked in ASKED:
        a, b = (resolve(s, asked) for s in servers)
        same = a == b
        differences += not same
        print(f"{'same' if same else 'DIFFERENT'}: {asked}")
        for s, r in zip(servers, (a, b)):
            if not same or s is servers[0]:
                print(f"    {s.name}: {json.dumps(r)}")
    print(f"templates compare: {len(ASKED) - differences} same, {differences} different")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
