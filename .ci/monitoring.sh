#!/usr/bin/env bash
# Installs what tests/manifests/test_monitoring.py needs beyond
# .ci/manifests.sh (run that first: it makes the venv and the binary):
# promtool and prometheus from Debian's prometheus package (apt; its service
# is not started), and promql-parser (PyPI) in the venv of .ci/manifests.sh.
# The checks themselves are pytest tests, run with the rest of tests/manifests:
#
#   bash .ci/manifests.sh && bash .ci/monitoring.sh
#   ~/.cache/kserve-injector-ci/venv/bin/python -m pytest tests/manifests/test_monitoring.py -q
set -euo pipefail
cd "$(dirname "$0")/.."

PY_PACKAGES=(promql-parser==0.11.0)
venv=${XDG_CACHE_HOME:-$HOME/.cache}/kserve-injector-ci/venv

log() { echo "== monitoring: $*"; }
die() { echo "monitoring: $*" >&2; exit 1; }

[ -x "$venv/bin/python" ] || die "no venv at $venv: run bash .ci/manifests.sh first"

if ! command -v promtool >/dev/null || ! command -v prometheus >/dev/null; then
  [ "$(id -u)" = 0 ] || die "cannot install Debian's prometheus package without root; install it and re-run"
  # The package's postinst starts the service where it can: a policy-rc.d
  # that refuses keeps it from starting a Prometheus on :9090 here.
  policy=/usr/sbin/policy-rc.d placed=""
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod 755 "$policy" && placed=1
  fi
  log "apt-get install prometheus (promtool and the server)"
  apt-get update -qq
  rc=0
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null || rc=$?
  [ -z "$placed" ] || rm -f "$policy"
  [ "$rc" = 0 ] || die "apt-get install prometheus failed ($rc)"
fi
log "$(promtool --version 2>&1 | head -1); $(prometheus --version 2>&1 | head -1)"

stamp="$venv/.monitoring-installed" want="${PY_PACKAGES[*]}"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  log "pip install ${PY_PACKAGES[*]}"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "${PY_PACKAGES[@]}"
  echo "$want" > "$stamp"
fi
