#!/usr/bin/env bash
# Load benchmark for `kserve-injector serve`, over loopback only.
#
# Builds release binaries, then for our server and for a baseline (the same
# TLS + HTTP stack answering a fixed body, examples/baseline_server.rs):
#   1. max rate: h2load, CONNS connections x STREAMS concurrent streams;
#   2. half rate: our max req/s / 2, paced with --rps over HALF_CONNS
#      connections (the API server holds few, long-lived HTTP/2 connections),
#      for the latency figure.
# Prints req/s, p50/p99 latency (from h2load's per-request log), peak RSS,
# and our max rate as a ratio of the baseline's.
#
#   bash bench/load.sh                          # defaults below
#   CONNS=16 STREAMS=4 DURATION=10 bash bench/load.sh
#   FIXTURE=fixtures/<case>/input.yaml bash bench/load.sh
#   STRICT=1 bash bench/load.sh                 # exit 1 when a target is missed
set -euo pipefail
cd "$(dirname "$0")/.."

CONNS=${CONNS:-16}
STREAMS=${STREAMS:-4}
HALF_CONNS=${HALF_CONNS:-4}
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
FIXTURE=${FIXTURE:-fixtures/m3-modelcar-oci/input.yaml}
SERVER_LOG=${SERVER_LOG:-info}
PORT=${PORT:-19443}
ADMIN_PORT=${ADMIN_PORT:-18081}
BASE_PORT=${BASE_PORT:-19444}

if ! command -v h2load >/dev/null; then
  echo "== installing h2load (nghttp2-client)"
  apt-get update -qq && apt-get install -y -qq nghttp2-client >/dev/null
fi

echo "== building release binaries"
cargo build --release --locked --bin kserve-injector --example baseline_server 2>&1 | tail -1
bin=target/release/kserve-injector
base=target/release/examples/baseline_server

work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

"$base" review "$FIXTURE" >"$work/review.json"
# `mutate` answers an AdmissionReview with the response the webhook sends,
# so the baseline returns exactly as many bytes as we do.
"$bin" mutate "$work/review.json" >"$work/response.json"

wait_for() { # url
  for _ in $(seq 1 200); do
    if curl -ks -o /dev/null --max-time 1 "$1"; then return 0; fi
    sleep 0.05
  done
  echo "server did not come up: $1" >&2
  return 1
}

peak_rss_kib() { awk '/^VmHWM:/ {print $2}' "/proc/$1/status"; }

# h2load's log: start (µs since epoch), status, time to response (µs).
percentile() { # file pct
  awk '{print $3}' "$1" | sort -n | awk -v p="$2" '{v[NR]=$1} END {
    if (NR == 0) { print "n/a"; exit }
    i = int(NR * p / 100); if (i < 1) i = 1; if (i > NR) i = NR
    printf "%.3f", v[i] / 1000 }'
}

load() { # name url out-prefix extra-args...
  local name=$1 url=$2 out=$3
  shift 3
  h2load -H 'content-type: application/json' -d "$work/review.json" \
    -D "$DURATION" --warm-up-time "$WARMUP" --log-file "$out.tsv" "$@" "$url" >"$out.txt" 2>&1 || {
    echo "h2load failed for $name:" >&2
    cat "$out.txt" >&2
    return 1
  }
  local rps non2xx
  rps=$(awk '/^finished in/ {gsub(",", "", $4); print $4}' "$out.txt")
  non2xx=$(awk '/^status codes:/ {print $5 + $7 + $9}' "$out.txt")
  local failed
  failed=$(awk '/^requests:/ {print $10 + $12 + $14}' "$out.txt")
  echo "$rps $(percentile "$out.tsv" 50) $(percentile "$out.tsv" 99) ${non2xx:-?} ${failed:-?}"
}

