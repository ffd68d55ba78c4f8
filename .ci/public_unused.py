#!/usr/bin/env python3
"""Every public item of a crate of ours is named outside it, by one path.

Reads the core's rustdoc JSON (which .ci/public-api.sh builds) and walks
the public surface from the crate root: modules, `pub use`s, types,
traits, functions, constants, statics, type aliases, and the methods and
associated constants of inherent impls. Fails, naming each item, when

- an item is reachable by two public paths (a re-export beside its
  original: `cluster::Secret` and `cluster::objects::Secret`);
- a public module holds no public item;
- an item's name appears nowhere in the core's users: src/, tests/,
  benches/, fuzz/fuzz_targets/, examples/ and the test oracle's crate,
  oracle/ (comments left out), as a
  word, or for a method as `.name` or `::name`. Every file counts, not only
  those that import the core: `use super::*` and glob imports carry names
  into files that never spell the crate.
  A type no user names is still used when a used item's signature, fields
  or variants hold it (what `prepare` returns, an error's source, a
  config's section): it cannot be private while they are public.

The same holds for the root crate's library (`--crate kserve_injector`),
whose users are the binary (src/main.rs), tests/, benches/,
fuzz/fuzz_targets/ and examples/: what they call stays public and nothing
else (`unreachable_pub` is denied in both crates).

A name search is a floor, not a proof: a common name (`new`, `table`) is
found whether or not the core's item is the one meant. It catches what
grew public for no caller, which `unreachable_pub` and `dead_code` do not.
Fields and enum variants are left out: they are public with their type (a
method of a type reachable two ways is reported with its type).
Trait impls (Clone, Display, From, …) are the type's, not items of their own.
public-api.sh runs it on the JSON built with the `oracle` feature, so the
`internals` only the oracle, the tests and the benches reach are checked too.

    python3 .ci/public_unused.py target/public-api/doc/kserve_injector_core.json
    python3 .ci/public_unused.py --crate kserve_injector target/public-api/doc/kserve_injector.json
"""

import json
import os
import re
import sys

# Each crate's users: folders, or single files.
USERS = {
    "kserve_injector_core": ("src", "tests", "benches", "fuzz/fuzz_targets", "examples", "oracle"),
    "kserve_injector": ("src/main.rs", "tests", "benches", "fuzz/fuzz_targets", "examples"),
}
CRATE = "kserve_injector_core"
LINE_COMMENT = re.compile(r"//[^\n]*")
BLOCK_COMMENT = re.compile(r"/\*.*?\*/", re.S)


def surface(doc):
    """{item id: (kind, [public paths])} reachable from the crate root."""
    index = doc["index"]
    found = {}
    empty = []

    def record(item_id, kind, path):
        found.setdefault(item_id, (kind, []))[1].append(path)

    def inherent(type_id, path):
        inner = index[str(type_id)]["inner"]
        body = next(iter(inner.values()))
        for impl_id in body.get("impls", []):
            impl = index.get(str(impl_id))
            if impl is None or impl["inner"]["impl"]["trait"] is not None:
                continue
            for member_id in impl["inner"]["impl"]["items"]:
                member = index.get(str(member_id))
                if member is None or member["visibility"] != "public":
                    continue
                kind = next(iter(member["inner"]))
                if kind in ("function", "assoc_const"):
                    record(member_id, "method" if kind == "function" else "const",
                           f"{path}::{member['name']}")

    def visit(item_id, path, seen):
        item = index.get(str(item_id))
        if item is None or item["crate_id"] != 0 or item["visibility"] != "public":
            return
        kind = next(iter(item["inner"]))
        if kind == "use":
            use = item["inner"]["use"]
            target = index.get(str(use["id"])) if use["id"] is not None else None
            if target is None or target["crate_id"] != 0:
                return
            if use["is_glob"]:
                for child in target["inner"]["module"]["items"]:
                    visit(child, path, seen)
            else:
                visit_as(use["id"], f"{path}::{use['name']}", seen)
            return
        visit_as(item_id, f"{path}::{item['name']}" if path else item["name"], seen)

    def visit_as(item_id, path, seen):
        item = index[str(item_id)]
        kind = next(iter(item["inner"]))
        if kind == "module":
            if item_id in seen:
                return
            record(item_id, "module", path)
            items = item["inner"]["module"]["items"]
            before = len(found)
            for child in items:
                visit(child, path, seen | {item_id})
            if len(found) == before and not item["inner"]["module"]["is_crate"]:
                empty.append(path)
        elif kind in ("struct", "enum", "union"):
            record(item_id, "type", path)
            inherent(item_id, path)
        elif kind in ("trait", "type_alias", "function", "constant", "static", "macro"):
            record(item_id, kind, path)

    visit_as(doc["root"], CRATE, frozenset())
    return found, empty


