#!/usr/bin/env python3
"""Modules import one another one way: fails on an import cycle between the
sibling modules of any module of the two crates (core/src and src), at every
depth: the top-level modules of a crate, the files of src/server, of
core/src/injectors, and so on.

A module is the file DIR/NAME.rs with the files under DIR/NAME/ (or
DIR/NAME/mod.rs). A file's imports of its siblings are the paths that name
them from the parent module: `crate::PATH::NAME` spelled in full, and
`super::NAME` with one `super` per level between the file and the parent
(`super::NAME` in DIR/a.rs, `super::super::NAME` in DIR/a/b.rs), grouped
ones (`super::{a::X, b}`) included; comments and test files (tests.rs,
*_tests.rs, test_support.rs, tests/) are left out, since tests may reach
any layer.

One layout throughout: a module with files of its own is NAME.rs beside
the folder NAME/ (its tests in NAME/tests.rs), so the check fails on a
mod.rs or a `#[path]` attribute in either crate.

The crates of the workspace are layered too: the product is the root
package and what it reaches through `[dependencies]`; a member with
`publish = false` (the test oracle, kserve-injector-oracle) is beside the
tests, reached only through `[dev-dependencies]`, and the check fails if a
product crate depends on it.

    python3 .ci/layers.py              # check both crates
    python3 .ci/layers.py --graph      # print the crates' and each module's imports too
    python3 .ci/layers.py OTHER        # check another checkout
"""

import os
import re
import sys
import tomllib

TEST_FILE = re.compile(r"(^|/)(tests?|test_support|[a-z0-9_]+_tests)(\.rs$|/)")
NAME = re.compile(r"\s*([a-z_][a-z0-9_]*)")
CRATE_ROOTS = ("lib.rs", "main.rs")


def children(folder):
    """The modules directly in `folder`: NAME for NAME.rs or NAME/ holding .rs files."""
    found = set()
    for entry in os.listdir(folder):
        path = os.path.join(folder, entry)
        if entry.endswith(".rs") and entry not in CRATE_ROOTS + ("mod.rs",):
            found.add(entry[:-3])
        elif os.path.isdir(path) and any(n.endswith(".rs") for _, _, ns in os.walk(path) for n in ns):
            found.add(entry)
    return {m for m in found if not TEST_FILE.search(m + ".rs")}


def sources(folder, module):
    """(file, levels below `folder`'s module) for each non-test file of `module`."""
    found = []
    single = os.path.join(folder, module + ".rs")
    if os.path.exists(single):
        found.append((single, 1))
    for sub, _, names in os.walk(os.path.join(folder, module)):
        for name in names:
            path = os.path.join(sub, name)
            if not name.endswith(".rs") or TEST_FILE.search(os.path.relpath(path, folder)):
                continue
            depth = os.path.relpath(path, folder).count(os.sep) + (0 if name == "mod.rs" else 1)
            found.append((path, depth))
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


def named(text, prefix):
    """The first names after `prefix::`, alone or grouped."""
    pattern = r"(?<![a-z0-9_:])" + re.escape(prefix) + "::"
    names = set(re.findall(pattern + r"([a-z_][a-z0-9_]*)\b", text))
    for m in re.finditer(pattern + r"\{", text):
        depth, end = 1, m.end()
        while depth and end < len(text):
            depth += {"{": 1, "}": -1}.get(text[end], 0)
            end += 1
        names.update(top_level_items(text[m.end() : end - 1]))
    return names


def imports(text, parent_path, depth):
    text = re.sub(r"//[^\n]*", "", text)
    names = named(text, parent_path)
    names |= named(text, "::".join(["super"] * depth))
    return names


def graph(folder, parent_path):
    modules = children(folder)
    edges = {}
    for module in sorted(modules):
        used = set()
        for path, depth in sources(folder, module):
            with open(path, encoding="utf-8") as f:
                used |= imports(f.read(), parent_path, depth)
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


def levels(crate_src):
    """(folder, its module's path from the crate) for the crate and every module folder in it."""
    for folder, _, _ in os.walk(crate_src):
        rel = os.path.relpath(folder, crate_src)
        if rel != "." and TEST_FILE.search(rel + "/"):
            continue
        parts = [] if rel == "." else rel.split(os.sep)
        yield folder, "::".join(["crate"] + parts)


def manifest(folder):
    with open(os.path.join(folder, "Cargo.toml"), "rb") as f:
        return tomllib.load(f)


def workspace_deps(table, members):
    """The workspace crates a dependency table names, by package name."""
    found = set()
    for key, spec in table.items():
        name = spec.get("package", key) if isinstance(spec, dict) else key
        if name in members:
            found.add(name)
    return found


def crate_layers(root, show):
    """Fails (returns False) if a crate the product depends on is not published."""
    top = manifest(root)
    members = {}
    for member in top["workspace"]["members"]:
        m = manifest(os.path.join(root, member))
        members[m["package"]["name"]] = m
    product, todo = set(), [top["package"]["name"]]
    while todo:
        name = todo.pop()
        if name in product:
            continue
        product.add(name)
        todo.extend(workspace_deps(members[name].get("dependencies", {}), members))
    ok = True
    for name in sorted(members):
        m = members[name]
        normal = sorted(workspace_deps(m.get("dependencies", {}), members))
        dev = sorted(workspace_deps(m.get("dev-dependencies", {}), members) - set(normal))
        published = m["package"].get("publish", True) is not False
        layer = "product" if name in product else "beside the tests"
        if show:
            print(f"crates: {name} ({layer}) -> {' '.join(normal)}"
                  + (f"; dev-only -> {' '.join(dev)}" if dev else ""))
        if name in product and not published:
            print(f"layers: {name} has publish = false (beside the tests) but the product "
                  f"depends on it", file=sys.stderr)
            ok = False
    outside = sorted(set(members) - product)
    return ok, sorted(product), outside


PATH_ATTRIBUTE = re.compile(r"^\s*#\[path\s*=", re.M)


def layout(crate_src, root):
    """The files that break the one layout: a mod.rs, a `#[path]` module."""
    broken = []
    for folder, _, names in os.walk(crate_src):
        for name in sorted(names):
            path = os.path.join(folder, name)
            if name == "mod.rs":
                broken.append(f"{os.path.relpath(path, root)}: a mod.rs (use NAME.rs beside NAME/)")
            elif name.endswith(".rs"):
                with open(path, encoding="utf-8") as f:
                    if PATH_ATTRIBUTE.search(f.read()):
                        broken.append(f"{os.path.relpath(path, root)}: a #[path] module")
    return broken


def main(argv):
    root = next((a for a in argv if not a.startswith("--")),
                os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    failed, checked = False, 0
    crates_ok, product, outside = crate_layers(root, "--graph" in argv)
    failed |= not crates_ok
    for crate_src in (os.path.join(root, "core", "src"), os.path.join(root, "src")):
        for broken in layout(crate_src, root):
            print(f"layers: {broken}", file=sys.stderr)
            failed = True
        for folder, parent_path in levels(crate_src):
            edges = graph(folder, parent_path)
            if len(edges) < 2:
                continue
            checked += 1
            where = os.path.relpath(folder, root)
            if "--graph" in argv:
                for module, targets in edges.items():
                    print(f"{where}: {module} -> {' '.join(targets)}")
            found = cycle(edges)
            if found:
                print(f"layers: import cycle in {where}: {' -> '.join(found)}", file=sys.stderr)
                failed = True
    if failed:
        return 1
    print(f"layers: {checked} module folders in core/src and src, no import cycle; "
          f"the product is {', '.join(product)}; beside the tests: {', '.join(outside) or 'nothing'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
