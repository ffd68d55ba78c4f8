#!/usr/bin/env bash
# System calls per request of `serve` and of its yardsticks (see
# loadtest/instructions.sh for the servers and bodies): `strace -c -f`
# attached to the server (every thread) while h2load sends N requests, then
# 2N on a new connection; the difference over N cancels the connection's
# set-up and close. Counts calls, not time, so a loaded machine does not
# change it much (how many reads a write wakes up still depends on timing).
#
#   bash loadtest/syscalls.sh                     # every server x body, N=2000
#   SERVERS=serve BODIES=oci bash loadtest/syscalls.sh
#
# Prints per request: `server body total` and the calls made at least 0.1
# times per request. Needs strace, h2load and curl.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-2000}
WARMUP=${WARMUP:-500}
CONNS=${CONNS:-1}
STREAMS=${STREAMS:-1}
SERVERS=${SERVERS:-serve baseline small}
BODIES=${BODIES:-pass oci typical}
PORT=${PORT:-19843}
ADMIN_PORT=${ADMIN_PORT:-19881}
source loadtest/common.sh
need strace h2load curl python3
build_release
make_work
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT

start() { # server body-file
  case $1 in
    serve)
      serve_command
      RUST_LOG=info "${serve_cmd[@]}" >"$work/server.log" 2>&1 &
      ;;
    baseline)
      answer_of "$2"
      "$base" serve "127.0.0.1:$PORT" "$2.response" >"$work/server.log" 2>&1 &
      ;;
    small) "$base" serve "127.0.0.1:$PORT" "$work/small.json" >"$work/server.log" 2>&1 & ;;
    *) echo "unknown server $1 (serve, baseline, small)" >&2; exit 2 ;;
  esac
  pid=$!
}

send() { # body-file count
  h2load -H 'content-type: application/json' -d "$1" -c "$CONNS" -m "$STREAMS" -n "$2" \
    "https://127.0.0.1:$PORT/mutate-pods" >"$work/h2load.txt" 2>&1
  grep -q "status codes: $2 2xx" "$work/h2load.txt" || { cat "$work/h2load.txt" >&2; exit 1; }
}

traced() { # body-file count out -> strace -c table of the server while count requests are sent
  strace -c -f -p "$pid" -o "$3" 2>/dev/null &
  local tracer=$!
  sleep 0.5
  send "$1" "$2"
  kill -INT "$tracer"
  wait "$tracer" 2>/dev/null || true
}

for b in $BODIES; do
  body=$(body_file "$b")
  for s in $SERVERS; do
    start "$s" "$body"
    for _ in $(seq 1 100); do
      curl -ks -o /dev/null --max-time 2 -H 'content-type: application/json' \
        --data @"$body" "https://127.0.0.1:$PORT/mutate-pods" && break
      sleep 0.1
    done
    send "$body" "$WARMUP"
    traced "$body" "$N" "$work/one"
    traced "$body" $((2 * N)) "$work/two"
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    pid=
    python3 - "$s" "$b" "$N" "$work/one" "$work/two" <<'EOF'
import sys
server, body, n, one, two = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
def table(path):
    calls = {}
    for line in open(path):
        f = line.split()
        if len(f) >= 5 and f[0][0].isdigit() and f[-1] != "total":
            calls[f[-1]] = int(f[3])
    return calls
a, b = table(one), table(two)
per = {k: (b.get(k, 0) - a.get(k, 0)) / n for k in set(a) | set(b)}
detail = " ".join(f"{k}={v:.2f}" for k, v in sorted(per.items(), key=lambda kv: -kv[1]) if v >= 0.1)
print(f"{server} {body} {sum(per.values()):.2f}  {detail}")
EOF
  done
done
