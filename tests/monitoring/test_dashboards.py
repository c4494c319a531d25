"""Structure of the Grafana dashboards and provisioning files: what Grafana needs to import
them cleanly on any Prometheus datasource (their PromQL is checked in
tests/monitoring/test_rules.py, the linters' rules in tests/monitoring/test_mixin_lint.py,
Grafana's schema in tests/monitoring/test_dashboards_schema.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from itertools import combinations
from typing import Any

import pytest
import yaml

from tests.support.testdata import REPO

GRAFANA = REPO / "grafana"
DASHBOARD_DIR = GRAFANA / "dashboards"
DATASOURCE_REF = {"type": "prometheus", "uid": "${datasource}"}
GRID_COLUMNS = 24
#: Dashboard file -> stable uid and the template variables it must offer.
TARGET = ("datasource", "job", "instance")
EXPECTED = {
    "ledger-fleet.json": ("ledger-fleet", (*TARGET, "node", "blockchain")),
    "ledger-node.json": ("ledger-node", (*TARGET, "node", "blockchain")),
    "ledger-exporter.json": ("ledger-exporter", (*TARGET, "node")),
    "ledger-slo.json": ("ledger-slo", (*TARGET, "node", "blockchain")),
    "ledger-watch.json": (
        "ledger-watch",
        (*TARGET, "node", "blockchain", "contract", "wallet"),
    ),
}
PANEL_TYPES = frozenset({"timeseries", "stat", "table", "state-timeline", "bargauge", "gauge"})

Board = dict[str, Any]
Panel = dict[str, Any]


def load(name: str) -> Board:
    board: Board = json.loads((DASHBOARD_DIR / name).read_text(encoding="utf-8"))
    return board


def walk_panels(panels: list[Panel]) -> Iterator[Panel]:
    for panel in panels:
        yield panel
        yield from walk_panels(panel.get("panels", []))


def walk_datasources(node: Any) -> Iterator[Any]:
    """Every value stored under a ``datasource`` key anywhere in the JSON."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "datasource":
                yield value
            yield from walk_datasources(value)
    elif isinstance(node, list):
        for item in node:
            yield from walk_datasources(item)


def test_dashboard_directory_holds_exactly_the_expected_files() -> None:
    assert sorted(path.name for path in DASHBOARD_DIR.glob("*.json")) == sorted(EXPECTED)


def test_dashboard_uids_and_titles_are_unique() -> None:
    boards = [load(name) for name in EXPECTED]
    assert len({board["uid"] for board in boards}) == len(boards)
    assert len({board["title"] for board in boards}) == len(boards)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_dashboard_header(name: str) -> None:
    board = load(name)
    uid, _ = EXPECTED[name]
    assert board["uid"] == uid, "uids are stable: links and bookmarks rely on them"
    assert board["editable"] is False, "provisioned from the mixin: edit mixin/, not Grafana"
    assert 36 <= board["schemaVersion"] <= 41
    assert board["title"].startswith("Ledger / ")
    assert "ledger" in board["tags"]
    assert board.get("id") is None, "a fixed id clashes with existing dashboards on import"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_template_variables(name: str) -> None:
    variables = {item["name"]: item for item in load(name)["templating"]["list"]}
    _, required = EXPECTED[name]
    assert set(required) <= set(variables)
    source = variables["datasource"]
    assert (source["type"], source["query"]) == ("datasource", "prometheus")
    assert list(variables)[: len(required)] == list(required), "in the order they filter"
    for item in variables.values():
        if item["type"] == "query":
            assert item["datasource"] == DATASOURCE_REF
            assert item["multi"] is True, item["name"]
            assert item["includeAll"] is True, item["name"]
            assert item["allValue"] == ".+", f"{item['name']}: All is any non-empty value"
            assert item["definition"].startswith("label_values("), item["name"]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_datasource_is_the_variable(name: str) -> None:
    found = list(walk_datasources(load(name)))
    assert found
    assert all(ref == DATASOURCE_REF for ref in found), [
        ref for ref in found if ref != DATASOURCE_REF
    ]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_panel_ids_are_unique(name: str) -> None:
    ids = [panel["id"] for panel in walk_panels(load(name)["panels"])]
    assert all(isinstance(panel_id, int) for panel_id in ids)
    assert len(ids) == len(set(ids))


def overlaps(first: dict[str, int], second: dict[str, int]) -> bool:
    return (
        first["x"] < second["x"] + second["w"]
        and second["x"] < first["x"] + first["w"]
        and first["y"] < second["y"] + second["h"]
        and second["y"] < first["y"] + first["h"]
    )


def layers(panels: list[Panel]) -> Iterator[list[Panel]]:
    """Panels that share the grid: the top level, and each collapsed row's content."""
    yield panels
    for panel in panels:
        if panel.get("panels"):
            yield from layers(panel["panels"])


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_grid_positions_fit_and_do_not_overlap(name: str) -> None:
    for layer in layers(load(name)["panels"]):
        for panel in layer:
            pos = panel["gridPos"]
            assert min(pos["w"], pos["h"]) > 0, panel["title"]
            assert min(pos["x"], pos["y"]) >= 0, panel["title"]
            assert pos["x"] + pos["w"] <= GRID_COLUMNS, f"{panel['title']} exceeds 24 columns"
        for first, second in combinations(layer, 2):
            assert not overlaps(first["gridPos"], second["gridPos"]), (
                f"{first['title']!r} overlaps {second['title']!r}"
            )


def content_panels(name: str) -> list[Panel]:
    return [panel for panel in walk_panels(load(name)["panels"]) if panel["type"] != "row"]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_panels_have_title_description_unit_and_queries(name: str) -> None:
    panels = content_panels(name)
    assert len(panels) >= 10
    for panel in panels:
        title = panel.get("title")
        assert title, f"panel {panel['id']} has no title"
        assert panel["type"] in PANEL_TYPES, f"{title}: unexpected panel type {panel['type']}"
        assert panel.get("description"), f"{title}: say what the panel shows"
        assert panel["fieldConfig"]["defaults"].get("unit"), f"{title}: no unit"
        targets = panel.get("targets", [])
        assert targets, f"{title}: no query"
        assert all(target.get("expr", "").strip() for target in targets), f"{title}: empty expr"
        ref_ids = [target["refId"] for target in targets]
        assert len(ref_ids) == len(set(ref_ids)), f"{title}: duplicate refId"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_rows_are_expanded_and_titled(name: str) -> None:
    rows = [panel for panel in load(name)["panels"] if panel["type"] == "row"]
    assert rows
    for row in rows:
        assert row["title"]
        assert row["gridPos"]["w"] == GRID_COLUMNS
        assert row["gridPos"]["h"] == 1


def test_datasource_provisioning() -> None:
    config = yaml.safe_load((GRAFANA / "provisioning/datasources/prometheus.yml").read_text())
    (source,) = config["datasources"]
    assert source["type"] == "prometheus"
    assert source["url"] == "http://prometheus:9090"
    assert source["uid"] == "ledger-prometheus"


def test_dashboard_provisioning() -> None:
    config = yaml.safe_load((GRAFANA / "provisioning/dashboards/ledger.yml").read_text())
    (provider,) = config["providers"]
    assert provider["type"] == "file"
    assert provider["options"]["path"] == "/var/lib/grafana/dashboards"
