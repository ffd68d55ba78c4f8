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

import json
import shutil
import time

import pytest
import yaml

import monitoring_checks as mc
from conftest import CHART, ROOT, by_kind, copy_tree, docs_of, need, one
from monitoring_live import Prometheus, Served, drive

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


def all_queries(rule, dashboard):
    queries = {f"alert {r['alert']} ({r['labels']['severity']})": r["expr"] for r in mc.alert_rules(rule)}
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
    assert "SUCCESS: 17 rules found" in mc.check_rules(doc, tmp_path)
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
    assert len(checked) == 2 * 15
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
    assert doc["metadata"]["labels"]["release"] == "prometheus"
    urls = [r["annotations"]["runbook_url"] for r in mc.alert_rules(doc)]
    assert all(u.startswith("https://git.example.com/k/-/blob/main/docs/operations.md#") for u in urls), urls


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


def test_runbook_url_is_refused_with_a_fragment(tools):
    proc = tools.template(ENABLED + ["metrics.prometheusRule.runbookUrl=docs/x.md#alerts"], check=False)
    assert proc.returncode != 0 and "runbookUrl" in proc.stderr, proc.stderr


def test_every_alert_has_a_runbook_entry(rule):
    """Each runbook_url points into docs/operations.md's Alerts section, at
    a heading that names the alert and says what it means, what users see
    and what to do."""
    text = (ROOT / "docs" / "operations.md").read_text()
    assert "\n## Alerts\n" in text
    section = text.split("\n## Alerts\n", 1)[1].split("\n## ", 1)[0]
    entries = {}
    for block in section.split("\n### ")[1:]:
        title, _, body = block.partition("\n")
        entries[title.strip().lower()] = body
    for r in mc.alert_rules(rule):
        url = r["annotations"]["runbook_url"]
        assert url == f"docs/operations.md#{r['alert'].lower()}", url
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
        assert len(health) == 15 and all(h == "ok" and not e for _, h, e in health), health
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
