"""The alerts and the Grafana dashboard (manifests/components/monitoring, the
chart's metrics.prometheusRule and metrics.dashboards), checked for real:
`promtool check rules` and `promtool test rules` (a firing and a quiet case
per alert, and each alert's cases failing when its rule is broken); every
series and label a rule or a dashboard query names found in a real scrape of
`serve` with cluster lookups on; a real Prometheus scraping that `serve` under
a short load evaluates every rule and query without error, the dashboard's
queries returning data and exactly the alerts the load provokes; the chart's
objects only when enabled, its thresholds reaching the rules, bad thresholds
refused; the runbook of every alert in docs/operations.md.

promtool and prometheus come from Debian's prometheus package (bash
.ci/monitoring.sh installs it); promql-parser from the venv of
.ci/manifests.sh.
"""

import base64
import json
import re
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import yaml

import monitoring_checks as mc
from conftest import CHART, ROOT, by_kind, copy_tree, docs_of, free_port, need, one, run
from monitoring_live import Prometheus, Served, drive, http_ok, wait_for

COMPONENT = ROOT / "manifests" / "components" / "monitoring"
DASHBOARD = COMPONENT / "dashboards" / "kserve-injector.json"
ENABLED = ["metrics.prometheusRule.enabled=true", "metrics.dashboards.enabled=true"]
# The list of panels: each item and the panel titles that show it.
PANELS = {
    "request rate by code": ["Request rate by code"],
    "latency p50/p90/p99 and heatmap": ["Latency p50 / p90 / p99", "Latency heatmap"],
    "in-flight": ["Requests in flight"],
    "injections by injector and outcome": ["Injections by injector and outcome"],
    "denials": ["Denials"],
    "shadow differences": ["Shadow differences"],
    "certificate time left": ["Certificate time left"],
    "config and certificate reloads": ["Config reloads", "Certificate reloads"],
    "lookups cache hits and fallback GETs": ["Cache hits and misses", "Fallback GETs and errors"],
    "connections and evictions": ["Open connections", "Evictions, deadlines and TLS errors"],
    "version from the build info": ["Version"],
}


@pytest.fixture(scope="session")
def promtool_ready():
    if not shutil.which("promtool") or not shutil.which("prometheus"):
        need("no promtool/prometheus (Debian's prometheus package: bash .ci/monitoring.sh)")


@pytest.fixture(scope="session")
def kustomized(tools, tmp_path_factory):
    """The default install with components/monitoring, rendered."""
    tmp = tmp_path_factory.mktemp("monitoring")
    copy_tree(ROOT / "manifests", tmp / "manifests")
    (tmp / "case").mkdir()
    (tmp / "case" / "kustomization.yaml").write_text("""\
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [../manifests]
components: [../manifests/components/monitoring]
transformers: [../manifests/follow-namespace]
""")
    return docs_of(tools.kustomize(tmp / "case"))


@pytest.fixture(scope="session")
def rule(kustomized):
    return one(kustomized, "PrometheusRule")


@pytest.fixture(scope="session")
def dashboard():
    return json.loads(DASHBOARD.read_text())


def serve_rules(rule):
    """The rules on the series `serve` exports (the first group; the second
    reads the API server's and kube-state-metrics' series)."""
    return [r for g in rule["spec"]["groups"] if g["name"] == "kserve-injector" for r in g["rules"]]


def apiserver_rules(rule):
    return [r for g in rule["spec"]["groups"] if g["name"] == "kserve-injector-apiserver" for r in g["rules"]]


def all_queries(rule, dashboard):
    queries = {f"alert {r['alert']} ({r['labels']['severity']})": r["expr"] for r in serve_rules(rule)}
    for where, expr in mc.dashboard_queries(dashboard).items():
        queries[where] = mc.grafana_to_promql(expr)
    for name, (selector, _) in mc.variable_queries(dashboard).items():
        queries[f"variable {name}"] = mc.grafana_to_promql(selector)
    return queries


# ---------------------------------------------------------------- promtool

