"""The image's build context: .ci/image_build.py lays it out with docker-py's
.dockerignore matcher and refuses a context that lacks a COPY source, labels
that disagree with Cargo.toml, and a RUN step that reads outside the context.
The full build stage runs in .ci/image.sh (release build, cached)."""

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / ".ci" / "image_build.py"
# .dockerignore before the workspace split: it let through neither core/ nor
# the benches the placeholder step names.
OLD_IGNORE = "*\n!Cargo.toml\n!Cargo.lock\n!src/\n!benches/review.rs\n"


def build(root, work, *flags):
    return subprocess.run([sys.executable, str(SCRIPT), str(root), str(work), *flags],
                          capture_output=True, text=True)


def project_copy(tmp, dockerfile=None, ignore=None):
    root = tmp / "repo"
    for name in ("Cargo.toml", "Cargo.lock", ".dockerignore", "Dockerfile"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, root / name)
    for name in ("src", "core", "oracle", "benches"):
        shutil.copytree(ROOT / name, root / name, ignore=shutil.ignore_patterns("target"))
    if dockerfile is not None:
        (root / "Dockerfile").write_text(dockerfile)
    if ignore is not None:
        (root / ".dockerignore").write_text(ignore)
    return root


def test_context_holds_every_copy_source(tmp_path):
    proc = build(ROOT, tmp_path / "work", "--check-only")
    assert proc.returncode == 0, proc.stderr
    context = tmp_path / "work" / "context"
    assert (context / "core" / "Cargo.toml").is_file()
    assert not (context / "fixtures").exists() and not (context / "target").exists()


def test_refuses_context_without_core(tmp_path):
    proc = build(project_copy(tmp_path, ignore=OLD_IGNORE), tmp_path / "work", "--check-only")
    assert proc.returncode == 1
    assert "lacks what the Dockerfile copies" in proc.stderr
    assert "COPY core/Cargo.toml" in proc.stderr and "COPY core/src" in proc.stderr


def test_refuses_label_version_other_than_cargo(tmp_path):
    dockerfile = (ROOT / "Dockerfile").read_text().replace("ARG VERSION=0.1.0", "ARG VERSION=9.9.9")
    assert "9.9.9" in dockerfile
    proc = build(project_copy(tmp_path, dockerfile=dockerfile), tmp_path / "work", "--check-only")
    assert proc.returncode == 1
    assert "org.opencontainers.image.version='9.9.9', Cargo.toml says '0.1.0'" in proc.stderr


def test_run_sees_only_the_context(tmp_path):
    labels = next(l for l in (ROOT / "Dockerfile").read_text().split("\nFROM ")
                  if l.startswith("${RUNTIME_IMAGE}"))
    dockerfile = ("FROM rust AS build\nWORKDIR /src\nCOPY Cargo.toml ./\n"
                  "RUN test -f Cargo.toml && cat README.md\n"
                  "FROM " + labels)
    proc = build(project_copy(tmp_path, dockerfile=dockerfile), tmp_path / "work")
    assert proc.returncode == 1
    assert "RUN failed with exit 1: test -f Cargo.toml && cat README.md" in proc.stderr


AUDITABLE = ROOT / ".ci" / "auditable_deps.py"


def with_dependency_list(tmp, packages):
    """A copy of /bin/true carrying `packages` as cargo-auditable writes them."""
    import json
    import zlib
    section = tmp / "dep-v0"
    section.write_bytes(zlib.compress(json.dumps({"packages": packages}).encode()))
    binary = tmp / "with-list"
    subprocess.run(["objcopy", "--add-section", f".dep-v0={section}", "/bin/true", str(binary)], check=True)
    return binary


def locked(name):
    import tomllib
    lock = tomllib.loads((ROOT / "Cargo.lock").read_text())
    return next(p["version"] for p in lock["package"] if p["name"] == name)


def test_refuses_a_binary_without_its_dependency_list(tmp_path):
    proc = subprocess.run([sys.executable, str(AUDITABLE), "/bin/true"], capture_output=True, text=True)
    assert proc.returncode == 1
    assert "no .dep-v0 section (not built with `cargo auditable build`)" in proc.stderr


def test_refuses_a_dependency_list_that_is_not_the_lockfiles(tmp_path):
    sys.path.insert(0, str(ROOT / ".ci"))
    import image_build
    good = [{"name": n, "version": locked(n), "source": "crates.io"} for n in ("rustls", "hyper", "kube")]
    ours = [{"name": n, "version": locked(n), "source": "local"} for n in ("kserve-injector", "kserve-injector-core")]
    image_build.check_dependency_list(with_dependency_list(tmp_path, good + ours), ROOT / "Cargo.lock")
    try:
        image_build.check_dependency_list(with_dependency_list(tmp_path, good[:2] + ours), ROOT / "Cargo.lock")
        raise AssertionError("a list without kube passed")
    except image_build.BuildError as err:
        assert "lacks kube" in str(err)
    stale = [dict(good[0], version="0.0.1")] + good[1:] + ours
    proc = subprocess.run([sys.executable, str(AUDITABLE), str(with_dependency_list(tmp_path, stale)),
                           str(ROOT / "Cargo.lock")], capture_output=True, text=True)
    assert proc.returncode == 1
    assert "rustls 0.0.1 (Cargo.lock: " in proc.stderr
