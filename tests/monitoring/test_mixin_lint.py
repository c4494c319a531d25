"""The ecosystem's linters on the mixin, re-implemented (mixtool and dashboard-linter are Go
builds that cannot be installed here).

mixtool's ``lint`` (monitoring-mixins/mixtool, pkg/mixer/lint.go) on the alerts: camel-case
names of at most 40 characters, severity critical/warning/info, a templated description, a
static summary that is a sentence, groups of at most 20 rules with names of at most 40
characters; plus the monitoring-mixins guideline of an absolute runbook_url; and on the
dashboards a title and a uid. grafana/dashboard-linter's rules (its ``lint/rule_*.go``), one
function each, on every dashboard. Each rule is run on the mixin with its default _config and
with overrides, and on a broken example that it must catch.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Iterator
from typing import Any

import promql_parser
import pytest

from tests.support import promql
from tests.support.monitoring import MIXIN_OVERRIDES, edit_at
from tools import render_mixin

Board = dict[str, Any]
Rule = dict[str, Any]
MIXINS = {
    "default": render_mixin.evaluate(),
    "overridden": render_mixin.evaluate(json.dumps(MIXIN_OVERRIDES)),
}
DASHBOARDS = {
    f"{config} {name}": board
    for config, mixin in MIXINS.items()
    for name, board in mixin["dashboards"].items()
}

# --- mixtool: alerts ----------------------------------------------------------------------

CAMEL_CASE = re.compile(r"^([A-Z]+[a-z0-9]+)+$")
GO_TEMPLATE = re.compile(r"\{\{.+}\}")
SENTENCE = re.compile(r"^[A-Z].+\.$")
SEVERITIES = frozenset({"critical", "warning", "info"})


def lint_alert(rule: Rule, runbook_pattern: str) -> list[str]:
    """mixtool's alert guidelines, and the runbook link of the mixin guidelines."""
    name, annotations = rule["alert"], rule.get("annotations", {})
    summary, description = annotations.get("summary"), annotations.get("description")
    found = []
    if not CAMEL_CASE.match(name):
        found.append("alert-name-camelcase")
    if len(name) > 40:
        found.append("alert-name-length")
    if rule.get("labels", {}).get("severity") not in SEVERITIES:
        found.append("alert-severity-rule")
    if description is None:
        found.append("alert-description-missing-rule")
    elif not GO_TEMPLATE.search(description):
        found.append("alert-description-templating")
    if summary is None:
        found.append("alert-summary-missing-rule")
    else:
        if GO_TEMPLATE.search(summary):
            found.append("alert-summary-templating")
        if not SENTENCE.match(summary) or re.search(r"[.!?]\s", summary):
            found.append("alert-summary-style (one sentence, capital to period)")
    if annotations.get("runbook_url") != runbook_pattern % name.lower():
        found.append("runbook_url not from runbookURLPattern")
    if not str(annotations.get("runbook_url", "")).startswith("https://"):
        found.append("runbook_url not absolute")
    return found


def lint_group(group: dict[str, Any]) -> list[str]:
    found = []
    if len(group["rules"]) > 20:
        found.append("alert-group-rule-count")
    if len(group["name"]) > 40:
        found.append("alert-group-name-length")
    return found


def alerts_of(config: str) -> Iterator[tuple[str, Rule]]:
    for group in MIXINS[config]["alerts"]["groups"]:
        for rule in group["rules"]:
            yield f"{config} {rule['alert']}", rule


ALERTS = dict(item for config in MIXINS for item in alerts_of(config))
PATTERNS = {
    "default": "https://github.com/ledger-exporter/ledger-exporter/blob/main/docs/alerts.md#%s",
    "overridden": MIXIN_OVERRIDES["runbookURLPattern"],
}


#: mixtool's lint exclusions (its `.lint` file, as kubernetes-mixin's): the dead man's switch
#: has severity none (it pages no one; kube-prometheus's Watchdog too) and nothing to template.
EXCLUSIONS = {"LedgerWatchdog": {"alert-severity-rule", "alert-description-templating"}}


