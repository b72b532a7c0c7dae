#!/usr/bin/env python3
"""Send the same web-proxy requests to handled and to the original Handle.Net
server and report status / Location / header / page-content differences.

    compare.py --seed-original https://127.0.0.1:8000   # PUT records.jsonl into the original
    compare.py --handled http://127.0.0.1:8001 --original http://127.0.0.1:8000 [--markdown out.md]

Python standard library only. Pages are compared by what they say (title,
"Handle Values for", table rows as text, XML hrefs, JSON without timestamps),
not byte for byte: the HTML around them is each server's own.
"""
import argparse
import base64
import email.utils
import html
import http.client
import json
import re
import ssl
import sys
import urllib.parse
from pathlib import Path

HERE = Path(__file__).resolve().parent
RECORDS = HERE / "records.jsonl"

# (name, method, path, extra headers, HTTP/1.0?)
REQUESTS = [
    ("first URL", "GET", "/TEST/p1", {}, False),
    ("HEAD", "HEAD", "/TEST/p1", {}, False),
    ("auth+cert", "GET", "/TEST/p1?auth&cert", {}, False),
    ("urlappend", "GET", "/TEST/p1?urlappend=%23frag", {}, False),
    ("urlappend path", "GET", "/TEST/bare?urlappend=%2Fdeeper%3Fq%3D1", {}, False),
    ("urlappend authority", "GET", "/TEST/bare?urlappend=%40evil.example%2F", {}, False),
    ("index filter", "GET", "/TEST/two?index=5", {}, False),
    ("first URL of two", "GET", "/TEST/two", {}, False),
    ("URL subtype", "GET", "/TEST/urlsub", {}, False),
    ("non-ASCII URL", "GET", "/TEST/utf8", {}, False),
    ("absolute TTL", "GET", "/TEST/abs?type=URL", {}, False),
    ("10320/loc score", "GET", "/TEST/loc1", {}, False),
    ("10320/loc HTTP/1.0", "GET", "/TEST/loc1", {}, True),
    ("locatt weight 0", "GET", "/TEST/loc1?locatt=id:0", {}, False),
    ("locatt href not template", "GET", "/TEST/loc1?locatt=id:2", {}, False),
    ("locatt no match", "GET", "/TEST/loc1?locatt=id:99", {}, False),
    ("action=metadata", "GET", "/TEST/loc1?action=metadata", {}, False),
    ("http_sc 301", "GET", "/TEST/sc?locatt=id:1", {}, False),
    ("http_sc 307", "GET", "/TEST/sc?locatt=id:2", {}, False),
    ("http_sc 308", "GET", "/TEST/sc?locatt=id:3", {}, False),
    ("http_sc 200", "GET", "/TEST/sc?locatt=id:4", {}, False),
    ("http_sc 307 HTTP/1.0", "GET", "/TEST/sc?locatt=id:2", {}, True),
    ("address (peer 127.0.0.1)", "GET", "/TEST/addr", {}, False),
    ("address ip= ignored", "GET", "/TEST/addr?ip=10.1.2.3", {}, False),
    ("country=gb", "GET", "/TEST/country?country=gb", {}, False),
    ("country=fr", "GET", "/TEST/country?country=fr", {}, False),
    ("country none", "GET", "/TEST/country", {}, False),
    ("weighted", "GET", "/TEST/weighted", {}, False),
    ("href_template", "GET", "/TEST/tpl", {}, False),
    ("href over template", "GET", "/TEST/tpl2", {}, False),
    ("10320/links+headers", "GET", "/TEST/links", {}, False),
    ("conneg json", "GET", "/TEST/conneg", {"Accept": "application/json"}, False),
    ("conneg browser", "GET", "/TEST/conneg", {"Accept": "*/*", "User-Agent": "Mozilla/5.0"}, False),
    ("Accept json, no json location", "GET", "/TEST/p1", {"Accept": "application/json"}, False),
    ("alias", "GET", "/TEST/alias1", {}, False),
    ("alias + query", "GET", "/TEST/alias1?foo=bar", {}, False),
    ("alias chain", "GET", "/TEST/alias3", {}, False),
    ("alias to missing", "GET", "/TEST/alias2", {}, False),
    ("alias loop", "GET", "/TEST/loop1", {}, False),
    ("alias noredirect", "GET", "/TEST/alias1?noredirect", {}, False),
    ("ignore_aliases", "GET", "/TEST/alias1?ignore_aliases", {}, False),
    ("alias showurls", "GET", "/TEST/alias1?action=showurls", {}, False),
    ("alias api", "GET", "/TEST/alias1?action=api", {}, False),
    ("alias redirectionHeaders", "GET", "/TEST/alias1?redirectionHeaders", {}, False),
    ("redirectionHeaders", "GET", "/TEST/p1?redirectionHeaders", {}, False),
    ("noredirect", "GET", "/TEST/p1?noredirect", {}, False),
    ("showvalues", "GET", "/TEST/p1?action=showvalues", {}, False),
    ("type filter", "GET", "/TEST/p1?noredirect&type=URL", {}, False),
    ("index filters", "GET", "/TEST/p1?noredirect&index=2&index=100", {}, False),
    ("bad index voids filter", "GET", "/TEST/p1?noredirect&index=abc&index=2", {}, False),
    ("type filter finds nothing", "GET", "/TEST/two?type=EMAIL", {}, False),
    ("selected values without URL", "GET", "/TEST/p1?index=2", {}, False),
    ("no URL", "GET", "/TEST/nourl", {}, False),
    ("non-public URL", "GET", "/TEST/private", {}, False),
    ("showurls", "GET", "/TEST/loc1?action=showurls", {}, False),
    ("showurls legacy", "GET", "/TEST/two?action=showurls", {}, False),
    ("api", "GET", "/TEST/p1?action=api", {}, False),
    ("api type", "GET", "/TEST/p1?action=api&type=EMAIL", {}, False),
    ("api missing", "GET", "/TEST/missing?action=api", {}, False),
    ("xss values", "GET", "/TEST/xss?noredirect", {}, False),
    ("xss redirect", "GET", "/TEST/xss", {}, False),
    ("hdl:", "GET", "/hdl:TEST/p1", {}, False),
    ("HDL:", "GET", "/HDL:TEST/p1", {}, False),
    ("doi:", "GET", "/doi:TEST/p1", {}, False),
    ("info:doi/", "GET", "/info:doi/TEST/p1", {}, False),
    ("info:hdl/", "GET", "/info:hdl/TEST/p1", {}, False),
    ("urn:hdl:", "GET", "/urn:hdl:TEST/p1", {}, False),
    ("urn:hdl: colon", "GET", "/urn:hdl:TEST:p1", {}, False),
    ("urn:doi: colon", "GET", "/urn:doi:TEST:p1", {}, False),
    ("encoded slash", "GET", "/TEST%2Fp1", {}, False),
    ("not found", "GET", "/TEST/missing", {}, False),
    ("prefix not homed", "GET", "/NOPE/x", {}, False),
    ("no prefix", "GET", "/nope", {}, False),
    ("trailing slash", "GET", "/TEST/p1/", {}, False),
    ("query page", "GET", "/", {}, False),
    ("favicon", "GET", "/favicon.ico", {}, False),
    ("robots.txt", "GET", "/robots.txt", {}, False),
    ("help.html", "GET", "/help.html", {}, False),
    ("api/handles", "GET", "/api/handles/TEST/p1", {}, False),
]

