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
        if key in ("hex", "data_hex") and data[:2] == b"\x00\x01" and len(data) > 40:
            add("site", data)
            add("root_info", data)

for path in sorted(vectors.rglob("*.json")):
    walk(json.loads(path.read_text()))

for target, items in seeds.items():
    d = corpus / target
    d.mkdir(parents=True, exist_ok=True)
    for data in items:
        (d / hashlib.sha1(data).hexdigest()).write_bytes(data)
    print(f"{target}: {len(items)} seeds", file=sys.stderr)
