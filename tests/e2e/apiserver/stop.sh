#!/usr/bin/env bash
# Stops what start.sh started in $WORK_DIR (and any other process a test
# saved there as pids/NAME.pid); `--clean` also removes $WORK_DIR.
set -uo pipefail
. "$(dirname "$0")/lib.sh"
if [ -d "$pids" ]; then
  for file in "$pids"/*.pid; do
    [ -e "$file" ] || continue
    name=$(basename "$file" .pid)
    case $name in etcd | kube-apiserver) ;; *) halt "$name" ;; esac
  done
  halt kube-apiserver
  halt etcd
fi
if [ "${1:-}" = --clean ]; then
  rm -rf "$WORK_DIR"
fi
