"""The Helm chart (charts/kserve-injector) with the real tools: helm lint
--strict; helm template under several value sets, each validated against the
Kubernetes schemas and tests/schemas like the kustomize renders; the chart
equal to the kustomize install; the HA defaults of both installs; broken
values refused; helm install --dry-run=server and kubectl apply
--dry-run=server on kube-apiserver 1.36; the self-signed certificates reused
on upgrade and served by the binary; the replaceKServeMutator hooks run
against the API server with their own RBAC; helm package.

helm v4.1.4 + kubectl v1.35.2, and helm v3.12.1 + kubectl v1.27.1 (the oldest
supported) where the check does not need a cluster.
"""

import base64
import json
import os
import subprocess
import time
from pathlib import Path

import kubernetes_validate.utils
import pytest
import yaml

from conftest import (CHART, ROOT, by_kind, copy_tree, docs_of, free_port, make_certs, normalized,
                      one, run)

OLDEST_K8S = "1.31.0"
NEWEST_K8S = kubernetes_validate.utils.latest_version()
ALT_NS = "models-infra"
KSERVE_CONFIG = "inferenceservice.serving.kserve.io"
KSERVE_POD_MUTATOR = "inferenceservice.kserve-webhook-server.pod-mutator"
KSERVE_DEFAULTER = "inferenceservice.kserve-webhook-server.defaulter"

# Value sets rendered, linted and validated: name -> (namespace, --set values).
VALUE_SETS = {
    "default": ("kserve", []),
    "ha": ("kserve", [
        "replicas=3",
        "priorityClassName=system-cluster-critical",
        "topologySpreadConstraints[0].maxSkew=1",
        "topologySpreadConstraints[0].topologyKey=kubernetes.io/hostname",
        "topologySpreadConstraints[0].whenUnsatisfiable=ScheduleAnyway",
        "topologySpreadConstraints[1].maxSkew=1",
        "topologySpreadConstraints[1].topologyKey=topology.kubernetes.io/zone",
        "topologySpreadConstraints[1].whenUnsatisfiable=ScheduleAnyway",
        "resources.requests.cpu=200m",
        "resources.limits.memory=256Mi",
    ]),
    "self-signed": ("kserve", ["certificates.mode=self-signed"]),
    "no-lookups": ("kserve", ["clusterLookups.enabled=false"]),
    "other-namespace": (ALT_NS, []),
    "everything": ("kserve", [
        "image.repository=registry.example.com/kserve-injector",
        "image.digest=sha256:" + "0" * 64,
        "imagePullSecrets[0].name=registry",
        "certificates.certManager.issuerRef.name=my-ca",
        "certificates.certManager.issuerRef.kind=ClusterIssuer",
        "clusterLookups.watch.inferenceservices=false",
        "server.requestTimeout=2500ms",
        "server.lookupTimeout=1s",
        "server.logFormat=text",
        "server.logLevel=kserve_injector=debug",
        "server.shutdownDelay=3s",
        "server.drainTimeout=15s",
        "server.maxConcurrentRequests=256",
        "server.maxConnections=2048",
        "server.modelcarMode=native-sidecar",
        "server.kserveVersion=v0.17",
        "server.extraArgs={--idle-timeout=60s}",
        "metrics.serviceMonitor.enabled=true",
        "metrics.serviceMonitor.labels.release=prometheus",
        "replaceKServeMutator=true",
        "podDisruptionBudget.minAvailable=1",
        "nodeSelector.kubernetes\\.io/os=linux",
        "tolerations[0].key=dedicated",
        "tolerations[0].operator=Exists",
        "podAnnotations.example\\.com/a=b",
        "webhook.annotations.example\\.com/owner=ml-platform",
        "webhook.excludedNamespaces={kube-system,istio-system}",
        "metrics.prometheusRule.enabled=true",
        "metrics.prometheusRule.thresholds.latencyP99Seconds=2.5",
        "metrics.dashboards.enabled=true",
        "metrics.dashboards.annotations.grafana_folder=KServe",
        "extraEnv[0].name=HTTPS_PROXY",
        "extraEnv[0].value=http://proxy.example.com:3128",
        "extraVolumes[0].name=scratch",
        "extraVolumes[0].emptyDir.medium=Memory",
        "extraVolumeMounts[0].name=scratch",
        "extraVolumeMounts[0].mountPath=/scratch",
        "podSecurityContext.runAsUser=65532",
        "securityContext.readOnlyRootFilesystem=null",
        "revisionHistoryLimit=3",
        "kserveMutatorHook.podAnnotations.example\\.com/hook=yes",
    ]),
    # the kustomize components' counterparts (compared below), and more
    "prometheus": ("kserve", ["metrics.serviceMonitor.enabled=true"]),
    "monitoring": ("kserve", ["metrics.serviceMonitor.enabled=true", "metrics.prometheusRule.enabled=true",
                              "metrics.dashboards.enabled=true"]),
    "native-sidecar": ("kserve", ["server.modelcarMode=native-sidecar"]),
    "restricted-profile": ("kserve", ["server.securityProfile=restricted"]),
    "tls-1.3": ("kserve", ["server.tlsMinVersion=1.3"]),
    "watch-secrets": ("kserve", ["clusterLookups.watch.secrets=true"]),
    "namespaced": ("kserve", ["clusterLookups.namespaces={models-a,models-b}",
                              "clusterLookups.outsideNamespaces=allow",
                              "clusterLookups.watch.secrets=true"]),
    "shadow": ("kserve", ["shadow.enabled=true", "shadow.warnings=true"]),
    "host-network": ("kserve", ["hostNetwork=true", "ports.webhook=10260", "ports.admin=10261"]),
    "webhook-url": ("kserve", ["hostNetwork=true", "ports.webhook=10260", "ports.admin=10261",
                               "webhook.url=https://kserve-injector.example.com:10260/mutate-pods"]),
    # every generated name and label at its longest
    "long-names": ("kserve", [
        "fullnameOverride=k" + "x" * 62,
        "nameOverride=n" + "y" * 69,
        "replaceKServeMutator=true",
        "certificates.mode=self-signed",
        "clusterLookups.namespaces={models-a}",
        "metrics.serviceMonitor.enabled=true",
    ]),
    "long-names-cert-manager": ("kserve", ["fullnameOverride=k" + "x" * 62]),
    # the timeouts at their limits, in Go's other spellings
    "durations": ("kserve", [
        "webhook.timeoutSeconds=10",
        "server.requestTimeout=7.5s",
        "server.lookupTimeout=7499ms",
        "server.shutdownDelay=0s",
        "server.drainTimeout=0.5m",
        "terminationGracePeriodSeconds=36",
        "clusterLookups.secretTtl=1h30m",
    ]),
    "no-lookups-durations": ("kserve", [
        "clusterLookups.enabled=false",
        "server.requestTimeout=500ms",
        "webhook.timeoutSeconds=3",
    ]),
}


def provided_args(certs):
    return ["certificates.mode=provided"], [
        f"certificates.provided.caCrt={certs}/ca.crt",
        f"certificates.provided.tlsCrt={certs}/tls.crt",
        f"certificates.provided.tlsKey={certs}/tls.key",
    ]


@pytest.fixture(scope="session")
def certs(tmp_path_factory):
    return make_certs(tmp_path_factory.mktemp("certs"), "kserve")


def render_set(tools, name, certs=None):
    if name == "provided":
        sets, files = provided_args(certs)
        return "kserve", tools.template(sets, files=files)
    namespace, sets = VALUE_SETS[name]
    return namespace, tools.template(sets, namespace=namespace)


ALL_SETS = list(VALUE_SETS) + ["provided"]


# ---------------------------------------------------------------- lint

@pytest.mark.parametrize("name", ALL_SETS)
def test_lint_strict(any_tools, name, certs):
    cmd = [any_tools.helm, "lint", "--strict", CHART]
    if name == "provided":
        sets, files = provided_args(certs)
        cmd += ["--set", ",".join(sets)] + [a for f in files for a in ("--set-file", f)]
    else:
        namespace, sets = VALUE_SETS[name]
        cmd += ["--namespace", namespace] + [a for s in sets for a in ("--set", s)]
    out = run(cmd).stdout
    assert "0 chart(s) failed" in out, out
    assert "[WARNING]" not in out and "[ERROR]" not in out, out


# ---------------------------------------------------------------- renders

def validate(docs, checks, path):
    """kubernetes-validate --strict for 1.31 and the newest known version;
    the cert-manager and ServiceMonitor objects against tests/schemas."""
    checks.validate(docs, str(path), str(ROOT / "tests" / "schemas"), (OLDEST_K8S, NEWEST_K8S))


@pytest.mark.parametrize("name", ALL_SETS)
def test_render_is_valid(tools, checks, name, certs, tmp_path):
    namespace, text = render_set(tools, name, certs)
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    docs = docs_of(text)
    validate(docs, checks, path)
    checks.size(str(path))  # every object under 262,144 bytes as JSON
    checks.namespaces(str(path), namespace)  # also: static certificates chain and name the Service
    checks.timeouts(str(path))


