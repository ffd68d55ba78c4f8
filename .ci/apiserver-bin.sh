#!/usr/bin/env bash
# Makes sure kube-apiserver and etcd are built (tests/e2e/apiserver/build.sh:
# about 8 minutes the first time on 2 cores, cached in
# $HOME/.cache/kube-apiserver/bin afterwards, or $BIN_DIR) and prints their
# directory. Progress goes to stderr; stdout carries only the directory.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${BIN_DIR:-$HOME/.cache/kube-apiserver/bin}
runnable() { "$bin/kube-apiserver" --version >/dev/null 2>&1 && "$bin/etcd" --version >/dev/null 2>&1; }
if ! runnable; then
  BIN_DIR=$bin bash tests/e2e/apiserver/build.sh >&2
  runnable || { echo "apiserver: the build left no runnable kube-apiserver and etcd in $bin" >&2; exit 1; }
fi
echo "$bin"