@pytest.mark.parametrize("install", ["kustomize", "helm"])
def test_promtool_checks_and_tests_the_rules(install, promtool_ready, rule, tools, tmp_path):
    """promtool check rules, then the unit tests (a firing and a quiet case
    per alert), on the component's rules and on the chart's default render."""
    doc = rule if install == "kustomize" else one(docs_of(tools.template(ENABLED)), "PrometheusRule")
    assert "SUCCESS: 24 rules found" in mc.check_rules(doc, tmp_path)
    assert "SUCCESS" in mc.unit_test_rules(doc, tmp_path)


def test_each_alert_has_a_firing_and_a_quiet_case(rule):
    tests = yaml.safe_load(mc.UNIT_TESTS.read_text())["tests"]
    firing, quiet = set(), set()
    for case in tests:
        for t in case["alert_rule_test"]:
            if t["exp_alerts"]:
                firing.update((t["alertname"], a["exp_labels"]["severity"]) for a in t["exp_alerts"])
            else:
                quiet.add(t["alertname"])
    rules = {(r["alert"], r["labels"]["severity"]) for r in mc.alert_rules(rule)}
    assert firing == rules, f"no firing case: {rules - firing}; unknown: {firing - rules}"
    assert quiet == {a for a, _ in rules}, f"no quiet case: {({a for a, _ in rules}) - quiet}"


def test_unit_tests_fail_when_a_rule_breaks(promtool_ready, rule, tmp_path, proof):
    """For each alert: a rule that never fires fails its firing case; one
    whose threshold is gone (`> X` made `>= -Inf`) fails its quiet case."""
    import promql_parser

    checked = {}
    for i, r in enumerate(mc.alert_rules(rule)):
        tree = promql_parser.parse(r["expr"])
        if isinstance(tree, promql_parser.BinaryExpr):
            always = f"({tree.lhs}) >= -Inf"
        else:  # KServeInjectorDown: absent(), which carries no labels either
            always = "vector(1)"
        for broken, expect in (("vector(1) == 0", "fire"), (always, "quiet")):
            doc = json.loads(json.dumps(rule))
            [x for g in doc["spec"]["groups"] for x in g["rules"]][i]["expr"] = broken
            with pytest.raises(mc.CheckFailed) as e:
                mc.unit_test_rules(doc, tmp_path, only=r["alert"])
            failed = [l.strip() for l in str(e.value).splitlines() if l.strip().startswith("name:")]
            # a rule that never fires can only break firing cases; one that
            # always fires breaks a quiet case (and may break another alert's
            # firing case of the same name, with its other severity)
            ok = all(expect in l for l in failed) if expect == "fire" else any(expect in l for l in failed)
            assert failed and ok, f"{r['alert']}: {broken}: {failed}"
            checked[(r["alert"], r["labels"]["severity"], expect)] = doc
    assert len(checked) == 2 * 24
    # the whole file, too, fails on a broken rule
    proof("promtool test rules (KServeInjectorPanics that never fires)", mc.unit_test_rules,
          checked[("KServeInjectorPanics", "warning", "fire")], tmp_path)


# ---------------------------------------------------------------- the chart and the component

def test_chart_renders_monitoring_only_when_enabled(tools):
    def kinds(sets):
        docs = docs_of(tools.template(sets))
        return ({d["kind"] for d in docs} & {"PrometheusRule", "ServiceMonitor"},
                [d["metadata"]["name"] for d in by_kind(docs, "ConfigMap")
                 if (d["metadata"].get("labels") or {}).get("grafana_dashboard") == "1"])
    assert kinds([]) == (set(), [])
    assert kinds(["metrics.prometheusRule.enabled=true"]) == ({"PrometheusRule"}, [])
    assert kinds(["metrics.dashboards.enabled=true"]) == (set(), ["kserve-injector-dashboard"])


def test_dashboard_is_the_same_file_in_the_chart_and_the_component(tools, kustomized):
    text = DASHBOARD.read_text()
    assert (CHART / "dashboards" / "kserve-injector.json").read_text() == text
    for docs in (kustomized, docs_of(tools.template(ENABLED))):
        assert one(docs, "ConfigMap", "kserve-injector-dashboard")["data"] == {"kserve-injector.json": text}


