"""Every dashboard query over one exporter and over an HA pair of two: a pair's replicas
must draw one line per node, count each node once, and keep working when one replica is down
or cannot reach a node.

One synthetic history of every series the dashboards read (the documented labels of each
family, nodes, chains and the other label values the queries match on; counters, timestamps,
heights, flags and gauges that change over time) is written into real Prometheus servers with
promtool's backfill, four ways: as one exporter scrapes it (no replica label); as a pair
scrapes it (every series twice, ``exporter_replica="a"`` and ``"b"``); as a pair whose
replica ``a`` died ten minutes ago (the series its scrapes brought end then; Prometheus' own
``up``, 0 since, ``scrape_duration_seconds``, the alerts and the records go on); and as a pair
whose replica ``a`` lost one node ten minutes ago while its twin still reaches it (``a`` reads
it down). Every panel target and every template variable of every shipped dashboard runs
against them with Grafana's variables set to *All*: the pair, as a range query over the last
30 minutes and an instant query at the end, and the pair with a replica down or cut off, at
the end, must give the same series (labels) with the same values as the one exporter. The
exporter's own panels (targets, cycle, config, build, process) stay per replica and name the
replica in their legend: there, each series of the one exporter comes once per replica.
"""

from __future__ import annotations

import json
import math
import random
import re
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.support import metrics_reference, promql
from tests.support.monitoring import DASHBOARDS, variable_query, walk_panels
from tests.support.programs import require_program
from tests.support.prometheus import PrometheusError, PrometheusServer
from tools import render_mixin

pytestmark = pytest.mark.integration

#: The mixin's default replicaLabels, which the shipped dashboards are rendered with.
REPLICA = "exporter_replica"
REPLICAS = ("a", "b")
#: The pair's logical exporter: both replicas' targets carry the same job and instance.
TARGET = {"job": "ledger-exporter", "instance": "ledger-exporter"}
NODES = ("node-1", "node-2", "node-3")
CHAINS = ("chain-a", "chain-b")
STEP = 60  # seconds between two samples of the history (the scrape interval)
HISTORY = 100 * 60  # seconds of history before the evaluation time
RANGE = 30 * 60  # the range queries' span, ending at the evaluation time
DOWN_FOR = 10 * 60  # replica a died (or lost CUT_NODE) this long before the evaluation time
CUT_NODE = "node-2"  # the node replica a cannot reach while its twin does
#: Grafana's variables as *All* selects them, and its macros for a STEP scrape interval.
VARIABLES = {
    "__rate_interval": f"{4 * STEP}s",
    "__interval": f"{STEP}s",
    "__range": f"{RANGE}s",
}
ALL = ".+"
#: Series Prometheus writes per target itself, on a failed scrape too.
SCRAPE_SERIES = frozenset({"up", "scrape_duration_seconds"})


def scraped(name: str) -> bool:
    """A series a replica's scrape brings (not Prometheus' own, its alerts or its records):
    it ends when the replica dies."""
    return name not in SCRAPE_SERIES and name != "ALERTS" and ":" not in name


#: Labels of the series that are no exporter family: Prometheus' own per target, the
#: alerts' ALERTS, the SLO records (per node or per chain).
OTHER_LABELS = {
    "up": frozenset(),
    "scrape_duration_seconds": frozenset(),
    "ALERTS": frozenset({"alertname", "alertstate", "severity", "node", "blockchain"}),
}
#: ALERTS as the rules write them (a node's, a chain's, the exporter's, the watchdog's).
ALERTS = (
    {"alertname": "LedgerNodeDown", "alertstate": "firing", "severity": "critical",
     "node": "node-2"},
    {"alertname": "LedgerBlockHeightStalled", "alertstate": "pending", "severity": "warning",
     "node": "node-1", "blockchain": "chain-a"},
    {"alertname": "LedgerBlockchainHalted", "alertstate": "firing", "severity": "critical",
     "blockchain": "chain-b"},
    {"alertname": "LedgerExporterCycleNearTimeout", "alertstate": "firing", "severity": "warning"},
    {"alertname": "LedgerWatchdog", "alertstate": "firing", "severity": "none"},
)  # fmt: skip

