"""What users read names changes, not the project's internal work items: no "issue 37",
"before issue 32" or "#123" in the README, the CHANGELOG, docs/*.md, the mixin's rendered
help texts (alert annotations, rule and dashboard descriptions, the Alertmanager config) or
the commands' help; and the two pages that grow with every change keep to their bounds."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from exporter.cli import build_parser as exporter_parser
from ledger_simulator.cli import build_parser as simulator_parser
from ledger_simulator.demo import build_parser as demo_parser
from tests.support.testdata import REPO

#: A reference to a work item: "issue 37", "issues 21 and 36", "issue #5", "PR 12", "#123".
WORK_ITEM = re.compile(r"\b(issues?|PRs?|pull requests?)\s*#?\d+|(?<![\w&/#])#\d+\b", re.I)

PAGES = (REPO / "README.md", REPO / "CHANGELOG.md", *sorted((REPO / "docs").glob("*.md")))
#: What the mixin renders for users: the rules' and alerts' texts, the dashboards, the
#: Alertmanager config, and their copies in the package, the chart and the manifests
#: (tools/render_mixin.py writes them).
RENDERED = (
    *sorted((REPO / "deploy" / "prometheus").glob("*.yml")),
    *sorted((REPO / "deploy" / "alertmanager").glob("*.yml")),
    *sorted((REPO / "grafana" / "dashboards").glob("*.json")),
    *sorted((REPO / "exporter" / "rules").glob("*")),
    *sorted((REPO / "deploy" / "helm" / "ledger-exporter" / "files").rglob("*.*")),
    *sorted((REPO / "deploy" / "kubernetes").glob("*.yaml")),
)
#: The chart's texts for users: its values' descriptions and schema, its notes.
CHART = REPO / "deploy" / "helm" / "ledger-exporter"
HELP = tuple(
    path
    for path in (
        CHART / "values.yaml",
        CHART / "values.schema.json",
        CHART / "Chart.yaml",
        CHART / "README.md",
        CHART / "templates" / "NOTES.txt",
    )
    if path.exists()
)
#: Longest each page may grow: release notes and current figures, not a log (git is that).
MAX_LINES = {"CHANGELOG.md": 150, "docs/performance.md": 250}


def _hits(text: str) -> list[str]:
    """Each line of ``text`` citing a work item, outside code spans."""
    return [
        line.strip()
        for line in text.splitlines()
        if WORK_ITEM.search(re.sub(r"`[^`\n]*`", "", line))
    ]


@pytest.mark.parametrize("path", [*PAGES, *RENDERED, *HELP], ids=lambda p: str(p.relative_to(REPO)))
def test_no_work_item_numbers_in_what_users_read(path: Path) -> None:
    assert _hits(path.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize(
    "parser", [exporter_parser, simulator_parser, demo_parser], ids=lambda p: p.__module__
)
def test_no_work_item_numbers_in_the_commands_help(parser: object) -> None:
    assert callable(parser)
    assert _hits(parser().format_help()) == []


@pytest.mark.parametrize(("page", "most"), MAX_LINES.items())
def test_the_growing_pages_keep_to_their_bounds(page: str, most: int) -> None:
    lines = (REPO / page).read_text(encoding="utf-8").count("\n")
    assert lines <= most, f"{page} has {lines} lines, more than {most}: keep it short"


@pytest.mark.parametrize(
    ("text", "cites"),
    [
        ("Seconds behind (issue 37).", True),
        ("before issue 32 it cost", True),
        ("issues 21 and 36", True),
        ("see #123", True),
        ("PR #12", True),
        ("the issuer_cn label; 3 issues remain", False),
        ("colour #fff, anchor [x](a.md#b-1)", False),
        ("`issue 37` in code", False),
    ],
)
def test_what_counts_as_a_work_item(text: str, cites: bool) -> None:
    assert bool(_hits(text)) is cites
