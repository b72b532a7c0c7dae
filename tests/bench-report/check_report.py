#!/usr/bin/env python3
"""Checks what a person relies on in a bench HTML report, from the page as
headless Chromium laid it out (`--dump-dom`):

- a title and one <h1>; a metadata table naming the date, the command and the
  target (or run);
- text as text: no empty paragraph, no terminal table squeezed into a paragraph
  (multi-line text must be <pre>);
- every chart rendered (the report's script marks each SVG with its laid-out
  size and element count);
- axes a person can read: no tick like "40000.0" or "2.0", and the percentile
  axis in percentiles (p90, p99, ...), not in "nines".

    check_report.py REPORT.dom        exit 0 when it reads well, 1 with reasons
"""
import re
import sys
from html.parser import HTMLParser


class Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.stack, self.title, self.h1 = [], "", 0
        self.meta_rows, self.paragraphs, self.svg_texts, self.rendered = [], [], [], []
        self.body_attrs, self._text, self._th = {}, [], None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.stack.append(tag)
        if tag == "body":
            self.body_attrs = a
        if tag == "h1":
            self.h1 += 1
        if tag == "svg" and "data-rendered" in a:
            self.rendered.append(a["data-rendered"])
        if tag in ("p", "th", "text", "title"):
            self._text = []

    def handle_endtag(self, tag):
        text = "".join(self._text)
        if tag == "p":
            self.paragraphs.append(text)
        elif tag == "th" and "table" in self.stack:
            self._th = text.strip()
        elif tag == "td" and self._th is not None:
            self.meta_rows.append(self._th)
            self._th = None
        elif tag == "text" and "svg" in self.stack:
            self.svg_texts.append(text.strip())
        elif tag == "title" and "svg" not in self.stack:
            self.title = text.strip()
        while self.stack and self.stack.pop() != tag:
            pass

    def handle_data(self, data):
        self._text.append(data)


def problems(dom: str):
    page = Page()
    page.feed(dom)
    out = []
    if not page.title:
        out.append("no <title>")
    if page.h1 != 1:
        out.append(f"{page.h1} <h1> headings, expected 1")
    for row in ("Date (UTC)", "Command"):
        if row not in page.meta_rows:
            out.append(f"metadata table lacks '{row}' (has {page.meta_rows})")
    if not ({"Target", "Run"} & set(page.meta_rows)):
        out.append("metadata table names neither the target nor the run")
    for p in page.paragraphs:
        if not p.strip():
            out.append("an empty <p>")
        elif p.strip().count("\n") >= 1:
            out.append(f"multi-line text in a <p> (a table?): {p.strip()[:60]!r}")
    charts = int(page.body_attrs.get("data-charts", "0") or 0)
    rendered = int(page.body_attrs.get("data-rendered-charts", "-1") or -1)
    if charts == 0 or rendered != charts or len(page.rendered) != charts:
        out.append(f"charts: {charts} on the page, {rendered} rendered, {len(page.rendered)} marked")
    for mark in page.rendered:
        if re.match(r"^(0x\d+|\d+x0):|:0$", mark):
            out.append(f"an empty chart ({mark})")
    ugly = sorted({t for t in page.svg_texts if re.fullmatch(r"-?\d+\.0", t) or re.fullmatch(r"\d{5,}(\.\d+)?", t)})
    if ugly:
        out.append(f"axis ticks a person has to decode: {ugly[:6]}")
    if "Latency by percentile" in page.svg_texts and not {"p90", "p99"} <= set(page.svg_texts):
        out.append("percentile axis without p90/p99 ticks")
    return out


def main():
    dom = open(sys.argv[1], encoding="utf-8").read()
    found = problems(dom)
    for p in found:
        print(f"  {p}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
