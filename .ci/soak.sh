#!/usr/bin/env bash
# 60-second soak of `kserve-injector serve` (loadtest/soak.sh): certificate
# rotation and config rewrites under load, then SIGTERM with the load running.
# Fails on any failed request or RSS growth over 20% from the warm-up figure.
set -euo pipefail
cd "$(dirname "$0")/.."
missing=()
command -v python3 >/dev/null || missing+=(python3)
command -v openssl >/dev/null || missing+=(openssl)
command -v curl >/dev/null || missing+=(curl)
if [ "${#missing[@]}" -gt 0 ]; then
  apt-get update -qq && apt-get install -y -qq "${missing[@]}" >/dev/null
fi
echo "== soak (loadtest/soak.sh, ${DURATION:-60} s)"
cargo build --locked --bin kserve-injector 2>&1 | tail -1
DURATION=${DURATION:-60} BIN="${CARGO_TARGET_DIR:-target}/debug/kserve-injector" MAX_RSS_GROWTH_PCT=20 bash loadtest/soak.sh
