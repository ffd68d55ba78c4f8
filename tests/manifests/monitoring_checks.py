"""Checks on the alerts and the dashboard (manifests/components/monitoring,
the chart's metrics.prometheusRule and metrics.dashboards), used by
test_monitoring.py. Each raises CheckFailed with the reason when its input
is bad. PromQL is read by promql-parser (a port of Prometheus' own parser),
the exposition by prometheus_client's OpenMetrics parser, the rules by
promtool."""

import json
import re
import shutil
import subprocess
from pathlib import Path

import yaml

from conftest import load_manifests_py

CheckFailed = load_manifests_py().CheckFailed
HERE = Path(__file__).resolve().parent
UNIT_TESTS = HERE / "monitoring" / "alerts_test.yaml"
# Labels Prometheus adds to every series of a target: a ServiceMonitor gives
# namespace, pod, service, endpoint, container; every scrape job gives job and
# instance.
TARGET_LABELS = {"namespace", "pod", "service", "endpoint", "container", "job", "instance"}
# What `up` carries besides the target labels.
BUILTIN_SERIES = {"up": set()}
# Grafana's variables, replaced by values a query of the test can run with.
GRAFANA_VARIABLES = {
    "$__rate_interval": "30s",
    "$__range": "5m",
    "$__interval": "15s",
    "${namespace}": "kserve",
    "$namespace": "kserve",
    "${pod}": ".*",
    "$pod": ".*",
}


def promtool():
    exe = shutil.which("promtool")
    if not exe:
        raise FileNotFoundError("no promtool (Debian's prometheus package: bash .ci/monitoring.sh)")
    return exe


def rule_file(rule_doc, directory):
    """The PrometheusRule's spec as a Prometheus rules file, rules.yaml in directory."""
    path = Path(directory) / "rules.yaml"
    path.write_text(yaml.safe_dump(rule_doc["spec"], sort_keys=False))
    return path


