"""PromQL of the Prometheus rules and the Grafana dashboards: promtool validates and unit-tests
it, and every metric it names must exist in ``exporter.expose.metrics`` (a rename breaks CI
here)."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from exporter.expose import metrics
from tests.support.monitoring import DASHBOARDS, PROM_DIR, RULE_FILES, variable_query, walk_panels
from tests.support.prometheus import Promtool
from tests.support.testdata import REPO
from tools import render_mixin

UNIT_TEST_FILES = sorted((PROM_DIR / "tests").glob("*.yml"))
RUNBOOKS = REPO / "docs" / "alerts.md"
MIXIN_DIR = REPO / "mixin"
#: The mixin's default runbookURLPattern: the runbooks of docs/alerts.md, where users reach them.
RUNBOOKS_URL = "https://github.com/ledger-exporter/ledger-exporter/blob/main/docs/alerts.md"

#: Series Prometheus itself creates: per-target scrape health and alert state.
PROMETHEUS_NAMES = frozenset({"up", "scrape_duration_seconds", "ALERTS", "ALERTS_FOR_STATE"})
#: Labels Prometheus attaches to every scraped series.
TARGET_LABELS = frozenset({"job", "instance"})
#: `none`: the Watchdog alone, routed to the dead man's switch (never a person).
SEVERITIES = frozenset({"critical", "warning", "info", "none"})
#: Alerts that fire by design from the first evaluation on (the dead man's switch): no case
#: can show them silent, and they read no metric.
ALWAYS_FIRING = frozenset({"LedgerWatchdog"})


# --- PromQL selector extraction ----------------------------------------------------------

AGGREGATORS = frozenset(
    {"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values"}
    | {"bottomk", "topk", "quantile"}
)
#: Keywords followed by an optional parenthesised list of label names (not metrics).
LABEL_LIST_KEYWORDS = frozenset(["by", "without", "on", "ignoring", "group_left", "group_right"])
OTHER_KEYWORDS = frozenset(["and", "or", "unless", "bool", "offset", "atan2", "inf", "nan"])
_TOKEN = re.compile(
    r"""(?P<space>\s+|\#[^\n]*)
    | (?P<string>"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*'|`[^`]*`)
    | (?P<duration>(?:\d+(?:ms|[smhdwy]))+)
    | (?P<number>0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
    | (?P<ident>[a-zA-Z_:][a-zA-Z0-9_:]*)
    | (?P<other>.)""",
    re.VERBOSE | re.DOTALL,
)


class PromQLSyntaxError(ValueError):
    """The extractor met PromQL it cannot read (unbalanced brackets or an open string)."""


def _tokens(expr: str) -> list[tuple[str, str]]:
    """Split ``expr`` into (kind, text) tokens, dropping whitespace and comments."""
    found = [(m.lastgroup or "", m.group()) for m in _TOKEN.finditer(expr)]
    open_quote = [text for kind, text in found if kind == "other" and text in "\"'`"]
    if open_quote:
        raise PromQLSyntaxError(f"unterminated string in {expr!r}")
    brackets = [text for kind, text in found if kind == "other" and text in "()[]{}"]
    for pair in ("()", "[]", "{}"):
        if brackets.count(pair[0]) != brackets.count(pair[1]):
            raise PromQLSyntaxError(f"unbalanced {pair!r} in {expr!r}")
    return [(kind, text) for kind, text in found if kind != "space"]


def _closing(tokens: list[tuple[str, str]], start: int, pair: str) -> int:
    """Index of the bracket closing the one at ``start`` (``pair`` is e.g. ``"()"``)."""
    depth = 0
    for index in range(start, len(tokens)):
        kind, text = tokens[index]
        if kind == "other" and text == pair[0]:
            depth += 1
        elif kind == "other" and text == pair[1]:
            depth -= 1
            if depth == 0:
                return index
    raise PromQLSyntaxError(f"unbalanced {pair!r}")


def _matchers(tokens: list[tuple[str, str]]) -> tuple[set[str], str | None]:
    """Label names of a ``{...}`` body, and the metric name if it is ``__name__="..."``."""
    labels: set[str] = set()
    name = None
    for index, (kind, text) in enumerate(tokens):
        following = tokens[index + 1 : index + 3]
        if kind != "ident" or not following or following[0][1] not in ("=", "!"):
            continue
        labels.add(text)
        equal_to_string = [(k, t[:1]) for k, t in following] == [("other", "="), ("string", '"')]
        if text == "__name__" and equal_to_string:
            name = following[1][1][1:-1]
    return labels - {"__name__"}, name


def selectors(expr: str) -> list[tuple[str, frozenset[str]]]:
    """Every vector selector in ``expr`` as (metric name, label names it matches on).

    Skips strings, function and aggregation names, keywords with their label lists,
    durations, numbers and ranges; ``__name__="x"`` matchers count as metric ``x``.
    """
    tokens = _tokens(expr)
    found: list[tuple[str, frozenset[str]]] = []
    index = 0
    while index < len(tokens):
        kind, text = tokens[index]
        following = tokens[index + 1][1] if index + 1 < len(tokens) else ""
        if kind == "other" and text == "[":
            index = _closing(tokens, index, "[]")
        elif kind == "other" and text == "{":
            end = _closing(tokens, index, "{}")
            labels, name = _matchers(tokens[index + 1 : end])
            if name is not None:
                found.append((name, frozenset(labels)))
            index = end
        elif kind == "ident" and text.lower() in LABEL_LIST_KEYWORDS:
            index = _closing(tokens, index + 1, "()") if following == "(" else index
        elif kind == "ident" and (text in AGGREGATORS or text.lower() in OTHER_KEYWORDS):
            pass
        elif kind == "ident" and following != "(":
            labels = set()
            if following == "{":
                labels, _ = _matchers(tokens[index + 2 : _closing(tokens, index + 1, "{}")])
            found.append((text, frozenset(labels)))
        index += 1
    return found


def metric_names(expr: str) -> set[str]:
    """The metric names ``expr`` reads."""
    return {name for name, _ in selectors(expr)}


EXTRACTOR_CASES = [
    ("up", {"up"}),
    ("rate(foo_total[5m])", {"foo_total"}),
    ('sum by (node) (rate(a_total{job="x", node=~"n.*"}[5m]))', {"a_total"}),
    ("sum(rate(a[5m])) by (node, le)", {"a"}),
    ("a / on(node) group_left(version, peer) b", {"a", "b"}),
    ("a and on (node, blockchain) b == 1 unless ignoring(x) c or d", {"a", "b", "c", "d"}),
    ('label_replace(a, "dst", "$1", "src", "(.*)")', {"a"}),
    ('count_values("version", build_info)', {"build_info"}),
    ("topk(5, a) offset 5m", {"a"}),
    ("rate(a[1h] offset -5m) > bool 3", {"a"}),
    ('{__name__="ledger_node_up", node="x"}', {"ledger_node_up"}),
    ("a{s=\"sum(b) by (c)\", t!~'d{e}'}", {"a"}),
    ("time() - a", {"a"}),
    ("max_over_time(a[5m:1m]) @ start()", {"a"}),
    ("abs(-1.5e3) + 0x1f * Inf + NaN - vector(0)", set()),
    ("histogram_quantile(0.9, sum without (pod) (rate(h_bucket[5m])))", {"h_bucket"}),
    ("level:metric:rate5m / ignoring (a) group_right b", {"level:metric:rate5m", "b"}),
    ("# a comment naming fake_metric\nreal_metric", {"real_metric"}),
    ('ALERTS{alertname=~"Ledger.*", node=~"$node"}', {"ALERTS"}),
    ("sum by(node)(x) * on() group_left y", {"x", "y"}),
]


@pytest.mark.parametrize(("expr", "expected"), EXTRACTOR_CASES)
def test_metric_name_extractor(expr: str, expected: set[str]) -> None:
    assert metric_names(expr) == expected


def test_extractor_reports_matcher_labels() -> None:
    assert selectors('a{node=~"$node", blockchain!=""} + b') == [
        ("a", frozenset({"node", "blockchain"})),
        ("b", frozenset()),
    ]


@pytest.mark.parametrize("expr", ['a{b="c}', "sum(rate(a[5m])", "a[5m"])
def test_extractor_rejects_broken_promql(expr: str) -> None:
    with pytest.raises(PromQLSyntaxError):
        selectors(expr)


# --- promtool --------------------------------------------------------------------------


@pytest.mark.parametrize("path", RULE_FILES, ids=lambda p: p.name)
def test_promtool_check_rules(promtool: Promtool, path: Path) -> None:
    promtool.check("check", "rules", str(path))


def test_promtool_check_config(promtool: Promtool) -> None:
    printed = promtool.check("check", "config", "prometheus.yml", cwd=PROM_DIR)
    assert "2 rule files found" in printed


@pytest.mark.parametrize("path", UNIT_TEST_FILES, ids=lambda p: p.name)
def test_promtool_unit_tests(promtool: Promtool, path: Path) -> None:
    promtool.check("test", "rules", str(path))


# --- rules: coverage by unit tests, metadata, names ------------------------------------


@functools.cache
def load_yaml(path: Path) -> Any:
    """The parsed file, read once per run: the coverage tests below read every unit-test file
    for each alert and record (pure-Python YAML: seconds each time). Callers do not change it."""
    with path.open(encoding="utf-8") as stream:
        return yaml.safe_load(stream)


def rules_of(path: Path) -> list[dict[str, Any]]:
    return [rule for group in load_yaml(path)["groups"] for rule in group["rules"]]


#: Each alert's first rule: a burn-rate alert is four rules of one name (its window pairs), the
#: first its fastest page, which its runbook opens with.
ALERTS: dict[str, dict[str, Any]] = {}
for _rule in rules_of(PROM_DIR / "alerts.yml"):
    ALERTS.setdefault(_rule["alert"], _rule)
#: The mixin's _config with every optional alert on (off by default, so not in alerts.yml).
OPTIONAL_ON = '{minimumNodeVersion: "1.4.2"}'
#: Every alert the mixin can render: the shipped ones and those the optional settings add
#: (their runbooks and metadata are checked alike; their promtool tests render them).
EVERY_ALERT: dict[str, dict[str, Any]] = {}
for _group in render_mixin.evaluate(OPTIONAL_ON)["alerts"]["groups"]:
    for _rule in _group["rules"]:
        EVERY_ALERT.setdefault(_rule["alert"], _rule)
RECORDS = {rule["record"]: rule for rule in rules_of(PROM_DIR / "rules.yml")}
#: Every sample name the exporter can emit (its own families and the runtime ones).
EXPORTER_NAMES = frozenset(spec.name for spec in metrics.ALL) | metrics.RUNTIME_SAMPLE_NAMES
VALID_NAMES = EXPORTER_NAMES | PROMETHEUS_NAMES | set(RECORDS)
LABELS_BY_NAME = {spec.name: frozenset(spec.labels) for spec in metrics.ALL}


def unit_test_expectations() -> Iterator[tuple[str, bool]]:
    """(alertname, expects it firing) for every alert_rule_test case in the test files."""
    for path in UNIT_TEST_FILES:
        for case in load_yaml(path)["tests"]:
            for check in case.get("alert_rule_test", []):
                yield check["alertname"], bool(check.get("exp_alerts"))


def test_rule_sets_are_not_empty() -> None:
    assert len(ALERTS) >= 10
    assert len(RECORDS) >= 3
    assert UNIT_TEST_FILES


@pytest.mark.parametrize("alert", sorted(ALERTS))
def test_every_alert_has_firing_and_quiet_unit_tests(alert: str) -> None:
    expectations = [fires for name, fires in unit_test_expectations() if name == alert]
    assert True in expectations, f"no promtool test expects {alert} to fire"
    if alert in ALWAYS_FIRING:
        assert False not in expectations, f"{alert} fires always"
        return
    assert False in expectations, f"no promtool test expects {alert} to stay silent or clear"


def test_unit_tests_name_only_existing_alerts() -> None:
    unknown = {name for name, _ in unit_test_expectations()} - set(ALERTS)
    assert not unknown, f"unit tests check alerts that alerts.yml does not define: {unknown}"


@pytest.mark.parametrize("record", sorted(RECORDS))
def test_every_recording_rule_has_a_unit_test(record: str) -> None:
    tested = {
        check["expr"].strip()
        for path in UNIT_TEST_FILES
        for case in load_yaml(path)["tests"]
        for check in case.get("promql_expr_test", [])
    }
    assert record in tested, f"no promql_expr_test queries {record}"


@pytest.mark.parametrize("record", sorted(RECORDS))
def test_recording_rule_names_follow_level_metric_operations(record: str) -> None:
    level, metric, operations = record.split(":")
    assert re.fullmatch(r"[a-z_]+", level), record
    assert re.fullmatch(r"[a-z0-9_]+", operations), record
    exporter_bases = EXPORTER_NAMES | {name.removesuffix("_total") for name in EXPORTER_NAMES}
    assert metric in exporter_bases, f"{record}: {metric} is no exporter metric"


#: The labels an alert whose expression is one aggregation keeps: ``max by (a, b) (...)``.
_OUTER_AGGREGATION = re.compile(r"\s*(?:min|max|count|sum) by \(([^)]*)\) \(")


def alert_level(rule: dict[str, Any]) -> str:
    """``contract``, ``wallet``, ``leader``, ``network chain``, ``chain``, ``node``,
    ``exporter`` or ``pipeline``, from the metric families the alert reads: an alert on a
    chain as a whole (a ``ledger_network_blockchain_`` family, or an aggregation by chain)
    or on a leader (aggregated over the nodes that see it) has no node to name; one that
    aggregates the nodes away names the exporter; one that reads nothing (the Watchdog) has
    nothing to name."""
    names = metric_names(rule["expr"])
    if not names:
        return "pipeline"
    for watched in ("contract", "wallet"):
        if any(name.startswith(f"ledger_{watched}_") for name in names):
            return watched
    if "ledger_blockchain_leader_failed_rounds_total" in names:
        return "leader"
    if all("node" not in LABELS_BY_NAME.get(name, {"node"}) for name in names):
        return (
            "network chain" if any("blockchain" in LABELS_BY_NAME[n] for n in names) else "exporter"
        )
    outer = _OUTER_AGGREGATION.match(rule["expr"].lstrip("( \n"))  # the same in parentheses
    kept = {label.strip() for label in outer[1].split(",")} if outer else {"node"}
    if "node" not in kept:
        return "network chain" if "blockchain" in kept else "exporter"
    if any(name.startswith(("ledger_network_blockchain_", "blockchain:")) for name in names):
        return "network chain"  # a chain-level family, or a record at the chain's level
    if any(name.startswith("ledger_blockchain_") for name in names):
        return "chain"
    return "node" if any(name.startswith("ledger_node_") for name in names) else "exporter"


REQUIRED_LABELS = {
    "contract": ("$labels.contract", "$labels.blockchain"),
    "wallet": ("$labels.wallet", "$labels.blockchain"),
    "leader": ("$labels.leader", "$labels.blockchain"),
    "network chain": ("$labels.blockchain",),
    "chain": ("$labels.node", "$labels.blockchain"),
    "node": ("$labels.node",),
    "exporter": ("$labels.",),
    "pipeline": (),
}


@pytest.mark.parametrize("alert", sorted(EVERY_ALERT))
def test_alert_metadata(alert: str) -> None:
    """The summary is one static headline (mixtool's rules:
    tests/monitoring/test_mixin_lint.py); the
    description names what fired; the runbook is the alert's section of the published
    docs/alerts.md."""
    rule = EVERY_ALERT[alert]
    assert alert.startswith("Ledger")
    assert rule["labels"]["severity"] in SEVERITIES
    assert rule.get("for"), f"{alert} has no `for`: one bad sample would page"
    annotations = rule["annotations"]
    for needle in REQUIRED_LABELS[alert_level(rule)]:
        assert needle in annotations["description"], f"{alert} description lacks {needle}"
    assert "{{" not in annotations["summary"], f"{alert}: a summary is the same for all"
    assert annotations["runbook_url"] == f"{RUNBOOKS_URL}#{alert.lower()}"


def runbook_sections() -> dict[str, set[str]]:
    """docs/alerts.md's runbook sections (its ``### `` headings) -> the five parts each has."""
    sections: dict[str, set[str]] = {}
    current: set[str] | None = None
    for line in RUNBOOKS.read_text(encoding="utf-8").splitlines():
        if line.startswith("### "):
            current = sections.setdefault(line.removeprefix("### ").strip(), set())
        elif line.startswith("#"):
            current = None
        elif current is not None and (part := re.match(r"- \*\*(.+?)\*\*:", line)):
            current.add(part[1])
    return sections


def heading_anchors(text: str) -> set[str]:
    """The anchors of a page's headings, as GitHub and MkDocs make them."""
    return {
        re.sub(r"[^\w\- ]", "", heading.replace("`", "")).strip().lower().replace(" ", "-")
        for heading in re.findall(r"^#{1,6} (.+)$", text, re.M)
    }


RUNBOOK_PARTS = {
    "What it means",
    "Likely causes",
    "How to confirm",
    "What to do",
    "When it clears",
}


def test_every_alert_has_a_runbook_and_every_runbook_an_alert() -> None:
    sections = runbook_sections()
    assert set(sections) - set(EVERY_ALERT) == set(), "runbook sections with no alert"
    assert set(EVERY_ALERT) - set(sections) == set(), "alerts with no runbook section"


@pytest.mark.parametrize("alert", sorted(EVERY_ALERT))
def test_alert_runbook_has_every_part(alert: str) -> None:
    assert runbook_sections()[alert] == RUNBOOK_PARTS, alert


@pytest.mark.parametrize("alert", sorted(EVERY_ALERT))
def test_alert_runbook_opens_with_the_rules_severity_for_and_summary(alert: str) -> None:
    rule = EVERY_ALERT[alert]
    severity, summary = rule["labels"]["severity"], rule["annotations"]["summary"]
    opening = f"### {alert}\n\n**{severity}**, for {rule['for']}: *{summary}*\n"
    assert opening in RUNBOOKS.read_text(encoding="utf-8"), f"docs/alerts.md: {opening}"


@pytest.mark.parametrize("alert", sorted(EVERY_ALERT))
def test_alert_runbook_url_anchor_exists_in_docs(alert: str) -> None:
    """The anchor the rendered runbook_url names is a heading of docs/alerts.md."""
    url = EVERY_ALERT[alert]["annotations"]["runbook_url"]
    page, _, anchor = url.partition("#")
    assert page == RUNBOOKS_URL, url
    assert anchor in heading_anchors(RUNBOOKS.read_text(encoding="utf-8")), url


def test_every_alert_is_explained_by_a_comment() -> None:
    """In the mixin's source: a comment above each alert says why its threshold and `for`."""
    explained = set()
    for path in sorted((MIXIN_DIR / "alerts").glob("*.libsonnet")):
        lines = path.read_text(encoding="utf-8").splitlines()
        for index, line in enumerate(lines):
            match = re.match(r"\s*alert: '(\w+)',", line)
            if match:
                above = lines[index - 2].strip()
                assert lines[index - 1].strip() == "{", f"{path.name}: {match[1]}"
                assert above.startswith("//"), f"no comment above {match[1]} in {path.name}"
                explained.add(match[1])
    assert explained == set(EVERY_ALERT)


def test_every_threshold_setting_is_in_the_table_atop_the_config() -> None:
    """The table atop mixin/config.libsonnet lists every setting an operator may tune (a
    number or a duration, the dashboards' aside) with the alerts that use it."""
    header = (MIXIN_DIR / "config.libsonnet").read_text(encoding="utf-8").split("\n{", 1)[0]
    config = render_mixin.evaluate()["config"]
    settings = [
        name
        for name, value in config.items()
        if not name.startswith("dashboard")
        and (type(value) in (int, float) or re.fullmatch(r"\d+[smhd]", str(value)))
    ]
    assert len(settings) >= 15
    for name in settings:
        assert re.search(rf"^//   {name} ", header, re.M), f"{name} is missing from the table"


def rule_expressions() -> Iterator[tuple[str, str]]:
    for path in RULE_FILES:
        for rule in rules_of(path):
            yield f"{path.name}: {rule.get('alert') or rule.get('record')}", rule["expr"]


@pytest.mark.parametrize(("where", "expr"), list(rule_expressions()), ids=lambda v: str(v)[:60])
def test_rule_expressions_name_existing_metrics(where: str, expr: str) -> None:
    check_selectors(where, expr, VALID_NAMES)


def check_selectors(where: str, expr: str, valid: frozenset[str] | set[str]) -> None:
    """Every metric ``expr`` reads exists, and exporter metrics are matched on their labels."""
    found = selectors(expr)
    assert found or expr == "vector(1)", f"{where}: no metric found in {expr!r}"
    for name, labels in found:
        assert name in valid, f"{where}: unknown metric {name!r}"
        if name in LABELS_BY_NAME:
            unknown = labels - LABELS_BY_NAME[name] - TARGET_LABELS
            assert not unknown, f"{where}: {name} has no label(s) {sorted(unknown)}"


# --- dashboards: every query parses and names existing metrics ---------------------------

#: Values for Grafana's built-in variables that keep the query valid PromQL.
GRAFANA_BUILTINS = {
    "__rate_interval": "1m",
    "__interval": "1m",
    "__interval_ms": "60000",
    "__range": "1h",
    "__range_s": "3600",
    "__range_ms": "3600000",
}
_VARIABLE = re.compile(r"\$\{(\w+)(?::\w+)?\}|\[\[(\w+)(?::\w+)?\]\]|\$(\w+)")


def substitute(expr: str, variables: set[str]) -> str:
    """``expr`` with Grafana variables replaced as Grafana would (a dashboard variable by a
    regex matching anything); ``$1``-style regex references are left alone."""

    def replace(match: re.Match[str]) -> str:
        name = next(group for group in match.groups() if group)
        if name.isdigit():
            return match.group()
        if name in GRAFANA_BUILTINS:
            return GRAFANA_BUILTINS[name]
        if name in variables:
            return ".*"
        raise AssertionError(f"undefined Grafana variable ${name} in {expr!r}")

    return _VARIABLE.sub(replace, expr)


def dashboard_queries() -> Iterator[tuple[str, str]]:
    """(where, PromQL with variables substituted) for every panel target and variable."""
    for path in DASHBOARDS:
        board = json.loads(path.read_text(encoding="utf-8"))
        variables = {item["name"] for item in board["templating"]["list"]}
        for item in board["templating"]["list"]:
            if item["type"] != "query":
                continue
            match = re.fullmatch(r"label_values\((.+),\s*\w+\)", variable_query(item))
            assert match, f"{path.name}: variable {item['name']} is no label_values(metric, label)"
            where = f"{path.name} variable {item['name']}"
            yield where, substitute(match[1], variables)
        for panel in walk_panels(board["panels"]):
            for target in panel.get("targets", []):
                where = f"{path.name} panel {panel['id']} {panel['title']!r} {target['refId']}"
                yield where, substitute(target["expr"], variables)


DASHBOARD_QUERIES = dict(dashboard_queries())


@pytest.fixture(scope="module")
def dashboard_parse_errors(
    promtool: Promtool, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, str]:
    """promtool's parse error per dashboard query (one rule group per query, one run)."""
    wheres = sorted(DASHBOARD_QUERIES)
    groups = [
        {"name": f"q{index}", "rules": [{"record": "dashboard:query:check", "expr": expr}]}
        for index, expr in enumerate(DASHBOARD_QUERIES[where] for where in wheres)
    ]
    path = tmp_path_factory.mktemp("promql") / "dashboard-queries.yml"
    path.write_text(yaml.safe_dump({"groups": groups}), encoding="utf-8")
    result = promtool.run("check", "rules", str(path))
    output = result.stdout + result.stderr
    errors = {wheres[int(m[1])]: m[0] for m in re.finditer(r'group "q(\d+)".*', output)}
    assert result.returncode == 0 or errors, f"promtool failed without naming a query:\n{output}"
    return errors


def test_dashboards_have_queries() -> None:
    assert len(DASHBOARDS) == 5
    assert len(DASHBOARD_QUERIES) >= 30


@pytest.mark.parametrize("where", sorted(DASHBOARD_QUERIES))
def test_dashboard_query_parses(where: str, dashboard_parse_errors: dict[str, str]) -> None:
    assert where not in dashboard_parse_errors, dashboard_parse_errors[where]


@pytest.mark.parametrize("where", sorted(DASHBOARD_QUERIES))
def test_dashboard_query_names_existing_metrics(where: str) -> None:
    # Dashboards read exporter and Prometheus series only, so they work without rules.yml;
    # the SLO dashboard reads the SLO records (a 30-day error ratio is a record's job).
    slo = {name for name in RECORDS if ":error_ratio" in name or name.endswith(":not_advancing")}
    allowed = (
        EXPORTER_NAMES | PROMETHEUS_NAMES | (slo if where.startswith("ledger-slo.") else set())
    )
    check_selectors(where, DASHBOARD_QUERIES[where], allowed)


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ('a{node=~"$node"}[$__rate_interval]', 'a{node=~".*"}[1m]'),
        ('a{node=~"${node:regex}", b="[[blockchain]]"}', 'a{node=~".*", b=".*"}'),
        ('label_replace(a, "x", "$1", "y", "(.*)")', 'label_replace(a, "x", "$1", "y", "(.*)")'),
    ],
)
def test_grafana_variable_substitution(expr: str, expected: str) -> None:
    assert substitute(expr, {"node", "blockchain"}) == expected


def test_undefined_grafana_variable_is_reported() -> None:
    with pytest.raises(AssertionError, match=r"\$nod "):
        substitute('a{node=~"$nod"}', {"node"})
