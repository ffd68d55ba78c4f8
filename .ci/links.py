#!/usr/bin/env python3
"""Offline link check of the repository's Markdown files.

Every link and image of every Markdown file git tracks (or of the files
named on the command line) is parsed with markdown-it-py (CommonMark, so
links inside code are not links) and checked without the network:
- a relative target must exist in the tree;
- a `#fragment` into a Markdown file must name one of its headings (GitHub's
  anchors: lower case, punctuation dropped, spaces to hyphens, `-1`, `-2`
  for repeats) or an `<a id|name="...">` in it;
- a `#L10` or `#L10-L20` into another file must be within its lines.
http(s) and mailto links are not fetched. Exit code 1 lists each broken
link as `file:line: target: why`.

    python3 .ci/links.py            # every tracked *.md
    python3 .ci/links.py a.md b.md  # only these
    python3 .ci/links.py --root DIR [FILE...]   # another tree (the tests' own)
"""
import re
import subprocess
import sys
from pathlib import Path

from markdown_it import MarkdownIt

EXTERNAL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
LINE_ANCHOR = re.compile(r"^L(\d+)(?:-L(\d+))?$")
HTML_ANCHOR = re.compile(r"<a\s[^>]*\b(?:id|name)\s*=\s*[\"']([^\"']+)[\"']", re.I)

md = MarkdownIt("commonmark").enable("table")


def slug(text):
    """GitHub's heading anchor for `text` (the heading's rendered text)."""
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def inline_text(token):
    return "".join(c.content for c in token.children or [] if c.type in ("text", "code_inline"))


def anchors(path, cache={}):
    if path not in cache:
        text = path.read_text(encoding="utf-8")
        found, seen = set(HTML_ANCHOR.findall(text)), {}
        tokens = md.parse(text)
        for i, tok in enumerate(tokens):
            if tok.type == "heading_open":
                base = slug(inline_text(tokens[i + 1]))
                n = seen.get(base, 0)
                seen[base] = n + 1
                found.add(base if n == 0 else f"{base}-{n}")
        cache[path] = found
    return cache[path]


def links(path):
    """(line, target) of every link and image in `path`."""
    text = path.read_text(encoding="utf-8")
    for tok in md.parse(text):
        if tok.type != "inline" or not tok.map:
            continue
        for child in tok.children or []:
            if child.type == "link_open":
                yield tok.map[0] + 1, child.attrs.get("href", "")
            elif child.type == "image":
                yield tok.map[0] + 1, child.attrs.get("src", "")
    for n, line in enumerate(text.splitlines(), 1):
        for target in re.findall(r"<a\s[^>]*\bhref\s*=\s*[\"']([^\"']+)[\"']", line, re.I):
            yield n, target


def check(path, target, root):
    if not target or EXTERNAL.match(target):
        return None
    ref, _, fragment = target.partition("#")
    dest = (path.parent / ref).resolve() if ref else path.resolve()
    if root not in dest.parents and dest != root:
        return "outside the repository"
    if not dest.exists():
        return "no such file"
    if not fragment:
        return None
    if dest.suffix.lower() == ".md":
        return None if fragment in anchors(dest) else "no such heading"
    m = LINE_ANCHOR.match(fragment)
    if m and dest.is_file():
        lines = len(dest.read_text(encoding="utf-8", errors="replace").splitlines())
        last = int(m.group(2) or m.group(1))
        return None if last <= lines else f"the file has {lines} lines"
    return "a fragment into a file that is not Markdown"


def main(argv):
    if argv[:1] == ["--root"] and len(argv) > 1:
        root, argv = Path(argv[1]).resolve(), argv[2:]
    else:
        top = subprocess.check_output(["git", "rev-parse", "--show-toplevel"], text=True)
        root = Path(top.strip()).resolve()
    if argv:
        files = [Path(a).resolve() for a in argv]
    else:
        listed = subprocess.check_output(["git", "ls-files", "-z", "--", "*.md"], cwd=root, text=True)
        files = [root / f for f in listed.split("\0") if f]
    broken = 0
    checked = 0
    for path in files:
        for line, target in links(path):
            checked += 1
            why = check(path, target, root)
            if why:
                broken += 1
                print(f"{path.relative_to(root)}:{line}: {target}: {why}")
    print(f"links: {checked} checked in {len(files)} files, {broken} broken")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
