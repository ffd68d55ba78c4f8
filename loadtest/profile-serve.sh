#!/usr/bin/env bash
# Where `serve`'s CPU goes under load: `perf record` on the server process
# while h2load sends the 1 KB review (as loadtest/load.sh does), then the
# samples summed by owner (kernel, h2, the review's crates, allocator, ...).
#
#   bash loadtest/profile-serve.sh            # DURATION=6 CONNS=16 STREAMS=4
#
# Needs perf (Debian: linux-perf) and h2load (nghttp2-client); loopback only.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-6}
CONNS=${CONNS:-16}
STREAMS=${STREAMS:-4}
FIXTURE=${FIXTURE:-fixtures/m3-modelcar-oci/input.yaml}
PORT=${PORT:-18443}
ADMIN_PORT=${ADMIN_PORT:-18080}
source loadtest/common.sh
need perf h2load curl python3
build_release
make_work
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT
"$base" review "$FIXTURE" >"$work/review.json"
serve_command
RUST_LOG=info "${serve_cmd[@]}" >"$work/serve.log" 2>&1 &
pid=$!
for _ in $(seq 1 100); do curl -ks -o /dev/null "http://127.0.0.1:$ADMIN_PORT/healthz" && break; sleep 0.05; done
url="https://127.0.0.1:$PORT/mutate-pods"
load() { h2load -H 'content-type: application/json' -d "$work/review.json" \
  -c "$CONNS" -m "$STREAMS" -D "$1" "$url" 2>&1 | grep -E 'finished in|succeeded'; }
load 2 >/dev/null
perf record -o "$work/perf.data" -F 4000 -p "$pid" -- sleep "$DURATION" >/dev/null 2>&1 &
load "$DURATION"
wait %2 2>/dev/null || sleep 1
perf report -i "$work/perf.data" --no-children --sort symbol 2>/dev/null | python3 -c '
import collections, re, sys
owners = ["kserve_injector", "serde_json", "serde_core", "h2::", "hyper", "axum", "tower",
          "http::", "tokio", "rustls", "ring", "mi_", "mimalloc", "__mem", "tracing",
          "prometheus", "base64", "jsonptr", "bytes::"]
share = collections.Counter()
for line in sys.stdin:
    m = re.match(r"\s*([\d.]+)%\s+\[(.)\]\s+(.*)", line)
    if not m:
        continue
    owner = "kernel" if m.group(2) == "k" else next((o for o in owners if o in m.group(3)), "other")
    share[owner] += float(m.group(1))
for owner, pct in share.most_common():
    print(f"{pct:6.2f}%  {owner}")
'