Labels = frozenset[tuple[str, str]]
Result = dict[Labels, tuple[str, ...]]


@dataclass(frozen=True)
class Query:
    """One query of a dashboard: a panel target or a template variable."""

    where: str
    expr: str  # Grafana's variables replaced
    instant: bool  # a table's instant query, else a range query (or a variable)
    per_replica: bool  # an exporter's own panel, labelled by the replica


def substitute(expr: str) -> str:
    """``expr`` with every Grafana variable as *All* selects it and the macros' values."""

    def one(match: re.Match[str]) -> str:
        name = next(group for group in match.groups() if group)
        return VARIABLES.get(name, ALL)

    return re.sub(r"\$\{(\w+)(?::\w+)?\}|\[\[(\w+)\]\]|\$(\w+)", one, expr)


def names_replica(panel: dict[str, Any]) -> bool:
    """The panel draws one series per replica: its legend or its table's columns name it."""
    legends = [target.get("legendFormat", "") for target in panel.get("targets", [])]
    columns = [
        name
        for step in panel.get("transformations", [])
        for name in step.get("options", {}).get("indexByName", {})
    ]
    return any(f"{{{{{REPLICA}}}}}" in legend for legend in legends) or REPLICA in columns


def dashboard_queries() -> Iterator[Query]:
    for path in DASHBOARDS:
        board = json.loads(path.read_text(encoding="utf-8"))
        for item in board["templating"]["list"]:
            if item["type"] != "query":
                continue
            match = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", variable_query(item))
            assert match, f"{path.name}: variable {item['name']} is no label_values()"
            expr = f"group by ({match[2]}) ({substitute(match[1])})"
            yield Query(f"{path.name} variable {item['name']}", expr, True, False)
        for panel in walk_panels(board["panels"]):
            for target in panel.get("targets", []):
                where = f"{path.name} panel {panel['id']} {panel['title']!r} {target['refId']}"
                instant = bool(target.get("instant")) and not target.get("range")
                yield Query(where, substitute(target["expr"]), instant, names_replica(panel))


QUERIES = {query.where: query for query in dashboard_queries()}


# --- the history ------------------------------------------------------------------------


def read_series() -> dict[str, set[str]]:
    """Every series name the dashboards read -> the labels its queries match on."""
    found: dict[str, set[str]] = {}
    for query in QUERIES.values():
        for selector in promql.vector_selectors(promql.parse(query.expr)):
            assert selector.name, f"{query.where}: a selector without a metric name"
            found.setdefault(selector.name, set()).update(
                name for name, _, _ in promql.matchers(selector) if name != "__name__"
            )
    return found


def required_values() -> dict[str, set[str]]:
    """Label -> the values the queries match with ``=`` (``status="ACTIVE"``): the history
    holds them, or a query would select nothing."""
    found: dict[str, set[str]] = {}
    for query in QUERIES.values():
        for selector in promql.vector_selectors(promql.parse(query.expr)):
            for name, op, value in promql.matchers(selector):
                if op in ("=", "!=") and name != "__name__":
                    found.setdefault(name, set()).add(value)
    return found


def values_of(label: str, required: dict[str, set[str]]) -> tuple[str, ...]:
    """Two values of ``label`` (the node and chain labels: the network's), the ones the
    queries match on first, then the documented ones."""
    if label == "node":
        return NODES
    if label == "blockchain":
        return CHAINS
    try:
        documented = metrics_reference.label_values(label)
    except AssertionError:
        documented = ()
    ordered = [*sorted(required.get(label, ())), *documented, f"{label}-1", f"{label}-2"]
    return tuple(dict.fromkeys(value for value in ordered if value))[:2]


def labels_of(name: str, matched: set[str]) -> frozenset[str]:
    families = metrics_reference.families()
    if name in families:
        return families[name].labels
    if name in OTHER_LABELS:
        return OTHER_LABELS[name]
    # a record (the SLO dashboard's): per node or per chain, as its selectors say
    return frozenset(matched & {"node", "blockchain"})


