#!/usr/bin/env bash
# Load benchmark for `kserve-injector serve`, over loopback only, against a
# baseline: the same TLS + HTTP/1/2 stack (rustls, hyper-util) answering a
# fixed body with no JSON work (examples/baseline_server.rs).
#
# ROUNDS alternating rounds (baseline, then ours), so both see the same
# machine load; the figures are medians over the rounds:
#   - max rate: h2load, CONNS connections x STREAMS streams, DURATION s
#     (after an unmeasured WARMUP s run);
#   - CPU per request: the server process's utime+stime (/proc/<pid>/stat)
#     over the measured run, divided by the requests it answered;
#   - admin p99 under load (ours): /healthz fetched every PROBE_MS by a fresh
#     curl connection, as kubelet would, during a second max-rate run of ours
#     (not the measured one: starting ~20 curl processes a second costs CPU
#     on the shared cores, which the baseline's run would not pay);
#   - half rate (ours): our max rate / 2 paced over HALF_CONNS connections,
#     p50/p99 from h2load's per-request log;
#   - peak RSS (ours) from VmHWM.
# Fixed conditions: `serve` with info-level JSON logs written to a file.
#
#   bash loadtest/load.sh                          # defaults below
#   ROUNDS=5 DURATION=10 bash loadtest/load.sh
#   FIXTURE=fixtures/<case>/input.yaml bash loadtest/load.sh
#   STRICT=1 bash loadtest/load.sh                 # exit 1 when a target is missed
#
# Needs h2load (Debian: apt-get install -y nghttp2-client; installed here
# when missing and apt-get is available) and curl.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-3}
CONNS=${CONNS:-16}
STREAMS=${STREAMS:-4}
HALF_CONNS=${HALF_CONNS:-4}
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
PROBE_MS=${PROBE_MS:-50}
FIXTURE=${FIXTURE:-fixtures/m3-modelcar-oci/input.yaml}
SERVER_LOG=${SERVER_LOG:-info}
PORT=${PORT:-19443}
ADMIN_PORT=${ADMIN_PORT:-18081}
BASE_PORT=${BASE_PORT:-19444}

if ! command -v h2load >/dev/null; then
  if command -v apt-get >/dev/null; then
    echo "== installing h2load (nghttp2-client)"
    { apt-get install -y -qq nghttp2-client || { apt-get update -qq && apt-get install -y -qq nghttp2-client; }; } >/dev/null
  else
    echo "h2load is missing: install nghttp2-client (Debian/Ubuntu) or nghttp2 (brew, dnf)" >&2
    exit 2
  fi
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
tick=$(getconf CLK_TCK)

wait_for() { # url
  for _ in $(seq 1 200); do
    if curl -ks -o /dev/null --max-time 1 "$1"; then return 0; fi
    sleep 0.05
  done
  echo "server did not come up: $1" >&2
  return 1
}

cpu_ticks() { sed 's/.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'; }
peak_rss_kib() { awk '/^VmHWM:/ {print $2}' "/proc/$1/status"; }

percentile() { # file pct -> value of the pct-th percentile of column 1
  sort -n "$1" | awk -v p="$2" '{v[NR]=$1} END {
    if (NR == 0) { print "nan"; exit }
    i = int((NR * p + 99) / 100); if (i < 1) i = 1; if (i > NR) i = NR
    printf "%.3f", v[i] }'
}

