#!/usr/bin/env python3
"""Every relative link and file reference in the repository's Markdown resolves.

Checked in each Markdown file git knows (tracked or new, not ignored):
- links `[text](path)` and `[text](path#anchor)` that are not URLs: the path,
  relative to the file, exists; an anchor into a Markdown file names one of
  its headings (GitHub's slugs);
- paths written in the text, `docs/x.md` or `scripts/y.sh` (from the
  repository's root, as the docs write them): they exist. Placeholders
  (`<backend>`, `*`, `{a,b}`, `$VAR`) end a path there, and paths out of the
  repository (paths starting with `../`: machine-local by design) are not checked.

Usage: scripts/check-links.py [FILE.md ...]; exits 1 naming each dead
reference as FILE:LINE: ..., 0 when all resolve.
"""

import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Top-level folders whose paths the docs cite from the root.
CITED_FOLDERS = ("docs", "scripts", "crates", "tests", "contrib")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
PATH = re.compile(r"(?<![\w./-])((?:%s)/[\w./-]*)" % "|".join(CITED_FOLDERS))
# Characters that start a placeholder in a path: `<backend>`, `*`, `{a,b}`, `$VAR`, `…`.
PLACEHOLDERS = set("<*{$…")
URL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")


def markdown_files():
    out = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "*.md"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout
    return [f for f in out.splitlines() if os.path.isfile(os.path.join(ROOT, f))]


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to `-`."""
    text = re.sub(r"`|\*\*|__", "", heading).strip().lower()
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        found, fence = set(), False
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.lstrip().startswith("```"):
                    fence = not fence
                    continue
                m = None if fence else HEADING.match(line)
                if m:
                    base, n = slug(m.group(1)), 0
                    while (base if n == 0 else f"{base}-{n}") in found:
                        n += 1
                    found.add(base if n == 0 else f"{base}-{n}")
        cache[path] = found
    return cache[path]


def inside_repository(path):
    return os.path.realpath(path).startswith(ROOT + os.sep) or os.path.realpath(path) == ROOT


def check_link(source, target):
    """None when `target` (a link in `source`) resolves, else why not."""
    if URL.match(target) or target.startswith("//"):
        return None
    path, _, anchor = target.partition("#")
    here = os.path.dirname(os.path.join(ROOT, source))
    full = os.path.normpath(os.path.join(here, path)) if path else os.path.join(ROOT, source)
    if not inside_repository(full):
        return None
    if not os.path.exists(full):
        return f"link {target}: no {os.path.relpath(full, ROOT)}"
    if anchor and full.endswith(".md") and anchor.lower() not in anchors(full):
        return f"link {target}: no heading #{anchor} in {os.path.relpath(full, ROOT)}"
    return None


def check_path(source, cited, placeholder):
    """None when `cited` (a path in the text of `source`, from the root or
    from `source`'s folder) exists, else why not. Before a `placeholder`
    (`vectors_*.rs`) only the folder is checked."""
    cited = cited.rstrip(".,;:")
    if placeholder:
        cited = cited[: cited.rfind("/") + 1]
    here = os.path.dirname(os.path.join(ROOT, source))
    if not any(os.path.exists(os.path.join(base, cited)) for base in (ROOT, here)):
        return f"{cited}: no such file or folder"
    return None


def check_file(source):
    problems = []
    with open(os.path.join(ROOT, source), encoding="utf-8") as f:
        lines = f.read().splitlines()
    for number, line in enumerate(lines, 1):
        linked = set()
        for m in LINK.finditer(line):
            linked.add(m.group(1).partition("#")[0])
            why = check_link(source, m.group(1))
            if why:
                problems.append(f"{source}:{number}: {why}")
        for m in PATH.finditer(line):
            cited = m.group(1)
            # A link's own target was judged above, relative to its file.
            if cited in linked or any(t.endswith(cited) for t in linked):
                continue
            placeholder = line[m.end() : m.end() + 1] in PLACEHOLDERS
            why = check_path(source, cited, placeholder)
            if why:
                problems.append(f"{source}:{number}: {why}")
    return problems


def main(argv):
    files = argv[1:] or markdown_files()
    problems = [p for f in files for p in check_file(f)]
    for p in problems:
        print(p)
    print(f"check-links: {len(files)} Markdown files, {len(problems)} dead references")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