def test_the_everything_set_reaches_the_objects(tools):
    """The named values end up where they should (a typo in a template that
    drops a value would pass every schema)."""
    docs = docs_of(render_set(tools, "everything")[1])
    dep = one(docs, "Deployment")
    pod = dep["spec"]["template"]["spec"]
    args = pod["containers"][0]["args"]
    assert args == ["serve", "--config=/etc/kserve-injector/config", "--request-timeout=2500ms",
                    "--cluster-lookups=on", "--watch-kinds=serviceaccounts,clusterstoragecontainers",
                    "--lookup-timeout=1s", "--log-format=text", "--log=kserve_injector=debug",
                    "--shutdown-delay=3s", "--drain-timeout=15s", "--max-concurrent-requests=256",
                    "--max-connections=2048", "--modelcar-mode=native-sidecar",
                    "--kserve-version=v0.17", "--idle-timeout=60s"]
    assert pod["containers"][0]["image"] == "registry.example.com/kserve-injector@sha256:" + "0" * 64
    assert pod["imagePullSecrets"] == [{"name": "registry"}]
    assert pod["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert pod["tolerations"] == [{"key": "dedicated", "operator": "Exists"}]
    assert dep["spec"]["template"]["metadata"]["annotations"] == {"example.com/a": "b"}
    assert one(docs, "PodDisruptionBudget")["spec"] == {
        "minAvailable": 1, "selector": {"matchLabels": {"app.kubernetes.io/name": "kserve-injector"}}}
    assert one(docs, "ServiceMonitor")["metadata"]["labels"]["release"] == "prometheus"
    hook = one(docs, "MutatingWebhookConfiguration")
    assert hook["metadata"]["annotations"] == {
        "example.com/owner": "ml-platform",
        "cert-manager.io/inject-ca-from": "kserve/kserve-injector-serving",
        "kserve-injector.kserve.io/replaces": KSERVE_CONFIG}
    exprs = hook["webhooks"][0]["namespaceSelector"]["matchExpressions"]
    assert exprs[-1]["values"] == ["kube-system", "istio-system", "kserve"]
    assert not by_kind(docs, "Issuer")
    assert one(docs, "Certificate")["spec"]["issuerRef"] == {"name": "my-ca", "kind": "ClusterIssuer"}
    assert len(by_kind(docs, "Job")) == 2
    container = pod["containers"][0]
    assert container["env"][1:] == [{"name": "HTTPS_PROXY", "value": "http://proxy.example.com:3128"}]
    assert container["volumeMounts"][-1] == {"name": "scratch", "mountPath": "/scratch"}
    assert pod["volumes"][-1] == {"name": "scratch", "emptyDir": {"medium": "Memory"}}
    assert pod["securityContext"] == {"runAsNonRoot": True, "runAsUser": 65532,
                                      "seccompProfile": {"type": "RuntimeDefault"}}
    assert container["securityContext"] == {"allowPrivilegeEscalation": False,
                                            "capabilities": {"drop": ["ALL"]}}
    assert dep["spec"]["revisionHistoryLimit"] == 3
    for job in by_kind(docs, "Job"):
        assert job["spec"]["template"]["metadata"]["annotations"] == {"example.com/hook": "yes"}
    rule = one(docs, "PrometheusRule")["spec"]["groups"][0]["rules"]
    assert [r["expr"] for r in rule if r["alert"] == "KServeInjectorSlowAdmissions"][0].endswith("> 2.5")
    dashboard = one(docs, "ConfigMap", "kserve-injector-dashboard")
    assert dashboard["metadata"]["annotations"] == {"grafana_folder": "KServe"}


def test_settings_kserve_version_reaches_the_server(tools, injector_bin, tmp_path):
    """settings.kserveVersion goes into the settings file (not into a flag),
    and the binary reads that file as the release: a LocalModel pod gets
    v0.17's sub-path."""
    docs = docs_of(tools.template(["settings.kserveVersion=v0.17"]))
    maps = [d for d in by_kind(docs, "ConfigMap") if "settings.yaml" in d.get("data", {})]
    assert len(maps) == 1, [d["metadata"]["name"] for d in by_kind(docs, "ConfigMap")]
    text = maps[0]["data"]["settings.yaml"]
    assert yaml.safe_load(text) == {"kserveVersion": "v0.17"}
    args = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--config-file=/etc/kserve-injector/settings/settings.yaml" in args
    assert not [a for a in args if a.startswith("--kserve-version")]
    settings = tmp_path / "settings.yaml"
    settings.write_text(text)
    pod = ROOT / "fixtures" / "s30a-local-model-root" / "input.yaml"
    out = run([injector_bin, "mutate", "-o", "json", "--config-file", settings, pod]).stdout
    mount = json.loads(out)["spec"]["containers"][0]["volumeMounts"][0]
    assert mount["subPath"] == "models/bar/"


@pytest.mark.parametrize("case", ["v01-model-volume-ephemeral", "x06-si-resources-config-file"])
def test_settings_values_reach_the_server_as_the_golden_expects(case, tools, injector_bin, tmp_path):
    """`settings` (modelVolume, storageInitializer defaults) is rendered into
    the settings file unchanged, and the binary reading that rendered file
    gives the golden's pod."""
    fixture = ROOT / "fixtures" / case
    wanted = yaml.safe_load((fixture / "settings.yaml").read_text())
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({"settings": wanted}))
    docs = docs_of(tools.template(values_files=[values]))
    maps = [d for d in by_kind(docs, "ConfigMap") if "settings.yaml" in d.get("data", {})]
    assert len(maps) == 1, [d["metadata"]["name"] for d in by_kind(docs, "ConfigMap")]
    assert yaml.safe_load(maps[0]["data"]["settings.yaml"]) == wanted
    rendered = tmp_path / "settings.yaml"
    rendered.write_text(maps[0]["data"]["settings.yaml"])
    cmd = [injector_bin, "mutate", "-o", "json", "--config-file", rendered]
    if (fixture / "config.yaml").exists():
        cmd += ["--config", fixture / "config.yaml"]
    out = json.loads(run([*cmd, fixture / "input.yaml"]).stdout)
    assert out == yaml.safe_load((fixture / "expected.yaml").read_text())


def test_only_the_webhook_pods_match_its_selectors(tools):
    """The hook Jobs' pods never join the webhook's Service, PDB or spread."""
    docs = docs_of(render_set(tools, "everything")[1])
    selector = one(docs, "Service", "kserve-injector")["spec"]["selector"]
    templates = [(d["kind"], d["metadata"]["name"], d["spec"]["template"]["metadata"]["labels"])
                 for d in docs if d["kind"] in ("Deployment", "Job")]
    assert len(templates) == 3
    matching = [(k, n) for k, n, labels in templates if selector.items() <= labels.items()]
    assert matching == [("Deployment", "kserve-injector")], matching


def test_no_lookups_drops_rbac_and_token(tools):
    docs = docs_of(render_set(tools, "no-lookups")[1])
    assert not by_kind(docs, "ClusterRole") and not by_kind(docs, "ClusterRoleBinding")
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    assert "--cluster-lookups=off" in pod["containers"][0]["args"]


WATCH_SECRETS = "clusterLookups.watch.secrets=true"


def secret_verbs(docs):
    """The lookups' ClusterRole's verbs on Secrets (one rule names them)."""
    rules = one(docs, "ClusterRole", "kserve-injector-lookups")["rules"]
    found = [r["verbs"] for r in rules if "secrets" in r["resources"]]
    assert len(found) == 1, rules
    others = {res: r["verbs"] for r in rules for res in r["resources"] if res != "secrets"}
    assert others == {"serviceaccounts": ["get", "list", "watch"],
                      "clusterstoragecontainers": ["list", "watch"],
                      "inferenceservices": ["get", "list", "watch"]}, rules
    return found[0]


def test_default_role_only_gets_secrets(any_tools, tmp_path):
    """The default install, chart and kustomize alike, may GET a Secret but
    neither list nor watch them, and the server is not asked to watch them."""
    copy_tree(ROOT / "manifests", tmp_path / "manifests")
    for docs in (docs_of(any_tools.template()), docs_of(any_tools.kustomize(tmp_path / "manifests"))):
        assert secret_verbs(docs) == ["get"]
        args = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
        assert not [a for a in args if a.startswith("--watch-kinds")], args


def test_watching_secrets_grants_list_and_watch(tools):
    """Naming secrets in clusterLookups.watchKinds grants list + watch on
    Secrets and passes the kinds to --watch-kinds; other kinds alone do not."""
    docs = docs_of(tools.template([WATCH_SECRETS]))
    assert secret_verbs(docs) == ["get", "list", "watch"]
    args = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--watch-kinds=serviceaccounts,secrets,clusterstoragecontainers,inferenceservices" in args
    everything = docs_of(render_set(tools, "everything")[1])
    rules = one(everything, "ClusterRole", "kserve-injector-lookups")["rules"]
    assert {res: r["verbs"] for r in rules for res in r["resources"]}["inferenceservices"] == ["get"]


def test_secret_ttl_values_reach_the_args(tools):
    docs = docs_of(tools.template(["clusterLookups.secretTtl=10s",
                                   "clusterLookups.secretCacheEntries=500"]))
    args = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[4:6] == ["--secret-ttl=10s", "--secret-cache-entries=500"], args


def test_namespaced_mode_has_roles_per_namespace(tools):
    """clusterLookups.namespaces: a Role and RoleBinding per namespace (get
    only on Secrets) bound to the webhook's ServiceAccount, a ClusterRole
    for ClusterStorageContainers only, and the flags."""
    docs = docs_of(tools.template(["clusterLookups.namespaces={models-a,models-b}",
                                   "clusterLookups.outsideNamespaces=allow"],
                                  namespace="infra"))
    cluster_rules = one(docs, "ClusterRole", "kserve-injector-lookups")["rules"]
    assert cluster_rules == [{"apiGroups": ["serving.kserve.io"],
                              "resources": ["clusterstoragecontainers"],
                              "verbs": ["list", "watch"]}]
    roles = by_kind(docs, "Role")
    assert sorted(r["metadata"]["namespace"] for r in roles) == ["models-a", "models-b"]
    for role in roles:
        verbs = {res: r["verbs"] for r in role["rules"] for res in r["resources"]}
        assert verbs == {"serviceaccounts": ["get", "list", "watch"], "secrets": ["get"],
                         "inferenceservices": ["get", "list", "watch"]}
    bindings = by_kind(docs, "RoleBinding")
    assert sorted(b["metadata"]["namespace"] for b in bindings) == ["models-a", "models-b"]
    for b in bindings:
        assert b["subjects"] == [{"kind": "ServiceAccount", "name": "kserve-injector",
                                  "namespace": "infra"}]
        assert b["roleRef"]["kind"] == "Role"
    args = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--namespaces=models-a,models-b" in args and "--outside-namespaces=allow" in args
    watched = docs_of(tools.template(["clusterLookups.namespaces={models}", WATCH_SECRETS]))
    assert one(watched, "Role")["rules"][1]["verbs"] == ["get", "list", "watch"]


# ---------------------------------------------------------------- equal to kustomize

