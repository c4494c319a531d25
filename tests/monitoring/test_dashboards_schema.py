"""The shipped dashboards against Grafana's own schema: the types Grafana publishes in its npm
package ``@grafana/schema`` (pinned in tools/grafana-schema/), turned into JSON Schema by
``make grafana-schema`` (tools/grafana_schema.py). The dashboard, every panel, each panel's
options and custom field config against its plugin's schema, every query against the part
every data source shares (``DataQuery``: the Prometheus query's own keys are not published
in that package).

A dashboard that carries every field Grafana fills in when it loads one validates clean, so
Grafana shows no diff on save. Allowed are only the generated types' own gaps that Grafana's
own saved dashboards hit: an empty string for a table footer's ``fields`` and a query
variable's ``definition`` (the query as typed, which Grafana writes on save).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any, cast

import jsonschema
import pytest

from tests.support.monitoring import edit_at
from tests.support.testdata import REPO
from tools import grafana_schema

DASHBOARDS = sorted((REPO / "grafana" / "dashboards").glob("*.json"))
#: Panel type -> the plugin's schema file.
PLUGINS = {
    "timeseries": "timeseries",
    "stat": "stat",
    "table": "table",
    "state-timeline": "statetimeline",
    "text": "text",
    "gauge": "gauge",
    "bargauge": "bargauge",
}
Board = dict[str, Any]


@cache
def validator(schema_file: str, definition: str) -> jsonschema.Draft7Validator:
    """A validator for one definition of one schema file (refs resolve within the file)."""
    definitions = copy.deepcopy(grafana_schema.load(schema_file)["definitions"])
    assert definition in definitions, f"{schema_file} has no {definition}"
    if (schema_file, definition) == ("common", "DataQuery"):
        # the keys every data source shares, typed; a data source adds its own
        definitions[definition]["additionalProperties"] = True
    return jsonschema.Draft7Validator(
        {"$ref": f"#/definitions/{definition}", "definitions": definitions}
    )


def is_listed_quirk(error: jsonschema.ValidationError) -> bool:
    """The generated types' gaps that Grafana's own saved dashboards hit, and nothing wider."""
    path = list(error.absolute_path)
    if path[-2:] == ["footer", "fields"]:
        return bool(error.instance == "")
    if (
        path[:2] == ["templating", "list"]
        and len(path) == 3
        and error.validator == "additionalProperties"
    ):
        variable = cast(dict[str, Any], error.instance)
        schema = cast(dict[str, Any], error.schema)
        extra = set(variable) - set(schema.get("properties", {}))
        return (
            extra == {"definition"}
            and variable.get("type") == "query"
            and isinstance(variable["definition"], str)
        )
    return False


def errors(schema_file: str, definition: str, instance: Any) -> list[str]:
    return [
        f"{'/'.join(map(str, error.absolute_path))}: {error.message[:200]}"
        for error in validator(schema_file, definition).iter_errors(instance)
        if not is_listed_quirk(error)
    ]


def panels(board: Board) -> Iterator[dict[str, Any]]:
    for panel in board["panels"]:
        yield panel
        yield from panel.get("panels", [])


def problems(board: Board) -> list[str]:
    """Every schema error of the dashboard, its panels, options, field config and queries."""
    found = errors("dashboard", "Dashboard", board)
    for panel in panels(board):
        where = f"panel {panel.get('id')} {panel.get('title')!r}"
        if panel["type"] == "row":
            found += [f"{where}: {e}" for e in errors("dashboard", "RowPanel", panel)]
            continue
        found += [f"{where}: {e}" for e in errors("dashboard", "Panel", panel)]
        plugin = PLUGINS.get(panel["type"])
        if plugin is None:
            found.append(f"{where}: no schema for panel type {panel['type']!r}")
            continue
        found += [f"{where} options: {e}" for e in errors(plugin, "Options", panel["options"])]
        custom = panel["fieldConfig"]["defaults"].get("custom")
        if custom is not None:
            found += [f"{where} custom: {e}" for e in errors(plugin, "FieldConfig", custom)]
        for target in panel.get("targets", []):
            found += [
                f"{where} target {target.get('refId')}: {e}"
                for e in errors("common", "DataQuery", target)
            ]
    return found


def load(path: Path) -> Board:
    board: Board = json.loads(path.read_text(encoding="utf-8"))
    return board


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda path: path.name)
def test_dashboard_validates_against_grafanas_schema(path: Path) -> None:
    assert problems(load(path)) == []


def test_schemas_are_the_pinned_grafana_release() -> None:
    pins = json.loads((grafana_schema.PINS / "package.json").read_text(encoding="utf-8"))
    assert grafana_schema.grafana_version() == pins["devDependencies"]["@grafana/schema"]
    assert "Grafana " + grafana_schema.grafana_version() in (
        REPO / "docs" / "monitoring.md"
    ).read_text(encoding="utf-8")


def test_every_panel_type_has_a_schema() -> None:
    types = {p["type"] for path in DASHBOARDS for p in panels(load(path))} - {"row"}
    assert types <= PLUGINS.keys()
    assert len(DASHBOARDS) == 5


# ledger-exporter.json: panels 0 row, 1 stat, 3 table, 5 timeseries, 11 state-timeline.
BREAKAGES = {
    "row without panels": edit_at("panels.0.panels", "-"),
    "variable without current value": edit_at("templating.list.1.current", {"text": "All"}),
    "stat without wideLayout": edit_at("panels.1.options.wideLayout", "-"),
    "stat with an unknown option": edit_at("panels.1.options.sparkline", True),
    "table without frameIndex": edit_at("panels.3.options.frameIndex", "-"),
    "table footer fields not a list": edit_at("panels.3.options.footer.fields", "node"),
    "table cell option of the wrong shape": edit_at(
        "panels.3.fieldConfig.defaults.custom.cellOptions", {"type": "gauge", "x": 1}
    ),
    "timeseries custom field config typo": edit_at(
        "panels.5.fieldConfig.defaults.custom.lineWidht", 1
    ),
    "state timeline legend without calcs": edit_at("panels.11.options.legend.calcs", "-"),
    "query whose refId is not a string": edit_at("panels.5.targets.0.refId", 1),
    "query variable with a definition that is not a string": edit_at(
        "templating.list.1.definition", {"query": "up"}
    ),
    "threshold step that is a string": edit_at(
        "panels.1.fieldConfig.defaults.thresholds.steps.0.value", "0"
    ),
    "dashboard with an unknown key": edit_at("editble", False),
}


@pytest.mark.parametrize("breakage", sorted(BREAKAGES))
def test_validation_catches(breakage: str) -> None:
    board = load(REPO / "grafana" / "dashboards" / "ledger-exporter.json")
    assert problems(board) == []
    broken = copy.deepcopy(board)
    BREAKAGES[breakage](broken)
    assert problems(broken), f"{breakage} passes validation"
