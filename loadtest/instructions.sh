#!/usr/bin/env bash
# Per-request cost of `serve` and of its two yardsticks, counted rather than
# timed, so the figures do not swing with the machine's load: instructions
# (callgrind), allocator calls, tasks spawned and timers armed, per request
# body. The yardsticks are examples/baseline_server.rs (the same TLS + HTTP
# stack, the body read in full) answering `baseline` the bytes `serve`
# answers, and `small` a fixed 100-byte answer.
#
# Each server runs under callgrind; h2load sends WARMUP requests, then the
# counters are zeroed, N requests sent and dumped, zeroed again, 2N sent and
# dumped. The second dump minus the first, over N, is the cost of N
# requests with the connection set-up, the handshake and the warm-up
# cancelled out.
#
#   bash loadtest/instructions.sh                       # every server x body
#   SERVERS="serve baseline" BODIES="pass oci" bash loadtest/instructions.sh
#   KEEP=/tmp/cg bash loadtest/instructions.sh          # keep the callgrind files
#
# Bodies: pass (fixtures/f01-non-isvc-pod, a pod we leave alone), oci
# (fixtures/m3-modelcar-oci, the 1.4 KB modelcar review), typical
# (benches/inputs/typical.json, the 23 KB pod). Prints one line per server
# and body: `server body instructions allocations tasks timers` (per request).
#
# Needs valgrind, h2load (Debian: nghttp2-client), curl and python3.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-1000}
WARMUP=${WARMUP:-200}
CONNS=${CONNS:-1}
STREAMS=${STREAMS:-1}
SERVERS=${SERVERS:-serve baseline small}
BODIES=${BODIES:-pass oci typical}
PORT=${PORT:-19743}
ADMIN_PORT=${ADMIN_PORT:-19781}
source loadtest/common.sh
need valgrind callgrind_control h2load curl python3
build_release
make_work
pid=
trap '[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -rf "$work"' EXIT

# Info-level JSON logs, as loadtest/load.sh runs it (exported rather than
# through `env`, which valgrind would follow instead of the server).
export RUST_LOG=info
server_cmd() { # server body-file -> sets the array `cmd`
  case $1 in
    serve) serve_command && cmd=("${serve_cmd[@]}") ;;
    baseline) answer_of "$2" && cmd=("$base" serve "127.0.0.1:$PORT" "$2.response") ;;
    small) cmd=("$base" serve "127.0.0.1:$PORT" "$work/small.json") ;;
    *) echo "unknown server $1 (serve, baseline, small)" >&2; exit 2 ;;
  esac
}

send() { # body-file count
  local out
  out=$(h2load -H 'content-type: application/json' -d "$1" -c "$CONNS" -m "$STREAMS" -n "$2" \
    "https://127.0.0.1:$PORT/mutate-pods" 2>&1)
  local ok
  ok=$(awk '/^status codes:/ {print $3}' <<<"$out")
  [ "$ok" = "$2" ] || { echo "expected $2 answers 2xx, h2load said:" >&2; echo "$out" >&2; exit 1; }
}

dump() { # pid file -> waits for callgrind to write it
  callgrind_control -d "$1" >/dev/null 2>&1
  for _ in $(seq 1 600); do
    # The totals line comes last.
    [ -f "$2" ] && grep -q '^totals:' "$2" && return 0
    sleep 0.1
  done
  echo "callgrind did not dump $2" >&2
  exit 1
}

measure() { # server body
  local body cg
  body=$(body_file "$2")
  cg="$work/cg.$1.$2"
  server_cmd "$1" "$body"
  valgrind --tool=callgrind --callgrind-out-file="$cg" "${cmd[@]}" >"$work/$1.$2.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 600); do
    curl -ks -o /dev/null --max-time 5 -H 'content-type: application/json' \
      --data @"$body" "https://127.0.0.1:$PORT/mutate-pods" && break
    sleep 0.2
  done
  send "$body" "$WARMUP"
  callgrind_control -z "$pid" >/dev/null 2>&1
  send "$body" "$N"
  dump "$pid" "$cg.1"
  callgrind_control -z "$pid" >/dev/null 2>&1
  send "$body" $((2 * N))
  dump "$pid" "$cg.2"
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  pid=
  printf '%s %s ' "$1" "$2"
  python3 loadtest/callgrind_counts.py --per "$N" "$cg.1" "$cg.2"
  if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP" && cp "$cg.1" "$cg.2" "$KEEP/"; fi
}

echo "# per request ($N after $WARMUP, $CONNS connections x $STREAMS streams): server body instructions allocations tasks timers" >&2
for body in $BODIES; do
  for server in $SERVERS; do
    measure "$server" "$body"
  done
done