def kustomize_cases(tree, certs_dir):
    """name -> (kustomization dir, namespace, helm --set, helm --set-file)."""
    cases = tree / "cases"
    (cases / "other-namespace").mkdir(parents=True)
    (cases / "other-namespace" / "kustomization.yaml").write_text(f"""\
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: {ALT_NS}
resources:
  - ../../manifests
transformers:
  - ../../manifests/follow-namespace
""")
    (cases / "prometheus").mkdir()
    (cases / "prometheus" / "kustomization.yaml").write_text("""\
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - ../../manifests
components:
  - ../../manifests/components/prometheus
transformers:
  - ../../manifests/follow-namespace
""")
    (cases / "monitoring").mkdir()
    (cases / "monitoring" / "kustomization.yaml").write_text("""\
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - ../../manifests
components:
  - ../../manifests/components/prometheus
  - ../../manifests/components/monitoring
transformers:
  - ../../manifests/follow-namespace
""")
    (cases / "watch-secrets").mkdir()
    (cases / "watch-secrets" / "kustomization.yaml").write_text("""\
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - ../../manifests
components:
  - ../../manifests/components/watch-secrets
transformers:
  - ../../manifests/follow-namespace
""")
    (cases / "namespaced").mkdir()
    (cases / "namespaced" / "kustomization.yaml").write_text("""\
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - ../../manifests
components:
  - ../../manifests/components/namespaced
transformers:
  - ../../manifests/follow-namespace
""")
    (cases / "native-sidecar").mkdir()
    (cases / "native-sidecar" / "kustomization.yaml").write_text("""\
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - ../../manifests
components:
  - ../../manifests/components/native-sidecar-modelcar
transformers:
  - ../../manifests/follow-namespace
""")
    (cases / "host-network").mkdir()
    (cases / "host-network" / "kustomization.yaml").write_text("""\
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - ../../manifests
components:
  - ../../manifests/components/host-network
transformers:
  - ../../manifests/follow-namespace
""")
    (cases / "restricted-profile").mkdir()
    (cases / "restricted-profile" / "kustomization.yaml").write_text("""\
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - ../../manifests
components:
  - ../../manifests/components/restricted-profile
transformers:
  - ../../manifests/follow-namespace
""")
    (cases / "tls-1.3").mkdir()
    (cases / "tls-1.3" / "kustomization.yaml").write_text("""\
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - ../../manifests
components:
  - ../../manifests/components/tls-1.3
transformers:
  - ../../manifests/follow-namespace
""")
    static = tree / "manifests" / "overlays" / "static-certs" / "certs"
    static.mkdir(exist_ok=True)
    for name in ("ca.crt", "tls.crt", "tls.key"):
        (static / name).write_bytes((certs_dir / name).read_bytes())
    sets, files = provided_args(certs_dir)
    return {
        "default": (tree / "manifests", "kserve", [], []),
        "other-namespace": (cases / "other-namespace", ALT_NS, [], []),
        "prometheus": (cases / "prometheus", "kserve", ["metrics.serviceMonitor.enabled=true"], []),
        "monitoring": (cases / "monitoring", "kserve", VALUE_SETS["monitoring"][1], []),
        "native-sidecar": (cases / "native-sidecar", "kserve", ["server.modelcarMode=native-sidecar"],
                           []),
        "restricted-profile": (cases / "restricted-profile", "kserve",
                               ["server.securityProfile=restricted"], []),
        "tls-1.3": (cases / "tls-1.3", "kserve", ["server.tlsMinVersion=1.3"], []),
        "host-network": (cases / "host-network", "kserve", VALUE_SETS["host-network"][1], []),
        "static-certs": (tree / "manifests" / "overlays" / "static-certs", "kserve", sets, files),
        "watch-secrets": (cases / "watch-secrets", "kserve", [WATCH_SECRETS], []),
        "namespaced": (cases / "namespaced", "kserve", ["clusterLookups.namespaces={models}"], []),
    }


@pytest.mark.parametrize("case", ["default", "other-namespace", "prometheus", "monitoring", "native-sidecar",
                                  "restricted-profile", "tls-1.3", "static-certs", "watch-secrets",
                                  "namespaced", "host-network"])
def test_equal_to_kustomize(any_tools, case, certs, tmp_path):
    """`helm template` and `kubectl kustomize` give the same objects, compared
    as data after dropping Helm's own labels: the default install, a namespace
    other than kserve, the prometheus, monitoring and native-sidecar-modelcar components,
    and static-certs against
    certificates.mode=provided with the same files."""
    tree = tmp_path / "tree"
    copy_tree(ROOT / "manifests", tree / "manifests")
    directory, namespace, sets, files = kustomize_cases(tree, certs)[case]
    kustomized = normalized(docs_of(any_tools.kustomize(directory)))
    helmed = normalized(docs_of(any_tools.template(sets, namespace=namespace, files=files)))
    only_k = sorted(set(kustomized) - set(helmed))
    only_h = sorted(set(helmed) - set(kustomized))
    assert not only_k and not only_h, f"only in kustomize: {only_k}; only in helm: {only_h}"
    for key in kustomized:
        a = yaml.safe_dump(kustomized[key], sort_keys=True)
        b = yaml.safe_dump(helmed[key], sort_keys=True)
        assert a == b, f"{key} differs (kustomize, then helm):\n{a}\n---\n{b}"


def test_equality_sees_a_difference(tools, tmp_path):
    """The comparison above fails when one install drifts: a kustomize tree
    with one replica more is not equal to the chart."""
    tree = copy_tree(ROOT / "manifests", tmp_path / "manifests")
    dep = tree / "base" / "deployment.yaml"
    dep.write_text(dep.read_text().replace("replicas: 2", "replicas: 3", 1))
    kustomized = normalized(docs_of(tools.kustomize(tree)))
    helmed = normalized(docs_of(tools.template()))
    assert kustomized != helmed
    key = ("apps/v1", "Deployment", "kserve", "kserve-injector")
    assert kustomized[key]["spec"]["replicas"] == 3 and helmed[key]["spec"]["replicas"] == 2


# ---------------------------------------------------------------- HA defaults

def assert_ha(docs, namespace, checks, path):
    dep = one(docs, "Deployment", "kserve-injector")
    pod_labels = dep["spec"]["template"]["metadata"]["labels"]
    assert dep["spec"]["replicas"] >= 2, "at least 2 replicas"
    assert dep["spec"]["strategy"]["rollingUpdate"] == {"maxUnavailable": 0, "maxSurge": 1}

    pdb = one(docs, "PodDisruptionBudget", "kserve-injector")
    assert pdb["spec"].get("maxUnavailable") == 1 and "minAvailable" not in pdb["spec"]
    selector = pdb["spec"]["selector"]["matchLabels"]
    assert selector.items() <= pod_labels.items(), "the PDB selects the webhook's pods"

    spread = dep["spec"]["template"]["spec"].get("topologySpreadConstraints") or []
    hostname = [c for c in spread if c["topologyKey"] == "kubernetes.io/hostname"]
    assert hostname, "spread over hostnames"
    assert hostname[0]["whenUnsatisfiable"] == "ScheduleAnyway", "soft spread"
    assert hostname[0]["labelSelector"]["matchLabels"].items() <= pod_labels.items()

    hook = one(docs, "MutatingWebhookConfiguration", "kserve-injector")["webhooks"][0]
    assert hook["failurePolicy"] == "Fail"
    assert hook["objectSelector"] == {"matchExpressions": [
        {"key": "serving.kserve.io/inferenceservice", "operator": "Exists"}]}, \
        "Fail only for InferenceService pods"
    excluded = set()
    for expr in hook["namespaceSelector"]["matchExpressions"]:
        if expr["key"] == "kubernetes.io/metadata.name" and expr["operator"] == "NotIn":
            excluded.update(expr["values"])
    assert {"kube-system", namespace} <= excluded, f"excluded: {excluded}"
    assert hook["timeoutSeconds"] == 5
    assert hook["reinvocationPolicy"] == "IfNeeded"
    checks.timeouts(str(path))  # --request-timeout at least 2 s below timeoutSeconds


@pytest.mark.parametrize("install", ["helm", "kustomize"])
@pytest.mark.parametrize("namespace", ["kserve", ALT_NS])
def test_ha_defaults(tools, checks, install, namespace, tmp_path):
    if install == "helm":
        text = tools.template(namespace=namespace)
    else:
        copy_tree(ROOT / "manifests", tmp_path / "manifests")
        case = tmp_path / "case"
        case.mkdir()
        (case / "kustomization.yaml").write_text(f"""\
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: {namespace}
resources: [../manifests]
transformers: [../manifests/follow-namespace]
""")
        text = tools.kustomize(case)
    path = tmp_path / "rendered.yaml"
    path.write_text(text)
    assert_ha(docs_of(text), namespace, checks, path)


def test_priority_class_value(tools):
    docs = docs_of(tools.template(["priorityClassName=system-cluster-critical"]))
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    assert pod["priorityClassName"] == "system-cluster-critical"
    assert "priorityClassName" not in one(docs_of(tools.template()), "Deployment")["spec"]["template"]["spec"]


def test_ha_check_fails_on_a_broken_default(tools, checks, tmp_path):
    """assert_ha fails on a render without the PDB and with a hard spread."""
    text = tools.template(["podDisruptionBudget.enabled=false"])
    path = tmp_path / "r.yaml"
    path.write_text(text)
    with pytest.raises(AssertionError, match="expected one PodDisruptionBudget"):
        assert_ha(docs_of(text), "kserve", checks, path)
    text = tools.template(["topologySpreadConstraints[0].whenUnsatisfiable=DoNotSchedule",
                           "topologySpreadConstraints[0].maxSkew=1",
                           "topologySpreadConstraints[0].topologyKey=kubernetes.io/hostname"])
    path.write_text(text)
    with pytest.raises(AssertionError, match="soft spread"):
        assert_ha(docs_of(text), "kserve", checks, path)


# ---------------------------------------------------------------- broken values

