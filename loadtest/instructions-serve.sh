#!/usr/bin/env bash
# Instructions per request of `serve` and of the baseline server
# (examples/baseline_server.rs: the same TLS + HTTP stack answering a fixed
# body), each under callgrind while h2load sends N requests of the 1 KB
# review over 2 connections x 4 streams. Unlike loadtest/load.sh's times, the
# counts do not swing with the machine's load, so they compare builds.
# Each server's counters are zeroed after a 500-request warm-up.
#
#   bash loadtest/instructions-serve.sh            # N=4000
#
# Needs valgrind (callgrind_control, callgrind_annotate), h2load and curl.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-4000}
FIXTURE=${FIXTURE:-fixtures/m3-modelcar-oci/input.yaml}
for tool in valgrind callgrind_control callgrind_annotate h2load curl; do
  command -v "$tool" >/dev/null || { echo "$tool is missing" >&2; exit 2; }
done
cargo build --release --locked --bin kserve-injector --example baseline_server 2>&1 | tail -1
work=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -rf "$work"' EXIT
target/release/examples/baseline_server review "$FIXTURE" >"$work/review.json"
target/release/kserve-injector mutate "$work/review.json" >"$work/response.json"

count() { # name url command... -> instructions per request
  local name=$1 url=$2
  shift 2
  valgrind --tool=callgrind --callgrind-out-file="$work/cg.$name" "$@" >"$work/$name.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 300); do
    curl -ks -o /dev/null --max-time 2 -H 'content-type: application/json' \
      --data @"$work/review.json" "$url" && break
    sleep 0.2
  done
  load() { h2load -H 'content-type: application/json' -d "$work/review.json" -c 2 -m 4 -n "$1" "$url" |
    awk '/^requests:/ {print $8}'; }
  load 500 >/dev/null
  callgrind_control -z "$pid" >/dev/null
  local done
  done=$(load "$N")
  callgrind_control -d "$pid" >/dev/null
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  pid=
  local total
  total=$(callgrind_annotate "$work/cg.$name".1 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
  [ "$done" = "$N" ] || { echo "$name answered $done of $N requests" >&2; exit 1; }
  awk -v t="$total" -v n="$N" 'BEGIN {printf "%d", t / n}'
}

base=$(count baseline https://127.0.0.1:19644/mutate-pods \
  target/release/examples/baseline_server serve 127.0.0.1:19644 "$work/response.json")
# Info-level JSON logs, as loadtest/load.sh runs it (not through `env`: valgrind
# would follow env, not the server it execs).
export RUST_LOG=info
ours=$(count serve https://127.0.0.1:19643/mutate-pods \
  target/release/kserve-injector serve --self-signed \
  --self-signed-ca-file "$work/ca.crt" --addr 127.0.0.1:19643 --admin-addr 127.0.0.1:19681 \
  --shutdown-delay 0s --cluster-lookups off)
echo "instructions per request ($N requests, 2 connections x 4 streams): baseline $base, serve $ours ($(awk -v a="$ours" -v b="$base" 'BEGIN {printf "%.2f", a / b}')x)"