@pytest.mark.parametrize("where", sorted(ALERTS))
def test_alert_passes_mixtool_lint(where: str) -> None:
    config, name = where.split(" ", 1)
    excluded = EXCLUSIONS.get(name, set())
    assert [p for p in lint_alert(ALERTS[where], PATTERNS[config]) if p not in excluded] == []


@pytest.mark.parametrize("config", sorted(MIXINS))
def test_alert_groups_pass_mixtool_lint(config: str) -> None:
    groups = MIXINS[config]["alerts"]["groups"] + MIXINS[config]["rules"]["groups"]
    assert [(g["name"], lint_group(g)) for g in groups if lint_group(g)] == []
    assert MIXINS[config]["rules"]["groups"], "prometheusRules evaluates to rule groups"


GOOD_ALERT: Rule = {
    "alert": "LedgerThingBroken",
    "labels": {"severity": "warning"},
    "annotations": {
        "summary": "A thing is broken.",
        "description": "Thing {{ $labels.thing }} is broken.",
        "runbook_url": "https://example.com/r#ledgerthingbroken",
    },
}


def _alert(**changes: Any) -> Rule:
    """GOOD_ALERT with top-level keys replaced and annotations merged (None deletes one)."""
    rule = copy.deepcopy(GOOD_ALERT) | {k: v for k, v in changes.items() if k != "annotations"}
    merged = rule["annotations"] | changes.get("annotations", {})
    rule["annotations"] = {key: value for key, value in merged.items() if value is not None}
    return rule


@pytest.mark.parametrize(
    ("rule", "finding"),
    [
        (_alert(alert="ledgerThingBroken"), "alert-name-camelcase"),
        (_alert(alert="Ledger_Thing"), "alert-name-camelcase"),
        (_alert(alert="Ledger" + "Very" * 10), "alert-name-length"),
        (_alert(labels={"severity": "page"}), "alert-severity-rule"),
        (_alert(annotations={"description": None}), "alert-description-missing-rule"),
        (_alert(annotations={"description": "Static."}), "alert-description-templating"),
        (_alert(annotations={"summary": None}), "alert-summary-missing-rule"),
        (
            _alert(annotations={"summary": "Thing {{ $labels.thing }} broke."}),
            "alert-summary-templating",
        ),
        (_alert(annotations={"summary": "a thing is broken."}), "alert-summary-style"),
        (_alert(annotations={"summary": "A thing is broken"}), "alert-summary-style"),
        (_alert(annotations={"summary": "A thing broke. Fix it."}), "alert-summary-style"),
        (_alert(annotations={"runbook_url": "README.md#ledgerthingbroken"}), "runbook_url"),
        (_alert(annotations={"runbook_url": "https://example.com/r#other"}), "runbook_url"),
    ],
)
def test_alert_lint_catches(rule: Rule, finding: str) -> None:
    assert lint_alert(GOOD_ALERT, "https://example.com/r#%s") == []
    found = lint_alert(rule, "https://example.com/r#%s")
    assert any(item.startswith(finding) for item in found), found


def test_group_lint_catches_big_groups_and_long_names() -> None:
    assert lint_group({"name": "g", "rules": [{}] * 21}) == ["alert-group-rule-count"]
    assert lint_group({"name": "g" * 41, "rules": []}) == ["alert-group-name-length"]


# --- dashboard-linter: its rules, one function each ---------------------------------------

