"""tools/render_dashboard.py, which draws the README's dashboard picture: Grafana's variables
replaced as Grafana would, the panels read where the dashboard places them, and a short real
run (the demo, a real Prometheus, each panel's own PromQL) that gives every panel data."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tools import render_dashboard as tool

FLEET = json.loads(tool.DEFAULT_DASHBOARD.read_text(encoding="utf-8"))


def test_variables_and_macros_are_replaced_as_all_selects_them() -> None:
    expr = 'rate(x{job=~"$job", node=~"${node}"}[$__rate_interval]) + y[$__range] + $other'
    assert tool.substitute(expr, 240) == 'rate(x{job=~".+", node=~".+"}[1m]) + y[240s] + $other'


def test_legend_follows_the_legend_format() -> None:
    labels = {"node": "node-1", "blockchain": "abc"}
    assert tool.legend("{{node}} · {{ blockchain }}", labels) == "node-1 · abc"
    assert tool.legend(None, {"__name__": "up", "job": "j"}) == "job=j"


def test_the_first_rows_of_the_fleet_dashboard() -> None:
    panels = tool.panels_of(FLEET, rows=2)
    rows = [p.title for p in panels if p.kind == "row"]
    assert rows == ["Fleet", "Chains"]
    assert all(p.targets for p in panels if p.kind != "row")
    assert len(tool.panels_of(FLEET, rows=None)) > len(panels)


def test_the_page_draws_each_kind_of_panel() -> None:
    line = tool.Panel("Height", "timeseries", {"x": 0, "y": 1, "w": 12, "h": 8})
    line.series = [("node-1", [(0.0, 1.0), (5.0, 2.0)]), ("node-2", [(0.0, 3.0), (5.0, 3.0)])]
    stat = tool.Panel("Nodes up", "stat", {"x": 12, "y": 1, "w": 4, "h": 4})
    stat.series = [("up", [(5.0, 3.0)])]
    timeline = tool.Panel("Node up", "state-timeline", {"x": 0, "y": 9, "w": 24, "h": 6})
    timeline.series = [("node-1", [(0.0, 1.0), (5.0, 0.0)])]
    empty = tool.Panel("Nothing", "timeseries", {"x": 16, "y": 1, "w": 8, "h": 4})
    text = tool.page("Fleet", [line, stat, timeline, empty], "a note")
    assert text.count("<polyline") == 2 and "node-2" in text
    assert '<div class="stat">3</div>' in text
    assert 'fill="#73bf69"' in text and 'fill="#f2495c"' in text
    assert "No data" in text


def test_units_are_shown_as_the_panels_show_them() -> None:
    assert tool.number(125.0, "s") == "2.1 min"
    assert tool.number(0.5, "suffix: blocks/s") == "0.5 blocks/s"
    assert tool.number(3.0, "none") == "3"


@pytest.mark.integration
def test_a_short_run_gives_every_panel_of_the_first_row_data(tmp_path: Path) -> None:
    """The demo with Prometheus for a few seconds: each panel's query answers, and the page
    holds the real values (four nodes, one of them down after the faults)."""
    page = tmp_path / "fleet.html"
    assert tool.main(["--rows", "1", "--seconds", "15", "--html", str(page)]) == 0
    text = page.read_text(encoding="utf-8")
    panels = tool.panels_of(FLEET, rows=1)
    for panel in panels:
        assert f">{panel.title}<" in text, panel.title
    assert "No data" not in text
    assert re.search(r'<h3>Nodes up</h3><div class="stat">[34]</div>', text)
    assert all(f">node-{n}</text>" in text for n in range(1, 5))
