#!/usr/bin/env python3
"""Set one key of a section of a Handle.Net config.dct (a CNRI StreamTable).

    dct_set.py CONFIG.dct SECTION KEY VALUE

VALUE is written as given: a quoted string ("30000") or a list ( "a" "b" ). An existing
entry for KEY in SECTION (one line, or a list up to its closing parenthesis) is replaced.
Only the layout hdl-setup-server writes is understood (one entry per line), which is all
the harness edits.
"""
import re
import sys


def set_key(text: str, section: str, key: str, value: str) -> str:
    lines = text.split("\n")
    start = next((i for i, l in enumerate(lines) if re.match(rf'\s*"{re.escape(section)}"\s*=\s*\{{\s*$', l)), None)
    if start is None:
        raise SystemExit(f"dct_set: no section {section}")
    depth, i, end = 0, start, None
    while i < len(lines):
        depth += lines[i].count("{") - lines[i].count("}")
        if depth == 0:
            end = i
            break
        i += 1
    if end is None:
        raise SystemExit(f"dct_set: section {section} not closed")
    out = lines[: start + 1]
    i = start + 1
    while i < end:
        l = lines[i]
        if re.match(rf'\s*"{re.escape(key)}"\s*=', l):
            if "(" in l and ")" not in l:
                while ")" not in lines[i]:
                    i += 1
            i += 1
            continue
        out.append(l)
        i += 1
    out.insert(start + 1, f'    "{key}" = {value}')
    return "\n".join(out + lines[end:])


if __name__ == "__main__":
    if len(sys.argv) != 5:
        raise SystemExit(__doc__)
    path, section, key, value = sys.argv[1:]
    with open(path) as f:
        text = f.read()
    with open(path, "w") as f:
        f.write(set_key(text, section, key, value))