def test_helm_thresholds_reach_the_rules(promtool_ready, tools, tmp_path):
    doc = one(docs_of(tools.template(ENABLED + [
        "metrics.prometheusRule.thresholds.latencyP99Seconds=2.5",
        "metrics.prometheusRule.thresholds.timeoutRatio=0.05",
        "metrics.prometheusRule.thresholds.shedRatio=0",
        "metrics.prometheusRule.thresholds.certificateWarningDays=14",
        "metrics.prometheusRule.thresholds.certificateCriticalDays=2",
        "metrics.prometheusRule.thresholds.watchErrors=20",
        "metrics.prometheusRule.thresholds.tlsHandshakeErrors=12",
        "metrics.prometheusRule.runbookUrl=https://git.example.com/k/-/blob/main/docs/operations.md",
        "metrics.prometheusRule.labels.release=prometheus",
        "fullnameOverride=webhook"])), "PrometheusRule")
    mc.check_rules(doc, tmp_path)
    exprs = {(r["alert"], r["labels"]["severity"]): r["expr"] for r in mc.alert_rules(doc)}
    assert exprs[("KServeInjectorDown", "critical")] == 'absent(up{job="webhook-metrics"} == 1)'
    assert exprs[("KServeInjectorSlowAdmissions", "warning")].endswith("> 2.5")
    assert exprs[("KServeInjectorTimeouts", "warning")].endswith("> 0.05")
    assert exprs[("KServeInjectorShedding", "warning")].endswith("> 0")
    assert exprs[("KServeInjectorCertificateExpiring", "warning")].endswith("< 14 * 86400")
    assert exprs[("KServeInjectorCertificateExpiring", "critical")].endswith("< 2 * 86400")
    assert exprs[("KServeInjectorWatchErrors", "warning")].endswith("> 20")
    assert exprs[("KServeInjectorTLSHandshakeErrors", "warning")].endswith("> 12")
    assert exprs[("KServeInjectorAPIServerSlowAdmissions", "warning")].endswith("> 2.5")
    assert 'deployment="webhook"' in exprs[("KServeInjectorReplicasUnavailable", "warning")]
    assert doc["metadata"]["labels"]["release"] == "prometheus"
    urls = [r["annotations"]["runbook_url"] for r in mc.alert_rules(doc)]
    assert urls == [f"https://git.example.com/k/-/blob/main/docs/operations.md#{r['alert'].lower()}"
                    for r in mc.alert_rules(doc)], urls


BAD_THRESHOLDS = {
    "latency 0": ("latencyP99Seconds=0", "latencyP99Seconds"),
    "latency at timeoutSeconds": ("latencyP99Seconds=5", "must stay below webhook.timeoutSeconds"),
    "a ratio of 1": ("timeoutRatio=1", "timeoutRatio"),
    "a negative ratio": ("shedRatio=-0.1", "shedRatio"),
    "a ratio as text": ("shedRatio=lots", "shedRatio"),
    "critical days not below warning days": ("certificateCriticalDays=7", "must be fewer than certificateWarningDays"),
    "0 warning days": ("certificateWarningDays=0", "certificateWarningDays"),
    "a fractional error count": ("watchErrors=1.5", "watchErrors"),
    "a misspelt threshold": ("latencyP99=1", "latencyP99"),
}


@pytest.mark.parametrize("what", list(BAD_THRESHOLDS))
def test_bad_thresholds_are_refused(any_tools, what):
    value, message = BAD_THRESHOLDS[what]
    proc = any_tools.template(ENABLED + [f"metrics.prometheusRule.thresholds.{value}"], check=False)
    assert proc.returncode != 0, f"{what}: helm template succeeded"
    assert message in proc.stderr, f"{what}: {proc.stderr}"


@pytest.mark.parametrize("url", ["https://git.example.com/docs/x.md#alerts", "docs/operations.md",
                                 "/docs/operations.md", "git.example.com/docs/operations.md"])
def test_runbook_url_must_be_absolute_without_a_fragment(tools, url):
    proc = tools.template(ENABLED + [f"metrics.prometheusRule.runbookUrl={url}"], check=False)
    assert proc.returncode != 0 and "runbookUrl" in proc.stderr, proc.stderr


