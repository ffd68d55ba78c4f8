#!/usr/bin/env bash
# Makes sure one version's kube-apiserver, etcd and kubectl are built
# (`apiserver-bin.sh 1.36`, the default, or `1.31`: tests/e2e/apiserver/build.sh,
# about 8 CPU minutes the first time, cached in ~/.cache/kube-apiserver-<version>
# afterwards, or $BIN_DIR_1_36 / $BIN_DIR_1_31) and prints their directory.
# Progress goes to stderr; stdout carries only the directory.
set -euo pipefail
cd "$(dirname "$0")/.."
minor=${1:-1.36}
var=BIN_DIR_${minor/./_}
bin=${!var:-$HOME/.cache/kube-apiserver-$minor/bin}
runnable() { "$bin/kube-apiserver" --version >/dev/null 2>&1 && "$bin/etcd" --version >/dev/null 2>&1; }
if ! runnable; then
  BIN_DIR=$bin bash tests/e2e/apiserver/build.sh "$minor" >&2
  runnable || { echo "apiserver: the build left no runnable kube-apiserver $minor and etcd in $bin" >&2; exit 1; }
fi
echo "$bin"
