#!/usr/bin/env bash
# Advisories, licenses, sources and bans of both lockfiles (Cargo.lock and
# fuzz/Cargo.lock) with cargo-deny (policy: deny.toml), against the RustSec
# advisory database that ../shared/advisory-db/ holds as a git bundle (CI
# has no network to fetch it): the bundle is cloned where cargo-deny looks
# for its database, fetching stays off, and the commit it loaded is printed.
#
#   bash .ci/supply-chain.sh          # this checkout's two lockfiles
#   bash .ci/supply-chain.sh DIR      # another checkout's (an older commit,
#                                     # to see the check fail), same policy
set -euo pipefail
cd "$(dirname "$0")/.."
bundle=${ADVISORY_DB_BUNDLE:-../shared/advisory-db/advisory-db.bundle}
[ -f "$bundle" ] || { echo "supply-chain: no advisory database bundle at $bundle (see ../shared/advisory-db/README.md)" >&2; exit 1; }
deny=$(bash .ci/cargo-tool.sh cargo-deny 0.20.2)

dbs=$(mktemp -d)
trap 'rm -rf "$dbs"' EXIT
# cargo-deny opens the database of its default URL,
# https://github.com/rustsec/advisory-db, at db-path/NAME-HASH: the URL's
# last segment and its XxHash64 (seed 0xca80de71), as
# src/advisories/helpers/db.rs (url_to_db_path) computes them.
db=$dbs/advisory-db-3157b0e258782691
git -c init.defaultBranch=main -c advice.detachedHead=false clone -q "$bundle" "$db"
# The bundle holds HEAD but not its parent: HEAD is where the history is
# cut, so git (and cargo-deny through it: `git show HEAD`) reads it whole.
git -C "$db" rev-parse HEAD > "$db/.git/shallow"
echo "supply-chain: RustSec advisory database $(git -C "$db" show -s --format='%h of %cs' HEAD), $(find "$db/crates" -name 'RUSTSEC-*.md' | wc -l) crate advisories, from $bundle"

policy=$PWD/deny.toml
root=${1:-.}
export ADVISORY_DB_PATH=$dbs  # deny.toml's db-path
failed=0
for manifest in "$root/Cargo.toml" "$root/fuzz/Cargo.toml"; do
  [ -f "$manifest" ] || continue
  echo "== cargo deny check: $manifest (${manifest%Cargo.toml}Cargo.lock)"
  # --frozen: the lockfile as it is (--locked), and no network, which also
  # keeps cargo-deny from fetching the database.
  "$deny" --manifest-path "$manifest" --frozen --config "$policy" check \
    --hide-inclusion-graph advisories bans licenses sources || failed=1
done
exit $failed