median() { # values...
  printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {
    if (NR % 2) printf "%.3f", v[(NR + 1) / 2]; else printf "%.3f", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

h2() { # out-prefix url extra-args... -> "req/s done non2xx+failed"
  local out=$1 url=$2
  shift 2
  h2load -H 'content-type: application/json' -d "$work/review.json" "$@" "$url" >"$out.txt" 2>&1 || {
    echo "h2load failed:" >&2
    cat "$out.txt" >&2
    return 1
  }
  awk '/^finished in/ {gsub(",", "", $4); rps = $4}
       /^requests:/ {done = $8; bad = $10 + $12 + $14}
       /^status codes:/ {bad += $5 + $7 + $9}
       END {print rps, done, bad}' "$out.txt"
}

# Max rate with CPU per request; prints "req/s cpu_us_per_req errors".
max_rate() { # pid url out-prefix
  local pid=$1 url=$2 out=$3
  h2 "$out-warm" "$url" -c "$CONNS" -m "$STREAMS" -D "$WARMUP" >/dev/null
  local before after rps done bad
  before=$(cpu_ticks "$pid")
  read -r rps done bad < <(h2 "$out" "$url" -c "$CONNS" -m "$STREAMS" -D "$DURATION")
  after=$(cpu_ticks "$pid")
  echo "$rps $(awk -v t=$((after - before)) -v hz="$tick" -v n="$done" 'BEGIN {printf "%.1f", t * 1e6 / hz / n}') $bad"
}

probe_admin() { # url out-file stop-file
  while [[ -e $3 ]]; do
    curl -s -o /dev/null -w '%{time_total}\n' --max-time 5 "$1" >>"$2" || echo 5 >>"$2"
    sleep "$(awk -v ms="$PROBE_MS" 'BEGIN {print ms / 1000}')"
  done
}

round() { # n -> "base_rps base_cpu ours_rps ours_cpu admin_p99_ms half_rps half_p50 half_p99 rss_kib errors"
  local n=$1 url_base="https://127.0.0.1:$BASE_PORT/mutate-pods" url="https://127.0.0.1:$PORT/mutate-pods"
  "$base" serve "127.0.0.1:$BASE_PORT" "$work/response.json" >"$work/base-$n.log" 2>&1 &
  local bpid=$!
  pids+=("$bpid")
  wait_for "$url_base" >/dev/null
  read -r brps bcpu _ < <(max_rate "$bpid" "$url_base" "$work/base-$n")
  kill -TERM "$bpid"
  wait "$bpid" 2>/dev/null || true

  env RUST_LOG="$SERVER_LOG" "$bin" serve --self-signed --self-signed-ca-file "$work/ca.crt" \
    --addr "127.0.0.1:$PORT" --admin-addr "127.0.0.1:$ADMIN_PORT" --shutdown-delay 0s \
    >"$work/ours-$n.log" 2>&1 &
  local pid=$!
  pids+=("$pid")
  wait_for "$url" >/dev/null
  read -r rps cpu bad < <(max_rate "$pid" "$url" "$work/ours-$n")
  touch "$work/probing"
  : >"$work/admin-$n.txt"
  probe_admin "http://127.0.0.1:$ADMIN_PORT/healthz" "$work/admin-$n.txt" "$work/probing" &
  local probe=$!
  local abad
  read -r _ _ abad < <(h2 "$work/admin-load-$n" "$url" -c "$CONNS" -m "$STREAMS" -D "$DURATION")
  rm -f "$work/probing"
  wait "$probe" || true
  local admin_p99
  admin_p99=$(awk '{print $1 * 1000}' "$work/admin-$n.txt" >"$work/admin-$n.ms"; percentile "$work/admin-$n.ms" 99)
  local half=${HALF_RATE:-}
  if [[ -z $half ]]; then half=$(awk -v r="$rps" 'BEGIN {printf "%d", r / 2}'); fi
  local per_client=$(((half + HALF_CONNS - 1) / HALF_CONNS))
  read -r hrps _ hbad < <(h2 "$work/half-$n" "$url" -c "$HALF_CONNS" -m 1 --rps="$per_client" \
    -D "$DURATION" --warm-up-time "$WARMUP" --log-file "$work/half-$n.tsv")
  awk '{print $3 / 1000}' "$work/half-$n.tsv" >"$work/half-$n.ms"
  local rss
  rss=$(peak_rss_kib "$pid")
  kill -TERM "$pid"
  wait "$pid" 2>/dev/null || true
  echo "$brps $bcpu $rps $cpu $admin_p99 $hrps $(percentile "$work/half-$n.ms" 50) $(percentile "$work/half-$n.ms" 99) $rss $((bad + abad + hbad))"
}

echo "== machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), loopback; h2load shares the cores; load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== request: $FIXTURE as an AdmissionReview ($(wc -c <"$work/review.json") bytes in, $(wc -c <"$work/response.json") bytes out)"
echo "== $ROUNDS alternating rounds: $CONNS connections x $STREAMS streams, ${DURATION}s after a ${WARMUP}s warm-up; half rate paced over $HALF_CONNS connections; server log: $SERVER_LOG JSON to a file"
printf '\n%5s | %10s %9s | %10s %9s %6s %6s | %10s %8s | %9s %8s %8s %8s %6s\n' round "base req/s" "µs/req" "ours req/s" "µs/req" ratio cpu× "admin p99" "ms" "half req/s" "p50 ms" "p99 ms" "RSS MiB" errors
cols=()
for n in $(seq 1 "$ROUNDS"); do
  row=$(round "$n")
  read -r brps bcpu rps cpu ap99 hrps hp50 hp99 rss bad <<<"$row"
  ratio=$(awk -v a="$rps" -v b="$brps" 'BEGIN {printf "%.2f", a / b}')
  cpux=$(awk -v a="$cpu" -v b="$bcpu" 'BEGIN {printf "%.2f", a / b}')
  rssm=$(awk -v k="$rss" 'BEGIN {printf "%.1f", k / 1024}')
  printf '%5s | %10s %9s | %10s %9s %6s %6s | %10s %8s | %9s %8s %8s %8s %6s\n' "$n" "$brps" "$bcpu" "$rps" "$cpu" "$ratio" "$cpux" "$ap99" "" "$hrps" "$hp50" "$hp99" "$rssm" "$bad"
  cols+=("$brps $bcpu $rps $cpu $ratio $cpux $ap99 $hrps $hp50 $hp99 $rssm $bad")
done

col() { local i=$1; for c in "${cols[@]}"; do echo "$c" | awk -v i="$i" '{print $i}'; done; }
m() { median $(col "$1"); }
ratio=$(m 5); cpux=$(m 6); ap99=$(m 7); hp99=$(m 10); rssm=$(m 11)
errors=$(col 12 | awk '{s += $1} END {print s}')
verdict() { if awk "BEGIN {exit !($1)}"; then echo "met"; else echo "MISSED"; fi; }
r1=$(verdict "$ratio >= 0.65")
r2=$(verdict "$cpux <= 2.0")
r3=$(verdict "$hp99 < 1.0")
r4=$(verdict "$rssm < 30")
r5=$(verdict "$ap99 < 50")
r6=$(verdict "$errors == 0")
echo
echo "medians over $ROUNDS rounds: baseline $(m 1) req/s at $(m 2) µs CPU/req; ours $(m 3) req/s at $(m 4) µs CPU/req"
echo "throughput ours/baseline: $ratio (target >= 0.65: $r1)"
echo "CPU per request ours/baseline: $cpux (target <= 2.0: $r2)"
echo "p99 at half our max rate: $hp99 ms (p50 $(m 9) ms; target < 1 ms: $r3)"
echo "peak RSS: $rssm MiB (target < 30 MiB: $r4)"
echo "admin /healthz p99 under max load: $ap99 ms (aim < 50 ms: $r5)"
echo "errors (non-2xx + failed, all rounds): $errors (target 0: $r6)"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
if [[ ${STRICT:-0} == 1 && "$r1$r2$r3$r4$r5$r6" == *MISSED* ]]; then exit 1; fi
