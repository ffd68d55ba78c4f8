"""The migration pieces (docs/migration.md): components/shadow and the
chart's shadow values run beside KServe's pod mutator (args, failurePolicy
Ignore, a configuration name that sorts after KServe's, reinvocation), and
manifests/audit's ClusterRole grants the audit read-only access and is not
part of the webhook's install. Each check also meets an input it must refuse.
"""

import shutil

import pytest

from conftest import ROOT, by_kind, docs_of, one, run

KSERVE_CONFIG = "inferenceservice.serving.kserve.io"
KSERVE_POD_MUTATOR = "inferenceservice.kserve-webhook-server.pod-mutator"
KSERVE_FIXTURE = ROOT / "fixtures" / "install" / "kserve-helm-rendered.yaml"


def shadow_tree(directory, reinvocation="IfNeeded"):
    """manifests/ beside KServe's rendered install, with the shadow component."""
    shutil.copytree(ROOT / "manifests", directory / "manifests")
    webhook = directory / "manifests" / "base" / "webhook.yaml"
    text = webhook.read_text()
    assert "reinvocationPolicy: IfNeeded" in text
    webhook.write_text(text.replace("reinvocationPolicy: IfNeeded", f"reinvocationPolicy: {reinvocation}"))
    case = directory / "case"
    case.mkdir()
    shutil.copy(KSERVE_FIXTURE, case / "kserve.yaml")
    (case / "kustomization.yaml").write_text("""\
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - kserve.yaml
  - ../manifests/base
components:
  - ../manifests/components/cert-manager
  - ../manifests/components/shadow
transformers:
  - ../manifests/follow-namespace
""")
    return case


def check_shadow(docs, warnings=False):
    """Ours runs after KServe's mutator, which stays, and only watches."""
    hooks = by_kind(docs, "MutatingWebhookConfiguration")
    ours = [h for h in hooks if h["metadata"]["name"] != KSERVE_CONFIG]
    assert len(ours) == 1, [h["metadata"]["name"] for h in hooks]
    name = ours[0]["metadata"]["name"]
    assert KSERVE_CONFIG < name, f"{name} would be called before {KSERVE_CONFIG}"
    webhook = ours[0]["webhooks"][0]
    assert webhook["failurePolicy"] == "Ignore"
    assert webhook["reinvocationPolicy"] == "IfNeeded"
    args = one(docs, "Deployment", name)["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--shadow" in args
    assert ("--shadow-warnings" in args) == warnings
    kserve = [h for h in hooks if h["metadata"]["name"] == KSERVE_CONFIG]
    if kserve:
        names = [w["name"] for w in kserve[0]["webhooks"]]
        assert KSERVE_POD_MUTATOR in names, names


def test_shadow_component_runs_after_kserves_mutator(any_tools, tmp_path):
    case = shadow_tree(tmp_path)
    check_shadow(docs_of(any_tools.kustomize(case)))


def test_shadow_component_refuses_a_webhook_without_reinvocation(tools, tmp_path):
    case = shadow_tree(tmp_path, reinvocation="Never")
    proc = run([tools.kubectl, "kustomize", case], check=False)
    assert proc.returncode != 0 and "test" in proc.stderr.lower(), proc.stderr


def test_shadow_check_sees_a_normal_install(tools):
    with pytest.raises(AssertionError):
        check_shadow(docs_of(tools.kustomize(ROOT / "manifests")))


@pytest.mark.parametrize("warnings", [False, True])
def test_helm_shadow_values(any_tools, warnings):
    sets = ["shadow.enabled=true", f"shadow.warnings={str(warnings).lower()}"]
    check_shadow(docs_of(any_tools.template(sets)), warnings)


def test_helm_without_shadow_mutates(tools):
    docs = docs_of(tools.template())
    hook = one(docs, "MutatingWebhookConfiguration")
    assert hook["webhooks"][0]["failurePolicy"] == "Fail"
    args = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert not [a for a in args if a.startswith("--shadow")], args


HELM_REFUSALS = {
    "with replaceKServeMutator": (["shadow.enabled=true", "replaceKServeMutator=true"],
                                  "cannot be combined with replaceKServeMutator"),
    "a name sorting before KServe's": (["shadow.enabled=true", "fullnameOverride=alpha"],
                                       "sorts before KServe's"),
    "a misspelt shadow value": (["shadow.enable=true"], "enable"),
    "a named flag in extraArgs": (["server.extraArgs={--shadow}"], "set shadow.enabled instead"),
}


@pytest.mark.parametrize("what", list(HELM_REFUSALS))
def test_helm_shadow_refusals(tools, what):
    sets, message = HELM_REFUSALS[what]
    proc = tools.template(sets, check=False)
    assert proc.returncode != 0, f"{what}: rendered"
    assert message in proc.stderr, f"{what}: {proc.stderr}"


AUDIT_RULES = [
    {"apiGroups": [""], "resources": ["pods", "serviceaccounts", "secrets"], "verbs": ["list"]},
    {"apiGroups": ["apps"], "resources": ["replicasets", "deployments"], "verbs": ["list"]},
    {"apiGroups": ["serving.kserve.io"], "resources": ["clusterstoragecontainers", "inferenceservices"],
     "verbs": ["list"]},
    {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["inferenceservice-config"],
     "verbs": ["get"]},
]


def check_audit_role(docs):
    """One read-only ClusterRole with exactly the audit's rules, bound to nobody."""
    role = one(docs, "ClusterRole", "kserve-injector-audit")
    assert role["rules"] == AUDIT_RULES, role["rules"]
    verbs = {v for rule in role["rules"] for v in rule["verbs"]}
    assert verbs <= {"get", "list"}, verbs
    assert not by_kind(docs, "ClusterRoleBinding") and not by_kind(docs, "RoleBinding")


def test_audit_cluster_role(any_tools):
    check_audit_role(docs_of(any_tools.kustomize(ROOT / "manifests" / "audit")))


def test_audit_role_is_not_part_of_the_webhook_install(tools):
    docs = docs_of(tools.kustomize(ROOT / "manifests"))
    assert not by_kind(docs, "ClusterRole", "kserve-injector-audit")
    with pytest.raises(AssertionError):
        check_audit_role(docs)
