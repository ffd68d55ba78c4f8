#!/usr/bin/env bash
# Prints the path of a cargo subcommand's binary (cargo-deny, cargo-cyclonedx,
# ...) at a pinned version, installing it first with `cargo install --locked`
# into ${XDG_CACHE_HOME:-$HOME/.cache}/kserve-injector-tools/NAME-VERSION,
# outside the repository, so CI builds it once per machine. Progress and the
# build's time go to stderr; stdout carries only the path.
#
#   bash .ci/cargo-tool.sh cargo-deny 0.20.2
set -euo pipefail
name=$1 version=$2
root=${XDG_CACHE_HOME:-$HOME/.cache}/kserve-injector-tools/$name-$version
if [ ! -x "$root/bin/$name" ]; then
  echo "$name: cargo install --locked $name@$version into $root" >&2
  t0=$SECONDS
  # Its own target directory (a temporary one), not the project's.
  env -u CARGO_TARGET_DIR cargo install --locked --quiet --root "$root" "$name@$version" >&2
  echo "$name: built in $((SECONDS - t0)) s" >&2
fi
echo "$root/bin/$name"
