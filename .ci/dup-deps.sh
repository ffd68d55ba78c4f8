#!/usr/bin/env bash
# One YAML stack and one base64: the binary, the tests and the fuzz targets
# (each lockfile) build serde-saphyr, granit-parser and base64 in the
# version kube builds, never a second one of their own.
#
#   bash .ci/dup-deps.sh          # Cargo.lock and fuzz/Cargo.lock
#
# A second version is accepted only where a crate we do not own pins it in
# its latest release and no crate of this repository uses it directly;
# each such version is listed below with the crates that pin it, and the
# check fails when the list is stale, so it is removed the day they move.
set -euo pipefail
cd "$(dirname "$0")/.."

crates='serde-saphyr|granit-parser|base64'
# "crate vMAJOR.MINOR. (who pins it)": k8s-openapi 0.29.0 and tower-http
# 0.7.1 (kube-client's `auth` layer) ask for base64 0.22, kube-client and
# pem (rcgen) for 0.23.
allowed=(
  "base64 v0.22. (k8s-openapi 0.29, tower-http 0.7)"
)

failed=0
for manifest in Cargo.toml fuzz/Cargo.toml; do
  # Normal, build and dev edges (the tests' dependencies too), every platform.
  tree=(cargo tree --locked --manifest-path "$manifest" -e normal,build,dev --target all)
  dups=$("${tree[@]}" -d --depth 0 --prefix none --format '{p}' | sort -uV | grep -E "^($crates) v" || true)
  for name in $(printf '%s\n' "$dups" | awk 'NF { print $1 }' | sort -u); do
    versions=$(printf '%s\n' "$dups" | awk -v n="$name" '$1 == n { print $2 }')
    newest=$(printf '%s\n' "$versions" | tail -1)
    for version in $versions; do
      [ "$version" = "$newest" ] && continue
      # Who depends on it directly; a path in parentheses is a crate of ours.
      users=$("${tree[@]}" -i "$name@${version#v}" --depth 1 --prefix depth --format '{p}' | sed -n 's/^1//p' | sort -u)
      ours=$(printf '%s\n' "$users" | grep -F ' (/' | awk '{ print $1 }' | tr '\n' ' ' || true)
      listed=no
      for entry in "${allowed[@]}"; do
        case "$name $version" in "${entry%% (*}"*) listed=yes ;; esac
      done
      if [ -n "$ours" ]; then
        echo "dup-deps: $manifest: $name $version beside $newest, used directly by ${ours% }; use $newest" >&2
        failed=1
      elif [ "$listed" = no ]; then
        echo "dup-deps: $manifest: $name $version beside $newest, through $(printf '%s\n' "$users" | awk '{ print $1 " " $2 }' | paste -sd, -); move to $newest or list it in .ci/dup-deps.sh with the crate that pins it" >&2
        failed=1
      fi
    done
  done
  # A listed exception that no longer occurs is removed, so the list stays true.
  for entry in "${allowed[@]}"; do
    prefix=${entry%% (*}
    if [ "$manifest" = Cargo.toml ] && ! printf '%s\n' "$dups" | grep -qF "$prefix"; then
      echo "dup-deps: $prefix no longer occurs in Cargo.lock: remove it from .ci/dup-deps.sh's list" >&2
      failed=1
    fi
  done
  echo "dup-deps: $manifest: $(printf '%s\n' "$dups" | awk 'NF' | paste -sd, - | sed 's/^$/no duplicates/')"
done
[ "$failed" = 0 ] && echo "dup-deps: one serde-saphyr, one granit-parser, one base64 of our own in each lockfile"
exit "$failed"