VALID_UNITS = frozenset(
    """none string short percent percentunit humidity dB hex0x hex sci locale pixel accMS2
    accFS2 accG degree radian grad arcmin arcsec areaM2 areaF2 areaMI2 flops mflops gflops
    tflops pflops eflops zflops yflops ppm conppb conngm3 conngNm3 conμgm3 conμgNm3 conmgm3
    conmgNm3 congm3 congNm3 conmgdL conmmolL currencyUSD currencyGBP currencyEUR currencyJPY
    currencyRUB currencyUAH currencyBRL currencyDKK currencyISK currencyNOK currencySEK
    currencyCZK currencyCHF currencyPLN currencyBTC currencymBTC currencyμBTC currencyZAR
    currencyINR currencyKRW currencyIDR currencyPHP currencyVND bytes decbytes bits decbits
    kbytes deckbytes mbytes decmbytes gbytes decgbytes tbytes dectbytes pbytes decpbytes pps
    binBps Bps binbps bps KiBs Kibits KBs Kbits MiBs Mibits MBs Mbits GiBs Gibits GBs Gbits
    TiBs Tibits TBs Tbits PiBs Pibits PBs Pbits dateTimeAsIso dateTimeAsIsoNoDateIfToday
    dateTimeAsUS dateTimeAsUSNoDateIfToday dateTimeAsLocal dateTimeAsLocalNoDateIfToday
    dateTimeAsSystem dateTimeFromNow watt kwatt megwatt gwatt mwatt Wm2 voltamp kvoltamp
    voltampreact kvoltampreact watth watthperkg kwatth kwattm amph kamph mamph joule ev amp
    kamp mamp volt kvolt mvolt dBm ohm kohm Mohm farad µfarad nfarad pfarad ffarad henry
    mhenry µhenry lumens flowgpm flowcms flowcfs flowcfm litreh flowlpm flowmlpm lux forceNm
    forcekNm forceN forcekN Hs KHs MHs GHs THs PHs EHs massmg massg masslb masskg masst
    lengthmm lengthin lengthft lengthm lengthkm lengthmi pressurembar pressurebar
    pressurekbar pressurepa pressurehpa pressurekpa pressurehg pressurepsi radbq radci radgy
    radrad radsv radmsv radusv radrem radexpckg radr radsvh radmsvh radusvh rotrpm rothz
    rotrads rotdegs celsius fahrenheit kelvin hertz ns µs ms s m h d dtdurationms dtdurations
    dthms dtdhms timeticks clockms clocks cps ops reqps rps wps iops cpm opm rpm wpm mps mpm
    velocityms velocitykmh velocitymph velocityknot mlitre litre m3 Nm3 dm3 gallons bool
    bool_yes_no bool_on_off""".split()  # noqa: SIM905 (the Go list, as it reads there)
)
#: Panel types each rule looks at (lint/constants.go, lint/rule_target_promql.go).
TITLED = frozenset({"stat", "singlestat", "graph", "table", "timeseries", "gauge"})
DATASOURCED = frozenset({"singlestat", "graph", "table", "timeseries"})
QUERIED = frozenset({"singlestat", "gauge", "table", "stat", "state-timeline", "timeseries"})
TEMPLATED_DATASOURCES = frozenset({"$datasource", "${datasource}"})
LABEL_FUNCTIONS = frozenset({"label_names", "label_values", "metrics", "query_result"})
COUNTER_FUNCTIONS = frozenset({"rate", "irate", "increase"})


def panels(board: Board) -> Iterator[dict[str, Any]]:
    """Every panel, rows and the panels inside collapsed rows included (GetPanels)."""
    for panel in board.get("panels", []):
        yield panel
        yield from panel.get("panels", [])


def targets(board: Board) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    for panel in panels(board):
        for target in panel.get("targets", []):
            yield panel, target


def variables(board: Board) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = board["templating"]["list"]
    return found


def query_of(variable: dict[str, Any]) -> str:
    query = variable.get("query", "")
    return str(query["query"] if isinstance(query, dict) else query)


def is_prometheus(board: Board) -> bool:
    sources = [v for v in variables(board) if v["type"] == "datasource"]
    return bool(sources) and sources[0]["query"] == "prometheus"


def template_datasource_rule(board: Board) -> list[str]:
    sources = [v for v in variables(board) if v["type"] == "datasource"]
    if not sources:
        return ["does not have a templated data source"]
    found = []
    for source in sources:
        names = {f"{source['query'].lower()}_datasource"} | (
            {"datasource"} if len(sources) == 1 else set()
        )
        labels = {f"{source['query'].title()} data source"} | (
            {"Data source"} if len(sources) == 1 else set()
        )
        if source["name"] not in names:
            found.append(f"data source variable named {source['name']!r}")
        if source.get("label") not in labels:
            found.append(f"data source variable labelled {source.get('label')!r}")
    return found


