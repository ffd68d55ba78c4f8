#!/usr/bin/env bash
# The red-team suite (loadtest/redteam.py): `serve` in a memory cgroup at
# the limit the chart and the kustomize base ship (128 MiB), attacked the
# ways docs/operations.md "Under attack" lists, each attack followed by real
# reviews and /healthz; fails on an OOM kill, a failed review, or memory not
# given back. Needs root and a cgroup memory controller (CI has both); a
# machine without them is skipped with a message.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v python3 >/dev/null || { apt-get update -qq && apt-get install -y -qq python3 >/dev/null; }
echo "== red team under the shipped memory limit (loadtest/redteam.py)"
t0=$SECONDS
# The instructions guard's release profile (loadtest/common.sh), so its
# build is reused rather than made again.
export CARGO_PROFILE_RELEASE_DEBUG=line-tables-only
cargo build --release --locked --bin kserve-injector --example attack_client 2>&1 | tail -1
python3 loadtest/redteam.py --json "${REDTEAM_FIGURES:-/dev/null}"
echo "red team: $((SECONDS - t0)) s"