BROKEN = {
    "a misspelt top-level value (replica)": (["replica=3"], "replica"),
    "a misspelt nested value (webhook.timeoutSecond)": (["webhook.timeoutSecond=5"], "timeoutSecond"),
    "a misspelt mode (cert-manger)": (["certificates.mode=cert-manger"], "mode"),
    "a wrong type (replicas=two)": (["replicas=two"], "replicas"),
    "timeoutSeconds 4 with requestTimeout 3s": (
        ["webhook.timeoutSeconds=4"], "must stay at least 2s below webhook.timeoutSeconds"),
    "requestTimeout 4s with timeoutSeconds 5": (
        ["server.requestTimeout=4s"], "must stay at least 2s below webhook.timeoutSeconds"),
    "a request timeout without a unit": (["server.requestTimeout=3"], "requestTimeout"),
    "lookupTimeout not below requestTimeout": (
        ["server.lookupTimeout=3s"], "must stay below server.requestTimeout"),
    "a named flag in extraArgs": (
        ["server.extraArgs={--request-timeout=1s}"], "set server.requestTimeout instead"),
    "settings.kserveVersion not a release": (["settings.kserveVersion=latest"], "kserveVersion"),
    "server.kserveVersion a patch release not modelled": (["server.kserveVersion=v0.15.3"], "kserveVersion"),
    "timeoutSeconds above 30": (["webhook.timeoutSeconds=31"], "timeoutSeconds"),
    "provided without caCrt": (["certificates.mode=provided"], "certificates.provided.caCrt"),
    "provided without a serving pair": (
        ["certificates.mode=provided", "certificates.provided.caCrt=x"], "existingSecret, or tlsCrt and tlsKey"),
    "an unknown failurePolicy": (["webhook.failurePolicy=Never"], "failurePolicy"),
    "--addr in extraArgs": (["server.extraArgs={--addr=0.0.0.0:9444}"], "set ports.webhook and ports.admin instead"),
    "one port for both listeners": (["ports.admin=9443"], "serve's two listeners need two ports"),
    "the kubelet's port on the host network": (
        ["hostNetwork=true", "ports.webhook=10250"], "is the kubelet's port on every node"),
    "a privileged port": (["ports.webhook=443"], "ports"),
    "a webhook URL over plain HTTP": (["webhook.url=http://kserve-injector.example.com/mutate-pods"], "url"),
    "a relative runbook URL": (["metrics.prometheusRule.runbookUrl=docs/operations.md"], "runbookUrl"),
    "a probe namespace that is no DNS label": (["test.probeNamespace=Models"], "probeNamespace"),
}


@pytest.mark.parametrize("what", list(BROKEN))
def test_broken_values_fail(any_tools, what):
    sets, message = BROKEN[what]
    proc = any_tools.template(sets, check=False)
    assert proc.returncode != 0, f"{what}: helm template succeeded:\n{proc.stdout[:500]}"
    assert message in proc.stderr, f"{what}: {proc.stderr}"


# Each value set issue 27 found rendering (exit 0) into objects that crash-loop
# the server, that cert-manager or Kubernetes refuse, or that contradict each
# other: each is now refused, with a message naming the values to change.
# name -> (--set values, --set-file values, namespace, the message's words).
WHY = {
    "requestTimeout 0s": (["server.requestTimeout=0s"], [], "kserve",
                          'server.requestTimeout: "0s": must be greater than zero'),
    "lookupTimeout 0s": (["server.lookupTimeout=0s"], [], "kserve",
                         'server.lookupTimeout: "0s": must be greater than zero'),
    "secretTtl banana": (["clusterLookups.secretTtl=banana"], [], "kserve", "secretTtl"),
    "secretTtl 0s": (["clusterLookups.secretTtl=0s"], [], "kserve",
                     'clusterLookups.secretTtl: "0s": must be greater than zero'),
    "a duration serve cannot represent (0.001h)": (
        ["server.drainTimeout=0.001h"], [], "kserve", "a fraction of an hour must be whole seconds"),
    "requestTimeout 1s below the default lookup timeout": (
        ["server.requestTimeout=1s"], [], "kserve",
        "server.lookupTimeout (null: the server's 2s) must stay below server.requestTimeout (1s)"),
    "drainTimeout 120s with terminationGracePeriodSeconds 35": (
        ["server.drainTimeout=120s"], [], "kserve",
        "server.drainTimeout (120s) must stay below terminationGracePeriodSeconds (35)"),
    "shutdownDelay + drainTimeout at the grace period": (
        ["server.shutdownDelay=10s", "server.drainTimeout=20s"], [], "kserve",
        "raise terminationGracePeriodSeconds or lower server.shutdownDelay / server.drainTimeout"),
    "extraArgs --addr=0.0.0.0:9999": (["server.extraArgs={--addr=0.0.0.0:9999}"], [], "kserve",
                                      "server.extraArgs: --addr is set by the chart"),
    "extraArgs --cert-dir and its value": (["server.extraArgs={--cert-dir,/certs}"], [], "kserve",
                                           "server.extraArgs: --cert-dir is set by the chart"),
    "extraArgs '--admin-addr 0.0.0.0:1'": (["server.extraArgs={--admin-addr 0.0.0.0:1}"], [], "kserve",
                                           "server.extraArgs: --admin-addr is set by the chart"),
    "extraArgs '--idle-timeout 60s' as one item": (
        ["server.extraArgs={--idle-timeout 60s}"], [], "kserve", "is one argument with a space in it"),
    "extraArgs --namespaces": (["server.extraArgs={--namespaces=a}"], [], "kserve",
                               "--namespaces is set by the chart: set clusterLookups.namespaces instead"),
    "extraArgs --kserve-version": (["server.extraArgs={--kserve-version=v0.17}"], [], "kserve",
                                   "--kserve-version is set by the chart: set server.kserveVersion instead"),
    "issuerRef.kind without a name": (["certificates.certManager.issuerRef.kind=ClusterIssuer"], [],
                                      "kserve", "certificates.certManager.issuerRef.name is required"),
    "namespaceSelector null": (["webhook.namespaceSelector=null"], [], "kserve",
                               "webhook.namespaceSelector is null"),
    "excludedNamespaces null": (["webhook.excludedNamespaces=null"], [], "kserve",
                                "webhook.excludedNamespaces is null"),
    "objectSelector null": (["webhook.objectSelector=null"], [], "kserve",
                            "webhook.objectSelector is null, which would send every pod"),
    "shadow with reinvocationPolicy Never": (
        ["shadow.enabled=true", "webhook.reinvocationPolicy=Never"], [], "kserve",
        "shadow.enabled needs webhook.reinvocationPolicy=IfNeeded"),
    "shadow.warnings without shadow": (["shadow.warnings=true"], [], "kserve",
                                       "set shadow.enabled=true, or shadow.warnings=false"),
    "shadow name sorting first": (["shadow.enabled=true", "fullnameOverride=alpha"], [], "kserve",
                                  "set fullnameOverride to a name that sorts after it"),
    "watchKinds={secrets}": (["clusterLookups.watchKinds={secrets}"], [], "kserve",
                             "clusterLookups.watchKinds is replaced by clusterLookups.watch"),
    "no kind watched": ([f"clusterLookups.watch.{k}=false" for k in
                         ("serviceaccounts", "clusterstoragecontainers", "inferenceservices")],
                        [], "kserve", "keep at least one kind watched"),
    "namespaces={kube-system}": (["clusterLookups.namespaces={kube-system}"], [], "kserve",
                                 "clusterLookups.namespaces lists kube-system, a namespace of "
                                 "webhook.excludedNamespaces"),
    "namespaces listing the release namespace": (
        ["clusterLookups.namespaces={models,kserve}"], [], "kserve",
        "clusterLookups.namespaces lists kserve, the release namespace"),
    "outsideNamespaces without namespaces": (
        ["clusterLookups.outsideNamespaces=allow"], [], "kserve",
        "clusterLookups.outsideNamespaces (allow) applies only with clusterLookups.namespaces"),
    "lookups off with namespaces and watches": (
        ["clusterLookups.enabled=false", "clusterLookups.namespaces={models}",
         "clusterLookups.watch.secrets=true"], [], "kserve",
        "clusterLookups.enabled is false, so clusterLookups.watch, clusterLookups.namespaces would do nothing"),
    "lookups off with lookupTimeout": (
        ["clusterLookups.enabled=false", "server.lookupTimeout=1s"], [], "kserve",
        "clusterLookups.enabled is false, so server.lookupTimeout would do nothing"),
    "caCrt=notapem": (["certificates.mode=provided", "certificates.provided.caCrt=notapem",
                       "certificates.provided.existingSecret=mine"], [], "kserve",
                      "certificates.provided.caCrt is not a PEM certificate"),
    "certificates for another namespace's Service": (
        ["certificates.mode=provided"], "other-namespace-certs", "kserve",
        "certificates.provided.tlsCrt does not name kserve-injector.kserve.svc"),
    "a serving key that is not a key": (
        ["certificates.mode=provided"], "key-is-a-cert", "kserve",
        "certificates.provided.tlsKey is not a PEM private key"),
}


@pytest.fixture(scope="session")
def other_certs(tmp_path_factory):
    return make_certs(tmp_path_factory.mktemp("other-certs"), "other")


@pytest.mark.parametrize("what", list(WHY))
def test_issue_27_values_are_refused(any_tools, what, certs, other_certs):
    sets, files, namespace, message = WHY[what]
    if files == "other-namespace-certs":
        files = provided_args(other_certs)[1]
    elif files == "key-is-a-cert":
        files = provided_args(certs)[1][:2] + [f"certificates.provided.tlsKey={certs}/tls.crt"]
    proc = any_tools.template(sets, namespace=namespace, files=files, check=False)
    assert proc.returncode != 0, f"{what}: helm template succeeded:\n{proc.stdout[:500]}"
    assert message in proc.stderr, f"{what}: {proc.stderr}"
    if what == "shadow name sorting first":
        assert "release name" not in proc.stderr, proc.stderr


# Durations: the chart takes Go's spelling, which serve (humantime) reads the
# same; both refuse the second list; the chart refuses the third, which serve
# reads but Go does not spell that way (docs/helm.md).
BOTH_TAKE = ["1s", "500ms", "1m30s", "1h", "0.5h", "1.5s", "2.25m", "100us", "100µs", "7ns",
             "0.000001s", "1h2m3s4ms", "007s"]
BOTH_REFUSE = ["banana", "", "1.s", ".5s", "-1s", "1.5ns", "0.001h", "1S", "1s2"]
ONLY_SERVE_TAKES = ["30", "1 s", "1min", "1d", "2days", "1sec", "1.0000001s"]


def serve_takes(injector_bin, flag, value):
    """`serve FLAG=VALUE --help`: clap reads the value, then prints the help."""
    return run([injector_bin, "serve", f"{flag}={value}", "--help"], check=False).returncode == 0


def chart_takes(tools, value):
    proc = tools.template([f"server.drainTimeout={value}", "terminationGracePeriodSeconds=999999999999"],
                          check=False)
    return proc.returncode == 0


