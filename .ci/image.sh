#!/usr/bin/env bash
# The image's build context and build stage, without a Docker engine:
# .ci/image_build.py lays the context out from .dockerignore, checks every
# COPY source, runs the build stage's steps inside that context and runs the
# binary it produced with --version and checks the dependency list
# cargo-auditable wrote into it (.ci/auditable_deps.py). Release
# dependencies are cached in
# ${XDG_CACHE_HOME:-$HOME/.cache}/kserve-injector-ci/image-target (about
# 8 minutes on 2 cores the first time, seconds afterwards).
#
#   bash .ci/manifests.sh   # the venv with docker-py (its .dockerignore matcher)
#   bash .ci/image.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cache=${XDG_CACHE_HOME:-$HOME/.cache}/kserve-injector-ci
python=$cache/venv/bin/python
"$python" -c 'import docker' 2>/dev/null || { echo "image: no docker-py in $cache/venv: run bash .ci/manifests.sh first" >&2; exit 1; }
t0=$SECONDS
# The build stage's `cargo install --locked cargo-auditable` lands in the
# cache, not in ~/.cargo/bin: installed once, found on PATH afterwards.
tools=$cache/image-cargo-tools
CARGO_INSTALL_ROOT=$tools PATH=$tools/bin:$PATH CARGO_TARGET_DIR=$cache/image-target \
  "$python" .ci/image_build.py . "$cache/image-build"
echo "image: context check and build stage took $((SECONDS - t0)) s"