def check_rules(rule_doc, directory):
    """`promtool check rules` on the PrometheusRule's groups."""
    path = rule_file(rule_doc, directory)
    proc = subprocess.run([promtool(), "check", "rules", str(path)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise CheckFailed(f"promtool check rules: {(proc.stdout + proc.stderr).strip()}")
    return proc.stdout.strip()


def unit_test_rules(rule_doc, directory, unit_tests=UNIT_TESTS, only=None):
    """`promtool test rules` with tests/manifests/monitoring/alerts_test.yaml
    against the PrometheusRule's groups; with `only`, the rules and cases of
    that alert alone (promtool evaluates every rule at every step of every
    case, so one alert's are much quicker)."""
    rule_doc = json.loads(json.dumps(rule_doc))
    tests = yaml.safe_load(Path(unit_tests).read_text())
    if only is not None:
        for group in rule_doc["spec"]["groups"]:
            group["rules"] = [r for r in group["rules"] if r.get("alert") == only]
        tests["tests"] = [case for case in tests["tests"]
                          if {t["alertname"] for t in case["alert_rule_test"]} == {only}]
    rule_file(rule_doc, directory)
    path = Path(directory) / "alerts_test.yaml"
    path.write_text(yaml.safe_dump(tests, sort_keys=False))
    proc = subprocess.run([promtool(), "test", "rules", str(path)], capture_output=True, text=True,
                          cwd=directory)
    if proc.returncode != 0:
        raise CheckFailed(f"promtool test rules:\n{(proc.stdout + proc.stderr).strip()}")
    return proc.stdout.strip()


def alert_rules(rule_doc):
    return [r for g in rule_doc["spec"]["groups"] for r in g["rules"] if "alert" in r]


def grafana_to_promql(expr):
    """A dashboard query with Grafana's variables replaced."""
    for name in sorted(GRAFANA_VARIABLES, key=len, reverse=True):
        expr = expr.replace(name, GRAFANA_VARIABLES[name])
    if "$" in expr:
        raise CheckFailed(f"a Grafana variable the checks do not know in: {expr}")
    return expr


def selectors(expr):
    """[(metric name, {label names matched}), ...] and the labels aggregations
    and vector matches group by, read by promql-parser."""
    import promql_parser

    try:
        tree = promql_parser.parse(expr)
    except ValueError as e:
        raise CheckFailed(f"not PromQL: {e}: {expr}") from e
    found, grouping = [], set()

    def visit(node):
        if isinstance(node, promql_parser.VectorSelector):
            labels = {m.name for m in node.matchers.matchers}
            name = node.name
            if name is None:
                names = [m.value for m in node.matchers.matchers if m.name == "__name__"]
                name = names[0] if names else None
            found.append((name, labels - {"__name__"}))
        elif isinstance(node, promql_parser.AggregateExpr) and node.modifier is not None:
            grouping.update(node.modifier.labels)
        elif isinstance(node, promql_parser.BinaryExpr) and node.modifier is not None:
            matching = node.modifier.matching
            if matching is not None:
                grouping.update(matching.labels)
    promql_parser.walk(tree, visit)
    return found, grouping


def scraped_series(text):
    """{sample name: {label names}} of an OpenMetrics exposition."""
    from prometheus_client.openmetrics.parser import text_string_to_metric_families

    series = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                series.setdefault(sample.name, set()).update(sample.labels)
    except Exception as e:  # the parser raises ValueError and friends
        raise CheckFailed(f"the scrape is not valid OpenMetrics: {e}") from e
    return series


def series_exist(queries, series):
    """Every series a query names is in the scrape `series` (or is `up`),
    and every label it matches or groups by is one of those series' labels
    or a label of the target. queries: {where: PromQL}."""
    known = dict(BUILTIN_SERIES, **series)
    errors = []
    for where, expr in queries.items():
        found, grouping = selectors(expr)
        if not found:
            errors.append(f"{where}: names no series: {expr}")
        labels_here = set(TARGET_LABELS)
        for name, _ in found:
            labels_here |= known.get(name, set())
        for name, labels in found:
            if name not in known:
                errors.append(f"{where}: {name} is not a series serve exports")
                continue
            for label in sorted(labels - known[name] - TARGET_LABELS):
                errors.append(f"{where}: {name} has no label {label!r}")
        for label in sorted(grouping - labels_here - {"le"}):
            errors.append(f"{where}: groups by {label!r}, which no series it reads has")
    if errors:
        raise CheckFailed("\n".join(errors))
    return f"{len(queries)} queries name only series and labels of the scrape"


def dashboard_queries(dashboard):
    """{"panel <title> <refId>": expr} of every panel's targets."""
    out = {}
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            out[f"panel {panel['title']!r} {target['refId']}"] = target["expr"]
    return out


def variable_queries(dashboard):
    """{variable: (metric selector, label)} of the label_values() variables."""
    out = {}
    for var in dashboard["templating"]["list"]:
        if var["type"] != "query":
            continue
        query = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
        m = re.fullmatch(r"label_values\((.+), *([a-zA-Z_][a-zA-Z0-9_]*)\)", query)
        if not m:
            raise CheckFailed(f"variable {var['name']}: not label_values(selector, label): {query}")
        out[var["name"]] = (m.group(1), m.group(2))
    return out


def dashboard_shape(dashboard):
    """The datasource is a variable every query uses; namespace and pod are
    variables every query filters on; panels do not overlap."""
    errors = []
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    ds = variables.get("datasource")
    if not ds or ds["type"] != "datasource" or ds.get("query") != "prometheus":
        errors.append("no datasource variable of type prometheus")
    for name in ("namespace", "pod"):
        if name not in variables:
            errors.append(f"no {name} variable")
    taken = {}
    for panel in dashboard["panels"]:
        g = panel["gridPos"]
        if g["x"] + g["w"] > 24:
            errors.append(f"panel {panel['title']!r} is wider than the grid")
        cells = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        under = sorted({taken[c] for c in cells if c in taken})
        if under:
            errors.append(f"panel {panel['title']!r} overlaps {under}")
        taken.update(dict.fromkeys(cells, panel["title"]))
        if panel["type"] == "row":
            continue
        sources = [panel.get("datasource")] + [t.get("datasource") for t in panel.get("targets", [])]
        if any(s != {"type": "prometheus", "uid": "${datasource}"} for s in sources):
            errors.append(f"panel {panel['title']!r}: a datasource other than ${{datasource}}")
        for target in panel.get("targets", []):
            expr = target.get("expr", "")
            if 'namespace=~"$namespace"' not in expr or 'pod=~"$pod"' not in expr:
                errors.append(f"panel {panel['title']!r} {target.get('refId')}: "
                              "not filtered on $namespace and $pod")
    if errors:
        raise CheckFailed("\n".join(errors))
    return f"{len(dashboard['panels'])} panels, datasource, namespace and pod variables"