def test_durations_match_serve(tools, injector_bin):
    """server.drainTimeout (zero allowed) against `serve --drain-timeout`."""
    for value in BOTH_TAKE:
        assert serve_takes(injector_bin, "--drain-timeout", value), value
        assert chart_takes(tools, value), value
    for value in BOTH_REFUSE:
        assert not serve_takes(injector_bin, "--drain-timeout", value), value
        assert not chart_takes(tools, value), value
    for value in ONLY_SERVE_TAKES:
        assert serve_takes(injector_bin, "--drain-timeout", value), value
        assert not chart_takes(tools, value), value
    # zero: allowed for the drain, refused where serve refuses it
    assert chart_takes(tools, "0s") and serve_takes(injector_bin, "--drain-timeout", "0s")
    for value in ("0s", "0ms", "0m0s", "0.0s"):
        assert not serve_takes(injector_bin, "--secret-ttl", value), value
        proc = tools.template([f"clusterLookups.secretTtl={value}"], check=False)
        assert proc.returncode != 0 and "must be greater than zero" in proc.stderr, (value, proc.stderr)


def test_provided_certificates_for_the_release_namespace_pass(tools, tmp_path):
    """The refusal above is about the names: the same files made for the
    namespace the release goes to render, and so does a wildcard for it."""
    other = make_certs(tmp_path / "other", "other")
    tools.template(["certificates.mode=provided"], namespace="other", files=provided_args(other)[1])
    wild = tmp_path / "wild"
    wild.mkdir()
    run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
         "-keyout", wild / "tls.key", "-out", wild / "tls.crt", "-days", "2", "-subj", "/CN=wild",
         "-addext", "subjectAltName=DNS:*.models.svc"])
    files = [f"certificates.provided.caCrt={wild}/tls.crt", f"certificates.provided.tlsCrt={wild}/tls.crt",
             f"certificates.provided.tlsKey={wild}/tls.key"]
    tools.template(["certificates.mode=provided"], namespace="models", files=files)
    proc = tools.template(["certificates.mode=provided"], namespace="kserve", files=files, check=False)
    assert proc.returncode != 0 and "does not name kserve-injector.kserve.svc" in proc.stderr


def test_names_and_labels_fit_63(any_tools):
    """Issue 27: a fullnameOverride over 40 characters with
    replaceKServeMutator made a 70-character Job name, a 60-character
    nameOverride an 80-character label. Every name and label value is now at
    most 63 characters, cut with a hash (so still distinct), and the objects
    still refer to each other by those names."""
    for name in ("long-names", "long-names-cert-manager"):
        docs = docs_of(any_tools.template(VALUE_SETS[name][1]))
        names = [(d["kind"], d["metadata"]["name"]) for d in docs]
        assert len(set(names)) == len(names), names
        for doc in docs:
            metas = [doc["metadata"]]
            template = (doc.get("spec") or {}).get("template")
            if template:
                metas.append(template["metadata"])
            for meta in metas:
                for value in [meta.get("name") or ""] + list((meta.get("labels") or {}).values()):
                    assert len(value) <= 63, f"{doc['kind']}: {value!r} is {len(value)} characters"
    docs = docs_of(any_tools.template(VALUE_SETS["long-names"][1]))
    full = "k" + "x" * 62
    job = one(docs, "Job", next(d["metadata"]["name"] for d in by_kind(docs, "Job")
                                if d["metadata"]["name"].endswith("-replace-kserve-mutator")))
    assert job["spec"]["template"]["spec"]["serviceAccountName"] in {
        d["metadata"]["name"] for d in by_kind(docs, "ServiceAccount")}
    dep = one(docs, "Deployment", full)
    volumes = {v["name"]: v for v in dep["spec"]["template"]["spec"]["volumes"]}
    assert one(docs, "Secret", volumes["serving-cert"]["secret"]["secretName"])
    for binding in by_kind(docs, "ClusterRoleBinding") + by_kind(docs, "RoleBinding"):
        assert one(docs, binding["roleRef"]["kind"], binding["roleRef"]["name"])
        for subject in binding["subjects"]:
            assert one(docs, "ServiceAccount", subject["name"])
    cm = docs_of(any_tools.template(VALUE_SETS["long-names-cert-manager"][1]))
    inject = one(cm, "MutatingWebhookConfiguration")["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
    assert one(cm, "Certificate", inject.split("/")[1])["spec"]["isCA"] is True
    issuers = {d["metadata"]["name"] for d in by_kind(cm, "Issuer")}
    certificates = by_kind(cm, "Certificate")
    assert all(c["spec"]["issuerRef"]["name"] in issuers for c in certificates)
    mounted = one(cm, "Deployment")["spec"]["template"]["spec"]["volumes"][0]["secret"]["secretName"]
    assert mounted in {c["spec"]["secretName"] for c in certificates if not c["spec"].get("isCA")}


def test_watch_adds_to_the_default_kinds(tools, tmp_path):
    """clusterLookups.watch switches one kind on or off; the others keep the
    server's default (watchKinds={secrets} used to replace them all)."""
    def args(*sets):
        docs = docs_of(tools.template(list(sets)))
        return [a for a in one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
                if a.startswith("--watch-kinds")]
    assert args() == []
    assert args("clusterLookups.watch.secrets=true") == [
        "--watch-kinds=serviceaccounts,secrets,clusterstoragecontainers,inferenceservices"]
    assert args("clusterLookups.watch.inferenceservices=false") == [
        "--watch-kinds=serviceaccounts,clusterstoragecontainers"]
    # a values file copied from before keeps rendering: the former default
    old = tmp_path / "old-values.yaml"
    old.write_text("clusterLookups:\n  watchKinds: []\n")
    docs = docs_of(tools.template(values_files=[old]))
    assert not [a for a in one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
                if a.startswith("--watch-kinds")]


def test_kube_version_floor(tools):
    proc = tools.template(extra=["--kube-version", "1.30.14"], check=False)
    assert proc.returncode != 0 and "kubeVersion" in proc.stderr, proc.stderr


def test_a_values_file_with_a_typo_fails(tools, tmp_path):
    values = tmp_path / "values.yaml"
    values.write_text("webhook:\n  failurePolicy: Fail\n  timeoutseconds: 5\n")
    proc = tools.template(values_files=[values], check=False)
    assert proc.returncode != 0 and "timeoutseconds" in proc.stderr, proc.stderr


# ---------------------------------------------------------------- kube-apiserver 1.36

# cert-manager's and Prometheus Operator's kinds are stand-in CRDs that
# accept any object (their content is checked against tests/schemas above).
STUB_CRDS = [
    ("cert-manager.io", "Certificate", "certificates"),
    ("cert-manager.io", "Issuer", "issuers"),
    ("monitoring.coreos.com", "ServiceMonitor", "servicemonitors"),
    ("monitoring.coreos.com", "PrometheusRule", "prometheusrules"),
]


@pytest.fixture(scope="session")
def cluster(apiserver, tools, tmp_path_factory):
    crds = []
    for group, kind, plural in STUB_CRDS:
        crds.append({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{plural}.{group}"},
            "spec": {"group": group, "scope": "Namespaced",
                     "names": {"kind": kind, "plural": plural, "singular": kind.lower(),
                               "listKind": kind + "List"},
                     "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                         "openAPIV3Schema": {"type": "object",
                                             "x-kubernetes-preserve-unknown-fields": True}}}]}})
    apiserver.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(crds))
    for group, kind, plural in STUB_CRDS:
        apiserver.kubectl("wait", "--for=condition=Established", f"crd/{plural}.{group}", "--timeout=60s")
    for ns in ("kserve", ALT_NS, "models-a", "models-b"):
        apiserver.ensure_namespace(ns)
    chart = copy_tree(CHART, tmp_path_factory.mktemp("chart") / "kserve-injector")
    return apiserver, chart


@pytest.mark.parametrize("name", ALL_SETS)
def test_dry_run_server(cluster, tools, name, certs, tmp_path):
    """helm install --dry-run=server (the server's kinds and OpenAPI schema,
    lookups against it), then kubectl apply --dry-run=server of the same
    render (the API server's own validation and admission)."""
    server, chart = cluster
    if name == "provided":
        namespace = "kserve"
        sets, files = provided_args(certs)
    else:
        namespace, sets = VALUE_SETS[name]
        files = []
    cmd = [tools.helm, "install", "kserve-injector", chart, "--namespace", namespace,
           "--kubeconfig", server.kubeconfig, "--dry-run=server"]
    cmd += [a for s in sets for a in ("--set", s)] + [a for f in files for a in ("--set-file", f)]
    out = run(cmd).stdout
    assert "STATUS: pending-install" in out
    rendered = tools.template(sets, namespace=namespace, chart=chart, files=files)
    server.kubectl("apply", "--dry-run=server", "-f", "-", stdin=rendered)


def test_dry_run_server_fails_on_a_bad_object(cluster, tools, tmp_path):
    """The server-side dry-run refuses what every schema passes: a Service
    port out of range."""
    server, chart = cluster
    rendered = tools.template(["podDisruptionBudget.enabled=false"], chart=chart)
    broken = rendered.replace("port: 443", "port: 70000", 1)
    assert broken != rendered
    proc = server.kubectl("apply", "--dry-run=server", "-f", "-", stdin=broken, check=False)
    assert proc.returncode != 0 and "70000" in proc.stderr, proc.stderr


def secret_data(server, namespace, name):
    out = server.kubectl("get", "secret", name, "-n", namespace, "-o", "json").stdout
    secret = json.loads(out)
    return ({k: base64.b64decode(v) for k, v in secret["data"].items()},
            secret["metadata"].get("annotations") or {})


def ca_bundle(server):
    out = server.kubectl("get", "mutatingwebhookconfiguration", "kserve-injector", "-o", "json").stdout
    return base64.b64decode(json.loads(out)["webhooks"][0]["clientConfig"]["caBundle"])


