#!/usr/bin/env bash
# Argo CD recipe (manifests/argocd): the health-check cases in Lua 5.1 and the kustomize
# renders, all in tests/manifests/argocd_health.rs. `cargo test` skips the renders when kubectl is
# missing; here kubectl is required, so a render cannot be skipped silently.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v kubectl >/dev/null; then
  echo "argocd: kubectl >= 1.27 is required to render manifests/argocd" >&2
  exit 1
fi
# Read whole before parsing: a reader that stops early would SIGPIPE kubectl
# and, under pipefail, fail the script.
version=$(kubectl version --client -o json)
minor=$(sed -n 's/.*"minor": *"\([0-9]*\).*/\1/p' <<<"$version")
minor=${minor%%$'\n'*}
if [ "${minor:-0}" -lt 27 ]; then
  echo "argocd: kubectl client 1.${minor:-?} is older than 1.27 (kustomize components, patch targets)" >&2
  exit 1
fi
ARGOCD_RENDER_REQUIRED=1 cargo test --locked --test manifests argocd_health
