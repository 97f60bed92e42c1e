#!/usr/bin/env python3
"""Fails when the files of a crate import each other in a circle.

Usage: .ci/cycles.py CRATE_SRC_DIR...   (for example kit/src backends/cpu/src)
       .ci/cycles.py --self-test        (shows that it finds circles)

Each source file is a node. An edge runs from a file to the file that defines
what it names through `crate::`, `super::` or `self::` paths (in `use` lines
and in code alike). A name re-exported by a `pub use` is followed to the file
that defines it, so a `mod.rs` that only gathers its children's items is no
hub of false circles, and is no edge of its own. Inline modules (`mod tests { ... }`) belong to their
file. The crate's top-level modules (a file, or a folder and everything in
it) must form a one-way stack as well. The script prints every strongly connected set of two or more files and
exits 1 if there is one; with `--graph` it also prints each file's edges.
"""

import os
import re
import sys

ITEM = re.compile(
    r"\b(?:pub(?:\([^)]*\))?\s+)?(?:unsafe\s+|async\s+|const\s+|extern\s+\"C\"\s+)*"
    r"(?:fn|struct|enum|trait|type|const|static|union|mod)\s+([A-Za-z_][A-Za-z0-9_]*)"
)
MACRO = re.compile(r"macro_rules!\s*([A-Za-z_][A-Za-z0-9_]*)")
PATH = re.compile(r"\b((?:crate|super|self)(?:\s*::\s*(?:[A-Za-z_][A-Za-z0-9_]*|\{|\*))+)")


