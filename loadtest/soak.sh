#!/usr/bin/env bash
# Soak for `kserve-injector serve`, over loopback only, bounded in time.
#
# While loadtest/soak_client.py sends paced AdmissionReviews over connections it
# keeps replacing (each new one verifies the server against the CA):
#   - the serving certificate is rotated every ROTATE_EVERY seconds the way
#     kubelet updates a mounted Secret: a new timestamped directory, then an
#     atomic rename of the `..data` symlink (tls.crt/tls.key point through it);
#   - the ConfigMap directory is rewritten every CONFIG_EVERY seconds the same
#     way, alternating valid versions with invalid ones (which must be refused
#     while the previous config keeps serving);
#   - at the end the server gets SIGTERM with the load still running.
# Prints requests sent / failed, p99, reload counts (from the admin /metrics)
# and RSS after WARMUP seconds and at the end. Exits 1 on any failed request,
# RSS growth over MAX_RSS_GROWTH_PCT, no certificate or config reload seen,
# or a server that does not exit 0 after SIGTERM.
#
#   bash loadtest/soak.sh                 # 60 s
#   DURATION=600 bash loadtest/soak.sh    # the long run
#   BIN=target/release/kserve-injector RATE=200 bash loadtest/soak.sh
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-60}
WARMUP=${WARMUP:-10}
RATE=${RATE:-100}
WORKERS=${WORKERS:-8}
RECONNECT=${RECONNECT:-25}
ROTATE_EVERY=${ROTATE_EVERY:-3}
CONFIG_EVERY=${CONFIG_EVERY:-4}
SHUTDOWN_DELAY=${SHUTDOWN_DELAY:-2}
MAX_RSS_GROWTH_PCT=${MAX_RSS_GROWTH_PCT:-20}
PORT=${PORT:-19543}
ADMIN_PORT=${ADMIN_PORT:-18181}
BODY=${BODY:-benches/inputs/minimal-oci.json}
BIN=${BIN:-target/debug/kserve-injector}

if [ "$DURATION" -le "$WARMUP" ]; then
  echo "DURATION must exceed WARMUP ($WARMUP s)" >&2
  exit 2