def test_self_signed_reused_on_upgrade(cluster, tools, tmp_path):
    """certificates.mode=self-signed: a real helm install, then an upgrade
    keeps the CA, the caBundle and the serving pair; an upgrade within
    renewDaysBefore of the expiry renews the serving pair under the same CA."""
    server, chart = cluster
    ns = "self-signed"
    server.kubectl("create", "namespace", ns)
    base = [tools.helm, "--kubeconfig", server.kubeconfig, "--namespace", ns]
    sets = ["--set", "certificates.mode=self-signed,podDisruptionBudget.enabled=false"]
    try:
        run(base + ["install", "kserve-injector", chart] + sets)
        first, first_notes = secret_data(server, ns, "kserve-injector-serving-cert")
        ca, _ = secret_data(server, ns, "kserve-injector-self-signed-ca")
        assert ca_bundle(server) == first["ca.crt"] == ca["tls.crt"]

        run(base + ["upgrade", "kserve-injector", chart] + sets)
        second, second_notes = secret_data(server, ns, "kserve-injector-serving-cert")
        assert second == first and second_notes == first_notes, "rotated on a plain upgrade"
        assert ca_bundle(server) == first["ca.crt"]

        run(base + ["upgrade", "kserve-injector", chart] + sets
            + ["--set", "certificates.selfSigned.renewDaysBefore=400"])
        third, third_notes = secret_data(server, ns, "kserve-injector-serving-cert")
        assert third["tls.crt"] != first["tls.crt"], "not renewed within renewDaysBefore"
        assert third["ca.crt"] == first["ca.crt"] and ca_bundle(server) == first["ca.crt"]
        assert third_notes["kserve-injector.kserve.io/not-after"] >= first_notes["kserve-injector.kserve.io/not-after"]
        (tmp_path / "ca.crt").write_bytes(third["ca.crt"])
        (tmp_path / "tls.crt").write_bytes(third["tls.crt"])
        run(["openssl", "verify", "-CAfile", tmp_path / "ca.crt", tmp_path / "tls.crt"])
    finally:
        run(base + ["uninstall", "kserve-injector"], check=False)


def test_certificate_mode_switches(cluster, tools, tmp_path):
    """certificates.mode on `helm upgrade` (docs/helm.md, "Switching
    certificates.mode"): cert-manager -> self-signed stops before anything
    changes, because cert-manager made the serving Secret Helm would have to
    take over, with the commands that get through; after them it works, and
    so do self-signed -> provided -> self-signed -> cert-manager."""
    server, chart = cluster
    ns, name = "switch", "kserve-injector-switch"
    server.ensure_namespace(ns)
    secret = f"{name}-serving-cert"
    base = [tools.helm, "--kubeconfig", server.kubeconfig, "--namespace", ns]
    common = ["--set", f"podDisruptionBudget.enabled=false,fullnameOverride={name}"]
    certs_dir = make_certs(tmp_path / "certs", ns, service=name)
    provided = ["--set", "certificates.mode=provided"] + [
        a for f in provided_args(certs_dir)[1] for a in ("--set-file", f)]

    def upgrade(*sets, check=True):
        return run(base + ["upgrade", "kserve-injector", chart] + common + list(sets), check=check)

    try:
        run(base + ["install", "kserve-injector", chart] + common)  # cert-manager, the default
        # what cert-manager's issuance creates (no controller runs here)
        server.kubectl("-n", ns, "create", "secret", "tls", secret,
                       f"--cert={certs_dir}/tls.crt", f"--key={certs_dir}/tls.key")
        server.kubectl("-n", ns, "annotate", "secret", secret,
                       f"cert-manager.io/certificate-name={name}-serving")
        refused = upgrade("--set", "certificates.mode=self-signed", check=False)
        assert refused.returncode != 0, refused.stdout
        assert (f"renders the Secret {ns}/{secret}, which exists and cert-manager made it for the "
                f"Certificate {name}-serving") in refused.stderr, refused.stderr
        assert "cannot be imported" not in refused.stderr
        assert server.kubectl("-n", ns, "get", "certificate", f"{name}-serving").returncode == 0
        # the message's way through
        server.kubectl("-n", ns, "delete", "certificate", f"{name}-serving", "--ignore-not-found")
        server.kubectl("-n", ns, "delete", "secret", secret)
        upgrade("--set", "certificates.mode=self-signed")
        data, _ = secret_data(server, ns, secret)
        assert webhook_bundle(server, name) == data["ca.crt"]

        upgrade(*provided)
        data, _ = secret_data(server, ns, secret)
        assert data["tls.crt"] == (certs_dir / "tls.crt").read_bytes()
        assert webhook_bundle(server, name) == (certs_dir / "ca.crt").read_bytes()

        upgrade("--set", "certificates.mode=self-signed")
        data, _ = secret_data(server, ns, secret)
        assert data["tls.crt"] != (certs_dir / "tls.crt").read_bytes()
        assert webhook_bundle(server, name) == data["ca.crt"]

        upgrade("--set", "certificates.mode=cert-manager")
        assert server.kubectl("-n", ns, "get", "certificate", f"{name}-serving").returncode == 0
        gone = server.kubectl("-n", ns, "get", "secret", secret, check=False)
        assert gone.returncode != 0, "the chart's Secret stays for cert-manager to fill"
        config = json.loads(server.kubectl("get", "mutatingwebhookconfiguration", name, "-o", "json").stdout)
        assert config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == f"{ns}/{name}-ca"
    finally:
        run(base + ["uninstall", "kserve-injector"], check=False)


def test_existing_secret_must_name_the_service(cluster, tools, other_certs, tmp_path):
    """certificates.provided.existingSecret: on a server-side dry-run
    (lookup reads the Secret), a Secret whose certificate names another
    namespace's Service is refused; one for this Service passes."""
    server, chart = cluster
    ns = "existing"
    server.ensure_namespace(ns)
    made = make_certs(tmp_path / "certs", ns)
    for name, pair in (("for-other", other_certs), ("for-existing", made)):
        server.kubectl("-n", ns, "create", "secret", "tls", name, f"--cert={pair}/tls.crt",
                       f"--key={pair}/tls.key")

    def dry_run(secret):
        return run([tools.helm, "install", "kserve-injector", chart, "--namespace", ns,
                    "--kubeconfig", server.kubeconfig, "--dry-run=server",
                    "--set", f"podDisruptionBudget.enabled=false,certificates.mode=provided,"
                             f"certificates.provided.existingSecret={secret}",
                    "--set-file", f"certificates.provided.caCrt={made}/ca.crt"], check=False)
    refused = dry_run("for-other")
    assert refused.returncode != 0
    assert (f"the tls.crt of the Secret {ns}/for-other (certificates.provided.existingSecret) does not "
            f"name kserve-injector.{ns}.svc") in refused.stderr, refused.stderr
    assert dry_run("for-existing").returncode == 0
    assert dry_run("not-there").returncode == 0, "a Secret made later is not checked"


def webhook_bundle(server, name):
    out = server.kubectl("get", "mutatingwebhookconfiguration", name, "-o", "json").stdout
    return base64.b64decode(json.loads(out)["webhooks"][0]["clientConfig"]["caBundle"])


LOOKUP_KINDS = {"serviceaccounts": "", "secrets": "", "clusterstoragecontainers": "serving.kserve.io",
                "inferenceservices": "serving.kserve.io"}
VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")


def used_verbs(kind, watched):
    """What the server does with a kind (src/lookups): a watched kind is
    listed and watched; one object a pod needs is read with a GET (on a
    cache miss, or when the kind is not watched); ClusterStorageContainers
    are always read whole, with a LIST."""
    if kind == "clusterstoragecontainers":
        return {"list", "watch"} if watched else {"list"}
    return {"get", "list", "watch"} if watched else {"get"}


def rbac_cases():
    """Every non-empty set of watched kinds, cluster-wide and namespaced, and
    lookups off: (id, --set values, watched kinds or None, namespaced)."""
    cases = []
    kinds = list(LOOKUP_KINDS)
    for mask in range(1, 16):
        watched = {k for i, k in enumerate(kinds) if mask & (1 << i)}
        sets = [f"clusterLookups.watch.{k}={str(k in watched).lower()}" for k in kinds]
        for namespaced in (False, True):
            extra = ["clusterLookups.namespaces={models-a}"] if namespaced else []
            cases.append((f"lk{mask}{'n' if namespaced else 'c'}", sets + extra, watched, namespaced))
    cases.append(("lkoff", ["clusterLookups.enabled=false"], None, False))
    return cases


def json_stream(text):
    """kubectl -o json's output for several objects: one JSON document after another."""
    decoder, docs, at = json.JSONDecoder(), [], 0
    while True:
        while at < len(text) and text[at].isspace():
            at += 1
        if at == len(text):
            return docs
        doc, at = decoder.raw_decode(text, at)
        docs.extend(doc["items"] if doc.get("kind") == "List" else [doc])


