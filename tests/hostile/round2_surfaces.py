#!/usr/bin/env python3
"""Round-2 attacks (issue 25) on the HTTP surfaces, replayed against one server:

* R1  a backup pulled or cancelled by its id alone, or by another identity, or
      with the id in the URL (where access logs record it);
* R4  `10320/headers` setting headers with an effect on the whole origin;
* R10 `?urlappend=` moving the redirect to another host;
* R11 JSONP (`?callback=`) wrapping what Basic credentials read;
* R13 a redirect to a `javascript:` URL.

Needs the admin's secret (`--admin-secret`) and a server whose TEST/ADMIN is in
`server_admins` (run_all.py starts it so); it creates TEST/round2-* handles and a
second identity TEST/round2-stranger. Bounded: a few dozen requests, loopback only.
Exit 0 when every attack was refused and the server still answers.

    tests/hostile/round2_surfaces.py 127.0.0.1:8000 --admin-secret S
"""
import argparse
import json
import sys
import urllib.parse

from hostile_common import https_request, loopback_target

class Server:
    def __init__(self, host, port):
        self.host, self.port = host, port

    def request(self, method, path, user=None, secret=None, headers=None, body=None):
        return https_request((self.host, self.port), method, path, user, secret, headers, body)


def value(index, kind, text):
    return {"index": index, "type": kind, "data": {"format": "string", "value": text}}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("addr", type=loopback_target, help="HOST:PORT of the HTTP port (HTTPS on the same port)")
    ap.add_argument("--admin-secret", required=True)
    ap.add_argument("--pid", type=int)
    a = ap.parse_args()
    s = Server(*a.addr)
    admin = ("300:TEST/ADMIN", a.admin_secret)
    failures = []

    def check(name, ok, detail):
        print(f"{name}: {'refused' if ok else 'NOT REFUSED'} ({detail})")
        if not ok:
            failures.append(name)

    # Set-up: a second identity, and the records the proxy attacks need.
    stranger = ("300:TEST/round2-stranger", "stranger-secret")
    records = {
        "TEST/round2-stranger": [value(300, "HS_SECKEY", stranger[1])],
        "TEST/round2-headers": [value(1, "URL", "https://ok.example/"), value(2, "10320/headers", (
            'Clear-Site-Data: "*"\nReport-To: {"url":"https://evil.example/"}\nNEL: {}\n'
            'Alt-Svc: h3=":443"\nPermissions-Policy: camera=*\nSet-Cookie: s=1\nX-Robots-Tag: noindex'))],
        "TEST/round2-bare": [value(1, "URL", "https://bare.example")],
        "TEST/round2-js": [value(1, "URL", "javascript:alert(document.domain)")],
    }
    for handle, values in records.items():
        status, _, body = s.request("PUT", f"/api/handles/{handle}", *admin, body={"values": values})
        if status not in (200, 201):
            sys.exit(f"set-up: PUT {handle} answered {status}: {body[:200]!r}")

    # R1: backups.
    status, _, body = s.request("POST", "/api/backup", *admin)
    if status != 200:
        sys.exit(f"set-up: the backup did not start ({status}: {body[:200]!r}); is TEST/ADMIN in server_admins?")
    backup = json.loads(body)["id"]
    named = {"X-Backup-Id": backup}
    status, _, body = s.request("GET", "/api/backup", headers=named)
    check("R1 pull by id alone", status == 401 and b"HDLBKUP" not in body, f"HTTP {status}")
    status, _, body = s.request("GET", "/api/backup", *stranger, headers=named)
    check("R1 pull by another identity", status == 403 and b"HDLBKUP" not in body, f"HTTP {status}")
    status, _, _ = s.request("DELETE", "/api/backup", *stranger, headers=named)
    check("R1 cancel by another identity", status == 403, f"HTTP {status}")
    status, _, body = s.request("GET", f"/api/backup/{backup}", *admin)
    check("R1 id in the URL", status == 400 and b"HDLBKUP" not in body, f"HTTP {status}")
    status, _, body = s.request("GET", "/api/backup", *admin, headers=named)
    check("R1 the owner still pulls", status == 200 and body.startswith(b"HDLBKUP"), f"HTTP {status}")
    s.request("DELETE", "/api/backup", *admin, headers=named)

    # R4: origin-wide headers from a handle.
    status, headers, _ = s.request("GET", "/TEST/round2-headers")
    leaked = [h for h in ("clear-site-data", "report-to", "nel", "alt-svc", "permissions-policy", "set-cookie")
              if h in headers]
    check("R4 10320/headers", not leaked and headers.get("x-robots-tag") == "noindex",
          f"HTTP {status}, origin-wide headers sent: {leaked or 'none'}")

    # R10: urlappend to another host.
    for append in ("@evil.example/", ".evil.example", ":1@evil.example", "\\@evil.example"):
        q = urllib.parse.quote(append, safe="")
        status, headers, _ = s.request("GET", f"/TEST/round2-bare?urlappend={q}")
        location = headers.get("location", "")
        host = urllib.parse.urlsplit(location.replace("\\", "/")).hostname
        check(f"R10 urlappend={append}", host == "bare.example", f"HTTP {status}, Location {location!r}")

    # R11: JSONP with credentials.
    status, headers, body = s.request("GET", "/api/handles/TEST/ADMIN?callback=steal", *admin)
    check("R11 JSONP with Basic credentials", not body.startswith(b"steal("),
          f"HTTP {status}, {headers.get('content-type')}")

    # R13: javascript: redirect.
    status, headers, _ = s.request("GET", "/TEST/round2-js")
    check("R13 javascript: redirect", "location" not in headers, f"HTTP {status}, Location {headers.get('location')!r}")

    status, _, _ = s.request("GET", "/api/handles/TEST/ADMIN")
    print(f"afterwards an ordinary request: HTTP {status}")
    if status != 200 or failures:
        sys.exit(f"not refused: {', '.join(failures) or 'none'}; server answered {status}")


if __name__ == "__main__":
    main()