def label_sets(
    name: str, labels: frozenset[str], required: dict[str, set[str]]
) -> list[dict[str, str]]:
    if name == "ALERTS":
        return [dict(alert) for alert in ALERTS]
    sets: list[dict[str, str]] = [{}]
    for label in sorted(labels - set(TARGET)):
        sets = [{**known, label: value} for known in sets for value in values_of(label, required)]
    return sets


def shape(name: str, rng: random.Random, start: int) -> Callable[[int], float]:
    """The value over time (from ``start``) of one series of ``name``, by what the name says
    it is: a counter rises steadily, a timestamp steps behind the time, a height climbs, a
    flag holds or flips once, a record's ratio holds, any other gauge steps between levels."""
    if name.endswith("_total"):
        rate = rng.choice((0.0, 0.02, 0.1, 0.5, 2.0))
        return lambda t: round(rate * (t - start + 10 * STEP), 6)
    if name.endswith("_expiry_timestamp_seconds"):
        ahead = rng.randrange(1, 60) * 86400
        return lambda t: float(start + ahead)
    if name.endswith("_timestamp_seconds") or name == "process_start_time_seconds":
        period, phase = rng.choice((120, 300, 900, 7200)), rng.randrange(0, 7200, STEP)
        return lambda t: float(t - (t - phase) % period)
    if name.endswith("_height"):
        speed, base = rng.choice((0.0, 0.1, 0.2)), rng.randrange(1000)
        return lambda t: float(base + int(speed * (t - start)))
    if name == "ALERTS" or name.endswith(("_info", "_maintenance")):
        return lambda t: 1.0
    flags = ("_up", "_agrees", "_syncing", "_in_council", "_voting", "_time_to_vote",
             "_enabled", "_successful", "_status", "_permission", ":not_advancing")  # fmt: skip
    if name.endswith(flags):
        flip = start + rng.randrange(0, HISTORY + STEP, STEP)
        before, after = rng.choice(((1.0, 1.0), (1.0, 1.0), (0.0, 0.0), (1.0, 0.0), (0.0, 1.0)))
        return lambda t: before if t < flip else after
    if ":" in name:  # an SLO record's error ratio
        ratio = rng.choice((0.0, 0.001, 0.004, 0.02))
        return lambda t: ratio
    period, levels = rng.choice((300, 600, 1800)), [rng.randrange(0, 13) for _ in range(4)]
    return lambda t: float(levels[(t // period) % len(levels)])


@dataclass(frozen=True)
class Series:
    name: str
    labels: dict[str, str]
    values: list[tuple[int, float]]  # (seconds, value), in time order


def history(end: int) -> list[Series]:
    """Every series the dashboards read, one exporter's, sampled every STEP up to ``end``."""
    rng = random.Random(45)
    required = required_values()
    start = end - HISTORY
    times = range(start, end + 1, STEP)
    found: list[Series] = []
    for name, matched in sorted(read_series().items()):
        for labels in label_sets(name, labels_of(name, matched), required):
            value = shape(name, rng, start)
            found.append(Series(name, {**TARGET, **labels}, [(t, value(t)) for t in times]))
    return found


def as_pair(
    series: list[Series], down_since: int | None = None, cut_off: int | None = None
) -> list[Series]:
    """The same series as a pair's two replicas scrape them. Replica ``a`` down from
    ``down_since`` on: the series its scrapes bring end, Prometheus' own go on (``up`` 0).
    Replica ``a`` cut off from CUT_NODE from ``cut_off`` on (its twin still reaches it): a
    reads it down, its last success stays where it was, its other series of it end."""
    paired: list[Series] = []
    for one in series:
        for replica in REPLICAS:
            values = one.values
            if replica == "a" and down_since is not None:
                if scraped(one.name):
                    values = [(t, v) for t, v in values if t < down_since]
                elif one.name == "up":
                    values = [(t, 0.0 if t >= down_since else v) for t, v in values]
            if replica == "a" and cut_off is not None and one.labels.get("node") == CUT_NODE:
                last = next(v for t, v in reversed(values) if t < cut_off)
                if one.name == "ledger_node_up":
                    values = [(t, 0.0 if t >= cut_off else v) for t, v in values]
                elif one.name == "ledger_node_last_success_timestamp_seconds":
                    values = [(t, last if t >= cut_off else v) for t, v in values]
                elif scraped(one.name):
                    values = [(t, v) for t, v in values if t < cut_off]
            paired.append(Series(one.name, {**one.labels, REPLICA: replica}, values))
    return paired


def openmetrics(series: list[Series]) -> str:
    """The series as promtool's backfill reads them (timestamps in seconds)."""
    lines: list[str] = []
    for one in sorted(series, key=lambda s: s.name):
        label_text = ",".join(f'{k}="{v}"' for k, v in sorted(one.labels.items()))
        lines.extend(f"{one.name}{{{label_text}}} {v!r} {t}" for t, v in one.values)
    return "\n".join([*lines, "# EOF", ""])


# --- three Prometheus servers -----------------------------------------------------------


@dataclass
class Evaluated:
    """Each query's answer on each server: its range result (over RANGE) and its instant
    result at the end."""

    ranged: dict[str, dict[str, Result | str]]
    instant: dict[str, dict[str, Result | str]]
    samples: int


def key(labels: dict[str, str]) -> Labels:
    return frozenset(labels.items())


def text(value: str) -> str:
    """A value as compared: rounded to 9 significant digits (a sum may add in any order)."""
    number = float(value)
    return value if math.isnan(number) or math.isinf(number) else f"{number:.9g}"


def run(server: PrometheusServer, expr: str, end: int, ranged: bool) -> Result | str:
    """The query's result (a range over RANGE, else an instant at ``end``), or Prometheus'
    error in words."""
    try:
        if ranged:
            data = server.api(
                "query_range", query=expr, start=str(end - RANGE), end=str(end), step=str(STEP)
            )
            return {
                key(s["metric"]): tuple(text(v) for _, v in s["values"]) for s in data["result"]
            }
        data = server.api("query", query=expr, time=str(end))
    except PrometheusError as error:
        return str(error).rsplit(": ", 1)[-1]
    if data["resultType"] == "scalar":
        return {frozenset(): (text(data["result"][1]),)}
    return {key(s["metric"]): (text(s["value"][1]),) for s in data["result"]}


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Evaluated]:
    promtool = require_program("promtool")
    end = int(time.time()) // STEP * STEP - 2 * STEP
    one = history(end)
    datasets = {
        "one": one,
        "pair": as_pair(one),
        "pair, a down": as_pair(one, down_since=end - DOWN_FOR),
        "pair, a cut off": as_pair(one, cut_off=end - DOWN_FOR),
    }
    servers: dict[str, PrometheusServer] = {}
    try:
        for index, (name, series) in enumerate(datasets.items()):
            workdir = tmp_path_factory.mktemp(f"prometheus-{index}")
            source = workdir / "history.om"
            source.write_text(openmetrics(series), encoding="utf-8")
            backfill = [
                "tsdb",
                "create-blocks-from",
                "openmetrics",
                str(source),
                str(workdir / "data"),
            ]
            subprocess.run([promtool, *backfill], check=True, capture_output=True, timeout=300)
            source.unlink()
            servers[name] = PrometheusServer(workdir, {}, retention="10y").start()
        ranged = {
            name: {w: run(s, q.expr, end, True) for w, q in QUERIES.items() if not q.instant}
            for name, s in servers.items()
        }
        instant = {
            name: {w: run(s, q.expr, end, False) for w, q in QUERIES.items()}
            for name, s in servers.items()
        }
        count = run(servers["one"], "count({__name__=~'.+'})", end, False)
        assert isinstance(count, dict), count
        yield Evaluated(ranged, instant, int(float(next(iter(count.values()))[0])))
    finally:
        for server in servers.values():
            server.stop()


def per_replica(result: Result, replicas: tuple[str, ...] = REPLICAS) -> Result:
    """One exporter's result as a pair's replicas give it: each series once per replica."""
    return {labels | {(REPLICA, r)}: values for labels, values in result.items() for r in replicas}


def replica_of(labels: Labels) -> str:
    return dict(labels).get(REPLICA, "")


# --- the tests --------------------------------------------------------------------------


def test_every_panel_target_and_variable_is_checked() -> None:
    boards = [json.loads(path.read_text(encoding="utf-8")) for path in DASHBOARDS]
    targets = sum(len(p.get("targets", [])) for b in boards for p in walk_panels(b["panels"]))
    variables = sum(1 for b in boards for v in b["templating"]["list"] if v["type"] == "query")
    assert len(DASHBOARDS) == 5
    assert len(QUERIES) == targets + variables


def test_per_replica_panels_are_the_exporters_own() -> None:
    """Only the exporter dashboard's panels about the exporter itself stay per replica:
    none reads a node's series."""
    own = {w for w, q in QUERIES.items() if q.per_replica}
    assert own and all(w.startswith("ledger-exporter.json panel ") for w in own)
    for where in own:
        for selector in promql.vector_selectors(promql.parse(QUERIES[where].expr)):
            labels = labels_of(selector.name or "", set())
            assert "node" not in labels, f"{where}: {selector.name} is a node's series"


@pytest.mark.parametrize("where", sorted(QUERIES))
def test_the_query_has_data_over_one_exporter(where: str, evaluated: Evaluated) -> None:
    """The history gives every query something to show (else the comparisons below would
    compare nothing)."""
    assert evaluated.samples > 100
    for results in (evaluated.ranged, evaluated.instant):
        if where in results["one"]:
            found = results["one"][where]
            assert isinstance(found, dict), f"{where}: {found}\n{QUERIES[where].expr}"
            assert found, f"{where}: no data\n{QUERIES[where].expr}"


@pytest.mark.parametrize("where", sorted(QUERIES))
def test_a_pair_shows_what_one_exporter_shows(where: str, evaluated: Evaluated) -> None:
    """The same series and values over the 30 minutes and at the end; the exporter's own
    panels once per replica."""
    query = QUERIES[where]
    for results in (evaluated.ranged, evaluated.instant):
        if where not in results["one"]:
            continue
        expected, found = results["one"][where], results["pair"][where]
        assert isinstance(expected, dict) and isinstance(found, dict), f"{where}: {found}"
        if query.per_replica:
            expected = per_replica(expected)
        assert found == expected, f"{where}\n{query.expr}"


@pytest.mark.parametrize("where", sorted(QUERIES))
@pytest.mark.parametrize("dataset", ["pair, a down", "pair, a cut off"])
def test_a_pair_with_one_replica_down_or_cut_off_shows_what_one_exporter_shows(
    where: str, dataset: str, evaluated: Evaluated
) -> None:
    """Replica a down for ten minutes, or cut off from one node its twin reaches: every node
    panel as before, from replica b (a node is up when either replica reaches it); the
    exporter's own panels show replica b's series as before (and a's own as it is)."""
    query = QUERIES[where]
    expected = evaluated.instant["one"][where]
    found = evaluated.instant[dataset][where]
    assert isinstance(expected, dict) and isinstance(found, dict), f"{where}: {found}"
    if query.per_replica:
        found = {labels: values for labels, values in found.items() if replica_of(labels) != "a"}
        expected = per_replica(expected, ("b",))
    assert found == expected, f"{where}\n{query.expr}"


def test_replica_labels_of_the_config_reach_every_fold_and_legend() -> None:
    """A user's replicaLabels (here two labels) replace the default in every fold and every
    per-replica legend and column: none is left with ``exporter_replica``."""
    shipped = json.dumps(render_mixin.evaluate()["dashboards"])
    overridden = json.dumps(
        render_mixin.evaluate(json.dumps({"replicaLabels": "replica, shard"}))["dashboards"]
    )
    folds = shipped.count(f"without({REPLICA})")
    assert folds >= 100
    assert overridden.count("without(replica, shard)") == folds
    assert REPLICA not in overridden
    legends = shipped.count(f"{{{{{REPLICA}}}}}")
    assert legends >= 10
    assert overridden.count("{{replica}} {{shard}}") == legends
