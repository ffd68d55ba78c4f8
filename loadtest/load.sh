#!/usr/bin/env bash
# Load benchmark for `kserve-injector serve`, over loopback only, against two
# yardsticks on the same TLS + HTTP/1/2 stack (rustls, hyper-util;
# examples/baseline_server.rs), which read the body in full and do no JSON
# work: `baseline` answers the very bytes `serve` answers, `small` a fixed
# 100-byte answer.
#
# For each request body (BODIES: pass = fixtures/f01-non-isvc-pod, a pod we
# leave alone; oci = fixtures/m3-modelcar-oci, the 1.4 KB modelcar review;
# typical = benches/inputs/typical.json, the 23 KB pod), ROUNDS alternating
# rounds (baseline, small, then ours), so all three see the same machine
# load; the figures are medians over the rounds:
#   - max rate: h2load, CONNS connections x STREAMS streams, DURATION s
#     (after an unmeasured WARMUP s run);
#   - CPU per request: the server process's utime+stime (/proc/<pid>/stat)
#     over the measured run, divided by the requests it answered;
#   - admin p99 under load (ours): /healthz fetched every PROBE_MS by a fresh
#     curl connection, as kubelet would, during a second max-rate run of ours
#     (not the measured one: starting ~20 curl processes a second costs CPU
#     on the shared cores, which the yardsticks' runs would not pay);
#   - half rate (ours): our max rate / 2 paced over HALF_CONNS connections,
#     p50/p99 from h2load's per-request log;
#   - peak RSS (ours) from VmHWM.
# Fixed conditions: `serve` with info-level JSON logs written to a file.
# The targets checked are issue 29's, per body.
#
#   bash loadtest/load.sh                          # defaults below
#   ROUNDS=5 DURATION=10 bash loadtest/load.sh
#   BODIES=oci bash loadtest/load.sh
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
BODIES=${BODIES:-pass oci typical}
SERVER_LOG=${SERVER_LOG:-info}
PORT=${PORT:-19443}
ADMIN_PORT=${ADMIN_PORT:-18081}
BASE_PORT=${BASE_PORT:-19444}
SMALL_PORT=${SMALL_PORT:-19445}

if ! command -v h2load >/dev/null; then
  if command -v apt-get >/dev/null; then
    echo "== installing h2load (nghttp2-client)"
    { apt-get install -y -qq nghttp2-client || { apt-get update -qq && apt-get install -y -qq nghttp2-client; }; } >/dev/null
  else
    echo "h2load is missing: install nghttp2-client (Debian/Ubuntu) or nghttp2 (brew, dnf)" >&2
    exit 2
  fi
fi

source loadtest/common.sh
need curl
echo "== building release binaries"
build_release
make_work
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

review_of() { # body name -> AdmissionReview file; its `serve` answer beside it (.response)
  local file
  file=$(body_file "$1")
  answer_of "$file"
  echo "$file"
}
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
  h2load -H 'content-type: application/json' -d "$review" "$@" "$url" >"$out.txt" 2>&1 || {
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

yardstick() { # port response-file out-prefix -> "req/s cpu_us errors"
  local url="https://127.0.0.1:$1/mutate-pods"
  "$base" serve "127.0.0.1:$1" "$2" >"$3.log" 2>&1 &
  local ypid=$!
  pids+=("$ypid")
  wait_for "$url" >/dev/null
  max_rate "$ypid" "$url" "$3"
  kill -TERM "$ypid"
  wait "$ypid" 2>/dev/null || true
}

round() { # body n -> "base_rps base_cpu small_rps small_cpu ours_rps ours_cpu admin_p99_ms half_rps half_p50 half_p99 rss_kib errors"
  local b=$1 n=$2 url="https://127.0.0.1:$PORT/mutate-pods"
  local brps bcpu bbad srps scpu sbad
  read -r brps bcpu bbad < <(yardstick "$BASE_PORT" "$work/$b.json.response" "$work/base-$b-$n")
  read -r srps scpu sbad < <(yardstick "$SMALL_PORT" "$work/small.json" "$work/small-$b-$n")

  serve_command
  env RUST_LOG="$SERVER_LOG" "${serve_cmd[@]}" >"$work/ours-$b-$n.log" 2>&1 &
  local pid=$!
  pids+=("$pid")
  wait_for "$url" >/dev/null
  read -r rps cpu bad < <(max_rate "$pid" "$url" "$work/ours-$b-$n")
  touch "$work/probing"
  : >"$work/admin-$b-$n.txt"
  probe_admin "http://127.0.0.1:$ADMIN_PORT/healthz" "$work/admin-$b-$n.txt" "$work/probing" &
  local probe=$!
  local abad
  read -r _ _ abad < <(h2 "$work/admin-load-$b-$n" "$url" -c "$CONNS" -m "$STREAMS" -D "$DURATION")
  rm -f "$work/probing"
  wait "$probe" || true
  local admin_p99
  admin_p99=$(awk '{print $1 * 1000}' "$work/admin-$b-$n.txt" >"$work/admin-$b-$n.ms"; percentile "$work/admin-$b-$n.ms" 99)
  local half=${HALF_RATE:-}
  if [[ -z $half ]]; then half=$(awk -v r="$rps" 'BEGIN {printf "%d", r / 2}'); fi
  local per_client=$(((half + HALF_CONNS - 1) / HALF_CONNS))
  read -r hrps _ hbad < <(h2 "$work/half-$b-$n" "$url" -c "$HALF_CONNS" -m 1 --rps="$per_client" \
    -D "$DURATION" --warm-up-time "$WARMUP" --log-file "$work/half-$b-$n.tsv")
  awk '{print $3 / 1000}' "$work/half-$b-$n.tsv" >"$work/half-$b-$n.ms"
  local rss
  rss=$(peak_rss_kib "$pid")
  kill -TERM "$pid"
  wait "$pid" 2>/dev/null || true
  echo "$brps $bcpu $srps $scpu $rps $cpu $admin_p99 $hrps $(percentile "$work/half-$b-$n.ms" 50) $(percentile "$work/half-$b-$n.ms" 99) $rss $((bbad + sbad + bad + abad + hbad))"
}

# issue 29's targets per body: min req/s ratio and max CPU ratio, against each yardstick.
targets() { # body -> "min_rps_ratio max_cpu_ratio" (- where none)
  case $1 in
    pass) echo "0.90 1.25" ;;
    oci) echo "0.85 1.5" ;;
    *) echo "- 2.0" ;;
  esac
}
verdict() { if awk "BEGIN {exit !($1)}"; then echo "met"; else echo "MISSED"; fi; }

