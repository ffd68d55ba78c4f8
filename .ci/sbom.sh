#!/usr/bin/env bash
# The CycloneDX SBOM of the kserve-injector binary: every crate it is built
# from (normal dependencies for this platform; no dev or build-only ones),
# with version, license and package URL, from cargo-cyclonedx (pinned,
# installed once by .ci/cargo-tool.sh). Checks that the SBOM lists rustls,
# hyper and kube at the versions Cargo.lock locks, then writes it to OUT.
#
#   bash .ci/sbom.sh [OUT]    # default: target/sbom/kserve-injector.cdx.json
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-${CARGO_TARGET_DIR:-target}/sbom/kserve-injector.cdx.json}
cyclonedx=$(bash .ci/cargo-tool.sh cargo-cyclonedx 0.5.9)
# cargo-cyclonedx writes kserve-injector_bin.cdx.json beside Cargo.toml.
"$cyclonedx" cyclonedx --manifest-path Cargo.toml --format json --spec-version 1.5 \
  --describe binaries --no-build-deps --quiet
mkdir -p "$(dirname "$out")"
mv kserve-injector_bin.cdx.json "$out"
python3 - "$out" Cargo.lock <<'PY'
import json, sys, tomllib
sbom = json.load(open(sys.argv[1]))
locked = {}
for p in tomllib.load(open(sys.argv[2], "rb"))["package"]:
    locked.setdefault(p["name"], set()).add(p["version"])
assert sbom["bomFormat"] == "CycloneDX", sbom.get("bomFormat")
components = {c["name"]: c["version"] for c in sbom["components"]}
missing = [n for n in ("rustls", "hyper", "kube") if n not in components]
wrong = [f"{n} {v}" for n, v in components.items() if v not in locked.get(n, ())]
if missing or wrong:
    sys.exit(f"sbom: lacks {missing}, versions Cargo.lock does not lock: {wrong}")
print(f"sbom: {sys.argv[1]}: CycloneDX {sbom['specVersion']}, {len(components)} components "
      f"(rustls {components['rustls']}, hyper {components['hyper']}, kube {components['kube']})")
PY