def test_without_a_runbook_url_the_alerts_have_none_and_notes_say_so(tools):
    """Alertmanager shows a relative runbook_url as text: the chart renders
    none until runbookUrl is set, and NOTES.txt asks for it."""
    doc = one(docs_of(tools.template(ENABLED)), "PrometheusRule")
    assert not [r["alert"] for r in mc.alert_rules(doc) if "runbook_url" in r["annotations"]]
    def notes(sets):
        cmd = [tools.helm, "install", "kserve-injector", CHART, "-n", "kserve", "--dry-run=client"]
        out = run(cmd + [a for s in sets for a in ("--set", s)], env=dict(os.environ, KUBECONFIG="/nonexistent")).stdout
        return out.split("\nNOTES:\n", 1)[1]
    assert "set metrics.prometheusRule.runbookUrl" in notes(ENABLED)
    assert "set metrics.prometheusRule.runbookUrl" not in notes(
        ENABLED + ["metrics.prometheusRule.runbookUrl=https://x.example/ops.md"])


def test_every_alert_has_a_runbook_entry(rule):
    """Each alert has an entry in docs/operations.md's Alerts section (where
    a runbook_url made of runbookUrl points), a heading that names the alert
    and says what it means, what users see and what to do."""
    text = (ROOT / "docs" / "operations.md").read_text()
    assert "\n## Alerts\n" in text
    section = text.split("\n## Alerts\n", 1)[1].split("\n## ", 1)[0]
    entries = {}
    for block in section.split("\n### ")[1:]:
        title, _, body = block.partition("\n")
        entries[title.strip().lower()] = body
    for r in mc.alert_rules(rule):
        assert "runbook_url" not in r["annotations"], "a relative runbook_url is no link in Alertmanager"
        body = entries.get(r["alert"].lower())
        assert body is not None, f"no entry '### {r['alert']}' in docs/operations.md's Alerts"
        for part in ("**Means:**", "**Users see:**", "**Do:**"):
            assert part in body, f"{r['alert']}: no {part}"


# ---------------------------------------------------------------- the dashboard

def test_dashboard_shape_and_panels(dashboard):
    assert mc.dashboard_shape(dashboard)
    titles = {p["title"] for p in dashboard["panels"]}
    missing = {item: [t for t in want if t not in titles] for item, want in PANELS.items()}
    assert not any(missing.values()), missing
    for where, expr in mc.dashboard_queries(dashboard).items():
        mc.selectors(mc.grafana_to_promql(expr))  # parses


def test_dashboard_shape_check_fails(dashboard, proof):
    broken = json.loads(json.dumps(dashboard))
    broken["panels"][2]["targets"][0]["datasource"] = {"type": "prometheus", "uid": "prom-1"}
    broken["panels"][3]["gridPos"]["x"] = 0
    proof("dashboard shape (a fixed datasource uid, overlapping panels)", mc.dashboard_shape, broken)


# ---------------------------------------------------------------- a real serve and a real Prometheus

@pytest.fixture(scope="module")
def served(injector_bin, apiserver, tmp_path_factory):
    server = Served(injector_bin, apiserver, tmp_path_factory.mktemp("served"))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def scraped(served):
    """The series of /metrics after a first round of requests."""
    drive(served, rounds=1)
    return mc.scraped_series(served.scrape())


def test_every_series_named_exists_in_a_real_scrape(rule, dashboard, scraped):
    assert "kserve_injector_cluster_fallback_gets_total" in scraped  # lookups are on
    assert mc.series_exist(all_queries(rule, dashboard), scraped)


def test_a_series_serve_does_not_export_fails(rule, dashboard, scraped, proof):
    """An alert naming a series `serve` does not export (a typo), and one
    matching a label the series lacks, fail the check."""
    queries = all_queries(rule, dashboard)
    where = "alert KServeInjectorPanics (warning)"
    queries[where] = queries[where].replace("kserve_injector_panics_total", "kserve_injector_panic_total")
    proof("series exist (kserve_injector_panic_total in an alert)", mc.series_exist, queries, scraped)
    queries = all_queries(rule, dashboard)
    queries[where] = 'sum(kserve_injector_panics_total{cert="serving"})'
    proof("series exist (a label the series lacks)", mc.series_exist, queries, scraped)


