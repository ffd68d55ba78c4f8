"""A running `serve` with cluster lookups against the test kube-apiserver,
a short load that makes each kind of answer (200, a denial, 404, 415, 503,
504), and a real Prometheus (Debian's package) scraping it on loopback:
what test_monitoring.py evaluates the alerts and the dashboard against."""

import json
import re
import shutil
import socket
import ssl
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import yaml

from conftest import ROOT, free_port, run

INPUTS = ROOT / "benches" / "inputs"
# Stand-ins for KServe's CRDs, so that the watches list (InferenceServices are
# watched as v1beta1; test_helm.py's stand-in serves v1alpha1, kept here).
KSERVE_CRDS = [
    ("ClusterStorageContainer", "clusterstoragecontainers", "Cluster", ["v1alpha1"]),
    ("InferenceService", "inferenceservices", "Namespaced", ["v1alpha1", "v1beta1"]),
]


def kserve_crds():
    return [{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
             "metadata": {"name": f"{plural}.serving.kserve.io"},
             "spec": {"group": "serving.kserve.io", "scope": scope,
                      "names": {"kind": kind, "plural": plural, "singular": kind.lower(),
                                "listKind": kind + "List"},
                      "versions": [{"name": v, "served": True, "storage": i == 0, "schema": {
                          "openAPIV3Schema": {"type": "object",
                                              "x-kubernetes-preserve-unknown-fields": True}}}
                                   for i, v in enumerate(versions)]}}
            for kind, plural, scope, versions in KSERVE_CRDS]


def wait_for(what, check, timeout=30.0, proc=None, log=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"{what}: the process exited:\n{Path(log).read_text()[-3000:]}")
        time.sleep(0.2)
    tail = Path(log).read_text()[-3000:] if log else ""
    raise AssertionError(f"{what}: not within {timeout:g} s\n{tail}")


def http_ok(url):
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