# Differences we chose; the report lists them apart (name -> why).
BY_DESIGN = {
    "Accept json, no json location": "handled answers the JSON record to Accept: application/json when no 10320/loc "
    "location serves JSON; the original redirects (issue 15: beyond the original)",
    "xss values": "handled never links a javascript: URL and links handle-typed types root-relative",
    "xss redirect": "handled never redirects to a javascript: URL: it shows the values page (issue 25 R13)",
    "urlappend authority": "handled never lets urlappend change the host it redirects to (issue 25 R10: "
    "https://bare.example + @evil.example/ would send the client to evil.example); it redirects without it",
    "query page": "handled's own page text (same form fields and REST API hint)",
    "favicon": "handled's own icon",
    "10320/links+headers": "handled sends each line of a 10320/links value as a Link header (issue 15); "
    "and an X-Robots-Tag from 10320/headers (only headers about this response are allowed, issue 25 R4); "
    "Handle.Net 9.0.0 sends neither for this value",
}

TIMESTAMP = re.compile(r'"timestamp":"[^"]*"')


def seed_original(base):
    """PUT every record into the original over HTTPS as 301:TEST/ADMIN (secret key)."""
    u = urllib.parse.urlsplit(base)
    ctx = ssl._create_unverified_context()
    auth = base64.b64encode(b"301%3ATEST%2FADMIN:benchsecret").decode()
    n = 0
    for line in RECORDS.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        c = http.client.HTTPSConnection(u.hostname, u.port, context=ctx, timeout=30)
        body = json.dumps({"values": rec["values"]}).encode()
        c.request("PUT", "/api/handles/" + urllib.parse.quote(rec["handle"], safe="/"), body,
                  {"Authorization": "Basic " + auth, "Content-Type": "application/json"})
        r = c.getresponse()
        text = r.read().decode(errors="replace")
        if r.status not in (200, 201):
            sys.exit(f"seeding {rec['handle']} into the original: {r.status} {text}")
        n += 1
    print(f"seeded {n} records into the original")