def test_prometheus_evaluates_every_rule_and_query(served, rule, dashboard, scraped, tmp_path,
                                                   promtool_ready, record):
    """Prometheus scrapes `serve` every second and evaluates the rules while
    the load runs; then every alert expression, dashboard query and variable
    query goes through its HTTP API without error, every dashboard query
    returns data, and exactly the alerts the load provokes return data."""
    rules = mc.rule_file(rule, tmp_path)
    prom = Prometheus(served, rules, tmp_path)
    try:
        t0 = time.monotonic()
        wait(prom, "up == 1")
        counts = drive(served)
        assert counts.get(504) == 8 and counts.get(503) == 4, counts
        # KServeInjectorConfigStale compares with the samples since the
        # last good load at its subquery's 30 s steps: one must have passed
        wait(prom, "min_over_time((kserve_injector_config_reload_errors_total - 1e6 * "
                   "kserve_injector_config_last_reload_success_timestamp_seconds)[1d:30s])", timeout=40)
        served.break_config_and_certificate()
        wait(prom, "kserve_injector_config_reload_errors_total > 0 "
                   "and on() kserve_injector_certificate_reload_errors_total > 0")
        time.sleep(2)  # a rule evaluation after the scrape that saw them
        errors, answered = [], {}
        for where, expr in all_queries(rule, dashboard).items():
            if where.startswith("variable "):
                selector, label = mc.variable_queries(dashboard)[where.split()[1]]
                answer = prom.api("series", **{"match[]": mc.grafana_to_promql(selector)})
                found = [s for s in answer.get("data", []) if label in s]
                error = None if answer.get("status") == "success" else answer.get("error")
                result = found
            else:
                error, result = prom.query(expr)
            if error:
                errors.append(f"{where}: {error}")
            answered[where] = len(result)
        assert not errors, "\n".join(errors)
        groups = prom.api("rules")["data"]["groups"]
        health = [(r["name"], r["health"], r.get("lastError", "")) for g in groups for r in g["rules"]]
        assert len(health) == 24 and all(h == "ok" and not e for _, h, e in health), health
        alerting = {w for w, n in answered.items() if w.startswith("alert ") and n}
        empty = [w for w, n in answered.items() if not w.startswith("alert ") and not n]
        states = sorted((a["labels"]["alertname"], a["labels"]["severity"], a["state"])
                        for a in prom.api("alerts")["data"]["alerts"])
        record(f"monitoring: load {dict(sorted(counts.items()))}, the run {time.monotonic() - t0:.1f} s; "
               f"{len(answered)} queries answered without error")
        record(f"monitoring: dashboard and variable queries with data: "
               f"{sum(1 for w, n in answered.items() if not w.startswith('alert ') and n)}"
               f"/{sum(1 for w in answered if not w.startswith('alert '))}; without: {empty or 'none'}")
        record("monitoring: series per dashboard and variable query: " + "; ".join(
            f"{w} {n}" for w, n in answered.items() if not w.startswith("alert ")))
        record(f"monitoring: alert expressions with data: {sorted(w[6:] for w in alerting)}")
        record(f"monitoring: alert states in Prometheus: {states}")
        assert not empty, f"dashboard queries without data: {empty}"
        assert alerting == {
            "alert KServeInjectorTimeouts (warning)", "alert KServeInjectorShedding (warning)",
            "alert KServeInjectorSlowAdmissions (warning)",
            "alert KServeInjectorCertificateExpiring (warning)",
            "alert KServeInjectorCertificateReloadErrors (warning)",
            "alert KServeInjectorConfigReloadErrors (warning)", "alert KServeInjectorConfigStale (warning)",
        }, sorted(alerting)
    finally:
        prom.stop()