def interface(doc, item_id):
    """The core's items that the signature, fields or variants of `item_id` hold."""
    index = doc["index"]
    found, stack, seen = set(), [index[str(item_id)]["inner"]], set()
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, dict):
            for key, value in node.items():
                if key == "resolved_path" and value.get("id") is not None:
                    target = index.get(str(value["id"]))
                    if target is not None and target["crate_id"] == 0:
                        found.add(value["id"])
                if key in ("fields", "variants", "tuple") and isinstance(value, list):
                    for member in value:
                        if isinstance(member, int) and member not in seen and str(member) in index:
                            seen.add(member)
                            stack.append(index[str(member)]["inner"])
                if key != "impls":
                    stack.append(value)
    return found


def users_text(root):
    """The text of every file of the crate's users, comments out."""
    every = []
    for top in USERS[CRATE]:
        if top.endswith(".rs"):
            with open(os.path.join(root, top), encoding="utf-8") as f:
                every.append(LINE_COMMENT.sub("", BLOCK_COMMENT.sub("", f.read())))
            continue
        for folder, _, names in os.walk(os.path.join(root, top)):
            if "/target" in folder:
                continue
            for name in names:
                if not name.endswith(".rs"):
                    continue
                with open(os.path.join(folder, name), encoding="utf-8") as f:
                    text = LINE_COMMENT.sub("", BLOCK_COMMENT.sub("", f.read()))
                every.append(text)
    return "\n".join(every)


def main():
    global CRATE
    args = sys.argv[1:]
    if args[:1] == ["--crate"]:
        CRATE, args = args[1], args[2:]
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    with open(args[0], encoding="utf-8") as f:
        doc = json.load(f)
    found, empty = surface(doc)
    every = users_text(root)
    problems = []
    for path in empty:
        problems.append(f"{path}: a public module with no public item (make it private)")
    used = set()
    for item_id, (kind, paths) in found.items():
        if kind == "module" and paths == [CRATE]:
            continue
        if len(paths) > 1 and kind not in ("method", "const"):
            problems.append(f"{' and '.join(sorted(paths))}: one {kind} by {len(paths)} public paths (keep one)")
        name = paths[0].rsplit("::", 1)[-1]
        if kind == "method":
            named = re.search(rf"(\.|::)\s*{re.escape(name)}\b", every)
        else:
            named = re.search(rf"\b{re.escape(name)}\b", every)
        if named:
            used.add(item_id)
    held, todo = set(), list(used)
    while todo:
        for ref in interface(doc, todo.pop()):
            if ref not in held:
                held.add(ref)
                todo.append(ref)
    for item_id, (kind, paths) in found.items():
        if paths != [CRATE] and item_id not in used and item_id not in held:
            problems.append(f"{paths[0]}: a public {kind} named nowhere outside the crate")
    for line in sorted(set(problems)):
        print(f"public surface: {line}", file=sys.stderr)
    items = sum(1 for kind, paths in found.values() if paths != [CRATE])
    if problems:
        users = ", ".join(d if d.endswith(".rs") else d + "/" for d in USERS[CRATE])
        print(f"public surface of {CRATE}: {len(set(problems))} problem(s) in {items} public items;"
              f" its users searched: {users}. Make an item no user names pub(crate), or drop it.",
              file=sys.stderr)
        return 1
    print(f"public surface of {CRATE}: {items} public items, each by one path and named outside it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
