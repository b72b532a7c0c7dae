#!/usr/bin/env python3
"""Lists import cycles between the modules of each workspace crate (exit 1 if any).

A crate should read top-down: if module A uses module B, B must not use A, directly
or through others. This holds at two levels: between modules, and between a crate's
top-level modules (`src/a.rs`, or the folder `src/a/` as a whole), so that each
folder sits on those below it. A module is a file (`src/a/b.rs` or `src/a/b/mod.rs`
is `a::b`); a use of `crate::a::b::Item` (or `super::…`, `self::…`) is an edge to the longest
module path it names. Edges between a module and its own ancestors are left out:
a parent declaring and re-exporting its children is how Rust is laid out. Test
modules (`#[cfg(test)]` to the end of the file) are left out too.

    scripts/module-cycles.py [crates/NAME ...]
"""
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PATH_RE = re.compile(r"\b(crate|super|self)((?:::\w+)+)")
USE_GROUP_RE = re.compile(r"\buse\s+(crate|super|self)((?:::\w+)*)::\{([^;]*)\};", re.S)


def module_of(src: Path, f: Path) -> tuple:
    parts = list(f.relative_to(src).with_suffix("").parts)
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return tuple(parts)


def strip(text: str) -> str:
    text = re.sub(r"//[^\n]*", "", text)
    cut = text.find("#[cfg(test)]")
    return text if cut < 0 else text[:cut]


def resolve(mod: tuple, is_dir_mod: bool, anchor: str, rest: list, modules: set):
    if anchor == "crate":
        base = []
    else:
        # inside `a/b.rs` (module a::b), `self` is a::b and `super` is a; same for a/b/mod.rs
        base = list(mod) if anchor == "self" else list(mod[:-1])
    while rest and rest[0] == "super":
        base, rest = base[:-1], rest[1:]
    path = tuple(base + rest)
    for n in range(len(path), -1, -1):
        if path[:n] in modules:
            return path[:n]
    return None


def edges_of(crate: Path):
    src = crate / "src"
    files = {module_of(src, f): f for f in src.rglob("*.rs")}
    modules = set(files)
    edges = {}
    for mod, f in files.items():
        text = strip(f.read_text())
        refs = []
        for m in USE_GROUP_RE.finditer(text):
            for item in re.split(r",", m.group(3)):
                item = item.strip().split(" as ")[0].strip()
                if item and item != "self" and not item.startswith("{"):
                    refs.append((m.group(1), [p for p in m.group(2).split("::") if p] + item.split("::")))
        for m in PATH_RE.finditer(text):
            refs.append((m.group(1), [p for p in m.group(2).split("::") if p]))
        for anchor, rest in refs:
            target = resolve(mod, f.name == "mod.rs", anchor, rest, modules)
            if target is None or target == mod:
                continue
            if target == mod[: len(target)] or mod == target[: len(mod)]:
                continue  # an ancestor or a descendant
            edges.setdefault(mod, set()).add(target)
    return edges


def cycles(edges):
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in list(edges):
        if v not in index:
            visit(v)
    return out


def top_level(edges):
    """Edges between top-level modules: a/x uses b/y is a -> b (the crate root is left out)."""
    tops = {}
    for a, targets in edges.items():
        for b in targets:
            if a and b and a[0] != b[0]:
                tops.setdefault(a[:1], set()).add(b[:1])
    return tops


def name(mod):
    return "::".join(mod) or "crate"


def main():
    crates = [Path(a) for a in sys.argv[1:]] or sorted((ROOT / "crates").iterdir())
    found = 0
    for crate in crates:
        if not (crate / "src").is_dir():
            continue
        edges = edges_of(crate)
        for level, graph in (("modules", edges), ("top-level modules", top_level(edges))):
            for comp in cycles(graph):
                found += 1
                members = set(comp)
                pairs = [(a, b) for a in comp for b in sorted(graph.get(a, ())) if b in members]
                links = []
                for a, b in pairs:
                    link = f"{name(a)} -> {name(b)}"
                    if graph is not edges:  # name the files that make a folder-level link
                        why = [
                            f"{name(x)} -> {name(y)}"
                            for x in sorted(edges)
                            for y in sorted(edges[x])
                            if x[:1] == a and y[:1] == b
                        ]
                        link += ": " + ", ".join(why)
                    links.append(link)
                print(f"{crate.name}: cycle among {level} {', '.join(name(m) for m in comp)}\n    " + "\n    ".join(links))
    if found:
        print(f"{found} import cycle(s)")
        return 1
    print("no import cycles between modules or between top-level modules")
    return 0


if __name__ == "__main__":
    sys.exit(main())
