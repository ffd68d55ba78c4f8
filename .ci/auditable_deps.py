"""The dependency list cargo-auditable embeds in a binary, read back.

`cargo auditable build` stores the crates a binary was built from (name,
version, source, kind) as zlib-compressed JSON in the ELF section .dep-v0;
image scanners (Trivy, Grype, `cargo audit bin`) read the same section.
objcopy (binutils) copies the section out; the format is the one
rust-secure-code/cargo-auditable documents (`{"packages": [...]}`).

Usage: auditable_deps.py BINARY [Cargo.lock]
  prints one `name version source` line per crate; with Cargo.lock, also
  fails unless every registry crate it lists has the version that
  Cargo.lock locks (a stale or foreign binary).
"""

import json
import subprocess
import sys
import tempfile
import tomllib
import zlib
from pathlib import Path


class NoDependencyList(Exception):
    pass


def packages(binary):
    """The packages recorded in BINARY's .dep-v0 section."""
    with tempfile.TemporaryDirectory() as tmp:
        section = Path(tmp) / "dep-v0"
        proc = subprocess.run(
            ["objcopy", "--dump-section", f".dep-v0={section}", str(binary), str(Path(tmp) / "copy")],
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0 or not section.is_file():
            raise NoDependencyList(
                f"{binary} has no .dep-v0 section (not built with `cargo auditable build`): {proc.stderr.strip()}"
            )
        return json.loads(zlib.decompress(section.read_bytes()))["packages"]


def locked_versions(lock):
    """name -> the set of versions Cargo.lock holds for it."""
    versions = {}
    for package in tomllib.loads(Path(lock).read_text())["package"]:
        versions.setdefault(package["name"], set()).add(package["version"])
    return versions


def mismatches(recorded, lock):
    locked = locked_versions(lock)
    return [
        f"{p['name']} {p['version']} (Cargo.lock: {', '.join(sorted(locked.get(p['name'], []))) or 'none'})"
        for p in recorded
        if p["version"] not in locked.get(p["name"], set())
    ]


def main():
    binary = sys.argv[1]
    recorded = packages(binary)
    for p in sorted(recorded, key=lambda p: p["name"]):
        print(p["name"], p["version"], p.get("source", ""))
    if len(sys.argv) > 2:
        wrong = mismatches(recorded, sys.argv[2])
        if wrong:
            print("versions Cargo.lock does not lock: " + "; ".join(wrong), file=sys.stderr)
            sys.exit(1)


if __name__ == "__main__":
    try:
        main()
    except NoDependencyList as err:
        print(err, file=sys.stderr)
        sys.exit(1)