def rbac_mismatches(server, ns, case, docs, watched, namespaced):
    """Applies the ServiceAccount and RBAC of docs, then asks one
    SelfSubjectAccessReview per verb, resource and namespace as that
    ServiceAccount (`case`); returns (answers checked, what differs from
    used_verbs)."""
    rbac = [d for d in docs if d["kind"] in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding",
                                             "Role", "RoleBinding")]
    server.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(rbac))
    reviews, expected = [], []
    for kind, group in LOOKUP_KINDS.items():
        scopes = [""] if kind == "clusterstoragecontainers" else ["models-a", "elsewhere", ""]
        for scope in scopes:
            for verb in VERBS:
                attrs = {"verb": verb, "group": group, "resource": kind}
                if scope:
                    attrs["namespace"] = scope
                reviews.append({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                                "spec": {"resourceAttributes": attrs}})
                allowed = (watched is not None and verb in used_verbs(kind, kind in watched)
                           and (not namespaced or scope == "models-a" or kind == "clusterstoragecontainers"))
                expected.append((f"{verb} {kind} in {scope or '(all namespaces)'}", allowed))
    out = server.kubectl(f"--as=system:serviceaccount:{ns}:{case}", "create", "-o", "json", "-f", "-",
                         stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": reviews})).stdout
    answers = json_stream(out)
    assert len(answers) == len(expected), case
    return len(answers), [
        f"{case}: {what}: {'allowed' if not allowed else 'denied'}, expected {'allowed' if allowed else 'denied'}"
        for (what, allowed), answer in zip(expected, answers)
        if answer["status"].get("allowed", False) != allowed]


def test_rbac_grants_exactly_what_the_flags_use(cluster, tools):
    """For every combination of clusterLookups.watch, cluster-wide and with
    clusterLookups.namespaces, and with lookups off: the rendered
    ServiceAccount and RBAC applied to kube-apiserver 1.36, then one
    SelfSubjectAccessReview per verb, resource and namespace, as the
    webhook's ServiceAccount. Allowed is exactly what the server uses with
    the flags the same render passes (used_verbs); writes never. A role with
    one verb too many is caught."""
    server, chart = cluster
    ns = "rbac"
    server.ensure_namespace(ns)
    failures = []
    checked = 0
    for case, sets, watched, namespaced in rbac_cases():
        docs = docs_of(tools.template(sets + [f"fullnameOverride={case}"], namespace=ns, chart=chart))
        args = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
        if watched is not None:
            flag = [a for a in args if a.startswith("--watch-kinds=")]
            passed = set(flag[0].split("=", 1)[1].split(",")) if flag else {
                "serviceaccounts", "clusterstoragecontainers", "inferenceservices"}
            assert passed == watched, (case, args)
        n, differ = rbac_mismatches(server, ns, case, docs, watched, namespaced)
        checked += n
        failures += differ
    assert not failures, "\n".join(failures)
    assert checked == 31 * 80
    # the check sees a role granting `get` on ClusterStorageContainers, which
    # the server never uses
    docs = docs_of(tools.template(["fullnameOverride=lkextra"], namespace=ns, chart=chart))
    role = one(docs, "ClusterRole", "lkextra-lookups")
    next(r for r in role["rules"] if r["resources"] == ["clusterstoragecontainers"])["verbs"].append("get")
    _, differ = rbac_mismatches(server, ns, "lkextra", docs,
                                {"serviceaccounts", "clusterstoragecontainers", "inferenceservices"}, False)
    assert differ == ["lkextra: get clusterstoragecontainers in (all namespaces): allowed, expected denied"]
    # the same answers through kubectl auth can-i, for the default install
    # (kubectl resolves a resource through discovery: stand-in CRDs for KServe's)
    crds = [{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
             "metadata": {"name": f"{plural}.serving.kserve.io"},
             "spec": {"group": "serving.kserve.io", "scope": scope,
                      "names": {"kind": kind, "plural": plural, "singular": kind.lower(),
                                "listKind": kind + "List"},
                      "versions": [{"name": "v1alpha1", "served": True, "storage": True, "schema": {
                          "openAPIV3Schema": {"type": "object",
                                              "x-kubernetes-preserve-unknown-fields": True}}}]}}
            for kind, plural, scope in (("ClusterStorageContainer", "clusterstoragecontainers", "Cluster"),
                                        ("InferenceService", "inferenceservices", "Namespaced"))]
    server.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(crds))
    for crd in crds:
        server.kubectl("wait", "--for=condition=Established", f"crd/{crd['metadata']['name']}",
                       "--timeout=60s")
    docs = docs_of(tools.template(["fullnameOverride=lkdefault"], namespace=ns, chart=chart))
    server.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(
        [d for d in docs if d["kind"] in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding")]))

    def can(*what):
        proc = server.kubectl("auth", "can-i", f"--as=system:serviceaccount:{ns}:lkdefault", *what,
                              check=False)
        return proc.stdout.strip() or proc.stderr.strip()
    assert can("get", "secrets", "-n", "models-a") == "yes"
    assert can("list", "secrets", "-n", "models-a") == "no"
    assert can("watch", "serviceaccounts", "--all-namespaces") == "yes"
    assert can("get", "clusterstoragecontainers.serving.kserve.io") == "no"
    assert can("list", "clusterstoragecontainers.serving.kserve.io") == "yes"
    assert can("patch", "inferenceservices.serving.kserve.io", "-n", "models-a") == "no"


def test_self_signed_certificate_is_served(tools, injector_bin, tmp_path):
    """The pair the chart generates (RSA, Sprig) loads in `serve`, and a client
    trusting the webhook's caBundle reaches kserve-injector.kserve.svc."""
    docs = docs_of(tools.template(["certificates.mode=self-signed"]))
    secret = one(docs, "Secret", "kserve-injector-serving-cert")
    certs = tmp_path / "certs"
    certs.mkdir()
    for key, value in secret["data"].items():
        (certs / key).write_bytes(base64.b64decode(value))
    bundle = tmp_path / "bundle.crt"
    bundle.write_bytes(base64.b64decode(
        one(docs, "MutatingWebhookConfiguration")["webhooks"][0]["clientConfig"]["caBundle"]))
    port, admin = free_port(), free_port()
    server = subprocess.Popen(
        [injector_bin, "serve", "--cert-dir", certs, "--addr", f"127.0.0.1:{port}",
         "--admin-addr", f"127.0.0.1:{admin}", "--shutdown-delay", "0s", "--log-format", "text"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        for _ in range(100):
            if run(["curl", "-fsS", f"http://127.0.0.1:{admin}/readyz"], check=False).returncode == 0:
                break
            assert server.poll() is None, server.communicate()[0]
            time.sleep(0.1)
        out = run(["curl", "-fsS", "--cacert", bundle,
                   "--resolve", f"kserve-injector.kserve.svc:{port}:127.0.0.1",
                   "-H", "content-type: application/json",
                   "--data", f"@{ROOT / 'benches' / 'inputs' / 'minimal-oci.json'}",
                   f"https://kserve-injector.kserve.svc:{port}/mutate-pods"]).stdout
        assert json.loads(out)["response"]["allowed"] is True
    finally:
        server.terminate()
        server.wait(timeout=30)


def hook_args(docs, job, container):
    spec = one(docs, "Job", job)["spec"]["template"]["spec"]
    for c in spec.get("initContainers", []) + spec["containers"]:
        if c["name"] == container:
            return spec["serviceAccountName"], c["args"]
    raise AssertionError(f"no container {container} in {job}")


def kserve_webhooks(server):
    out = server.kubectl("get", "mutatingwebhookconfiguration", KSERVE_CONFIG, "-o", "json").stdout
    return [h["name"] for h in json.loads(out)["webhooks"]]


def test_replace_kserve_mutator_hooks(cluster, tools):
    """The hook Jobs' kubectl commands, run as the hooks' ServiceAccount with
    the hooks' RBAC on kube-apiserver 1.36: wait for the rollout, delete only
    KServe's pod-mutator entry (again: no change), nothing else may be
    patched, and the uninstall guard fails until the entry is back."""
    server, chart = cluster
    ns = "hooks"
    server.kubectl("create", "namespace", ns)
    docs = docs_of(tools.template(["replaceKServeMutator=true", "podDisruptionBudget.enabled=false",
                                   "certificates.mode=self-signed"], namespace=ns, chart=chart))
    kserve = [d for d in docs_of((ROOT / "fixtures" / "install" / "kserve-helm-rendered.yaml").read_text())
              if d["kind"] == "MutatingWebhookConfiguration"]
    # The webhook configurations are cluster-wide and the API server is the
    # session's: left behind, KServe's entry and the chart's (failurePolicy
    # Fail, no endpoints) would refuse every later test's labelled pods.
    hooks = [d["metadata"]["name"] for d in kserve + docs if d["kind"] == "MutatingWebhookConfiguration"]
    try:
        server.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(kserve))
        assert kserve_webhooks(server) == [KSERVE_DEFAULTER, KSERVE_POD_MUTATOR]
        # everything the chart renders, hooks included, as helm would create it
        server.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(docs))
        # no controller-manager: report the Deployment rolled out by hand
        server.kubectl("patch", "deployment", "kserve-injector", "-n", ns, "--subresource=status",
                       "--type=merge", "-p", json.dumps({"status": {
                           "observedGeneration": 1, "replicas": 2, "updatedReplicas": 2,
                           "readyReplicas": 2, "availableReplicas": 2}}))

        def as_hook(sa, args, check=True):
            return server.kubectl(f"--as=system:serviceaccount:{ns}:{sa}", *args, check=check)

        sa, args = hook_args(docs, "kserve-injector-replace-kserve-mutator", "wait-for-injector")
        as_hook(sa, args)
        guard_sa, guard = hook_args(docs, "kserve-injector-check-kserve-mutator", "require-kserve-pod-mutator")
        guard = [a if not a.startswith("--timeout=") else "--timeout=2s" for a in guard]
        as_hook(guard_sa, guard)  # KServe's entry is there: uninstall may go on

        sa, args = hook_args(docs, "kserve-injector-replace-kserve-mutator", "remove-kserve-pod-mutator")
        as_hook(sa, args)
        assert kserve_webhooks(server) == [KSERVE_DEFAULTER]
        out = as_hook(sa, args).stdout  # post-upgrade: already gone
        assert "no change" in out, out
        assert kserve_webhooks(server) == [KSERVE_DEFAULTER]

        denied = as_hook(sa, ["patch", "mutatingwebhookconfiguration", "kserve-injector", "--type=merge",
                              "-p", '{"metadata":{"labels":{"x":"y"}}}'], check=False)
        assert denied.returncode != 0 and "forbidden" in denied.stderr, denied.stderr
        denied = as_hook(sa, ["get", "secrets", "-n", ns], check=False)
        assert denied.returncode != 0 and "forbidden" in denied.stderr, denied.stderr

        failed = as_hook(guard_sa, guard, check=False)
        assert failed.returncode != 0 and "timed out" in failed.stderr, failed.stderr
        server.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(kserve))  # KServe upgraded
        as_hook(guard_sa, guard)
    finally:
        server.kubectl("delete", "mutatingwebhookconfiguration", "--ignore-not-found", *hooks)


def test_helm_test_check_runs_with_the_hooks_rbac(cluster, tools, injector_bin, tmp_path):
    """What `helm test` runs, on kube-apiserver 1.36: the chart rendered with
    its test hook and applied, and `kserve-injector check` with the hook
    pod's arguments as the hook's ServiceAccount (impersonated: no kubelet
    runs the hook's pod, or the webhook's). Every check reads what it needs
    under the hook's RBAC; what fails or warns is only what a cluster
    without nodes cannot have: the webhook's Service answers nothing."""
    server, chart = cluster
    ns = "helmtest"
    server.ensure_namespace(ns)
    server.ensure_namespace("helmtest-models")
    docs = docs_of(tools.template(["certificates.mode=self-signed", "test.probeNamespace=helmtest-models"],
                                  namespace=ns, chart=chart, tests=True))
    hooks = [d for d in docs if (d["metadata"].get("annotations") or {}).get("helm.sh/hook") == "test"]
    pod = one(hooks, "Pod")
    # KServe's ConfigMap, as `default-config` writes it, its images tagged
    # as KServe's chart renders them at HEAD
    config = yaml.safe_load(run([injector_bin, "default-config"]).stdout.replace(":latest", ":v0.20.0"))
    config["metadata"] = {"name": "inferenceservice-config", "namespace": ns}
    hook_names = [d["metadata"]["name"] for d in docs if d["kind"] == "MutatingWebhookConfiguration"]
    try:
        server.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(
            [d for d in docs if d is not pod] + [config]))
        server.kubectl("patch", "deployment", "kserve-injector", "-n", ns, "--subresource=status",
                       "--type=merge", "-p", json.dumps({"status": {
                           "observedGeneration": 1, "replicas": 2, "updatedReplicas": 2,
                           "readyReplicas": 2, "availableReplicas": 2}}))
        kubeconfig = yaml.safe_load(Path(server.kubeconfig).read_text())
        for user in kubeconfig["users"]:
            user["user"]["as"] = f"system:serviceaccount:{ns}:{pod['spec']['serviceAccountName']}"
        as_hook = tmp_path / "hook.kubeconfig"
        as_hook.write_text(yaml.safe_dump(kubeconfig))
        args = pod["spec"]["containers"][0]["args"]
        proc = run([injector_bin, *args, "-o", "json", "--kubeconfig", as_hook], check=False)
        report = json.loads(proc.stdout)
        lines = {c["id"]: (c["status"], c["message"]) for c in report["checks"]}
        denied = {i: m for i, (_, m) in lines.items()
                  if any(w in m for w in ("forbidden", "cannot read", "cannot list", "could not show"))}
        assert not denied, json.dumps(report, indent=1)
        not_passing = {i: s for i, (s, _) in lines.items() if s != "pass"}
        # no pod behind the Service (no kubelet): the API server's call fails
        # (how depends on where it dials), and this machine cannot resolve
        # the Service's name
        assert not_passing == {"webhook.handshake": "warn", "endToEnd.dryRun": "fail"}, \
            json.dumps(report, indent=1)
        for i in ("rbac.lookups", "podSecurity.restricted", "cluster.imageVolume",
                  "webhook.caBundle", "config.inferenceservice-config"):
            assert i in lines, json.dumps(report, indent=1)
    finally:
        server.kubectl("delete", "mutatingwebhookconfiguration", "--ignore-not-found", *hook_names)


