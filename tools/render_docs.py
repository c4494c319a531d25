#!/usr/bin/env python3
"""Write ``docs/metrics.md``, the metric reference, from the code: the catalogue
(``exporter/expose/metrics.py``) gives every family, its type, labels, meaning, unit and the
rules for missing or odd values; client_python's collectors (``exporter/runtime.py``) the
process and Python families; the rendered mixin (``deploy/prometheus/{alerts,rules}.yml``,
``grafana/dashboards/*.json``) which alerts, recording rules and panels read each family.

    python tools/render_docs.py           # write docs/metrics.md (make docs)
    python tools/render_docs.py --check   # exit 1 if the committed file differs
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import yaml
from prometheus_client.parser import text_string_to_metric_families

from exporter.expose import metrics as m
from exporter.runtime import runtime_families

ROOT = Path(__file__).resolve().parent.parent
TARGET = Path("docs/metrics.md")
ALERTS = Path("deploy/prometheus/alerts.yml")
RULES = Path("deploy/prometheus/rules.yml")
DASHBOARDS = Path("grafana/dashboards")
_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


class Family(NamedTuple):
    """One family as the reference shows it."""

    name: str
    kind: str
    labels: tuple[str, ...]
    unit: str
    meaning: str
    missing: str
    source: str = ""


def runtime() -> list[Family]:
    """client_python's process, platform and GC families, as the exporter serves them."""
    text = runtime_families()[0].decode()
    found = []
    for family in text_string_to_metric_families(text):
        name = family.name + ("_total" if family.type == "counter" else "")
        labels = tuple(dict.fromkeys(k for s in family.samples for k in s.labels))
        unit = m.RUNTIME_UNITS[name]
        found.append(Family(name, family.type, labels, unit, family.documentation, ""))
    return found


def families(group: m.Group) -> list[Family]:
    return [
        Family(s.name, s.kind.value, s.labels, m.unit_of(s), s.help, s.missing, s.source)
        for s in group.families
    ]


# --- where the mixin reads each family ------------------------------------------------------


def _names(expr: str, known: set[str]) -> set[str]:
    return {token for token in _NAME.findall(expr) if token in known}


def users(root: Path, known: set[str]) -> dict[str, list[str]]:
    """Family -> the recording rules, alerts and dashboard panels and variables that read it
    (an alert or panel reading a recording rule reads the families the rule reads)."""
    records: dict[str, set[str]] = {}
    used: dict[str, list[str]] = defaultdict(list)
    for rule in _rules(root / RULES):
        read = set(_expand(_names(rule["expr"], known | set(records)), records))
        records[rule["record"]] = read
        for name in read:
            used[name].append(f"rule `{rule['record']}`")
    readers = [(f"alert `{r['alert']}`", r["expr"]) for r in _rules(root / ALERTS)]
    readers += _dashboard_readers(root)
    for reader, expr in readers:
        for name in _expand(_names(expr, known | set(records)), records):
            used[name].append(reader)
    return {name: list(dict.fromkeys(found)) for name, found in used.items()}


def _rules(path: Path) -> Iterator[dict[str, str]]:
    for group in yaml.safe_load(path.read_text(encoding="utf-8"))["groups"]:
        yield from group["rules"]


def _dashboard_readers(root: Path) -> list[tuple[str, str]]:
    """(who, PromQL) for every template variable and panel of the shipped dashboards."""
    found = []
    for path in sorted((root / DASHBOARDS).glob("*.json")):
        board = json.loads(path.read_text(encoding="utf-8"))
        title = board["title"]
        for variable in board["templating"]["list"]:
            query = json.dumps(variable.get("query", ""))
            found.append((f'dashboard "{title}", variable `${variable["name"]}`', query))
        for panel in _panels(board["panels"]):
            exprs = " ".join(t.get("expr", "") for t in panel.get("targets", []))
            found.append((f'dashboard "{title}", panel "{panel["title"]}"', exprs))
    return found


def _expand(names: Iterable[str], records: dict[str, set[str]]) -> Iterator[str]:
    for name in names:
        if name in records:
            yield from records[name]
        else:
            yield name


def _panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for panel in panels:
        yield panel
        yield from _panels(panel.get("panels", []))


# --- the page -------------------------------------------------------------------------------


def anchor(name: str) -> str:
    """The heading id MkDocs gives ``### `name```: the name itself (underscores kept)."""
    return name


def _code(values: Iterable[str]) -> str:
    return ", ".join(f"`{v}`" for v in values) or "none"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def section(
    title: str, about: str, missing: str, found: list[Family], used: dict[str, list[str]]
) -> list[str]:
    lines = [f"## {title}", "", about, "", f"**Missing or odd values.** {missing}", ""]
    lines += ["| metric | type | labels | unit |", "|---|---|---|---|"]
    for family in found:
        row = (f"[`{family.name}`](#{anchor(family.name)})", family.kind, _code(family.labels))
        lines.append("| " + " | ".join(row) + f" | {_cell(family.unit)} |")
    for family in found:
        lines += ["", f"### `{family.name}`", "", family.meaning, ""]
        if family.source:
            lines += [f"**Read from:** {family.source}.", ""]
        if family.missing:
            lines += [f"**Missing or odd values.** {family.missing}", ""]
        readers = used.get(family.name, [])
        lines.append(
            "**Used by:** " + ("; ".join(readers) if readers else "no shipped alert or panel") + "."
        )
    return [*lines, ""]


def render(root: Path = ROOT) -> str:
    known = {s.name for s in m.ALL} | m.RUNTIME_SAMPLE_NAMES
    used = users(root, known)
    lines = [
        "# Metrics",
        "",
        "<!-- GENERATED by tools/render_docs.py from exporter/expose/metrics.py and the rendered",
        "mixin: do not edit. Change the catalogue and run `make docs`. -->",
        "",
        "Every family the exporter can emit: its type, labels, unit, meaning, what happens to",
        "missing or odd values, and which shipped alerts, recording rules and dashboard panels",
        "read it. Names follow the Prometheus naming guide (base units, `_total` on counters,",
        "`_info` for label-only series valued 1, `_timestamp_seconds` for Unix times); a name",
        "changes only with a migration note in the changelog.",
        "",
        "## How values are read",
        "",
    ]
    lines += [f"{number}. {rule}" for number, rule in enumerate(m.RULES, 1)]
    lines += ["", "## Labels", "", "| label | meaning |", "|---|---|"]
    lines += [f"| `{label}` | {_cell(meaning)} |" for label, meaning in m.LABELS.items()]
    lines.append("")
    for group in m.GROUPS:
        lines += section(group.title, group.about, group.missing, families(group), used)
    lines += section(
        "Process and Python",
        "client_python's standard process, platform and garbage-collector collectors, on "
        "/metrics only (not on /probe).",
        "The `process_*` families are read from `/proc` and exist on Linux only.",
        runtime(),
        used,
    )
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/metrics.md differs")
    args = parser.parse_args(argv)
    text = render(ROOT)
    path = ROOT / TARGET
    if args.check:
        if path.read_text(encoding="utf-8") != text:
            print(
                f"{TARGET} differs from what the code generates: run `make docs`", file=sys.stderr
            )
            return 1
        return 0
    path.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
