"""Builds the Dockerfile's build stage without a Docker engine, inside the
build context that .dockerignore lets through.

No image registry is reachable in CI, so no builder can pull the base images.
This runs what a builder would, in the order it would, on the host's Rust
toolchain (the version the Dockerfile's RUST_IMAGE names):

1. lay the context out with docker-py's own .dockerignore matcher
   (`docker.utils.build.exclude_paths`, the implementation `docker build`
   clients use);
2. check that every COPY source of every stage exists in that context;
3. run the build stage: WORKDIR, ENV, SHELL, COPY and RUN in order, in a scratch
   root (RUN steps see only the copied context, so a file the context lacks
   fails the build as it would in Docker);
4. check that the final stage's `COPY --from=build` sources were produced,
   that the binary answers `--version` with Cargo.toml's version, that it
   carries cargo-auditable's dependency list (what image scanners read:
   rustls, hyper and kube among the crates, at Cargo.lock's versions), and
   that the OCI labels agree with Cargo.toml.

Usage: image_build.py REPO_ROOT WORK_DIR [--check-only]  (--check-only stops
after step 2 and the label check; CARGO_TARGET_DIR, when set, is
passed to the RUN steps so dependency builds are shared between runs.)
"""

import glob
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from docker.utils.build import exclude_paths

import auditable_deps

# Crates the webhook cannot be built without: a dependency list that lacks
# one is not the binary's.
EXPECTED_CRATES = ("rustls", "hyper", "kube", "kserve-injector", "kserve-injector-core")


class BuildError(Exception):
    pass


def instructions(dockerfile):
    """(keyword, argument text) per instruction, continuation lines joined."""
    out, pending = [], ""
    for raw in dockerfile.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        full = pending + line
        pending = ""
        keyword, _, rest = full.partition(" ")
        out.append((keyword.upper(), rest.strip()))
    if pending:
        raise BuildError("Dockerfile ends inside a continued line")
    return out


def substitute(text, variables):
    def value(match):
        name = match.group(1) or match.group(2)
        return variables.get(name, "")

    return re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)", value, text)


def key_values(text):
    """ARG/ENV/LABEL arguments: KEY=VALUE pairs (shell quoting)."""
    pairs = {}
    for word in shlex.split(text):
        key, sep, val = word.partition("=")
        pairs[key] = val if sep else None
    return pairs


def copy_parts(text):
    words = shlex.split(text)
    flags = {w.split("=", 1)[0]: w.split("=", 1)[1] for w in words if w.startswith("--") and "=" in w}
    paths = [w for w in words if not w.startswith("--")]
    if len(paths) < 2:
        raise BuildError(f"COPY needs a source and a destination: COPY {text}")
    return flags, paths[:-1], paths[-1]


def stages(steps):
    """Splits the instructions at each FROM; ARGs before the first FROM are global."""
    global_args, result = {}, []
    for keyword, rest in steps:
        if keyword == "FROM":
            words = rest.split()
            name = words[2] if len(words) >= 3 and words[1].upper() == "AS" else None
            result.append({"name": name, "from": words[0], "steps": []})
        elif not result:
            if keyword != "ARG":
                raise BuildError(f"{keyword} before the first FROM")
            global_args.update({k: v or "" for k, v in key_values(rest).items()})
        else:
            result[-1]["steps"].append((keyword, rest))
    return global_args, result


def lay_out_context(root, work):
    ignore = root / ".dockerignore"
    patterns = []
    if ignore.exists():
        patterns = [l.strip() for l in ignore.read_text().splitlines() if l.strip() and not l.strip().startswith("#")]
    context = work / "context"
    for rel in sorted(exclude_paths(str(root), patterns)):
        source, target = root / rel, context / rel
        if source.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        elif source.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    return context


def check_copy_sources(all_stages, global_args, context):
    missing = []
    for stage in all_stages:
        for keyword, rest in stage["steps"]:
            if keyword not in ("COPY", "ADD"):
                continue
            flags, sources, _ = copy_parts(substitute(rest, global_args))
            if "--from" in flags:
                continue
            for source in sources:
                if not glob.glob(str(context / source.lstrip("/"))):
                    missing.append(f"{keyword} {source}")
    if missing:
        raise BuildError(
            "the build context (.dockerignore) lacks what the Dockerfile copies: " + ", ".join(missing)
        )


def copy_into(sources, dest, context, rootfs, workdir):
    target = Path(dest) if dest.startswith("/") else workdir / dest
    target = rootfs / str(target).lstrip("/")
    matched = [Path(m) for s in sources for m in sorted(glob.glob(str(context / s.lstrip("/"))))]
    into_dir = dest.endswith("/") or len(matched) > 1
    for source in matched:
        if source.is_dir():
            shutil.copytree(source, target, dirs_exist_ok=True)
        else:
            final = target / source.name if into_dir else target
            final.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, final)


