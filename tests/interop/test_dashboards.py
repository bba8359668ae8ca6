"""The dashboard and the alert rules of deploy/ against a real server: `promtool` checks and
unit-tests the rules, every metric a panel or a rule names is one the server exposes (with the
label values it matches on), and the dashboard is a loadable Grafana document whose every panel
has a data source and queries.

Runs on the backend the suite runs on (LIAISON_TEST_DATABASE_URL, as the `server` fixture does):
the store-read gauges come from a different SQL on each."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import urllib.request
from pathlib import Path

import pytest
import yaml
from prometheus_client.openmetrics.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "liaison.json"
RULES_DIR = ROOT / "deploy" / "prometheus"
RULES = RULES_DIR / "liaison.rules.yml"
RULES_TEST = RULES_DIR / "liaison.rules.test.yml"

# A metric name in PromQL: `liaison_…`, not the tail of a longer identifier.
METRIC = re.compile(r"(?<![A-Za-z0-9_:])(liaison_[a-z0-9_]+)\b")
# A selector's braces right after a metric name, and one `label="value"` matcher inside them.
SELECTOR = re.compile(r"(?<![A-Za-z0-9_:])(liaison_[a-z0-9_]+)\s*\{([^}]*)\}")
EQUALS = re.compile(r'([a-z_]+)\s*=\s*"([^"$]*)"')


def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        pytest.skip("promtool is not installed (Debian: apt-get install prometheus); .ci/run installs it")
    return path


def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def panels(dash: dict) -> list[dict]:
    """Every panel but rows (and the panels of collapsed rows)."""
    out = []
    for p in dash["panels"]:
        if p["type"] == "row":
            out.extend(p.get("panels", []))
        else:
            out.append(p)
    return out


def dashboard_queries() -> list[tuple[str, str]]:
    """(where, PromQL) of every panel query and every query variable of the dashboard."""
    dash = dashboard()
    out = [(f"panel {p['title']!r}", t["expr"]) for p in panels(dash) for t in p["targets"]]
    for v in dash["templating"]["list"]:
        if v["type"] == "query":
            query = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
            out.append((f"variable {v['name']!r}", query))
    return out


def rules() -> list[dict]:
    return [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]


def rule_queries() -> list[tuple[str, str]]:
    return [(f"rule {r.get('alert') or r.get('record')!r}", r["expr"]) for r in rules()]


def exposed(server) -> dict[str, set[tuple[str, str]]]:
    """Every sample name of a scrape, parsed by the reference parser, with the (label, value)
    pairs it carries. A request first, so the request histograms have their series."""
    urllib.request.urlopen(f"{server.url}/healthz", timeout=10).read()
    headers = {"Authorization": f"Bearer {server.metrics_token}"} if server.metrics_token else {}
    req = urllib.request.Request(f"{server.url}/metrics", headers=headers)
    with urllib.request.urlopen(req, timeout=10) as r:
        text = r.read().decode()
    names: dict[str, set[tuple[str, str]]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            names.setdefault(s.name, set()).update(s.labels.items())
    return names


def missing(queries: list[tuple[str, str]], names: dict[str, set[tuple[str, str]]]) -> list[str]:
    """What the queries name that the scrape does not have: a metric (a histogram is queried by
    its `_bucket`, `_sum` or `_count` series, never by its family name), or a label value a
    selector matches exactly."""
    problems = []
    for where, expr in queries:
        for name in METRIC.findall(expr):
            if name not in names:
                problems.append(f"{where}: {name} is not exposed")
        for name, matchers in SELECTOR.findall(expr):
            for label, value in EQUALS.findall(matchers):
                if label in {"job", "instance"} or name not in names:
                    continue  # Prometheus's own labels; a missing metric is reported above
                if (label, value) not in names[name]:
                    problems.append(f'{where}: no {name} series has {label}="{value}"')
    return problems


def test_the_rules_pass_promtool_check_and_their_unit_tests():
    tool = promtool()
    check = subprocess.run([tool, "check", "rules", str(RULES)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    # The unit tests name the rules file relative to their own folder.
    test = subprocess.run([tool, "test", "rules", RULES_TEST.name], cwd=RULES_DIR, capture_output=True, text=True)
    assert test.returncode == 0, test.stdout + test.stderr


def test_every_alert_has_a_delay_a_severity_and_says_what_happened_and_what_to_do():
    alerts = [r for r in rules() if "alert" in r]
    assert {a["alert"] for a in alerts} >= {
        "LiaisonDown", "LiaisonWritesFailing", "LiaisonCommitLatencyHigh",
        "LiaisonOutboxBacklogGrowing", "LiaisonDeadDeliveries", "LiaisonApprovalsAboutToExpire",
    }
    tested = yaml.safe_load(RULES_TEST.read_text())["tests"]
    tested_names = {t["alertname"] for group in tested for t in group["alert_rule_test"]}
    for a in alerts:
        assert re.fullmatch(r"\d+[smh]", a.get("for", "")), f"{a['alert']} has no for:"
        assert a["labels"]["severity"] in {"warning", "critical"}, a["alert"]
        assert a["annotations"]["summary"].strip(), a["alert"]
        assert len(a["annotations"]["description"]) > 40, a["alert"]
        assert a["alert"] in tested_names, f"{a['alert']} has no unit test"


def test_the_dashboard_loads_and_every_panel_has_a_data_source_and_queries():
    dash = dashboard()
    assert dash["schemaVersion"] >= 36
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    assert variables["DS_PROMETHEUS"]["type"] == "datasource"
    assert variables["DS_PROMETHEUS"]["query"] == "prometheus"
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids)), "panel ids repeat"
    shown = panels(dash)
    assert len(shown) >= 15
    for p in shown:
        assert p["datasource"]["uid"] == "${DS_PROMETHEUS}", p["title"]
        assert p["targets"], f"{p['title']} has no queries"
        assert p.get("description"), f"{p['title']} says not what it shows"
        for t in p["targets"]:
            assert t["expr"].strip() and t["refId"], p["title"]
            assert t["datasource"]["uid"] == "${DS_PROMETHEUS}", p["title"]
        assert {"h", "w", "x", "y"} <= p["gridPos"].keys(), p["title"]
    titles = " ".join(p["title"] for p in shown).lower()
    for topic in ["latency", "group-commit", "commit latency", "inbox", "approvals", "deliveries",
                  "oldest due", "rate-limit", "connection-cap", "readiness"]:
        assert topic in titles, f"no panel on {topic}"


def test_every_metric_the_dashboard_and_the_rules_name_is_exposed(server):
    names = exposed(server)
    queries = dashboard_queries() + rule_queries()
    named = {n for _, e in queries for n in METRIC.findall(e)}
    assert len(named) >= 20, sorted(named)
    assert missing(queries, names) == []


def test_the_name_check_catches_a_missing_metric_a_family_name_and_an_unknown_label_value(server):
    names = exposed(server)
    bad = [
        ("typo", "rate(liaison_outbox_delivery_total[5m])"),
        ("family name", "histogram_quantile(0.99, rate(liaison_store_group_commit_duration_seconds[5m]))"),
        ("label", 'rate(liaison_outbox_deliveries_total{outcome="bounced"}[5m])'),
    ]
    assert missing(bad, names) == [
        "typo: liaison_outbox_delivery_total is not exposed",
        "family name: liaison_store_group_commit_duration_seconds is not exposed",
        'label: no liaison_outbox_deliveries_total series has outcome="bounced"',
    ]
    good = [("fine", 'sum by (le) (rate(liaison_store_group_commit_duration_seconds_bucket{job="x"}[5m]))')]
    assert missing(good, names) == []