fi
if [ ! -x "$BIN" ]; then
  echo "== building $BIN"
  case "$BIN" in
    target/release/*) cargo build --release --locked --bin kserve-injector ;;
    *) cargo build --locked --bin kserve-injector ;;
  esac
fi

work=$(mktemp -d)
server_pid=
client_pid=
cleanup() {
  for pid in $client_pid $server_pid; do kill "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# --- certificates: one CA, a fresh serving key pair per rotation ----------
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
  -subj "/CN=soak-ca" -keyout "$work/ca.key" -out "$work/ca.crt" 2>/dev/null
cat >"$work/leaf.ext" <<'EOF'
subjectAltName = DNS:localhost, IP:127.0.0.1, IP:::1
extendedKeyUsage = serverAuth
basicConstraints = CA:FALSE
EOF

# new_version DIR NAME: an empty kubelet-style timestamped directory.
new_version() {
  local v="$1/..$(date -u +%Y_%m_%d_%H_%M_%S).$2"
  mkdir "$v"
  echo "$v"
}
# publish DIR VERSION KEYS...: swap ..data to VERSION atomically, drop the old one.
publish() {
  local dir=$1 version=$2
  shift 2
  local old
  old=$(readlink "$dir/..data" 2>/dev/null || true)
  ln -sfn "$(basename "$version")" "$dir/..data_tmp"
  mv -T "$dir/..data_tmp" "$dir/..data"
  for key in "$@"; do
    [ -L "$dir/$key" ] || ln -s "..data/$key" "$dir/$key"
  done
  if [ -n "$old" ] && [ "$old" != "$(basename "$version")" ]; then rm -rf "${dir:?}/$old"; fi
}

certs="$work/certs"
mkdir "$certs"
rotation=0
rotate_cert() {
  rotation=$((rotation + 1))
  local v
  v=$(new_version "$certs" "c$rotation")
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=localhost" \
    -keyout "$v/tls.key" -out "$work/leaf.csr" 2>/dev/null
  openssl x509 -req -in "$work/leaf.csr" -CA "$work/ca.crt" -CAkey "$work/ca.key" \
    -CAcreateserial -days 1 -extfile "$work/leaf.ext" -out "$v/tls.crt" 2>/dev/null
  publish "$certs" "$v" tls.crt tls.key
}

# --- config: valid versions (two, so each is a change) and invalid ones ----
# The default ConfigMap's data, one file per key (its values are `key: |-`
# block scalars), as kubelet projects a mounted ConfigMap.
config_src="$work/config-src"
mkdir "$config_src"
"$BIN" default-config | python3 -c '
import sys, os
out, key, lines = sys.argv[1], None, []
def flush():
    if key:
        open(os.path.join(out, key), "w").write("\n".join(lines))
in_data = False
for line in sys.stdin.read().splitlines():
    if line == "data:":
        in_data = True
    elif in_data and line.startswith("  ") and not line.startswith("    "):
        flush()
        key, lines = line.strip().split(":")[0], []
    elif in_data and key and (line.startswith("    ") or not line.strip()):
        lines.append(line[4:])
    elif in_data and line and not line.startswith(" "):
        in_data = False
flush()
' "$config_src"
config_keys=$(ls "$config_src")
grep -q '"memoryRequest": "100Mi"' "$config_src/storageInitializer"
config="$work/config"
mkdir "$config"
writes=0
write_config() {
  writes=$((writes + 1))
  local v key
  v=$(new_version "$config" "k$writes")
  for key in $config_keys; do cp "$config_src/$key" "$v/$key"; done
  case $((writes % 4)) in
    1) ;;                                               # KServe's defaults
    3) sed -i 's/"memoryRequest": "100Mi"/"memoryRequest": "200Mi"/' "$v/storageInitializer" ;;
    *) printf '{"image": "kserve/storage-initializer:latest", "memoryRequest": ' >"$v/storageInitializer" ;;
  esac
  # shellcheck disable=SC2086
  publish "$config" "$v" $config_keys
}

rotate_cert
write_config

# --- server ----------------------------------------------------------------
"$BIN" serve --addr "127.0.0.1:$PORT" --admin-addr "127.0.0.1:$ADMIN_PORT" \
  --cert-dir "$certs" --config "$config" \
  --cert-poll-interval 1s --config-poll-interval 1s \
  --shutdown-delay "${SHUTDOWN_DELAY}s" --drain-timeout 10s \
  --log-format json --log warn >"$work/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 1 200); do
  if curl -fs -o /dev/null --max-time 1 "http://127.0.0.1:$ADMIN_PORT/readyz"; then break; fi
  if ! kill -0 "$server_pid" 2>/dev/null; then
    echo "server exited at startup:" >&2
    cat "$work/server.log" >&2
    exit 1
  fi
  sleep 0.05
done

rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$server_pid/status"; }
metric() { # name: sum of the samples of every series of that name
  awk -v n="$1" '$1 == n || index($1, n "{") == 1 { s += $NF } END { printf "%d", s }' "$work/metrics.txt"
}

echo "== soak ($BIN): ${DURATION}s at ${RATE} req/s (${WORKERS} workers, new connection every ${RECONNECT} requests), cert rotation every ${ROTATE_EVERY}s, config rewrite every ${CONFIG_EVERY}s; load: $(cut -d' ' -f1-3 /proc/loadavg)"
marker="$work/stopping"
python3 loadtest/soak_client.py --port "$PORT" --ca "$work/ca.crt" --body "$BODY" \
  --duration "$((DURATION + 120))" --rate "$RATE" --workers "$WORKERS" \
  --reconnect "$RECONNECT" --stop-marker "$marker" --done-marker "$work/done" >"$work/client.json" &
client_pid=$!

started=$(date +%s)
next_cert=$((started + ROTATE_EVERY))
next_config=$((started + CONFIG_EVERY))
rss_warm=
while :; do
  now=$(date +%s)
  elapsed=$((now - started))
  [ "$elapsed" -ge "$DURATION" ] && break
  if [ -z "$rss_warm" ] && [ "$elapsed" -ge "$WARMUP" ]; then rss_warm=$(rss_kib); fi
  if [ "$now" -ge "$next_cert" ]; then rotate_cert; next_cert=$((now + ROTATE_EVERY)); fi
  if [ "$now" -ge "$next_config" ]; then write_config; next_config=$((now + CONFIG_EVERY)); fi
  if ! kill -0 "$server_pid" 2>/dev/null; then
    echo "server died during the soak:" >&2
    tail -20 "$work/server.log" >&2
    exit 1
  fi
  sleep 0.2
done
rss_end=$(rss_kib)
curl -fs --max-time 5 "http://127.0.0.1:$ADMIN_PORT/metrics" >"$work/metrics.txt"

# SIGTERM with the load still running; the load goes on until the server
# has exited, and a second longer (connections are refused by then).
touch "$marker"
term_at=$(date +%s.%N)
kill -TERM "$server_pid"
server_status=0
wait "$server_pid" || server_status=$?
server_pid=
exit_after=$(awk -v a="$term_at" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
sleep 1
touch "$work/done"
wait "$client_pid" || true
client_pid=

read -r sent ok failed refused retried p50 p99 maxms certs_seen < <(python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
print(r["sent"], r["ok"], r["failed"], r["refused_after_close"], r["retried_closed_idle"],
      r["p50_ms"], r["p99_ms"], r["max_ms"], r["serving_certs_seen"])
' "$work/client.json")

cert_reloads=$(metric kserve_injector_certificate_reloads_total)
cert_errors=$(metric kserve_injector_certificate_reload_errors_total)
config_reloads=$(metric kserve_injector_config_reloads_total)
config_errors=$(metric kserve_injector_config_reload_errors_total)
growth=$(awk -v a="$rss_warm" -v b="$rss_end" 'BEGIN { printf "%.1f", (b - a) * 100 / a }')

echo "requests sent:            $sent"
echo "answered correctly:       $ok"
echo "failed:                   $failed"
echo "refused after close:      $refused (connections refused once the listener closed; not failures)"
echo "retried (closed idle):    $retried"
echo "latency p50 / p99 / max:  $p50 / $p99 / $maxms ms"
echo "serving certs seen:       $certs_seen (client side; $rotation written)"
echo "certificate reloads:      $cert_reloads (errors $cert_errors)"
echo "config reloads:           $config_reloads (errors $config_errors; $writes versions written, half invalid)"
echo "RSS after ${WARMUP}s warm-up:  ${rss_warm} KiB"
echo "RSS at the end:           ${rss_end} KiB (${growth}%)"
echo "server exit status:       $server_status, ${exit_after}s after SIGTERM (shutdown delay ${SHUTDOWN_DELAY}s)"
echo "achieved rate:            $(awk -v n="$sent" -v d="$DURATION" -v e="$exit_after" 'BEGIN { printf "%.0f", n / (d + e + 1) }') req/s (target $RATE)"
echo "machine load (1/5/15 min): $(cut -d' ' -f1-3 /proc/loadavg)"

problems=()
[ "$failed" -eq 0 ] || problems+=("$failed failed requests: $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["failures"])' "$work/client.json")")
awk -v g="$growth" -v m="$MAX_RSS_GROWTH_PCT" 'BEGIN { exit !(g > m) }' && problems+=("RSS grew ${growth}% (limit ${MAX_RSS_GROWTH_PCT}%)")
[ "$cert_reloads" -ge 1 ] || problems+=("no certificate reload observed")
[ "$config_reloads" -ge 1 ] || problems+=("no config reload observed")
[ "$config_errors" -ge 1 ] || problems+=("no invalid config refused")
[ "$certs_seen" -ge 2 ] || problems+=("the client never saw a rotated certificate")
[ "$server_status" -eq 0 ] || problems+=("server exited $server_status after SIGTERM")
if [ "${#problems[@]}" -gt 0 ]; then
  printf 'soak: FAIL: %s\n' "${problems[@]}" >&2
  echo "--- server log (last 20 lines)" >&2
  tail -20 "$work/server.log" >&2
  exit 1
fi
echo "soak: OK"
