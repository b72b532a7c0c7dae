#!/usr/bin/env python3
"""Write the seed corpora (fuzz/corpus/TARGET/) from the golden vectors in
crates/proto/tests/vectors/ (byte-exact output of Handle.Net's Java library,
the same files as the project's shared vector set) and the test data named
below. Rerun after adding vectors; the files are named by content hash, so a
rerun adds only what is new."""
import hashlib, json, pathlib, sys

root = pathlib.Path(__file__).resolve().parent.parent
vectors = root / "crates/proto/tests/vectors"
corpus = root / "fuzz/corpus"
seeds = {}

def add(target, data: bytes):
    seeds.setdefault(target, set()).add(data)

def walk(x, key=""):
    if isinstance(x, dict):
        for k, v in x.items():
            if k == "rest_api_json" and isinstance(v, dict) and "index" in v:
                add("json_value", json.dumps(v, indent=1).encode())
            if k == "rest_api_json" and isinstance(v, dict) and "values" in v and "handle" in v:
                add("import", json.dumps({"handle": v["handle"], "values": v["values"]}).encode())
            if k in ("data_decoded", "decoded_siteinfo_json") and isinstance(v, dict) and "servers" in v:
                add("root_info", json.dumps(v, indent=1).encode())
            walk(v, k)
    elif isinstance(x, list):
        for v in x:
            walk(v, key)
    elif isinstance(x, str) and len(x) % 2 == 0 and x and all(c in "0123456789abcdef" for c in x):
        data = bytes.fromhex(x)
        # Whole units (envelope + message) for decode; HS_SITE data for site.
        if key == "hex" and len(data) >= 20 and data[0] == 2:
            add("decode", data)
            add("session", bytes(range(32)) + data)
        if key in ("hex", "data_hex") and data[:2] == b"\x00\x01" and len(data) > 40:
            add("site", data)
            add("root_info", data)

for path in sorted(vectors.rglob("*.json")):
    walk(json.loads(path.read_text()))

# Template handles: `XML \0 extension \0 base values` (fuzz_targets/templates.rs),
# from the namespaces tests/templates/compare.py compares with Handle.Net, and
# the bombs of docs/template-handles.md, "Bounds", in small.
compare = (root / "tests/templates/compare.py").read_text()
# The section reads the Manual's namespace from a file beside compare.py.
namespaces = {"os": __import__("os"), "__file__": str(root / "tests/templates/compare.py")}
exec(compare[compare.index("MANUAL ="):compare.index("def value(")], namespaces)
base = "URL http://example.org/data/abc\nEMAIL contact@example.org\n"
own = 'HS_NAMESPACE <namespace><template><value type="URL" data="x"/></template></namespace>\n'
for xml, extension, values in [
    (namespaces["MANUAL"], "box(10,20,30,40)", base),
    (namespaces["MANUAL"], "page7", base),
    (namespaces["RULES"], "foo-12", "EMAIL rules@example.org\n"),
    (namespaces["RULES"], "gone", "EMAIL rules@example.org\n"),
    ('<namespace><template delimiter="@"><def parameter="x"><value data="${extension}${extension}"/></def>'
     '<def parameter="y"><value data="${x}${x}"/></def><value data="${y}"/></template></namespace>', "abcd", base),
    ('<namespace><template delimiter="@"><template ref="1:1234/other"/></template></namespace>', "x", base),
    ('<namespace><template delimiter="@"><foreach><if value="index" test="equals" expression="1"><value/></if>'
     '</foreach></template></namespace>', "x", base + own),
]:
    add("templates", (xml + "\0" + extension + "\0" + values).encode())

# Replication streams as the Java library wrote them (txn and dump, signed
# and not): `kind piece stream` (fuzz_targets/replication.rs).
streams = json.loads((vectors / "replication/streams.json").read_text())["streams"]
for st in streams:
    kind = 0 if st["kind"] == "txn" else 1
    for piece in (255, 3):
        add("replication", bytes([kind, piece]) + bytes.fromhex(st["stream_hex"]))

# Stored handle records (fuzz_targets/record.rs): the capacity benchmark's two-value
# record in the compact form (crates/store/src/record_compact.rs), the same in the
# wire form written before it, and a compact record with a spelled-out type, explicit
# TTL and permissions, references and a name.
def small(n):
    return bytes([n]) if n < 255 else b"\xff" + n.to_bytes(4, "big")
def sized(b):
    return small(len(b)) + b
url, mail, ts = b"https://example.org/objects/1", b"owner1@example.org", (1_700_000_000).to_bytes(4, "big")
add("record", b"\xc5\x01\x02" + ts + b"\x01\x07\x00" + sized(url) + b"\x02\x07\x01" + sized(mail))
def wire_value(index, typ, data):
    b4 = lambda n: n.to_bytes(4, "big", signed=True)
    return b4(index) + ts + b"\x00" + b4(86400) + b"\x0e" + b4(len(typ)) + typ + b4(len(data)) + data + b4(0)
