"""The monitoring mixin (mixin/) is the one source of the shipped alerts, recording rules and
dashboards, and tools/render_mixin.py their one writer.

Every shipped file must be exactly what the mixin renders with its default _config; a render
with another _config (another job, a cluster selector, a runbook URL pattern, a threshold)
must carry those settings into every alert, rule and dashboard query.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support import promql
from tests.support.monitoring import MIXIN_OVERRIDES
from tests.support.prometheus import Promtool
from tests.support.testdata import REPO
from tools import render_mixin

SHIPPED = render_mixin.render()
OVERRIDDEN = render_mixin.evaluate(json.dumps(MIXIN_OVERRIDES))
#: Series of the exporter's own /metrics (and Prometheus' per-target ones): the exporter job.
EXPORTER_SERIES = ("up", "scrape_duration_seconds", "ledger_exporter_", "process_")
DASHBOARDS = render_mixin.DASHBOARD_DIR


def rules_of(mixin: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [rule for group in mixin[kind]["groups"] for rule in group["rules"]]


# --- the shipped files are the rendered mixin ----------------------------------------------


@pytest.mark.parametrize("path", sorted(SHIPPED), ids=str)
def test_shipped_file_is_the_rendered_mixin(path: Path) -> None:
    shipped = REPO / path
    assert shipped.exists(), f"{path} missing: run `make mixin`"
    assert shipped.read_text(encoding="utf-8") == SHIPPED[path], f"{path}: run `make mixin`"


def test_nothing_is_shipped_that_the_mixin_does_not_render() -> None:
    assert render_mixin.stale(REPO, SHIPPED) == []


#: Alerts the default _config leaves out, and the override that renders them.
OPTIONAL_ALERTS = {"LedgerNodeVersionBelowMinimum": '{minimumNodeVersion: "1.4.2"}'}


def test_the_mixin_renders_every_alert_rule_and_dashboard() -> None:
    """Every alert written in mixin/alerts/ is rendered, once (an optional one only when
    its setting is on)."""
    mixin = render_mixin.evaluate()
    for name, overrides in OPTIONAL_ALERTS.items():
        assert name not in {rule["alert"] for rule in rules_of(mixin, "alerts")}
        rendered = render_mixin.evaluate(overrides)
        assert [r["alert"] for r in rules_of(rendered, "alerts")].count(name) == 1
    written = [
        name
        for path in sorted((render_mixin.MIXIN_DIR / "alerts").glob("*.libsonnet"))
        for name in re.findall(r"^\s*alert: '(\w+)',$", path.read_text(encoding="utf-8"), re.M)
    ]
    assert len(written) >= 32
    default = [name for name in written if name not in OPTIONAL_ALERTS]
    assert sorted(rule["alert"] for rule in rules_of(mixin, "alerts")) == sorted(default)
    assert len(rules_of(mixin, "rules")) == 15 + 17  # the SLOs': 8 ratios each, 1 indicator
    assert sorted(mixin["dashboards"]) == [
        "ledger-exporter.json",
        "ledger-fleet.json",
        "ledger-node.json",
        "ledger-slo.json",
        "ledger-watch.json",
    ]


def test_prometheusrule_wraps_the_rules_then_the_alerts() -> None:
    manifest = yaml.safe_load(SHIPPED[Path("deploy/kubernetes/prometheusrule.yaml")])
    rules = yaml.safe_load(SHIPPED[Path("deploy/prometheus/rules.yml")])["groups"]
    alerts = yaml.safe_load(SHIPPED[Path("deploy/prometheus/alerts.yml")])["groups"]
    assert manifest["kind"] == "PrometheusRule"
    assert manifest["spec"] == {"groups": rules + alerts}
    names = [group["name"] for group in rules + alerts]
    assert len(names) == len(set(names)), "Prometheus needs unique group names"


def test_prometheusrule_groups_pass_promtool(tmp_path: Path, promtool: Promtool) -> None:
    """What the Operator hands Prometheus is a valid rule file."""
    manifest = yaml.safe_load(SHIPPED[Path("deploy/kubernetes/prometheusrule.yaml")])
    rule_file = tmp_path / "rules.yml"
    rule_file.write_text(yaml.safe_dump({"groups": manifest["spec"]["groups"]}), encoding="utf-8")
    promtool.check("check", "rules", str(rule_file))


def test_dashboards_configmap_holds_every_dashboard() -> None:
    configmap = yaml.safe_load(SHIPPED[Path("deploy/kubernetes/grafana-dashboards.yaml")])
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    files = {path.name: text for path, text in SHIPPED.items() if path.parent == DASHBOARDS}
    assert configmap["data"].keys() == files.keys()
    for name, text in files.items():
        assert json.loads(configmap["data"][name]) == json.loads(text)


def test_helm_chart_holds_the_same_groups_and_dashboards() -> None:
    """The chart's copies (deploy/helm/ledger-exporter/files/): its PrometheusRule template
    reads the groups, its dashboards template each dashboard."""
    chart = yaml.safe_load(SHIPPED[render_mixin.CHART_FILES / "prometheus-rules.yaml"])
    manifest = yaml.safe_load(SHIPPED[Path("deploy/kubernetes/prometheusrule.yaml")])
    assert chart == manifest["spec"]
    for name in render_mixin.evaluate()["dashboards"]:
        board = json.loads(SHIPPED[render_mixin.CHART_DASHBOARD_DIR / name])
        assert board == json.loads(SHIPPED[render_mixin.DASHBOARD_DIR / name])


def test_rule_files_name_their_source() -> None:
    for path, text in SHIPPED.items():
        if path.suffix in (".yml", ".yaml"):
            assert text.startswith("# GENERATED by tools/render_mixin.py from mixin/"), path
    generated = json.loads(SHIPPED[render_mixin.THRESHOLDS])["generated"]
    assert generated.startswith("GENERATED by tools/render_mixin.py from mixin/")


# --- the command line --------------------------------------------------------------------


def test_write_then_check_then_drift(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert render_mixin.main(["--root", str(tmp_path)]) == 0
    assert render_mixin.main(["--root", str(tmp_path), "--check"]) == 0
    alerts = tmp_path / "deploy/prometheus/alerts.yml"
    alerts.write_text(alerts.read_text(encoding="utf-8") + "# hand edit\n", encoding="utf-8")
    extra = tmp_path / "grafana/dashboards/old.json"
    extra.write_text("{}", encoding="utf-8")
    chart_extra = tmp_path / render_mixin.CHART_DASHBOARD_DIR / "old.json"
    chart_extra.write_text("{}", encoding="utf-8")
    capsys.readouterr()
    assert render_mixin.main(["--root", str(tmp_path), "--check"]) == 1
    stderr = capsys.readouterr().err
    assert "deploy/prometheus/alerts.yml differs from the mixin: run `make mixin`" in stderr
    assert "grafana/dashboards/old.json" in stderr
    assert render_mixin.main(["--root", str(tmp_path)]) == 0
    assert not extra.exists(), "a dashboard the mixin no longer renders is removed"
    assert not chart_extra.exists(), "from the chart too"
    assert render_mixin.main(["--root", str(tmp_path), "--check"]) == 0


def test_config_file_overrides(tmp_path: Path) -> None:
    config = tmp_path / "config.jsonnet"
    config.write_text("{ extraSelector: 'cluster=\"eu\"' }  // jsonnet, comments allowed\n")
    out = tmp_path / "out"
    assert render_mixin.main(["--config", str(config), "--root", str(out)]) == 0
    assert 'ledger_node_up{job=~"ledger-exporter|ledger-probe", cluster="eu"} == 0' in (
        out / "deploy/prometheus/alerts.yml"
    ).read_text(encoding="utf-8")


DURATION_DUE = "not a Prometheus duration such as '3m', '1h30m' or '14d'"
#: An override the mixin cannot take, and the one line that answers it (after the file name).
BAD_OVERRIDES = [
    ("{ extraSelector: ", "the mixin does not evaluate: 1:18 Unexpected end of file"),
    ("[1, 2]", "the mixin does not evaluate: the overrides must be a jsonnet object, such as"),
    ('{ exporterJobSelector: "" }', "the mixin does not evaluate: exporterJobSelector and"),
    ("{ stallGrace: 180 }", f"stallGrace is 180, {DURATION_DUE}"),
    ("{ stallGrace: '3 minutes' }", f'stallGrace is "3 minutes", {DURATION_DUE}'),
    ("{ syncingTooLongFor: '30x' }", f'syncingTooLongFor is "30x", {DURATION_DUE}'),
    ("{ heightStalled: 600 + 300 }", f"heightStalled is 900, {DURATION_DUE}"),
    ("{ blocksBehindThreshold: '10' }", 'blocksBehindThreshold is "10", not a whole number'),
    ("{ blocksBehindThreshold: 2.5 }", "blocksBehindThreshold is 2.5, not a whole number"),
    ("{ peersLowThreshold: true }", "peersLowThreshold is true, not a whole number"),
    ("{ extraSelector: 3 }", "extraSelector is 3, not a string"),
    ("{ dashboardTags: 'ledger' }", 'dashboardTags is "ledger", not a list of strings'),
    (
        "{ stallGraceSeconds: 240 }",
        "stallGraceSeconds is not a setting of the mixin's _config (did you mean stallGrace?): "
        "mixin/config.libsonnet lists them",
    ),
    (
        "{ nonsense: 1 }",
        "nonsense is not a setting of the mixin's _config: mixin/config.libsonnet lists them",
    ),
]


@pytest.mark.parametrize(("config", "message"), BAD_OVERRIDES)
def test_bad_override_is_one_line_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], config: str, message: str
) -> None:
    path = tmp_path / "config.jsonnet"
    path.write_text(config, encoding="utf-8")
    assert render_mixin.main(["--config", str(path), "--root", str(tmp_path / "out")]) == 1
    stderr = capsys.readouterr().err
    assert stderr.startswith(f"render_mixin: {path}: {message}"), stderr
    assert stderr.count("\n") == 1, stderr
    assert not (tmp_path / "out").exists()


def test_bad_override_exits_non_zero_from_the_command_line(tmp_path: Path) -> None:
    """As a user runs it: one line on stderr, exit status 1, nothing written."""
    path = tmp_path / "mine.jsonnet"
    path.write_text("{ stallGrace: 180 }", encoding="utf-8")
    command = [sys.executable, str(REPO / "tools" / "render_mixin.py"), "--config", str(path)]
    done = subprocess.run(
        [*command, "--root", str(tmp_path / "out")], capture_output=True, text=True, check=False
    )
    assert done.returncode == 1
    assert done.stderr == f"render_mixin: {path}: stallGrace is 180, {DURATION_DUE}\n"
    assert not (tmp_path / "out").exists()


def test_good_overrides_of_every_kind_pass_the_check() -> None:
    """Each kind the check knows, given right, renders: a duration of several units, a whole
    number given as 5.0, a list, a string."""
    render_mixin.check_overrides(
        "{ stallGrace: '1h30m', blocksBehindThreshold: 5.0, dashboardTags: ['a'], "
        "extraSelector: 'cluster=\"eu\"' }"
    )


# --- overridden _config ------------------------------------------------------------------


def _selector_problems(expr: str, job_matcher: tuple[str, str, str]) -> list[str]:
    problems = []
    for selector in promql.vector_selectors(promql.parse(expr)):
        if selector.name == "ALERTS":  # Prometheus's own: the rules' alerts, no target's
            continue
        found = promql.matchers(selector)
        if ("cluster", "=", "prod") not in found:
            problems.append(f"{selector} lacks the extra selector")
        if job_matcher not in found:
            problems.append(f"{selector} lacks {job_matcher}")
    return problems


def _job_matcher(metric_names: list[str]) -> tuple[str, str, str]:
    exporter = all(name.startswith(EXPORTER_SERIES) for name in metric_names)
    return ("job", "=", "ledger") if exporter else ("job", "=~", "ledger|ledger-probes")


@pytest.mark.parametrize("kind", ["alerts", "rules"])
def test_every_rule_selector_carries_the_configured_selectors(kind: str) -> None:
    for rule in rules_of(OVERRIDDEN, kind):
        selected = promql.vector_selectors(promql.parse(rule["expr"]))
        names = [s.name or "" for s in selected if s.name != "ALERTS"]
        assert _selector_problems(rule["expr"], _job_matcher(names)) == [], rule["expr"]
        assert "ledger-exporter" not in rule["expr"]


def test_runbook_urls_follow_the_pattern() -> None:
    for rule in rules_of(OVERRIDDEN, "alerts"):
        expected = f"https://runbooks.example.com/ledger/{rule['alert'].lower()}.md"
        assert rule["annotations"]["runbook_url"] == expected


def test_thresholds_reach_expressions_summaries_and_dashboards() -> None:
    alerts = {rule["alert"]: rule for rule in rules_of(OVERRIDDEN, "alerts")}
    for name in ("LedgerBlockHeightStalled", "LedgerNodeBehind"):  # one stall condition
        assert "change_timestamp_seconds" in alerts[name]["expr"]
        assert "+ 900" in alerts[name]["expr"] and "600" not in alerts[name]["expr"]
        assert "+ 240" in alerts[name]["expr"] and "+ 180" not in alerts[name]["expr"]
    stuck = alerts["LedgerVoteSessionStuck"]
    timeout = "max without(exporter_replica) (ledger_blockchain_consensus_timeout_seconds"
    assert f"7 * {timeout}" in stuck["expr"]
    assert (
        "+ 1200" in stuck["expr"] and "7 consensus timeouts" in stuck["annotations"]["description"]
    )
    leader = alerts["LedgerLeaderFailingRounds"]
    assert "[30m]" in leader["expr"] and ">= 5" in leader["expr"]
    assert "30 minutes" in leader["annotations"]["description"]
    syncing = alerts["LedgerBlockchainSyncingTooLong"]
    assert syncing["for"] == "2h" and "2 hours" in syncing["annotations"]["summary"]
    fleet = OVERRIDDEN["dashboards"]["ledger-fleet.json"]
    (stat,) = [p for p in fleet["panels"] if p["title"] == "Longest time since last block"]
    assert stat["fieldConfig"]["defaults"]["thresholds"]["steps"][-1]["value"] == 900


def _dashboard_exprs(board: dict[str, Any]) -> list[tuple[str, str]]:
    """(where, PromQL) of every panel target and every query variable's selector."""
    found = [
        (f"panel {panel['title']!r}", target["expr"])
        for panel in board["panels"]
        for target in panel.get("targets", [])
    ]
    for variable in board["templating"]["list"]:
        if variable["type"] == "query":
            selector = variable["query"].removeprefix("label_values(").rsplit(",", 1)[0]
            found.append((f"variable {variable['name']}", selector))
    return found


@pytest.mark.parametrize("name", sorted(OVERRIDDEN["dashboards"]))
def test_dashboard_queries_carry_the_configured_selectors(name: str) -> None:
    board = OVERRIDDEN["dashboards"][name]
    for where, expr in _dashboard_exprs(board):
        names = [s.name or "" for s in promql.vector_selectors(promql.parse(expr))]
        if names == ["ALERTS"]:  # alerts carry their own labels, not a target's job
            assert 'cluster="prod"' in expr, where
            continue
        assert _selector_problems(expr, _job_matcher(names)) == [], f"{name} {where}: {expr}"
    assert board["tags"] == ["ledger", "prod"]
    assert board["links"][0]["tags"] == ["ledger", "prod"]
    assert board["refresh"] == "1m"


def test_the_docs_document_every_config_field() -> None:
    page = (REPO / "docs" / "monitoring.md").read_text(encoding="utf-8")
    section = page.split("## Monitoring mixin", 1)[1].split("\n## ", 1)[0]
    derived = {"exporterSelector", "ledgerSelector"}  # joined from the fields documented
    for field in set(render_mixin.evaluate()["config"]) - derived:
        assert f"`{field}`" in section, f"docs/monitoring.md's Monitoring mixin lacks {field}"
