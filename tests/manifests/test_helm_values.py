"""The chart's pod values (extraEnv, extraVolumes, extraVolumeMounts,
podSecurityContext, securityContext, revisionHistoryLimit, and the hook
Jobs' kserveMutatorHook.podAnnotations): the hardened defaults unchanged,
the values equal to the JSON patch a kustomize user writes, and
the values that would collide with the chart's own refused with a message.
"""

import pytest
import yaml

from conftest import ROOT, copy_tree, docs_of, normalized, one

HARDENED_POD = {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
HARDENED_CONTAINER = {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                      "capabilities": {"drop": ["ALL"]}}

# The same change as Helm values and as the patch of a kustomize overlay.
VALUES = {
    "extraEnv": [{"name": "HTTPS_PROXY", "value": "http://proxy.example.com:3128"},
                 {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
    "extraVolumes": [{"name": "scratch", "emptyDir": {"sizeLimit": "64Mi"}}],
    "extraVolumeMounts": [{"name": "scratch", "mountPath": "/scratch"}],
    "podSecurityContext": {"runAsUser": 65532, "fsGroup": 65532},
    "securityContext": {"runAsGroup": 65532},
    "revisionHistoryLimit": 3,
}
# JSON patch operations (list items appended, as the chart appends them
# after its own; a strategic merge patch would put them first).
C = "/spec/template/spec/containers/0"
PATCH = [
    {"op": "add", "path": "/spec/revisionHistoryLimit", "value": 3},
    {"op": "add", "path": "/spec/template/spec/securityContext/runAsUser", "value": 65532},
    {"op": "add", "path": "/spec/template/spec/securityContext/fsGroup", "value": 65532},
    {"op": "add", "path": f"{C}/securityContext/runAsGroup", "value": 65532},
    *({"op": "add", "path": f"{C}/env/-", "value": e} for e in VALUES["extraEnv"]),
    *({"op": "add", "path": f"{C}/volumeMounts/-", "value": m} for m in VALUES["extraVolumeMounts"]),
    *({"op": "add", "path": "/spec/template/spec/volumes/-", "value": v} for v in VALUES["extraVolumes"]),
]


def pod_of(docs):
    return one(docs, "Deployment")["spec"]["template"]["spec"]


def test_defaults_stay_hardened(tools):
    pod = pod_of(docs_of(tools.template()))
    assert pod["securityContext"] == HARDENED_POD
    assert pod["containers"][0]["securityContext"] == HARDENED_CONTAINER
    assert [e["name"] for e in pod["containers"][0]["env"]] == ["POD_NAMESPACE"]
    assert "revisionHistoryLimit" not in one(docs_of(tools.template()), "Deployment")["spec"]


def test_values_equal_the_kustomize_patch(any_tools, tmp_path):
    """The values above and a kustomize overlay patching the Deployment the
    same way render the same objects; the overrides merge into the hardened
    defaults."""
    copy_tree(ROOT / "manifests", tmp_path / "manifests")
    case = tmp_path / "case"
    case.mkdir()
    (case / "patch.yaml").write_text(yaml.safe_dump(PATCH))
    (case / "kustomization.yaml").write_text("""\
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [../manifests]
patches:
  - path: patch.yaml
    target: {group: apps, version: v1, kind: Deployment, name: kserve-injector}
transformers: [../manifests/follow-namespace]
""")
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump(VALUES))
    kustomized = normalized(docs_of(any_tools.kustomize(case)))
    helmed = normalized(docs_of(any_tools.template(values_files=[values])))
    assert set(kustomized) == set(helmed)
    for key in kustomized:
        a, b = (yaml.safe_dump(d[key], sort_keys=True) for d in (kustomized, helmed))
        assert a == b, f"{key} differs (kustomize, then helm):\n{a}\n---\n{b}"
    pod = pod_of(docs_of(any_tools.template(values_files=[values])))
    assert pod["securityContext"] == dict(HARDENED_POD, runAsUser=65532, fsGroup=65532)
    assert pod["containers"][0]["securityContext"] == dict(HARDENED_CONTAINER, runAsGroup=65532)


def test_hook_pod_annotations_reach_only_the_jobs(tools):
    docs = docs_of(tools.template(["replaceKServeMutator=true",
                                   "kserveMutatorHook.podAnnotations.sidecar\\.istio\\.io/inject=no"]))
    jobs = [d for d in docs if d["kind"] == "Job"]
    assert len(jobs) == 2
    for job in jobs:
        assert job["spec"]["template"]["metadata"]["annotations"] == {"sidecar.istio.io/inject": "no"}
    assert "annotations" not in one(docs, "Deployment")["spec"]["template"]["metadata"]


REFUSED = {
    "extraEnv POD_NAMESPACE": (["extraEnv[0].name=POD_NAMESPACE", "extraEnv[0].value=x"],
                               "extraEnv: POD_NAMESPACE is set by the chart"),
    "extraEnv KSERVE_INJECTOR_ADDR": (["extraEnv[0].name=KSERVE_INJECTOR_ADDR", "extraEnv[0].value=:1"],
                                      "extraEnv: KSERVE_INJECTOR_ADDR would set a serve flag"),
    "extraVolumes named config": (["extraVolumes[0].name=config", "extraVolumes[0].emptyDir.medium=Memory"],
                                  "extraVolumes: the name config is the chart's own volume"),
    "a mount of no volume": (["extraVolumeMounts[0].name=scratch", "extraVolumeMounts[0].mountPath=/scratch"],
                             "extraVolumeMounts: /scratch mounts the volume scratch, which is neither"),
    "a mount over the certificates": (
        ["extraVolumes[0].name=x", "extraVolumes[0].emptyDir.medium=Memory", "extraVolumeMounts[0].name=x",
         "extraVolumeMounts[0].mountPath=/tmp"], "extraVolumeMounts: /tmp is on a path the chart mounts"),
    "a mount inside the config": (
        ["extraVolumes[0].name=x", "extraVolumes[0].emptyDir.medium=Memory", "extraVolumeMounts[0].name=x",
         "extraVolumeMounts[0].mountPath=/etc/kserve-injector/config/extra"],
        "extraVolumeMounts: /etc/kserve-injector/config/extra is on a path the chart mounts"),
    "a relative mount path": (["extraVolumeMounts[0].name=config", "extraVolumeMounts[0].mountPath=x"],
                              "mountPath"),
    "an env without a name": (["extraEnv[0].value=x"], "extraEnv"),
    "a negative revisionHistoryLimit": (["revisionHistoryLimit=-1"], "revisionHistoryLimit"),
    "a securityContext that is not a map": (["securityContext=strict"], "securityContext"),
}


@pytest.mark.parametrize("what", list(REFUSED))
def test_colliding_values_are_refused(any_tools, what):
    sets, message = REFUSED[what]
    proc = any_tools.template(sets, check=False)
    assert proc.returncode != 0, f"{what}: helm template succeeded"
    assert message in proc.stderr, f"{what}: {proc.stderr}"