run_target() { # name url start-cmd...
  local name=$1 url=$2
  shift 2
  "$@" >"$work/$name.log" 2>&1 &
  local pid=$!
  pids+=("$pid")
  wait_for "$url" >/dev/null
  read -r max p50 p99 bad failed < <(load "$name" "$url" "$work/$name-max" -c "$CONNS" -m "$STREAMS")
  local half=${HALF_RATE:-}
  if [[ -z $half ]]; then half=$(awk -v r="$max" 'BEGIN {printf "%d", r / 2}'); fi
  local per_client=$(( (half + HALF_CONNS - 1) / HALF_CONNS ))
  read -r hrps hp50 hp99 hbad hfailed < <(load "$name" "$url" "$work/$name-half" -c "$HALF_CONNS" -m 1 --rps="$per_client")
  local rss
  rss=$(peak_rss_kib "$pid")
  kill -TERM "$pid"
  wait "$pid" 2>/dev/null || true
  echo "$name $max $p50 $p99 $hrps $hp50 $hp99 $rss $((bad + hbad)) $((failed + hfailed))"
}

echo "== machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), loopback; h2load shares the cores"
echo "== request: $FIXTURE as an AdmissionReview ($(wc -c <"$work/review.json") bytes in, $(wc -c <"$work/response.json") bytes out)"
echo "== load: $CONNS connections x $STREAMS streams, ${DURATION}s after ${WARMUP}s warm-up; half rate paced over $HALF_CONNS connections"
echo "== server log level: $SERVER_LOG (JSON lines to a file)"

ours=$(run_target ours "https://127.0.0.1:$PORT/mutate-pods" \
  env RUST_LOG="$SERVER_LOG" "$bin" serve --self-signed --self-signed-ca-file "$work/ca.crt" \
  --addr "127.0.0.1:$PORT" --admin-addr "127.0.0.1:$ADMIN_PORT" --shutdown-delay 0s)
baseline=$(run_target baseline "https://127.0.0.1:$BASE_PORT/mutate-pods" "$base" serve "127.0.0.1:$BASE_PORT" "$work/response.json")

printf '\n%-9s %12s %9s %9s | %12s %9s %9s | %9s %7s %7s\n' "" "max req/s" "p50 ms" "p99 ms" "half req/s" "p50 ms" "p99 ms" "RSS MiB" "non2xx" "failed"
for row in "$ours" "$baseline"; do
  read -r name max p50 p99 hrps hp50 hp99 rss bad failed <<<"$row"
  printf '%-9s %12s %9s %9s | %12s %9s %9s | %9s %7s %7s\n' "$name" "$max" "$p50" "$p99" "$hrps" "$hp50" "$hp99" \
    "$(awk -v k="$rss" 'BEGIN {printf "%.1f", k / 1024}')" "$bad" "$failed"
done

read -r _ our_max _ _ _ _ our_hp99 our_rss our_bad our_failed <<<"$ours"
read -r _ base_max _ _ _ _ _ _ _ _ <<<"$baseline"
ratio=$(awk -v a="$our_max" -v b="$base_max" 'BEGIN {printf "%.2f", a / b}')
verdict() { if awk "BEGIN {exit !($1)}"; then echo "met"; else echo "MISSED"; fi; }
r1=$(verdict "$ratio >= 0.70")
r2=$(verdict "$our_hp99 < 1.0")
r3=$(verdict "$our_rss < 30 * 1024")
r4=$(verdict "$our_bad + $our_failed == 0")
echo
echo "ratio ours/baseline at max rate: $ratio (target >= 0.70: $r1)"
echo "p99 at half our max rate: ${our_hp99} ms (target < 1 ms: $r2)"
echo "peak RSS: $(awk -v k="$our_rss" 'BEGIN {printf "%.1f", k / 1024}') MiB (target < 30 MiB: $r3)"
echo "errors: $our_bad non-2xx, $our_failed failed (target 0: $r4)"
if [[ ${STRICT:-0} == 1 && "$r1$r2$r3$r4" == *MISSED* ]]; then exit 1; fi