def strip(text):
    """Source without comments, strings and char literals (kept as blanks)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif c == "r" and re.match(r'r#*"', text[i:i + 10]) and (i == 0 or not text[i - 1].isalnum()):
            m = re.match(r'r(#*)"', text[i:])
            end = text.find('"' + m.group(1), i + len(m.group(0)))
            i = n if end < 0 else end + 1 + len(m.group(1))
            out.append('""')
        elif c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            i += 1
            out.append('""')
        elif c == "'" and re.match(r"'(\\.|[^\\'])'|'\\u\{[0-9a-fA-F]+\}'|'\\x[0-9a-fA-F]{2}'", text[i:i + 12]):
            m = re.match(r"'(\\.|[^\\'])'|'\\u\{[0-9a-fA-F]+\}'|'\\x[0-9a-fA-F]{2}'", text[i:i + 12])
            i += len(m.group(0))
            out.append("' '")
        else:
            out.append(c)
            i += 1
    return "".join(out)


class Crate:
    def __init__(self, src):
        self.src = src
        self.files = {}  # module path (tuple) -> file
        self.text = {}  # file -> stripped text
        root = "lib.rs" if os.path.exists(os.path.join(src, "lib.rs")) else "main.rs"
        self.load((), os.path.join(src, root), src)

    def load(self, module, path, directory):
        self.files[module] = path
        text = strip(open(path, encoding="utf-8").read())
        self.text[path] = text
        for m in re.finditer(r"(?:#\[path\s*=\s*\"([^\"]+)\"\]\s*)?\b(?:pub(?:\([^)]*\))?\s+)?mod\s+([a-z_][a-z0-9_]*)\s*;", text):
            name = m.group(2)
            for candidate in (os.path.join(directory, name + ".rs"), os.path.join(directory, name, "mod.rs")):
                if os.path.exists(candidate):
                    sub = os.path.join(directory, name)
                    self.load(module + (name,), candidate, sub)
                    break
        # A file `a.rs` keeps its children in `a/`; `a/mod.rs` in `a/` too.

    def module_of(self, path):
        for module, file in self.files.items():
            if file == path:
                return module
        raise KeyError(path)

    def resolve(self, module, names, seen=None):
        """The file that defines `names` (a path below `module`)."""
        seen = seen or set()
        key = (module, tuple(names))
        if key in seen:
            return self.files[module]
        seen.add(key)
        if not names:
            return self.files[module]
        head, rest = names[0], names[1:]
        if module + (head,) in self.files:
            return self.resolve(module + (head,), rest, seen)
        text = self.text[self.files[module]]
        # A re-export: `pub use a::b::Head;`, `pub use a::{b::Head, ..}`, `pub use a::*;`.
        for target in self.reexports(module):
            tail = target[-1]
            if tail == head or tail.endswith(" as " + head):
                src = target[:-1] + [tail.split(" as ")[0]]
                resolved = self.resolve_path(module, src, seen)
                if resolved:
                    return resolved
        if not module:
            for other, path in self.files.items():
                if re.search(r"#\[macro_export\][^!]*macro_rules!\s*" + re.escape(head) + r"\b", self.text[path]):
                    return path
        if re.search(r"\b(?:fn|struct|enum|trait|type|const|static|union)\s+" + re.escape(head) + r"\b", text) or re.search(
            r"macro_rules!\s*" + re.escape(head) + r"\b", text
        ):
            return self.files[module]
        for target in self.reexports(module):
            if target[-1] == "*":
                resolved = self.resolve_path(module, target[:-1] + [head], seen)
                if resolved and resolved != self.files[module]:
                    return resolved
        return self.files[module]

    def resolve_path(self, module, parts, seen):
        parts = list(parts)
        base = self.base(module, parts)
        if base is None:
            return None
        start, rest = base
        return self.resolve(start, rest, seen)

    def base(self, module, parts):
        if not parts:
            return None
        if parts[0] == "crate":
            return (), parts[1:]
        if parts[0] in ("self", "super"):
            cur = module
            while parts and parts[0] in ("self", "super"):
                if parts[0] == "super":
                    cur = cur[:-1]
                parts = parts[1:]
            return cur, parts
        # A path relative to the module (2018 edition): a child module.
        if module + (parts[0],) in self.files:
            return module, parts
        return None

    def reexports(self, module):
        text = self.text[self.files[module]]
        found = []
        for m in re.finditer(r"\bpub(?:\([^)]*\))?\s+use\s+([^;]+);", text):
            found.extend(expand(m.group(1)))
        return found


def expand(tree):
    """`a::{b::C, d as e}` -> [[a,b,C], [a, 'd as e']]."""
    tree = re.sub(r"\s+", " ", tree).strip()
    out = []

    def walk(prefix, t):
        t = t.strip()
        if not t:
            return
        depth, brace = 0, None
        for i, c in enumerate(t):
            if c == "{":
                if depth == 0:
                    brace = i
                depth += 1
            elif c == "}":
                depth -= 1
        if brace is not None:
            head = [p.strip() for p in t[:brace].split("::") if p.strip()]
            inner = t[brace + 1:t.rfind("}")]
            for part in split_top(inner):
                walk(prefix + head, part)
        else:
            parts = [p.strip() for p in t.split("::")]
            out.append(prefix + parts)

    walk([], tree)
    return out


def split_top(s):
    parts, depth, cur = [], 0, ""
    for c in s:
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        if c == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += c
    parts.append(cur)
    return [p for p in parts if p.strip()]


def edges(crate):
    graph = {f: set() for f in crate.text}
    for module, file in crate.files.items():
        text = crate.text[file]
        # Inline modules shift `super::` by one level: track them by braces.
        inline = [(m.start(), m.group(1)) for m in re.finditer(r"\bmod\s+([a-z_][a-z0-9_]*)\s*\{", text)]
        spans = []
        for start, name in inline:
            depth, i = 0, text.index("{", start)
            j = i
            while j < len(text):
                if text[j] == "{":
                    depth += 1
                elif text[j] == "}":
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            spans.append((i, j, name))

        def inline_depth(pos):
            return sum(1 for a, b, _ in spans if a < pos < b)

        targets = []
        use_spans = [(m.start(), m.end()) for m in re.finditer(r"\buse\s+[^;]+;", text)]

        def in_use(pos):
            return any(a <= pos < b for a, b in use_spans)

        for m in re.finditer(r"\buse\s+([^;]+);", text):
            if re.search(r"\bpub(?:\([^)]*\))?\s+$", text[max(0, m.start() - 20):m.start()]):
                continue  # a re-export: followed by `resolve`, no dependency of its own
            for parts in expand(m.group(1)):
                targets.append((m.start(), parts))
        for m in PATH.finditer(text):
            # Paths in code (not in `use` lines, handled above).
            if in_use(m.start()):
                continue
            parts = [p.strip() for p in re.split(r"::", m.group(1)) if p.strip() and p.strip() not in ("{", "*")]
            targets.append((m.start(), parts))
        # Paths in code that start at a child module (`ret::rows::<H>()`).
        for m in re.finditer(r"(?<![A-Za-z0-9_:])([a-z_][a-z0-9_]*)\s*::\s*([A-Za-z_][A-Za-z0-9_]*)", text):
            if in_use(m.start()):
                continue
            if module + (m.group(1),) in crate.files and m.group(1) not in ("crate", "self", "super"):
                targets.append((m.start(), [m.group(1), m.group(2)]))
        for pos, parts in targets:
            if not parts or parts[0] not in ("crate", "super", "self") and (module + (parts[0],)) not in crate.files:
                continue
            parts = [p.split(" as ")[0].strip() for p in parts]
            if parts[-1] in ("*", "self"):
                parts = parts[:-1]
            extra = inline_depth(pos)
            if parts and parts[0] == "super" and extra:
                # `super` of an inline module: the file itself, once per level.
                drop = 0
                while drop < extra and parts and parts[0] == "super":
                    parts = parts[1:]
                    drop += 1
                parts = ["self"] + parts
            base = crate.base(module, parts)
            if base is None:
                continue
            start, rest = base
            if start not in crate.files:
                continue
            target = crate.resolve(start, rest)
            if target != file:
                graph[file].add(target)
    return graph


def top_module(src, path):
    """The crate's top-level module `path` belongs to: `a` for `a.rs`, `a/...`."""
    rel = os.path.relpath(path, src)
    head = rel.split(os.sep)[0]
    return head[:-3] if head.endswith(".rs") else head


