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
import textwrap
from collections import defaultdict
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import yaml
from prometheus_client.parser import text_string_to_metric_families

from exporter.cli import DEFAULTS, build_parser
from exporter.config.dns_sd import DnsSdConfig
from exporter.config.exporter import Config, NetworkChecks
from exporter.config.keytable import Declared, bound_keys, declared
from exporter.config.nodes import NodeConfig
from exporter.config.probe_modules import ProbeConfig
from exporter.expose import metrics as m
from exporter.flags import env_name, shown_default
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


# --- the configuration reference: flags and plain config keys, from their declarations -------
# The generated blocks of docs/configuration.md (the flag and settings tables) and of
# config/example.yml (the plain keys with their text and defaults), written by the same run:
# from the flags' parser and DEFAULTS (exporter/cli.py) and the plain keys' declarations
# (exporter/config/keytable.py), so no default is restated by hand.

CONFIGURATION = Path("docs/configuration.md")
EXAMPLE = Path("config/example.yml")
_FLAG_SUFFIX = re.compile(r"(?: \(default [^)]*\))?(?: \[env [A-Z_]+\])?$")
_LINK = re.compile(r"\[([^\]]+)\]\(([^)#]+)(?:#[^)]*)?\)")


def setting_sections() -> list[tuple[str, list[Declared]]]:
    """(key prefix, plain keys) of every section that declares some, in the docs' order:
    the top level (with the cardinality bounds), network_checks, nodes[], dns_sd_configs[],
    probe."""
    top = [*declared(Config), *(item for _, item in bound_keys())]
    return [
        ("", top),
        ("network_checks.", list(declared(NetworkChecks))),
        ("nodes[].", list(declared(NodeConfig))),
        ("dns_sd_configs[].", list(declared(DnsSdConfig))),
        ("probe.", list(declared(ProbeConfig))),
    ]


def settings_table() -> list[str]:
    """docs/configuration.md's table of plain keys: key, default, meaning."""
    lines = ["| key | default | meaning |", "|---|---|---|"]
    for prefix, items in setting_sections():
        for item in items:
            limits = item.key.check.limits()
            doc = f"{item.key.doc}; {limits}" if limits else item.key.doc
            lines.append(f"| `{prefix}{item.name}` | {item.shown_default} | {_cell(doc)} |")
    return lines


def flags_table() -> list[str]:
    """docs/configuration.md's flag table, from the main command's parser and DEFAULTS."""
    lines = ["| flag | environment variable | default | meaning |", "|---|---|---|---|"]
    for action in build_parser()._actions:
        if not action.option_strings or action.option_strings[0] in ("-h", "--help"):
            continue
        flag = action.option_strings[0]
        meaning = _FLAG_SUFFIX.sub("", action.help or "")
        variable, default = "", ""
        if action.dest in DEFAULTS:
            variable = f"`{env_name(flag.removeprefix('--'))}`"
            value = DEFAULTS[action.dest]
            default = "none" if value is None else f"`{shown_default(value, action.type)}`"
            if meaning.endswith(" (required)"):
                meaning, default = meaning.removesuffix(" (required)"), "(required)"
        elif isinstance(action.const, bool):  # a switch
            default = "off"
        lines.append(f"| `{flag}` | {variable} | {default} | {_cell(meaning)} |")
    return lines


def _plain(doc: str) -> str:
    """Markdown as a YAML comment says it: no backticks, a link as its text and page."""
    return _LINK.sub(r"\1 (docs/\2)", doc).replace("`", "")


def example_block(items: list[Declared], indent: str) -> list[str]:
    """config/example.yml's lines for ``items``: the doc text and default as a comment, then
    the key set to its default."""
    lines = []
    width = 92 - len(indent)
    for item in items:
        check = item.key.check
        limits = check.limits()
        doc = _plain(f"{item.key.doc}; {limits}" if limits else item.key.doc)
        if not item.key.doc.startswith("`"):
            doc = doc[:1].upper() + doc[1:]
        default = _plain(item.shown_default) if item.key.shown else check.show(item.default)
        wrapped = textwrap.wrap(f"{doc}.", width, break_on_hyphens=False, break_long_words=False)
        stated = f"Default: {default}."
        if len(wrapped[-1]) + 1 + len(stated) <= width:
            wrapped[-1] += f" {stated}"
        else:
            wrapped.append(stated)
        lines += [f"{indent}# {line}" for line in wrapped]
        lines.append(f"{indent}{item.name}: {check.show(item.default)}")
    return lines


def replace_generated(text: str, name: str, body: list[str], source: Path) -> str:
    """``text`` with the lines between the markers of block ``name`` replaced by ``body``.
    The markers are comments: ``<!-- BEGIN GENERATED name ...`` in Markdown, ``# BEGIN
    GENERATED name ...`` in YAML (indented as the block), each ending at ``END GENERATED name``."""
    lines = text.split("\n")
    begin = next((i for i, line in enumerate(lines) if f"BEGIN GENERATED {name} " in line), None)
    end = next(
        (
            i
            for i, line in enumerate(lines)
            if line.strip().endswith(f"END GENERATED {name} -->")
            or line.strip() == f"# END GENERATED {name}"
        ),
        None,
    )
    if begin is None or end is None or end < begin:
        raise SystemExit(f"{source}: the markers of the generated block {name!r} are missing")
    return "\n".join([*lines[: begin + 1], *body, *lines[end:]])


def render_configuration(root: Path = ROOT) -> dict[Path, str]:
    """docs/configuration.md and config/example.yml with their generated blocks renewed
    (those of the two that exist under ``root``: a partial tree renders the rest)."""
    sections = dict(setting_sections())
    texts = {}
    if (root / CONFIGURATION).exists():
        doc = (root / CONFIGURATION).read_text(encoding="utf-8")
        doc = replace_generated(doc, "flags", flags_table(), CONFIGURATION)
        texts[CONFIGURATION] = replace_generated(doc, "settings", settings_table(), CONFIGURATION)
    if (root / EXAMPLE).exists():
        example = (root / EXAMPLE).read_text(encoding="utf-8")
        blocks = [("settings", "", ""), ("network_checks", "network_checks.", "  ")]
        blocks += [("node settings", "nodes[].", "    ")]
        for name, prefix, indent in blocks:
            body = example_block(sections[prefix], indent)
            example = replace_generated(example, name, body, EXAMPLE)
        texts[EXAMPLE] = example
    return texts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a generated file differs")
    args = parser.parse_args(argv)
    texts = {TARGET: render(ROOT), **render_configuration(ROOT)}
    differ = [path for path, text in texts.items() if (ROOT / path).read_text("utf-8") != text]
    if args.check:
        for path in differ:
            print(f"{path} differs from what the code generates: run `make docs`", file=sys.stderr)
        return 1 if differ else 0
    for path in differ:
        (ROOT / path).write_text(texts[path], encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
