#!/usr/bin/env bash
# The core's public API, checked: lists what kserve-injector-core makes
# public (cargo-public-api over rustdoc's JSON) and fails when the listing
# differs from the committed core/public-api.txt. A change to the core's
# surface is then a change to that file too, seen in review.
#
#   bash .ci/public-api.sh            # check
#   UPDATE=1 bash .ci/public-api.sh   # rewrite core/public-api.txt
#
# rustdoc writes JSON only when unstable options are allowed: the
# project's own stable toolchain is run with RUSTC_BOOTSTRAP=1 (no nightly
# needed), in a target directory of its own so the flag does not rebuild
# the main one. cargo-public-api is pinned to the rustdoc JSON format it
# reads; it is installed once (cargo install, kept in ~/.cargo/bin).
#
# Before the listing, .ci/public_unused.py fails on a public item that is
# reachable by two paths, on a public module with no public item, and on
# an item named nowhere outside the core (src/, tests/, benches/,
# fuzz/fuzz_targets/, examples/, oracle/): the listing says what the
# surface is, that check says each item has a user. The root crate's
# library is held to the second rule too: what the binary, tests/,
# benches/, fuzz/ and examples/ call is public, nothing else.
set -euo pipefail
cd "$(dirname "$0")/.."
version=0.52.0
listing=core/public-api.txt
if [ "$(cargo public-api --version 2>/dev/null)" != "cargo-public-api $version" ]; then
  echo "installing cargo-public-api $version"
  cargo install --locked --quiet cargo-public-api --version "$version"
fi
echo "== the core's public API (cargo public-api, against $listing)"
target=${CARGO_TARGET_DIR:-target}/public-api
json=$target/doc/kserve_injector_core.json
rustdoc_json() { # package, then cargo's flags
  local package=$1
  shift
  RUSTC_BOOTSTRAP=1 CARGO_TARGET_DIR=$target cargo rustdoc --locked --quiet -p "$package" --lib "$@" \
    -- -Z unstable-options --output-format json
}
echo "== the root crate's public items, each named by its users"
rustdoc_json kserve-injector
python3 .ci/public_unused.py --crate kserve_injector "$target/doc/kserve_injector.json"
# Each public item has a user, by one path: checked with the `oracle`
# feature on, so that `internals` (the test oracle's, the tests' and the
# benches' items) is checked too.
rustdoc_json kserve-injector-core --features oracle
python3 .ci/public_unused.py "$json"
# The listing is the surface as it ships: without the feature.
rustdoc_json kserve-injector-core
# -ss: without blanket and auto-trait impls, which follow from the rest and
# change with the toolchain (a new auto trait in std), not with the core.
# Derived impls (Clone, Debug, PartialEq, serde's) stay listed: removing
# one breaks a caller as surely as removing a method.
listed=$(cargo public-api --color never -ss --rustdoc-json "$json")
if [ "${UPDATE:-0}" = 1 ]; then
  printf '%s\n' "$listed" >"$listing"
  echo "wrote $listing ($(wc -l <"$listing") items)"
  exit 0
fi
if ! diff -u "$listing" <(printf '%s\n' "$listed"); then
  echo "public API: the core's public items differ from $listing (above: - committed, + now)." >&2
  echo "Make the item pub(crate) if nothing outside the core needs it; if the change is intended," >&2
  echo "rewrite the listing with \`UPDATE=1 bash .ci/public-api.sh\` and commit it." >&2
  exit 1
fi
echo "public API: $(wc -l <"$listing") items, as committed"
