#!/usr/bin/env bash
# Prerequisites of the kube-apiserver end-to-end tests (tests/e2e): openssl
# and curl for the harness scripts (tests/e2e/apiserver/), and
# kube-apiserver 1.36 and 1.31 + etcd built by tests/e2e/apiserver/build.sh
# from ../shared/k8s-src (about 8 CPU minutes each the first time, one after
# the other; cached in ~/.cache/kube-apiserver-1.36 and -1.31 afterwards).
# .ci/run calls this before the README's test command, which then runs the
# e2e tests (under CI=true they fail rather than skip without the binaries).
# `bash .ci/e2e.sh 1.31` prepares that version alone; `bash .ci/e2e.sh
# --run` also runs the e2e tests alone.
set -euo pipefail
cd "$(dirname "$0")/.."
versions=() run=0
for arg in "$@"; do
  case $arg in
    --run) run=1 ;;
    *) versions+=("$arg") ;;
  esac
done
[ ${#versions[@]} -gt 0 ] || versions=(1.36 1.31)
missing=()
command -v openssl >/dev/null || missing+=(openssl)
command -v curl >/dev/null || missing+=(curl)
if [ ${#missing[@]} -gt 0 ]; then
  echo "e2e: installing ${missing[*]}"
  sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq && $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi

for minor in "${versions[@]}"; do
  start=$(date +%s)
  bin=$(bash .ci/apiserver-bin.sh "$minor")
  echo "e2e: $("$bin/kube-apiserver" --version) and etcd ready in $bin after $(( $(date +%s) - start )) s"
done

if [ "$run" = 1 ]; then
  start=$(date +%s)
  CI=true cargo test --locked --test e2e -- --nocapture
  echo "e2e: tests took $(( $(date +%s) - start )) s"
fi