add("record", (2).to_bytes(4, "big") + wire_value(1, b"URL", url) + wire_value(2, b"EMAIL", mail))
add("record", b"\xc5\x03\x01" + ts + small(300) + b"\x08" + b"\x01" + (60).to_bytes(4, "big") + b"\x0f"
    + sized(b"x-type") + sized(b"data") + small(1) + sized(b"20.5000/ref") + small(2) + sized(b"TEST/doc1"))

# Stored transaction log entries (fuzz_targets/txn_log_entry.rs): the id of the last
# change, then one change (date, action, handle) or a run of an import's changes
# (action | 0x80, each handle as the bytes it shares with the one before and the rest;
# crates/store/src/embedded_txnlog_entry.rs).
date = (1_700_000_000_000).to_bytes(8, "big")
add("txn_log_entry", (7).to_bytes(8, "big") + date + b"\x01" + b"TEST/1")
add("txn_log_entry", (30).to_bytes(8, "big") + date + b"\x81" + b"\x00" + sized(b"30M/000000001")
    + b"\x0c\x012" + b"\x0b\x0210" + b"\x00" + sized(b"TEST/" + b"x" * 300))

# The refs column as Handle.Net 9 wrote it on PostgreSQL (tests/sql-handle-net),
# and as other programs write it (raw tabs).
for refs in ["1:TEST/ADMIN%0009300:TEST/ADMIN", "1:A/b%00092:C/%00E9", "1:A/b\t2:C/d",
             "7:X/back\\\\slash%0025", "300:TEST/%D83D%DE00", ""]:
    add("refs", refs.encode())

# config.dct files: the ones import-config's tests read (Handle.Net 9's own
# layout, as hdl-setup-server writes it).
for path in sorted((root / "crates/cli/tests").rglob("*.dct")):
    add("config_dct", path.read_bytes())

# Referral answers a walk of the global system follows (fuzz_targets/referrals.rs:
# `mode handle \n` then answers, each a 2-byte length and a unit), built on the
# Java library's resolution response: its HS_SITE value (the site record of
# site_info_value.json), HS_SERV service handles, referrals (302/303) with and
# without site values, the errors a root gives.
def first_hex(x):
    if isinstance(x, dict):
        if isinstance(x.get("hex"), str):
            return bytes.fromhex(x["hex"])
        x = list(x.values())
    if isinstance(x, list):
        for v in x:
            found = first_hex(v)
            if found:
                return found
    return None

resolved = first_hex(json.loads((vectors / "resolution_response.json").read_text()))
not_found = first_hex(json.loads((vectors / "error_handle_not_found.json").read_text()))
not_here = first_hex(json.loads((vectors / "error_server_not_responsible.json").read_text()))
site_record = first_hex(json.loads((vectors / "site_info_value.json").read_text()))

def lp(b):
    return len(b).to_bytes(4, "big") + b

def value(index, kind, data):
    return (index.to_bytes(4, "big") + bytes.fromhex("6553f100") + b"\0" + (86400).to_bytes(4, "big") + b"\x0e"
            + lp(kind) + lp(data) + b"\0\0\0\0")

def unit(code, body):
    header = resolved[20:24] + code.to_bytes(4, "big") + resolved[28:40] + len(body).to_bytes(4, "big")
    message = header + body + b"\0\0\0\0"
    return resolved[:16] + len(message).to_bytes(4, "big") + message

def values_body(handle, values):
    return lp(handle) + len(values).to_bytes(4, "big") + b"".join(values)

def walk_seed(mode, handle, *answers):
    add("referrals", bytes([mode]) + handle + b"\n" + b"".join(len(a).to_bytes(2, "big") + a for a in answers))

with_site = unit(1, values_body(b"0.NA/20.5000", [value(1, b"HS_SITE", site_record)]))
serv = lambda h: unit(1, values_body(b"0.NA/20.5000", [value(1, b"HS_SERV", h)]))
walk_seed(0, b"20.5000/test-1", resolved)
walk_seed(0, b"20.5000/x", with_site)
walk_seed(0, b"20.5000/x", not_found)
walk_seed(0, b"20.5000/x", unit(302, values_body(b"0.NA/20.5000", [value(1, b"HS_SITE.PREFIX", site_record)])), with_site)
walk_seed(0, b"20.5000/x", serv(b"0.NA/20.1"), with_site)
walk_seed(0, b"20.5000/x", serv(b"11.22/svc"), with_site, with_site)
walk_seed(1, b"20.5000/x", unit(302, lp(b"0.NA/20.9")), with_site, resolved)
walk_seed(1, b"20.5000/x", unit(303, values_body(b"0.NA/20", [value(2, b"HS_SITE.PREFIX", site_record)])), not_here)
walk_seed(7, b"20.5000/x", *[unit(302, values_body(b"20.5000/x", [value(1, b"HS_SITE", site_record)]))] * 4, resolved)
walk_seed(1, b"20.5000/x", *[unit(302, lp(b"0.NA/20.%d" % n)) for n in range(3)], with_site, with_site, with_site, resolved)

for target, items in seeds.items():
    d = corpus / target
    d.mkdir(parents=True, exist_ok=True)
    for data in items:
        (d / hashlib.sha1(data).hexdigest()).write_bytes(data)
    print(f"{target}: {len(items)} seeds", file=sys.stderr)
