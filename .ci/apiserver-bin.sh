#!/usr/bin/env bash
# Makes sure kube-apiserver and etcd from ../shared/tools/kube-apiserver are
# built (about 8 minutes the first time on 2 cores, cached in
# $HOME/.cache/kube-apiserver afterwards) and prints their directory.
#
# build.sh ends with `etcd --version | head -1` under pipefail, which exits
# 141 (SIGPIPE) whenever head closes the pipe before etcd's last line, so its
# status alone cannot tell a failed build: the binaries answering --version
# decide. Progress goes to stderr; stdout carries only the directory.
set -euo pipefail
cd "$(dirname "$0")/.."
tools=${KUBE_APISERVER_TOOLS:-$PWD/../shared/tools/kube-apiserver}
bin=${BIN_DIR:-$HOME/.cache/kube-apiserver/bin}
[ -f "$tools/build.sh" ] || { echo "apiserver: no kube-apiserver harness at $tools" >&2; exit 1; }

runnable() { "$bin/kube-apiserver" --version >/dev/null 2>&1 && "$bin/etcd" --version >/dev/null 2>&1; }
if ! runnable; then
  rc=0
  bash "$tools/build.sh" >&2 || rc=$?
  runnable || { echo "apiserver: kube-apiserver build failed (build.sh exit $rc)" >&2; exit 1; }
fi
echo "$bin"