def _template_rule(name: str) -> Callable[[Board], list[str]]:
    def rule(board: Board) -> list[str]:
        if not is_prometheus(board):
            return []
        matching = [v for v in variables(board) if v["name"] == name]
        if not matching:
            return [f"is missing the {name} template"]
        variable, found = matching[0], []
        if (variable.get("datasource") or {}).get("uid") not in TEMPLATED_DATASOURCES:
            found.append(f"{name} template should use datasource '$datasource'")
        if variable["type"] != "query":
            found.append(f"{name} template should be a Prometheus query")
        if variable.get("label") != name.title():
            found.append(f"{name} template should be labelled {name.title()!r}")
        if not variable.get("multi"):
            found.append(f"{name} template should be a multi select")
        if variable.get("allValue") != ".+":
            found.append(f"{name} template allValue should be '.+'")
        return found

    return rule


def template_label_promql_rule(board: Board) -> list[str]:
    found = []
    for variable in variables(board):
        if variable["type"] != "query" or not is_prometheus(board):
            continue
        match = re.search(r"([a-z_]+)\((.+)\)", query_of(variable))
        if not match or match[1] not in LABEL_FUNCTIONS:
            found.append(f"template {variable['name']!r}: invalid templated label")
            continue
        # label_values(selector, label): the selector must parse (promtool also parses it,
        # in tests/monitoring/test_rules.py); label_values(label) and label_names() have none.
        inner = re.fullmatch(r"(.+),\s*\w+", match[2]) if match[1] == "label_values" else None
        if inner or match[1] == "query_result":
            try:
                promql.parse(inner[1] if inner else match[2])
            except ValueError as err:
                found.append(f"template {variable['name']!r}: {err}")
    return found


def template_on_time_change_reload_rule(board: Board) -> list[str]:
    return [
        f"variable {v['name']!r} refresh is {v.get('refresh')}, not 2 (on time range change)"
        for v in variables(board)
        if v["type"] == "query" and v.get("refresh") != 2
    ]


def panel_datasource_rule(board: Board) -> list[str]:
    return [
        f"panel {p.get('title')!r} does not use the templated datasource"
        for p in panels(board)
        if p["type"] in DATASOURCED
        and (p.get("datasource") or {}).get("uid") not in TEMPLATED_DATASOURCES
    ]


def panel_title_description_rule(board: Board) -> list[str]:
    # Every panel but rows: state-timeline too, though the Go rule skips it.
    return [
        f"panel {p.get('id')} has no title or description"
        for p in panels(board)
        if p["type"] != "row" and not (p.get("title") and p.get("description"))
    ]


def panel_units_rule(board: Board) -> list[str]:
    """Stricter than the Go rule: value mappings do not excuse a missing unit; a custom
    ``suffix:`` unit counts as a unit."""
    found = []
    for panel in panels(board):
        if panel["type"] not in TITLED:
            continue
        if panel["type"] == "stat" and panel.get("options", {}).get("reduceOptions", {}).get(
            "fields"
        ):
            continue  # a stat showing non-numeric fields needs no unit
        unit = panel.get("fieldConfig", {}).get("defaults", {}).get("unit", "")
        if unit not in VALID_UNITS and not unit.startswith("suffix:"):
            found.append(f"panel {panel.get('title')!r} has no or invalid unit {unit!r}")
    return found


def panel_no_targets_rule(board: Board) -> list[str]:
    return [
        f"panel {p.get('title')!r} has no targets"
        for p in panels(board)
        if p["type"] in TITLED and not p.get("targets")
    ]


def target_promql_rule(board: Board) -> list[str]:
    found = []
    for panel, target in targets(board):
        if panel["type"] in QUERIED and is_prometheus(board):
            try:
                promql.parse(target.get("expr", ""))
            except ValueError as err:
                found.append(f"panel {panel['title']!r} {target.get('refId')}: {err}")
    return found


def target_logql_rules(board: Board) -> list[str]:
    """target-logql-rule and target-logql-auto-rule apply to Loki targets only: the
    dashboards must have none (their datasource variable and every target are Prometheus)."""
    return [
        f"panel {panel['title']!r} has a non-Prometheus target"
        for panel, target in targets(board)
        if (target.get("datasource") or {}).get("type") != "prometheus"
    ]