def wait(prom, expr, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        error, result = prom.query(expr)
        assert error is None, error
        if result:
            return
        time.sleep(0.5)
    raise AssertionError(f"Prometheus: no data for {expr} within {timeout} s\n"
                         f"{prom.log.read_text()[-2000:]}")


# ---------------------------------------------------------------- the API server's series

# The series the API server's group names, with the Kubernetes release that
# added each (kubernetes#81399 made rejection_count and fixed `rejected` in
# 1.16; kubernetes#107171 added fail_open_count in 1.24), and kube-state-
# metrics' (not run here: kube_deployment_spec_replicas and
# kube_deployment_status_replicas_available, in every release since 1.0).
APISERVER_SERIES = {
    "apiserver_admission_webhook_admission_duration_seconds_bucket": (1, 16),
    "apiserver_admission_webhook_rejection_count": (1, 16),
    "apiserver_admission_webhook_fail_open_count": (1, 24),
}
KUBE_STATE_METRICS = {"kube_deployment_spec_replicas", "kube_deployment_status_replicas_available"}
HOOK = "pod-mutator.kserve-injector.kserve.io"


def probe_pod(name, container="kserve-container"):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"serving.kserve.io/inferenceservice": name},
                         "annotations": {"internal.serving.kserve.io/storage-initializer-sourceuri":
                                         "oci://registry.invalid/model:v1"}},
            "spec": {"containers": [{"name": container, "image": "registry.invalid/server:v1"}]}}