# ---------------------------------------------------------------- KServe's chart, post-rendered

def fake_kserve_chart(path, swapped=False):
    """A chart whose templates are fixtures/install's rendering of KServe's
    chart (optionally with KServe's two webhooks in the other order)."""
    (path / "templates").mkdir(parents=True)
    (path / "Chart.yaml").write_text("apiVersion: v2\nname: kserve\nversion: 0.15.2\n")
    docs = docs_of((ROOT / "fixtures" / "install" / "kserve-helm-rendered.yaml").read_text())
    if swapped:
        for doc in docs:
            if doc["kind"] == "MutatingWebhookConfiguration":
                doc["webhooks"].reverse()
    (path / "templates" / "kserve.yaml").write_text(yaml.safe_dump_all(docs))
    return path


@pytest.mark.parametrize("swapped", [False, True])
def test_post_renderer_on_kserves_chart(any_tools, checks, swapped, tmp_path):
    """manifests/helm-post-renderer.sh on KServe's chart: by path with Helm 3,
    as the postrenderer plugin manifests/helm-post-renderer-plugin with Helm 4
    (which takes plugins only). It removes only the pod mutator, and fails
    the render when KServe's layout changed."""
    chart = fake_kserve_chart(tmp_path / "kserve", swapped)
    env = dict(os.environ, KUBECTL=str(any_tools.kubectl),
               HELM_DATA_HOME=str(tmp_path / "data"), HELM_CONFIG_HOME=str(tmp_path / "config"),
               HELM_CACHE_HOME=str(tmp_path / "cache"))
    env.pop("HELM_PLUGINS", None)
    if any_tools.helm_version.startswith("v3."):
        renderer = ROOT / "manifests" / "helm-post-renderer.sh"
    else:
        run([any_tools.helm, "plugin", "install", ROOT / "manifests" / "helm-post-renderer-plugin"], env=env)
        renderer = "kserve-replace-mutator"
    proc = run([any_tools.helm, "template", "kserve", chart, "--namespace", "kserve",
                "--post-renderer", renderer], env=env, check=False)
    if swapped:
        assert proc.returncode != 0, proc.stdout[:500]
        return
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "out.yaml"
    out.write_text(proc.stdout)
    checks.replaced(str(out))


# ---------------------------------------------------------------- package

def test_package(tools, tmp_path):
    out = run([tools.helm, "package", CHART, "--destination", tmp_path]).stdout
    archive = tmp_path / "kserve-injector-0.1.0.tgz"
    assert archive.is_file(), out
    names = run(["tar", "-tzf", archive]).stdout.split()
    for name in ("kserve-injector/Chart.yaml", "kserve-injector/values.yaml",
                 "kserve-injector/values.schema.json", "kserve-injector/templates/webhook.yaml"):
        assert name in names, names
    assert tools.template(chart=archive) == tools.template()
    lint = run([tools.helm, "lint", "--strict", archive]).stdout
    assert "0 chart(s) failed" in lint


# ---------------------------------------------------------------- the host network and helm test

def test_host_network_values_reach_the_pods_and_the_webhook(tools):
    """hostNetwork, the ports and webhook.url reach the Deployment (its args,
    ports, dnsPolicy), the webhook's clientConfig and the serving
    certificate's names; the Service, probes and NetworkPolicy follow the
    named ports."""
    docs = docs_of(render_set(tools, "webhook-url")[1])
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert pod["hostNetwork"] is True and pod["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert container["args"][4:6] == ["--addr=0.0.0.0:10260", "--admin-addr=0.0.0.0:10261"]
    assert [(p["name"], p["containerPort"]) for p in container["ports"]] == [
        ("webhook-server", 10260), ("admin", 10261)]
    assert container["readinessProbe"]["httpGet"]["port"] == "admin"
    assert one(docs, "Service", "kserve-injector")["spec"]["ports"][0]["targetPort"] == "webhook-server"
    hook = one(docs, "MutatingWebhookConfiguration")["webhooks"][0]
    assert hook["clientConfig"] == {"url": "https://kserve-injector.example.com:10260/mutate-pods"}
    assert "kserve-injector.example.com" in one(docs, "Certificate", "kserve-injector-serving")["spec"]["dnsNames"]
    ip = docs_of(tools.template(["webhook.url=https://10.0.0.7:10260/mutate-pods"]))
    serving = one(ip, "Certificate", "kserve-injector-serving")["spec"]
    assert serving["ipAddresses"] == ["10.0.0.7"] and "10.0.0.7" not in serving["dnsNames"]
    default = one(docs_of(tools.template()), "Deployment")["spec"]["template"]["spec"]
    assert "hostNetwork" not in default and not any(a.startswith("--addr") for a in default["containers"][0]["args"])


def test_self_signed_certificate_names_the_webhook_url(tools, tmp_path):
    """In self-signed mode the URL's host (a name or an IP) is in the serving
    certificate the chart makes, so the API server accepts it."""
    for url, san in (("https://webhook.example.com:10260/mutate-pods", "DNS:webhook.example.com"),
                     ("https://10.0.0.7:10260/mutate-pods", "IP Address:10.0.0.7")):
        docs = docs_of(tools.template(["certificates.mode=self-signed", f"webhook.url={url}"]))
        secret = one(docs, "Secret", "kserve-injector-serving-cert")
        crt = tmp_path / "tls.crt"
        crt.write_bytes(base64.b64decode(secret["data"]["tls.crt"]))
        text = run(["openssl", "x509", "-in", crt, "-noout", "-ext", "subjectAltName"]).stdout
        assert san in text, text


def test_helm_test_hook_renders_check_with_its_own_rbac(tools, checks, tmp_path):
    """`helm template` renders the test hook: a pod running `kserve-injector
    check` from the chart's image, and the ServiceAccount, roles and
    bindings it needs, every one a test hook removed once it passes; valid
    objects, and none when test.enabled is false."""
    text = tools.template(["test.probeNamespace=models"], tests=True)
    path = tmp_path / "hook.yaml"
    path.write_text(text)
    validate(docs_of(text), checks, path)
    hooks = [d for d in docs_of(text) if (d["metadata"].get("annotations") or {}).get("helm.sh/hook") == "test"]
    assert sorted(d["kind"] for d in hooks) == ["ClusterRole", "ClusterRoleBinding", "Pod", "Role", "Role",
                                                "RoleBinding", "RoleBinding", "ServiceAccount"]
    for d in hooks:
        assert d["metadata"]["annotations"]["helm.sh/hook-delete-policy"] == "before-hook-creation,hook-succeeded"
    pod = one(hooks, "Pod")
    main = one(docs_of(text), "Deployment")["spec"]["template"]["spec"]["containers"][0]
    container = pod["spec"]["containers"][0]
    assert container["image"] == main["image"]
    assert container["args"] == ["check", "--namespace=kserve", "--name=kserve-injector", "--probe-namespace=models"]
    assert pod["spec"]["restartPolicy"] == "Never"
    assert pod["spec"]["serviceAccountName"] == one(hooks, "ServiceAccount")["metadata"]["name"]
    assert pod["metadata"]["labels"]["app.kubernetes.io/name"] != "kserve-injector", "not the webhook's selector"
    probe_role = [r for r in by_kind(hooks, "Role") if r["metadata"]["namespace"] == "models"]
    assert probe_role and probe_role[0]["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["create"]}]
    role = [r for r in by_kind(hooks, "Role") if r["metadata"]["namespace"] == "kserve"][0]
    assert {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["kserve-injector-serving-cert"],
            "verbs": ["get"]} in role["rules"]
    assert {"apiGroups": [""], "resources": ["podtemplates"], "verbs": ["create"]} in role["rules"]
    cluster = one(hooks, "ClusterRole")["rules"]
    assert {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list"]} in cluster
    assert all(set(r["verbs"]) <= {"get", "list", "create"} for r in cluster), cluster
    assert not [d for d in docs_of(tools.template(["test.enabled=false"], tests=True))
                if (d["metadata"].get("annotations") or {}).get("helm.sh/hook") == "test"]
