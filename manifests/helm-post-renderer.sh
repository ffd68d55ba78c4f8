#!/usr/bin/env bash
# Helm post-renderer for KServe's chart: removes KServe's pod mutator webhook
# (inferenceservice.kserve-webhook-server.pod-mutator) from the rendered
# manifests with components/replace-kserve-mutator, so that kserve-injector
# alone mutates InferenceService pods and a `helm upgrade` does not bring the
# pod mutator back. Everything else passes through (re-formatted by kustomize).
#
#   helm upgrade --install kserve oci://ghcr.io/kserve/charts/kserve --version v0.15.2 \
#     --namespace kserve --post-renderer ./manifests/helm-post-renderer.sh
#
# That is Helm 3; Helm 4 takes post-renderer plugins only: ../helm-post-renderer-plugin
# wraps this script (helm plugin install, then --post-renderer kserve-replace-mutator).
#
# Fails (non-zero, message on stderr, nothing on stdout) when the chart's
# layout is not the one the component checks for. Needs kubectl >= 1.27.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
kubectl=${KUBECTL:-kubectl}
mutator=inferenceservice.kserve-webhook-server.pod-mutator

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/rendered.yaml"
if ! grep -q "$mutator" "$work/rendered.yaml"; then
  echo "helm-post-renderer: the rendered chart has no webhook named $mutator; nothing to replace (is this KServe's chart?)" >&2
  exit 1
fi
# kustomize loads components by relative path only: bring a copy along.
cp -r "$here/components/replace-kserve-mutator" "$work/replace-kserve-mutator"
cat > "$work/kustomization.yaml" <<'KUSTOMIZATION'
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - rendered.yaml
components:
  - replace-kserve-mutator
KUSTOMIZATION
if ! "$kubectl" kustomize "$work" > "$work/out.yaml"; then
  echo "helm-post-renderer: KServe's webhook layout changed; the pod mutator was not removed (see the error above)" >&2
  exit 1
fi
if grep -q "$mutator" "$work/out.yaml"; then
  echo "helm-post-renderer: $mutator is still in the output" >&2
  exit 1
fi
cat "$work/out.yaml"