class Served:
    """`serve` with certificates from `kserve-injector certs` (valid 3 days,
    so that the 7-day expiry warning has something to say), a config file
    and cluster lookups against the test kube-apiserver."""

    def __init__(self, injector_bin, apiserver, tmp):
        self.tmp = Path(tmp)
        self.certs = self.tmp / "certs"
        run([injector_bin, "certs", "--service", "kserve-injector", "--namespace", "kserve",
             "--days", "3", "--out", self.certs])
        self.config = self.tmp / "inferenceservice-config.yaml"
        self.config.write_text(run([injector_bin, "default-config"]).stdout)
        apiserver.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(kserve_crds()))
        for _, plural, _, _ in KSERVE_CRDS:
            apiserver.kubectl("wait", "--for=condition=Established",
                              f"crd/{plural}.serving.kserve.io", "--timeout=60s")
        self.port, self.admin = free_port(), free_port()
        self.log = self.tmp / "serve.log"
        self.proc = subprocess.Popen(
            [injector_bin, "serve", "--cert-dir", self.certs,
             "--addr", f"127.0.0.1:{self.port}", "--admin-addr", f"127.0.0.1:{self.admin}",
             "--kubeconfig", apiserver.kubeconfig, "--cluster-lookups", "on",
             "--config", self.config, "--config-poll-interval", "1s", "--cert-poll-interval", "1s",
             # --body-timeout past --request-timeout: a stalled body is then a 504
             # (the timeout the alerts watch), not the body pace's 408.
             "--request-timeout", "2s", "--body-timeout", "10s",
             "--lookup-timeout", "500ms", "--max-concurrent-requests", "2",
             "--shutdown-delay", "0s", "--drain-timeout", "2s", "--log-format", "text"],
            stdout=self.log.open("w"), stderr=subprocess.STDOUT)
        wait_for("serve /readyz", lambda: http_ok(f"http://127.0.0.1:{self.admin}/readyz"),
                 proc=self.proc, log=self.log)
        self.tls = ssl.create_default_context(cafile=str(self.certs / "ca.crt"))
        # the certificate names kserve-injector.kserve.svc; the test dials 127.0.0.1
        self.tls.check_hostname = False

    def scrape(self):
        req = urllib.request.Request(f"http://127.0.0.1:{self.admin}/metrics",
                                     headers={"accept": "application/openmetrics-text; version=1.0.0"})
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.read().decode()

    def in_flight(self):
        found = re.search(r"^kserve_injector_requests_in_flight (\d+)$", self.scrape(), re.M)
        return int(found.group(1)) if found else None

    def post(self, path, body, content_type="application/json"):
        """One request on a connection of its own; the status code."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=10) as raw:
            with self.tls.wrap_socket(raw) as s:
                head = f"POST {path} HTTP/1.1\r\nHost: kserve-injector\r\nConnection: close\r\n"
                if content_type:
                    head += f"Content-Type: {content_type}\r\n"
                s.sendall(f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body)
                return status_of(s)

    def stall(self, result):
        """A request whose body never comes: 504 at --request-timeout (the
        body's pace, --body-timeout, is set past it)."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=10) as raw:
            with self.tls.wrap_socket(raw) as s:
                s.sendall(b"POST /mutate-pods HTTP/1.1\r\nHost: kserve-injector\r\n"
                          b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
                result.append(status_of(s))

    def break_config_and_certificate(self):
        """A change to each that cannot be loaded: counted as reload errors,
        the previous ones serving on."""
        self.config.write_text("apiVersion: v1\nkind: ConfigMap\ndata: [not, a, map]\n")
        (self.certs / "tls.crt").write_text("-----BEGIN CERTIFICATE-----\nbroken\n-----END CERTIFICATE-----\n")

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def status_of(sock):
    data = b""
    while b"\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    parts = data.split(b" ", 2)
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0


def drive(served, rounds=40):
    """`rounds` times: reviews (patched, with lookups, denied) on both paths,
    a 404 and a 415; every tenth round, two requests that stall (504) while
    a third is shed (503, --max-concurrent-requests 2). A fixed count, so
    the shares of 504 and 503 (8 and 4 of 212 webhook requests) do not
    depend on the machine's speed. Returns the status counts."""
    oci = (INPUTS / "minimal-oci.json").read_bytes()
    typical = (INPUTS / "typical.json").read_bytes()
    review = json.loads(oci)
    review["request"]["object"]["spec"]["containers"][0]["name"] = "model"
    denied = json.dumps(review).encode()
    counts = {}

    def count(code):
        counts[code] = counts.get(code, 0) + 1

    for i in range(1, rounds + 1):
        for body in (oci, typical, denied):
            count(served.post("/mutate-pods", body))
        count(served.post("/mutate", oci))
        count(served.post("/unknown", oci))
        count(served.post("/mutate-pods", oci, content_type=None))
        if i % 10 == 0:
            stalled = []
            threads = [threading.Thread(target=served.stall, args=(stalled,)) for _ in range(2)]
            for t in threads:
                t.start()
            wait_for("two stalled requests in flight", lambda: served.in_flight() == 2, timeout=10)
            count(served.post("/mutate-pods", oci))
            for t in threads:
                t.join()
            for code in stalled:
                count(code)
    return counts


class Prometheus:
    """Debian's prometheus on loopback, scraping `served` every second as the
    job a ServiceMonitor for the metrics Service makes (with the namespace and
    pod labels it adds), or what `scrape_configs` says, and evaluating
    `rules` every second."""

    def __init__(self, served, rules, tmp, scrape_configs=None):
        exe = shutil.which("prometheus")
        if not exe:
            raise FileNotFoundError("no prometheus (Debian's package: bash .ci/monitoring.sh)")
        tmp = Path(tmp)
        config = tmp / "prometheus.yml"
        config.write_text(yaml.safe_dump({
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(rules)],
            "scrape_configs": scrape_configs or [{
                "job_name": "kserve-injector-metrics",
                "static_configs": [{"targets": [f"127.0.0.1:{served.admin}"],
                                    "labels": {"namespace": "kserve", "pod": "kserve-injector-0"}}],
            }],
        }))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tmp / "prometheus.log"
        self.proc = subprocess.Popen(
            [exe, f"--config.file={config}", f"--storage.tsdb.path={tmp / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
            stdout=self.log.open("w"), stderr=subprocess.STDOUT)
        wait_for("prometheus /-/ready", lambda: http_ok(f"{self.url}/-/ready"), proc=self.proc, log=self.log)

    def api(self, path, **params):
        url = f"{self.url}/api/v1/{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params, doseq=True)
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                return json.load(r)
        except urllib.error.HTTPError as e:  # 400 and 422 carry the error as JSON
            return json.load(e)

    def query(self, expr):
        """(error or None, result list) of an instant query now."""
        answer = self.api("query", query=expr)
        if answer.get("status") != "success":
            return f"{answer.get('errorType')}: {answer.get('error')}", []
        return None, answer["data"]["result"]

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