def target_rate_interval_rule(board: Board) -> list[str]:
    found = []
    for panel, target in targets(board):
        if panel["type"] not in QUERIED or not is_prometheus(board):
            continue
        for node, parents in promql.walk(promql.parse(target["expr"])):
            if not isinstance(node, promql_parser.MatrixSelector) or not parents:
                continue
            if node.range == promql.RATE_INTERVAL:
                continue
            call = parents[-1]
            if not isinstance(call, promql_parser.Call):
                found.append(f"{target['expr']!r}: range outside a function")
            elif call.func.name in {"rate", "irate"}:
                found.append(f"{target['expr']!r}: should use $__rate_interval")
    return found


def _target_matcher_rule(label: str) -> Callable[[Board], list[str]]:
    def rule(board: Board) -> list[str]:
        if not is_prometheus(board):
            return []
        found = []
        for _, target in targets(board):
            for selector in promql.vector_selectors(promql.parse(target["expr"])):
                if (label, "=~", f"${label}") not in promql.matchers(selector):
                    found.append(f'{target["expr"]!r}: {selector} has no {label}=~"${label}"')
        return found

    return rule


def target_counter_agg_rule(board: Board) -> list[str]:
    """Counters (names ending in _total) only directly under rate, irate or increase."""
    found = []
    for _, target in targets(board):
        for node, parents in promql.walk(promql.parse(target["expr"])):
            if not isinstance(node, promql_parser.VectorSelector):
                continue
            if not (node.name or "").endswith("_total"):
                continue
            under = parents[-2:]
            if not (
                len(under) == 2
                and isinstance(under[1], promql_parser.MatrixSelector)
                and isinstance(under[0], promql_parser.Call)
                and under[0].func.name in COUNTER_FUNCTIONS
            ):
                found.append(f"counter {node} is not under rate, irate or increase")
    return found


def uneditable_rule(board: Board) -> list[str]:
    return ["is editable, it should be set to 'editable: false'"] if board.get("editable") else []


def mixtool_dashboard_rule(board: Board) -> list[str]:
    return [f"dashboard has no {key}" for key in ("title", "uid") if not board.get(key)]


def no_rate_on_gauges_rule(board: Board) -> list[str]:
    """The issue's own rule: rate/irate/increase read counters; a gauge's slope is deriv()."""
    found = []
    for _, target in targets(board):
        for node, _ in promql.walk(promql.parse(target["expr"])):
            if isinstance(node, promql_parser.Call) and node.func.name in COUNTER_FUNCTIONS:
                for selector in promql.vector_selectors(node):
                    if not (selector.name or "").endswith("_total"):
                        found.append(f"{node.func.name}() on the gauge {selector.name}")
    return found


DASHBOARD_RULES: dict[str, Callable[[Board], list[str]]] = {
    "template-datasource-rule": template_datasource_rule,
    "template-job-rule": _template_rule("job"),
    "template-instance-rule": _template_rule("instance"),
    "template-label-promql-rule": template_label_promql_rule,
    "template-on-time-change-reload-rule": template_on_time_change_reload_rule,
    "panel-datasource-rule": panel_datasource_rule,
    "panel-title-description-rule": panel_title_description_rule,
    "panel-units-rule": panel_units_rule,
    "panel-no-targets-rule": panel_no_targets_rule,
    "target-logql-rule, target-logql-auto-rule": target_logql_rules,
    "target-promql-rule": target_promql_rule,
    "target-rate-interval-rule": target_rate_interval_rule,
    "target-job-rule": _target_matcher_rule("job"),
    "target-instance-rule": _target_matcher_rule("instance"),
    "target-counter-agg-rule": target_counter_agg_rule,
    "uneditable-dashboard": uneditable_rule,
    "mixtool dashboard title and uid": mixtool_dashboard_rule,
    "no rate() on a gauge": no_rate_on_gauges_rule,
}


@pytest.mark.parametrize("rule", sorted(DASHBOARD_RULES))
@pytest.mark.parametrize("where", sorted(DASHBOARDS))
def test_dashboard_passes_linter_rule(where: str, rule: str) -> None:
    assert DASHBOARD_RULES[rule](DASHBOARDS[where]) == []


