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
for tool in strace h2load curl; do
  command -v "$tool" >/dev/null || { echo "$tool is missing" >&2; exit 2; }
done
export CARGO_PROFILE_RELEASE_DEBUG=line-tables-only
cargo build --release --locked --bin kserve-injector --example baseline_server 2>&1 | tail -1 >&2
target=${CARGO_TARGET_DIR:-target}
bin=$target/release/kserve-injector
base=$target/release/examples/baseline_server

work=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT
printf '%s' '{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"0b6f1d84-5d2e-4c2a-9a43-3c1e7f6f0001","allowed":true}}' >"$work/small.json"

body_file() {
  case $1 in
    pass) "$base" review fixtures/f01-non-isvc-pod/input.yaml >"$work/pass.json" ;;
    oci) "$base" review fixtures/m3-modelcar-oci/input.yaml >"$work/oci.json" ;;
    typical) cp benches/inputs/typical.json "$work/typical.json" ;;
    *) echo "unknown body $1 (pass, oci, typical)" >&2; exit 2 ;;
  esac
  echo "$work/$1.json"
}

start() { # server body-file
  case $1 in
    serve)
      RUST_LOG=info "$bin" serve --self-signed --self-signed-ca-file "$work/ca.crt" \
        --addr "127.0.0.1:$PORT" --admin-addr "127.0.0.1:$ADMIN_PORT" --shutdown-delay 0s \
        --cluster-lookups off >"$work/server.log" 2>&1 &
      ;;
    baseline)
      "$bin" mutate "$2" >"$2.response"
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