def sccs(graph):
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
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
            out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [c for c in out if len(c) > 1]


def self_test():
    """The check can fail: a circle through `use`, through a path in code
    and through `super::` is found; re-exports, doc comments and strings
    are no edges."""
    import tempfile

    cases = {
        "circle through use lines": ({"lib.rs": "mod a;\nmod b;\n", "a.rs": "use crate::b::B;\npub struct A;\n",
                                      "b.rs": "use crate::a::A;\npub struct B;\n"}, True),
        "circle through a path in code": ({"lib.rs": "mod a;\nmod b;\n", "a.rs": "pub fn a() { crate::b::b() }\n",
                                           "b.rs": "pub fn b() { crate::a::a() }\n"}, True),
        "parent and child": ({"lib.rs": "mod m;\n", "m/mod.rs": "mod c;\npub fn top() { c::low() }\npub struct T;\n",
                              "m/c.rs": "pub fn low() { let _ = super::T; }\n"}, True),
        "re-exports, comments and strings": ({"lib.rs": "mod a;\nmod b;\npub use a::A;\npub use b::B;\n",
                                              "a.rs": "// crate::b::B\npub struct A;\n",
                                              "b.rs": "use crate::a::A;\npub struct B(A);\nconst S: &str = \"crate::a::A\";\n"},
                                             False),
    }
    failed = 0
    for name, (files, circle) in cases.items():
        with tempfile.TemporaryDirectory() as root:
            for path, text in files.items():
                os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
                with open(os.path.join(root, path), "w", encoding="utf-8") as out:
                    out.write(text)
            found = bool(sccs(edges(Crate(root))))
        if found != circle:
            failed += 1
            print(f"self-test: {name}: circle {'not ' if circle else ''}found, expected {'one' if circle else 'none'}")
    print(f"self-test: {len(cases) - failed} of {len(cases)} cases as expected")
    return 1 if failed else 0


def main(argv):
    if argv == ["--self-test"]:
        return self_test()
    show = "--graph" in argv
    dirs = [a for a in argv if a != "--graph"]
    if not dirs:
        print(__doc__)
        return 2
    bad = 0
    for src in dirs:
        crate = Crate(src)
        graph = edges(crate)
        if show:
            for f in sorted(graph):
                print(f"{f} -> {', '.join(sorted(graph[f])) or '-'}")
        circles = sccs(graph)
        # The crate's top-level modules (a file, or a folder with what is
        # inside it) must form a one-way stack too, so that the folders show
        # the layers.
        top = {}
        for f, targets in graph.items():
            a = top_module(src, f)
            top.setdefault(a, set())
            for t in targets:
                b = top_module(src, t)
                if a != b and "lib.rs" not in (a, b) and "main.rs" not in (a, b):
                    top[a].add(b)
        for t in list(top.values()):
            for b in t:
                top.setdefault(b, set())
        circles += [[f"{src}/{m} (module)" for m in c] for c in sccs(top)]
        if circles:
            bad += 1
            for c in circles:
                kind = "modules" if c[0].endswith("(module)") else "files"
                print(f"{src}: {len(c)} {kind} import each other in a circle:")
                for f in c:
                    if f in graph:
                        inside = sorted(t for t in graph[f] if t in c)
                        print(f"  {f} -> {', '.join(inside)}")
                    else:
                        print(f"  {f}")
        else:
            print(f"{src}: {len(graph)} files, no import circle")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
