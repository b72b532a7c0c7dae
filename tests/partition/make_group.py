#!/usr/bin/env python3
"""Make the multi-primary group's sites handle on its first member: one HS_SITE
value per member, priorities 1, 2, 3 in the order given (docs/multi-primary.md,
"Setting it up"), each member's own published site record.

    make_group.py --credentials CREDS --sites TEST/SITES --on a=HOST:PORT:HTTP \
        --member a=... --member b=... --member c=...
"""

import argparse
import sys

from nodes import basic_auth, http, node_arg, wait


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--credentials", required=True)
    ap.add_argument("--sites", required=True)
    ap.add_argument("--on", required=True, type=node_arg)
    ap.add_argument("--member", action="append", required=True, type=node_arg)
    args = ap.parse_args()

    values = []
    for priority, member in enumerate(args.member, start=1):
        status, body = wait(f"the site record of {member['name']}",
                            lambda m=member: (lambda r: r if r[0] == 200 else None)(http(m, "GET", "/api/site")), 60)
        values.append({"index": priority, "type": "HS_SITE", "data": {"format": "site", "value": body["site"]}})
    status, body = http(args.on, "PUT", f"/api/handles/{args.sites}?overwrite=false", {"values": values},
                        auth=basic_auth(args.credentials))
    if status not in (200, 201):
        sys.exit(f"make_group: creating {args.sites} on {args.on['name']}: HTTP {status} {body}")
    print(f"make_group: {args.sites} holds {len(values)} members")


if __name__ == "__main__":
    main()