def test_apiserver_series_exist_in_a_real_scrape(apiserver, injector_bin, rule, tmp_path, promtool_ready, record):
    """The test kube-apiserver calls a `serve` registered under our webhook's
    name (a pod admitted, one denied, then one while serve is stopped, with
    failurePolicy Fail and then Ignore); a
    real Prometheus scrapes the API server's /metrics; every series the
    API server's rules name is there with the labels they match, except
    those documented as newer than this API server (or as kube-state-
    metrics'), and the rules evaluate without error, the call errors and
    the denial showing in their expressions."""
    pki = Path(apiserver.env["WORK_DIR"]) / "pki"
    port, admin = free_port(), free_port()
    log = tmp_path / "serve.log"
    proc = subprocess.Popen(
        [injector_bin, "serve", "--tls-cert-file", pki / "webhook.crt", "--tls-key-file", pki / "webhook.key",
         "--addr", f"127.0.0.1:{port}", "--admin-addr", f"127.0.0.1:{admin}", "--cluster-lookups", "off",
         "--shutdown-delay", "0s"], stdout=log.open("w"), stderr=subprocess.STDOUT)
    namespace = "scrape-webhook-metrics"
    apiserver.ensure_namespace(namespace)
    apiserver.kubectl("label", "namespace", namespace, "kserve-injector-scrape=yes", "--overwrite")
    ca = base64.b64encode((pki / "ca.crt").read_bytes()).decode()
    registration = {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "kserve-injector-scrape"},
        "webhooks": [{"name": HOOK, "clientConfig": {"url": f"https://127.0.0.1:{port}/mutate-pods", "caBundle": ca},
                      "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                                 "resources": ["pods"]}],
                      "namespaceSelector": {"matchLabels": {"kserve-injector-scrape": "yes"}},
                      "objectSelector": {"matchExpressions": [{"key": "serving.kserve.io/inferenceservice",
                                                               "operator": "Exists"}]},
                      "admissionReviewVersions": ["v1"], "sideEffects": "None", "failurePolicy": "Fail",
                      "timeoutSeconds": 5}]}
    prom = None
    try:
        wait_for("serve /readyz", lambda: http_ok(f"http://127.0.0.1:{admin}/readyz"), proc=proc, log=log)
        apiserver.kubectl("apply", "-f", "-", stdin=json.dumps(registration))

        def dry_run(pod):
            return apiserver.kubectl("-n", namespace, "create", "--dry-run=server", "-o", "json", "-f", "-",
                                     stdin=json.dumps(pod), check=False)
        last = []

        def injects():
            last[:] = [dry_run(probe_pod("admitted"))]
            return "modelcar" in last[0].stdout
        try:
            wait_for("the webhook injects", injects, proc=proc, log=log)
        except AssertionError as e:
            raise AssertionError(f"{e}\nthe last dry run said: {last[0].stderr if last else None}") from None
        denied = dry_run(probe_pod("denied", container="model"))
        assert denied.returncode != 0 and "denied the request" in denied.stderr, denied.stderr
        proc.terminate()
        proc.wait(timeout=30)
        unreachable = dry_run(probe_pod("unreachable"))
        assert "failed calling webhook" in unreachable.stderr, unreachable.stderr
        # The same registration failing open (failurePolicy: Ignore, which
        # the chart never ships): the pod is admitted uninjected, and from
        # 1.24 on the API server counts it in fail_open_count.
        registration["webhooks"][0]["failurePolicy"] = "Ignore"
        apiserver.kubectl("apply", "-f", "-", stdin=json.dumps(registration))
        opened = dry_run(probe_pod("fail-open"))
        assert opened.returncode == 0 and "modelcar" not in opened.stdout, opened.stderr

        rules = tmp_path / "apiserver-rules.yaml"
        rules.write_text(yaml.safe_dump({"groups": [{"name": "kserve-injector-apiserver",
                                                     "rules": apiserver_rules(rule)}]}))
        server_port = apiserver.env["APISERVER_PORT"]
        prom = Prometheus(None, rules, tmp_path, scrape_configs=[{
            "job_name": "apiserver", "scheme": "https",
            "tls_config": {"ca_file": str(pki / "ca.crt"), "cert_file": str(pki / "admin.crt"),
                           "key_file": str(pki / "admin.key")},
            "static_configs": [{"targets": [f"127.0.0.1:{server_port}"]}]}])
        wait(prom, f'apiserver_admission_webhook_rejection_count{{name="{HOOK}"}}', timeout=60)
        version = apiserver.kubectl("version", "-o", "json").stdout
        server = json.loads(version)["serverVersion"]
        major, minor = re.match(r"v(\d+)\.(\d+)", server["gitVersion"]).groups()
        running = (int(major), int(minor))
        found, newer = {}, []
        for r in apiserver_rules(rule):
            names, _ = mc.selectors(r["expr"])
            for name, labels in names:
                if name in KUBE_STATE_METRICS:
                    continue
                error, result = prom.query(f'{name}{{name="{HOOK}"}}')
                assert error is None, error
                if not result:
                    assert running < APISERVER_SERIES[name], f"{name}: absent from a {running} API server"
                    newer.append(f"{name} (Kubernetes {'.'.join(map(str, APISERVER_SERIES[name]))})")
                    continue
                have = set().union(*(s["metric"] for s in result))
                assert labels <= have, f"{name}: the rule matches {labels - have}, which the series lacks"
                found[name] = sorted(have - {"__name__", "instance", "job"})
        assert set(found) >= {"apiserver_admission_webhook_rejection_count",
                              "apiserver_admission_webhook_admission_duration_seconds_bucket"}, found
        error, calls = prom.query(f'apiserver_admission_webhook_rejection_count{{name="{HOOK}", '
                                  f'error_type="calling_webhook_error"}}')
        assert error is None and calls, "the stopped webhook's call error is counted"
        error, denials = prom.query(f'apiserver_admission_webhook_rejection_count{{name="{HOOK}", '
                                    f'error_type="no_error", rejection_code="500"}}')
        assert error is None and denials, "the denial is counted with its code"
        time.sleep(2)
        health = [(r["name"], r["health"], r.get("lastError", ""))
                  for g in prom.api("rules")["data"]["groups"] for r in g["rules"]]
        assert len(health) == 5 and all(h == "ok" and not e for _, h, e in health), health
        for r in apiserver_rules(rule):
            error, _ = prom.query(r["expr"])
            assert error is None, f"{r['alert']}: {error}"
        record(f"apiserver series: kube-apiserver {running[0]}.{running[1]} exports {found}; "
               f"documented as newer: {newer or 'none'}; kube-state-metrics (not run): {sorted(KUBE_STATE_METRICS)}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        apiserver.kubectl("delete", "mutatingwebhookconfiguration", "kserve-injector-scrape", "--ignore-not-found")
        if prom is not None:
            prom.stop()
