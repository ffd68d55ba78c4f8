#!/usr/bin/env python3
"""Every error type of the code has its row in docs/design.md's error tables,
and every row there names error types the code has, where the row says.

An error type is a struct or enum of src/ or core/src that derives
`thiserror::Error` (`#[derive(..., Error)]` with thiserror's `Error` in
scope, or `thiserror::Error` spelled out) or implements `std::error::Error`
by hand. Test code is left out: test files (tests.rs, *_tests.rs,
test_support.rs, tests/) and `#[cfg(test)]` items inside a file.

The tables are the Markdown tables of docs/design.md whose header is
`| error | what failed | where |`; a row names its types in backticks in the
first column and where they live in the third (a file, or a folder the
file is under). The check fails, naming each, on a type no row names, on a
name no type of the code has, and on a type defined outside the place its
row gives.

    python3 .ci/error-types.py           # check this checkout
    python3 .ci/error-types.py --list    # print every error type and its file
    python3 .ci/error-types.py OTHER     # check another checkout
"""

import os
import re
import sys

ROOTS = ("src", "core/src")
DESIGN = "docs/design.md"
TEST_FILE = re.compile(r"(^|/)(tests?|test_support|[a-z0-9_]+_tests)(\.rs$|/)")
DERIVE = re.compile(r"#\[derive\(([^\]]*)\)\]")
ITEM = re.compile(r"(?:pub(?:\([^)]*\))?\s+)?(?:struct|enum)\s+([A-Za-z_][A-Za-z0-9_]*)")
ATTRIBUTE_OR_DOC = re.compile(r"\s*(#\[[^\n]*\]|///[^\n]*|//[^\n]*)")
MANUAL_IMPL = re.compile(
    r"\bimpl\b\s*(?:<[^{;]*?>)?\s*(?:std::error::|core::error::)?Error\s+for\s+([A-Za-z_][A-Za-z0-9_]*)"
)
CFG_TEST = re.compile(r"#\[cfg\((?:test|all\(test[^\]]*|any\(test[^\]]*)\)\]")
TABLE_HEADER = re.compile(r"^\|\s*error\s*\|\s*what failed\s*\|\s*where\s*\|\s*$")


def strip_comments_and_strings(text):
    """`text` with comments and string contents blanked (same length), so
    braces and keywords inside them do not count."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            out.append(" " * (end - i))
            i = end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append(re.sub(r"[^\n]", " ", text[i:end]))
            i = end
        elif c == "r" and re.match(r'r#*"', text[i:]) and not re.match(r"[A-Za-z0-9_]", text[i - 1] if i else " "):
            hashes = re.match(r"r(#*)\"", text[i:]).group(1)
            close = '"' + hashes
            end = text.find(close, i + 2 + len(hashes))
            end = n if end < 0 else end + len(close)
            out.append(re.sub(r"[^\n]", " ", text[i:end]))
            i = end
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(re.sub(r"[^\n]", " ", text[i : j + 1]))
            i = j + 1
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", text[i:]):
            length = len(re.match(r"'(\\.|[^\\'])'", text[i:]).group(0))
            out.append(" " * length)
            i += length
        else:
            out.append(c)
            i += 1
    return "".join(out)


def without_test_items(code):
    """`code` (comments and strings blanked) with each `#[cfg(test)]` item blanked."""
    for m in reversed(list(CFG_TEST.finditer(code))):
        start = m.start()
        semicolon = code.find(";", m.end())
        brace = code.find("{", m.end())
        if brace < 0 or (0 <= semicolon < brace):
            end = semicolon + 1  # `#[cfg(test)] mod tests;` or a `use`
        else:
            depth, end = 0, brace
            while end < len(code):
                depth += {"{": 1, "}": -1}.get(code[end], 0)
                end += 1
                if depth == 0:
                    break
        code = code[:start] + re.sub(r"[^\n]", " ", code[start:end]) + code[end:]
    return code


def thiserror_in_scope(code):
    return re.search(r"\buse\s+thiserror::(Error\b|\{[^}]*\bError\b)", code) is not None


def error_types(root):
    """{name: [file, ...]} of every error type outside tests."""
    found = {}
    for base in ROOTS:
        for folder, _, names in os.walk(os.path.join(root, base)):
            for name in sorted(names):
                path = os.path.join(folder, name)
                rel = os.path.relpath(path, root)
                if not name.endswith(".rs") or TEST_FILE.search(os.path.relpath(path, os.path.join(root, base))):
                    continue
                with open(path, encoding="utf-8") as f:
                    code = without_test_items(strip_comments_and_strings(f.read()))
                bare = thiserror_in_scope(code)
                for m in DERIVE.finditer(code):
                    derived = [d.strip() for d in m.group(1).split(",")]
                    if "thiserror::Error" not in derived and not (bare and "Error" in derived):
                        continue
                    rest = code[m.end():]
                    while True:
                        attr = ATTRIBUTE_OR_DOC.match(rest)
                        if not attr:
                            break
                        rest = rest[attr.end():]
                    item = ITEM.match(rest.lstrip())
                    if item:
                        found.setdefault(item.group(1), []).append(rel)
                for m in MANUAL_IMPL.finditer(code):
                    found.setdefault(m.group(1), []).append(rel)
    return {k: sorted(set(v)) for k, v in found.items()}


def table_rows(root):
    """[(line number, [names], where)] of the error tables' rows."""
    rows, in_table = [], False
    with open(os.path.join(root, DESIGN), encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if TABLE_HEADER.match(line):
                in_table = True
                continue
            if in_table and not line.startswith("|"):
                in_table = False
            if not in_table or re.match(r"^\|[\s|:-]+\|\s*$", line):
                continue
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            names = re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", cells[0])
            places = re.findall(r"`([^`]+)`", cells[-1])
            rows.append((number, names, places))
    return rows


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    root = args[0] if args else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    types = error_types(root)
    if "--list" in sys.argv:
        for name in sorted(types):
            print(f"{name}\t{', '.join(types[name])}")
        return 0
    rows = table_rows(root)
    if not rows:
        print(f"{DESIGN}: no error table (a header `| error | what failed | where |`)", file=sys.stderr)
        return 1
    problems = []
    named = set()
    for number, names, places in rows:
        if not names:
            problems.append(f"{DESIGN}:{number}: a row of the error tables names no type")
        for name in names:
            named.add(name)
            if name not in types:
                problems.append(f"{DESIGN}:{number}: `{name}` is no error type of src/ or core/src")
                continue
            for file in types[name]:
                if not any(file == p or file.startswith(p.rstrip("/") + "/") for p in places):
                    problems.append(
                        f"{DESIGN}:{number}: `{name}` is defined in {file}, not where the row says ({', '.join(places) or 'nowhere'})"
                    )
    for name in sorted(set(types) - named):
        problems.append(f"{', '.join(types[name])}: error type `{name}` is missing from {DESIGN}'s error tables")
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        print(f"error-types: {len(problems)} problem(s); each error type has one row in {DESIGN}'s error tables", file=sys.stderr)
        return 1
    print(f"error-types: {len(types)} error types, each in {DESIGN}'s error tables where its row says")
    return 0


if __name__ == "__main__":
    sys.exit(main())
