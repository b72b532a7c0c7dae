#!/usr/bin/env python3
"""Compare two snapshots (java/HsTool.java `snapshot`) of replicated servers, value by value.

    compare.py A.jsonl B.jsonl [--names A B] [--case-sensitive] [--ignore-timestamps]

A snapshot holds, per handle listed under the test prefixes, every value (restricted ones
included, read with an admin identity) and the list of homed prefixes. Compared, per handle:

* presence on both sides;
* per value index: type, data (bytes), TTL type and TTL, the four permission bits,
  references, and the timestamp. The timestamp is compared because replication copies the
  stored value as the primary wrote it (the primary sets it at write time); a mirror that
  re-stamps values on apply would answer differently from its primary to every client.
  `--ignore-timestamps` exists for diagnosis only.

Handle names and homed prefixes are compared upper-cased unless --case-sensitive: both
servers run case-insensitive (Handle.Net stores upper-cased handles; another server may keep
the spelling it was given). Prints every difference; exit status 1 when there is any.
"""
import argparse
import json
import sys

VALUE_FIELDS = ("type", "data_hex", "ttl_type", "ttl", "perms", "refs", "timestamp")


def load(path, case_sensitive):
    records, homed, problems, list_errors = {}, set(), [], {}
    with open(path) as f:
        for line in f:
            if not line.strip():
                continue
            o = json.loads(line)
            if "handle" in o:
                name = o["handle"] if case_sensitive else o["handle"].upper()
                if "error" in o:
                    problems.append(f"{name}: listed but not resolvable: {o['error']}")
                    continue
                records[name] = {v["index"]: v for v in o["values"]}
            elif "homed" in o:
                homed.add(o["homed"] if case_sensitive else o["homed"].upper())
            elif "list_error" in o:
                list_errors[o["prefix"].upper()] = o["list_error"]
            elif "homed_error" in o:
                problems.append(f"listing homed prefixes: {o['homed_error']}")
    return records, homed, problems, list_errors


def compare(a, b, names, ignore_timestamps):
    (ra, ha, pa, la), (rb, hb, pb, lb) = a, b
    na, nb = names
    diffs = [f"{na}: {p}" for p in pa] + [f"{nb}: {p}" for p in pb]
    # A prefix that cannot be listed (e.g. unhomed by the test) must fail alike on both.
    for p in sorted(set(la) | set(lb)):
        if la.get(p) != lb.get(p):
            diffs.append(f"listing {p}: {na}={la.get(p, 'listed')!r} {nb}={lb.get(p, 'listed')!r}")
    for h in sorted(set(ra) - set(rb)):
        diffs.append(f"{h}: only on {na}")
    for h in sorted(set(rb) - set(ra)):
        diffs.append(f"{h}: only on {nb}")
    fields = [f for f in VALUE_FIELDS if not (ignore_timestamps and f == "timestamp")]
    for h in sorted(set(ra) & set(rb)):
        va, vb = ra[h], rb[h]
        for i in sorted(set(va) - set(vb)):
            diffs.append(f"{h} index {i}: only on {na} ({va[i]['type']})")
        for i in sorted(set(vb) - set(va)):
            diffs.append(f"{h} index {i}: only on {nb} ({vb[i]['type']})")
        for i in sorted(set(va) & set(vb)):
            for f in fields:
                if va[i][f] != vb[i][f]:
                    diffs.append(f"{h} index {i} {f}: {na}={va[i][f]!r} {nb}={vb[i][f]!r}")
    for p in sorted(ha - hb):
        diffs.append(f"homed prefix {p}: only on {na}")
    for p in sorted(hb - ha):
        diffs.append(f"homed prefix {p}: only on {nb}")
    return diffs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--names", nargs=2, default=["A", "B"])
    ap.add_argument("--case-sensitive", action="store_true")
    ap.add_argument("--ignore-timestamps", action="store_true")
    args = ap.parse_args()
    a = load(args.a, args.case_sensitive)
    b = load(args.b, args.case_sensitive)
    diffs = compare(a, b, args.names, args.ignore_timestamps)
    nvals = sum(len(v) for v in a[0].values())
    if diffs:
        print(f"{len(diffs)} difference(s) between {args.names[0]} and {args.names[1]}:")
        for d in diffs:
            print("  " + d)
        sys.exit(1)
    print(f"same: {len(a[0])} handles, {nvals} values, {len(a[1])} homed prefixes")


if __name__ == "__main__":
    main()