@pytest.mark.parametrize("where", sorted(DASHBOARDS))
def test_job_and_instance_variables_offer_all(where: str) -> None:
    """Beyond the linter: both include All, and refresh on a time range change."""
    by_name = {v["name"]: v for v in variables(DASHBOARDS[where])}
    for name in ("job", "instance"):
        assert by_name[name]["includeAll"] is True
        assert by_name[name]["refresh"] == 2


def _variable(name: str, /, **changes: Any) -> Callable[[Board], None]:
    def apply(board: Board) -> None:
        for variable in variables(board):
            if variable["name"] == name:
                variable.update(changes)

    return apply


def _drop_variable(name: str) -> Callable[[Board], None]:
    def apply(board: Board) -> None:
        board["templating"]["list"] = [v for v in variables(board) if v["name"] != name]

    return apply


BROKEN: list[tuple[str, Callable[[Board], None]]] = [
    ("template-datasource-rule", _drop_variable("datasource")),
    ("template-datasource-rule", _variable("datasource", name="ds")),
    ("template-job-rule", _drop_variable("job")),
    ("template-job-rule", _variable("job", allValue=".*")),
    ("template-job-rule", _variable("job", multi=False)),
    ("template-job-rule", _variable("job", label="job")),
    ("template-instance-rule", _variable("instance", datasource={"uid": "prom"})),
    ("template-label-promql-rule", _variable("node", query="labels(ledger_node_up, node)")),
    ("template-label-promql-rule", _variable("node", query="label_values(up{, node)")),
    ("template-on-time-change-reload-rule", _variable("node", refresh=1)),
    ("panel-datasource-rule", edit_at("panels.6.datasource", {"uid": "prometheus"})),
    ("panel-title-description-rule", edit_at("panels.6.description", "")),
    ("panel-units-rule", edit_at("panels.6.fieldConfig.defaults.unit", "-")),
    ("panel-units-rule", edit_at("panels.6.fieldConfig.defaults.unit", "blocks")),
    ("panel-no-targets-rule", edit_at("panels.6.targets", [])),
    ("target-logql-rule, target-logql-auto-rule", edit_at("panels.6.targets.0.datasource", {})),
    ("target-promql-rule", edit_at("panels.6.targets.0.expr", "rate(x[5m]")),
    ("target-rate-interval-rule", edit_at("panels.6.targets.0.expr", "rate(x_total[5m])")),
    ("target-rate-interval-rule", edit_at("panels.6.targets.0.expr", "(x[5m])")),
    ("target-job-rule", edit_at("panels.6.targets.0.expr", 'x{instance=~"$instance"}')),
    ("target-job-rule", edit_at("panels.6.targets.0.expr", 'x{job="a", instance=~"$instance"}')),
    ("target-instance-rule", edit_at("panels.6.targets.0.expr", 'x{job=~"$job"}')),
    ("target-counter-agg-rule", edit_at("panels.6.targets.0.expr", 'x_total{job=~"$job"}')),
    ("target-counter-agg-rule", edit_at("panels.6.targets.0.expr", "deriv(x_total[5m])")),
    ("uneditable-dashboard", edit_at("editable", True)),
    ("mixtool dashboard title and uid", edit_at("uid", "")),
    ("no rate() on a gauge", edit_at("panels.6.targets.0.expr", "rate(x[$__rate_interval])")),
]


@pytest.mark.parametrize(("rule", "breakage"), BROKEN, ids=[rule for rule, _ in BROKEN])
def test_dashboard_linter_rule_catches(rule: str, breakage: Callable[[Board], None]) -> None:
    board = copy.deepcopy(MIXINS["default"]["dashboards"]["ledger-exporter.json"])
    assert DASHBOARD_RULES[rule](board) == []
    breakage(board)
    assert DASHBOARD_RULES[rule](board), f"{rule} misses the breakage"


def test_every_dashboard_linter_rule_has_a_broken_example() -> None:
    assert {rule for rule, _ in BROKEN} == set(DASHBOARD_RULES)