def run_build_stage(stage, global_args, context, rootfs):
    args = dict(global_args)
    env = dict(os.environ)
    workdir = Path("/")
    shell = ["/bin/sh", "-c"]
    for keyword, rest in stage["steps"]:
        if keyword == "ARG":
            args.update({k: v or args.get(k, "") for k, v in key_values(rest).items()})
        elif keyword == "ENV":
            env.update({k: substitute(v or "", {**args, **env}) for k, v in key_values(rest).items()})
        elif keyword == "WORKDIR":
            workdir = workdir / substitute(rest, args)
            (rootfs / str(workdir).lstrip("/")).mkdir(parents=True, exist_ok=True)
        elif keyword in ("COPY", "ADD"):
            flags, sources, dest = copy_parts(substitute(rest, args))
            if "--from" in flags:
                raise BuildError(f"the build stage copies from another stage: {keyword} {rest}")
            copy_into(sources, dest, context, rootfs, workdir)
        elif keyword == "RUN":
            cwd = rootfs / str(workdir).lstrip("/")
            print(f"image: RUN in {workdir}: {rest[:100]}...", flush=True)
            proc = subprocess.run([*shell, rest], cwd=cwd, env=env)
            if proc.returncode != 0:
                raise BuildError(f"RUN failed with exit {proc.returncode}: {rest}")
        elif keyword == "SHELL":
            shell = json.loads(rest)
        elif keyword in ("LABEL", "USER", "EXPOSE", "ENTRYPOINT", "CMD"):
            continue
        else:
            raise BuildError(f"image_build.py does not run {keyword}; extend it or keep the stage simple")


def final_stage(final, global_args):
    """The runtime stage's labels and the files it copies from other stages."""
    args, labels, copied = dict(global_args), {}, []
    for keyword, rest in final["steps"]:
        if keyword == "ARG":
            args.update({k: v or args.get(k, "") for k, v in key_values(rest).items()})
        elif keyword == "LABEL":
            labels.update({k: substitute(v or "", args) for k, v in key_values(rest).items()})
        elif keyword == "COPY":
            flags, sources, _ = copy_parts(substitute(rest, args))
            if "--from" in flags:
                copied += [(flags["--from"], source) for source in sources]
    return labels, copied


def check_labels(labels, manifest):
    package = manifest["package"]
    want = {
        "org.opencontainers.image.version": package["version"],
        "org.opencontainers.image.licenses": package["license"],
    }
    for key, value in want.items():
        if labels.get(key) != value:
            raise BuildError(f"LABEL {key}={labels.get(key)!r}, Cargo.toml says {value!r}")
    if "org.opencontainers.image.source" not in labels:
        raise BuildError("no LABEL org.opencontainers.image.source")


def main():
    root, work = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
    manifest = tomllib.loads((root / "Cargo.toml").read_text())
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    global_args, all_stages = stages(instructions(root / "Dockerfile"))
    build = next((s for s in all_stages if s["name"] == "build"), None)
    if build is None or all_stages[-1] is build:
        raise BuildError("expected a stage named build followed by a runtime stage")
    labels, copied = final_stage(all_stages[-1], global_args)
    check_labels(labels, manifest)
    context = lay_out_context(root, work)
    print(f"image: context laid out from .dockerignore: {sum(1 for p in context.rglob('*') if p.is_file())} files")
    check_copy_sources(all_stages, global_args, context)
    if "--check-only" in sys.argv[3:]:
        return
    rootfs = work / "rootfs"
    run_build_stage(build, global_args, context, rootfs)
    for stage, source in copied:
        produced = rootfs / source.lstrip("/")
        if stage != "build" or not produced.is_file():
            raise BuildError(f"the build stage did not produce {source} (COPY --from={stage})")
        out = subprocess.run([produced, "--version"], capture_output=True, text=True)
        if out.returncode != 0 or manifest["package"]["version"] not in out.stdout:
            raise BuildError(f"{produced.name} --version: exit {out.returncode}, {out.stdout!r}{out.stderr!r}")
        print(f"image: the build stage's {produced.name} answers: {out.stdout.strip()}")
        check_dependency_list(produced, root / "Cargo.lock")


def check_dependency_list(binary, lock):
    try:
        recorded = auditable_deps.packages(binary)
    except auditable_deps.NoDependencyList as err:
        raise BuildError(str(err))
    names = {p["name"]: p["version"] for p in recorded}
    absent = [name for name in EXPECTED_CRATES if name not in names]
    if absent:
        raise BuildError(f"{binary.name}'s dependency list lacks {', '.join(absent)}")
    wrong = auditable_deps.mismatches(recorded, lock)
    if wrong:
        raise BuildError(f"{binary.name}'s dependency list has versions Cargo.lock does not lock: {'; '.join(wrong)}")
    shown = ", ".join(f"{name} {names[name]}" for name in EXPECTED_CRATES[:3])
    print(f"image: {binary.name} carries its dependency list (cargo auditable): {len(recorded)} crates, {shown}")


if __name__ == "__main__":
    try:
        main()
    except BuildError as err:
        print(f"image: {err}", file=sys.stderr)
        sys.exit(1)
