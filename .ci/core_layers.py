#!/usr/bin/env python3
"""The core's modules import one another one way: fails on an import cycle
between the top-level modules of core/src (a module being the file
core/src/NAME.rs with the files under core/src/NAME/).

A module's imports are the `crate::NAME` paths in its code, `use` lines
and inline paths alike, grouped ones (`crate::{a::X, b}`) included;
comments and test files (tests.rs, *_tests.rs, test_support.rs, tests/)
are left out, since tests may reach any layer.

    python3 .ci/core_layers.py              # check core/src
    python3 .ci/core_layers.py --graph      # print each module's imports too
    python3 .ci/core_layers.py OTHER/src    # check another checkout's core
"""

import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "core", "src")
TEST_FILE = re.compile(r"(^|/)(tests?|test_support|[a-z0-9_]+_tests)(\.rs$|/)")
NAME = re.compile(r"\s*([a-z_][a-z0-9_]*)")


def sources(module):
    """The non-test files of `module`."""
    found = []
    single = os.path.join(ROOT, module + ".rs")
    if os.path.exists(single):
        found.append(single)
    for folder, _, names in os.walk(os.path.join(ROOT, module)):
        for name in names:
            path = os.path.join(folder, name)
            if name.endswith(".rs") and not TEST_FILE.search(os.path.relpath(path, ROOT)):
                found.append(path)
    return found


def top_level_items(group):
    """`a::X, b, c::{d, e}` -> the first name of each top-level item."""
    depth, item, names = 0, "", []
    for ch in group + ",":
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            m = NAME.match(item)
            if m:
                names.append(m.group(1))
            item = ""
        else:
            item += ch
    return names


def imports(text):
    text = re.sub(r"//[^\n]*", "", text)
    names = set(re.findall(r"\bcrate::([a-z_][a-z0-9_]*)\b", text))
    for m in re.finditer(r"\bcrate::\{", text):
        depth, end = 1, m.end()
        while depth and end < len(text):
            depth += {"{": 1, "}": -1}.get(text[end], 0)
            end += 1
        names.update(top_level_items(text[m.end() : end - 1]))
    return names


def graph():
    modules = {n[:-3] if n.endswith(".rs") else n for n in os.listdir(ROOT)} - {"lib"}
    edges = {}
    for module in sorted(modules):
        used = set()
        for path in sources(module):
            with open(path, encoding="utf-8") as f:
                used |= imports(f.read())
        edges[module] = sorted((used & modules) - {module})
    return edges


def cycle(edges):
    """One import cycle as a list of modules, or None."""
    state, stack = {}, []

    def visit(module):
        state[module] = "open"
        stack.append(module)
        for target in edges[module]:
            if state.get(target) == "open":
                return stack[stack.index(target) :] + [target]
            if target not in state:
                found = visit(target)
                if found:
                    return found
        stack.pop()
        state[module] = "done"
        return None

    for module in edges:
        if module not in state:
            found = visit(module)
            if found:
                return found
    return None


def main(argv):
    global ROOT
    ROOT = next((a for a in argv if not a.startswith("--")), ROOT)
    edges = graph()
    if "--graph" in argv:
        for module, targets in edges.items():
            print(f"{module} -> {' '.join(targets)}")
    found = cycle(edges)
    if found:
        print(f"core layers: import cycle {' -> '.join(found)}", file=sys.stderr)
        return 1
    print(f"core layers: {len(edges)} modules, no import cycle")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