def fetch(base, method, path, headers, http10):
    u = urllib.parse.urlsplit(base)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    if http10:
        c._http_vsn, c._http_vsn_str = 10, "HTTP/1.0"
    c.request(method, path, headers=headers)
    r = c.getresponse()
    body = r.read()
    c.close()
    return r.status, {k.lower(): v for k, v in r.getheaders()}, body


def strip_tags(s):
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", s)).split())


def page_content(ctype, body, base):
    """What a page says, server-neutral."""
    text = body.decode("utf-8", errors="replace")
    if not text.strip():
        return "empty"
    if "json" in ctype:
        return "json " + TIMESTAMP.sub('"timestamp":"…"', text)
    if "xml" in ctype:
        return "xml hrefs " + " ".join(sorted(re.findall(r'href="([^"]*)"', text)))
    if "html" not in ctype:
        return f"{ctype} {len(body)} bytes" if ctype.startswith("image") else f"{ctype} {text.strip()}"
    title = re.search(r"<title>(.*?)</title>", text, re.S | re.I)
    out = ["title=" + (title.group(1).strip() if title else "")]
    m = re.search(r"Handle Values for: ([^<]*)<", text)
    if m:
        out.append("values of " + m.group(1).strip())
        rows = re.findall(r"<tr[^>]*>\s*<td[^>]*><b>(-?\d+)</b></td>(.*?)</tr>", text, re.S)
        for index, rest in rows:
            cells = re.findall(r"<td[^>]*>(.*?)</td>", rest, re.S)
            if len(cells) >= 3:
                out.append(f"row {index} | {strip_tags(cells[0])} | {strip_tags(cells[2])}")
    elif "Handle Redirect" in text:
        out.append("redirect to " + strip_tags(text.split("<body>", 1)[-1]))
    return "; ".join(out)


def summary(base, status, headers, body, date_of):
    loc = headers.get("location", "")
    if loc.startswith(base):
        loc = "{proxy}" + loc[len(base):]
    s = {"status": status, "location": loc}
    if "expires" in headers:
        try:
            delta = email.utils.parsedate_to_datetime(headers["expires"]).timestamp() - date_of(headers)
            s["expires"] = "now+%ds" % round(delta, -1) if abs(delta) < 10 ** 8 else headers["expires"]
        except (TypeError, ValueError):
            s["expires"] = "unparsable: " + headers["expires"]
    for h in ("link", "x-robots-tag"):
        if h in headers:
            s[h] = headers[h]
    s["content"] = page_content(headers.get("content-type", ""), body, base)
    return s


def date_of(headers):
    d = headers.get("date")
    import time
    return email.utils.parsedate_to_datetime(d).timestamp() if d else time.time()


def compare(handled, original):
    agree, design, differ = [], [], []
    for name, method, path, headers, http10 in REQUESTS:
        h = summary(handled, *fetch(handled, method, path, headers, http10), date_of)
        o = summary(original, *fetch(original, method, path, headers, http10), date_of)
        diffs = {k: (h.get(k), o.get(k)) for k in sorted(set(h) | set(o)) if h.get(k) != o.get(k)}
        line = (name, method, path + (" (HTTP/1.0)" if http10 else "") + (f" {headers}" if headers else ""), h, diffs)
        if not diffs:
            agree.append(line)
        elif name in BY_DESIGN:
            design.append(line)
        else:
            differ.append(line)
    return agree, design, differ


def report(agree, design, differ, markdown):
    out = [f"{len(REQUESTS)} requests: {len(agree)} agree, {len(design)} differ by design, {len(differ)} differ otherwise.", ""]
    out.append("### Agree (status, Location, Expires, extra headers, page content)")
    out += [f"- {n}: `{m} {p}` → {h['status']} {h['location']}".rstrip() for n, m, p, h, _ in agree]
    for title, lines in (("### Differ by design", design), ("### Differ", differ)):
        out += ["", title]
        if not lines:
            out.append("- none")
        for n, m, p, h, d in lines:
            why = f" — {BY_DESIGN[n]}" if n in BY_DESIGN else ""
            out.append(f"- {n}: `{m} {p}`{why}")
            for k, (hv, ov) in d.items():
                out.append(f"  - {k}: handled `{hv}` / original `{ov}`")
    text = "\n".join(out) + "\n"
    print(text)
    if markdown:
        Path(markdown).write_text(text, encoding="utf-8")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed-original")
    ap.add_argument("--handled")
    ap.add_argument("--original")
    ap.add_argument("--markdown")
    a = ap.parse_args()
    if a.seed_original:
        seed_original(a.seed_original)
    if a.handled and a.original:
        agree, design, differ = compare(a.handled.rstrip("/"), a.original.rstrip("/"))
        report(agree, design, differ, a.markdown)
        # Agreement, or a difference by design, passes; any other difference fails.
        print(f"proxy-compare: {len(agree) + len(design)} passed, {len(differ)} failed")
        sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
