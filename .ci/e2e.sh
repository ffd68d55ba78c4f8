#!/usr/bin/env bash
# Prerequisites of the kube-apiserver end-to-end tests (tests/e2e): openssl
# and curl for the harness scripts (tests/e2e/apiserver/), and kube-apiserver
# 1.20 + etcd built by tests/e2e/apiserver/build.sh from Debian's sources
# (about 8 minutes the first time on 2 cores, cached in
# $HOME/.cache/kube-apiserver/bin afterwards).
# .ci/run calls this before the README's test command, which then runs the
# e2e tests (under CI=true they fail rather than skip without the binaries).
# `bash .ci/e2e.sh --run` also runs the e2e tests alone.
set -euo pipefail
cd "$(dirname "$0")/.."
missing=()
command -v openssl >/dev/null || missing+=(openssl)
command -v curl >/dev/null || missing+=(curl)
if [ ${#missing[@]} -gt 0 ]; then
  echo "e2e: installing ${missing[*]}"
  sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq && $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

start=$(date +%s)
bin=$(bash .ci/apiserver-bin.sh)
echo "e2e: $("$bin/kube-apiserver" --version) and etcd ready in $bin after $(( $(date +%s) - start )) s"

if [ "${1:-}" = "--run" ]; then
  start=$(date +%s)
  CI=true cargo test --locked --test e2e lookups:: -- --nocapture
  echo "e2e: tests took $(( $(date +%s) - start )) s"
fi