echo "== machine: $(nproc) cores, $(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), loopback; h2load shares the cores; load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== $ROUNDS alternating rounds per body: $CONNS connections x $STREAMS streams, ${DURATION}s after a ${WARMUP}s warm-up; half rate paced over $HALF_CONNS connections; server log: $SERVER_LOG JSON to a file"
missed=
summary=()
for b in $BODIES; do
  review=$(review_of "$b")
  echo
  echo "== body $b: $(wc -c <"$review") bytes in, $(wc -c <"$work/$b.json.response") bytes out (small: $(wc -c <"$work/small.json"))"
  printf '%5s | %10s %7s | %10s %7s | %10s %7s %6s %6s %6s %6s | %9s | %10s %7s %7s %7s %6s\n' round "base req/s" "µs/req" "small r/s" "µs/req" "ours req/s" "µs/req" "r/base" "c/base" "r/smal" "c/smal" "admin p99" "half req/s" "p50 ms" "p99 ms" "RSS MiB" errors
  cols=()
  for n in $(seq 1 "$ROUNDS"); do
    row=$(round "$b" "$n")
    read -r brps bcpu srps scpu rps cpu ap99 hrps hp50 hp99 rss bad <<<"$row"
    r=$(awk -v a="$rps" -v b="$brps" 'BEGIN {printf "%.2f", a / b}')
    c=$(awk -v a="$cpu" -v b="$bcpu" 'BEGIN {printf "%.2f", a / b}')
    rs=$(awk -v a="$rps" -v b="$srps" 'BEGIN {printf "%.2f", a / b}')
    cs=$(awk -v a="$cpu" -v b="$scpu" 'BEGIN {printf "%.2f", a / b}')
    rssm=$(awk -v k="$rss" 'BEGIN {printf "%.1f", k / 1024}')
    printf '%5s | %10s %7s | %10s %7s | %10s %7s %6s %6s %6s %6s | %9s | %10s %7s %7s %7s %6s\n' "$n" "$brps" "$bcpu" "$srps" "$scpu" "$rps" "$cpu" "$r" "$c" "$rs" "$cs" "$ap99" "$hrps" "$hp50" "$hp99" "$rssm" "$bad"
    cols+=("$brps $bcpu $srps $scpu $rps $cpu $r $c $rs $cs $ap99 $hrps $hp50 $hp99 $rssm $bad")
  done
  col() { local i=$1; for c in "${cols[@]}"; do echo "$c" | awk -v i="$i" '{print $i}'; done; }
  m() { median $(col "$1"); }
  read -r min_r max_c < <(targets "$b")
  r=$(m 7); c=$(m 8); rs=$(m 9); cs=$(m 10); ap99=$(m 11); hp99=$(m 14); rssm=$(m 15)
  errors=$(col 16 | awk '{s += $1} END {print s}')
  checks=("CPU/req vs baseline $c <= $max_c:$(verdict "$c <= $max_c")" "CPU/req vs small $cs <= $max_c:$(verdict "$cs <= $max_c")")
  if [[ $min_r != - ]]; then
    checks+=("req/s vs baseline $r >= $min_r:$(verdict "$r >= $min_r")" "req/s vs small $rs >= $min_r:$(verdict "$rs >= $min_r")")
  fi
  checks+=("p99 at half rate $hp99 ms < 1:$(verdict "$hp99 < 1.0")" "RSS $rssm MiB < 30:$(verdict "$rssm < 30")" "admin p99 $ap99 ms < 50:$(verdict "$ap99 < 50")" "errors $errors == 0:$(verdict "$errors == 0")")
  echo "medians ($b): baseline $(m 1) req/s at $(m 2) µs CPU/req; small $(m 3) req/s at $(m 4) µs; ours $(m 5) req/s at $(m 6) µs (p50 at half rate $(m 13) ms)"
  for check in "${checks[@]}"; do
    echo "  ${check%:*}: ${check##*:}"
    [[ ${check##*:} == MISSED ]] && missed=1
  done
  summary+=("$b: ours/baseline req/s $r, CPU $c; ours/small req/s $rs, CPU $cs; p99 $hp99 ms; RSS $rssm MiB; errors $errors")
done
echo
echo "== summary (medians over $ROUNDS rounds)"
printf '%s\n' "${summary[@]}"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
if [[ ${STRICT:-0} == 1 && -n $missed ]]; then exit 1; fi
