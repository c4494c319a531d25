"""The docs document every metric (docs/metrics.md, generated), flag and config key the code
has, the flag table states each flag's variable and real default, and the development page
names every module."""

from __future__ import annotations

import argparse
import re

import pytest

from exporter.cli import DEFAULTS, build_parser
from exporter.config.exporter import _TOP_KEYS
from exporter.config.nodes import NODE_KEYS
from exporter.expose import metrics
from exporter.flags import env_name
from tests.support import metrics_reference
from tests.support.testdata import REPO

CONFIGURATION = (REPO / "docs" / "configuration.md").read_text(encoding="utf-8")
DEVELOPMENT = (REPO / "docs" / "development.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("name", [spec.name for spec in metrics.ALL])
def test_every_metric_is_documented(name: str) -> None:
    documented = metrics_reference.families()
    assert name in documented, f"{name} missing from docs/metrics.md: run `make docs`"
    spec = next(spec for spec in metrics.ALL if spec.name == name)
    assert documented[name] == (spec.kind.value, frozenset(spec.labels))


def test_no_undocumented_metric_names_in_the_reference() -> None:
    documented = set(metrics_reference.families())
    assert documented == {spec.name for spec in metrics.ALL} | metrics.RUNTIME_SAMPLE_NAMES


@pytest.mark.parametrize(
    "flag",
    [
        option
        for action in build_parser()._actions
        for option in action.option_strings
        if option not in ("-h", "--help")  # argparse's own
    ],
)
def test_every_flag_is_documented(flag: str) -> None:
    assert f"`{flag}`" in CONFIGURATION


@pytest.mark.parametrize("key", list(_TOP_KEYS) + [f"nodes[].{key}" for key in NODE_KEYS])
def test_every_config_key_is_documented(key: str) -> None:
    assert f"| `{key}` |" in CONFIGURATION


def _package_map() -> dict[str, str]:
    """The rows of docs/development.md's "Where things live" table: first cell -> the row."""
    section = DEVELOPMENT.split("## Where things live\n", 1)[1].split("\n#", 1)[0]
    return {row.split("|")[1].strip(): row for row in section.splitlines() if row.startswith("| `")}


@pytest.mark.parametrize(
    "module",
    sorted(
        str(path.relative_to(REPO / "exporter"))
        for path in (REPO / "exporter").rglob("*.py")
        if path.name not in ("__init__.py", "__main__.py")
    ),
)
def test_the_package_map_names_every_module(module: str) -> None:
    """Each module of the package is named in the row of its sub-package (the top-level
    modules in the rows that list files), so the map cannot fall behind the code."""
    rows = _package_map()
    folder, _, name = module.rpartition("/")
    if folder:
        assert f"`{name}`" in rows[f"`{folder}/`"], module
    else:
        assert any(f"`{name}`" in cell for cell in rows if not cell.endswith("/`")), module


def _flag_rows() -> dict[str, list[str]]:
    """docs/configuration.md's flag table: flag -> its cells (variable, default, meaning)."""
    rows = {}
    for line in CONFIGURATION.splitlines():
        cells = [cell.strip() for cell in line.strip("|").split(" | ")]
        if len(cells) == 4 and re.fullmatch(r"`--[\w.-]+`", cells[0]):
            rows[cells[0].strip("`")] = cells[1:]
    return rows


@pytest.mark.parametrize(
    "action",
    [a for a in build_parser()._actions if a.dest in DEFAULTS],
    ids=lambda a: a.option_strings[0],
)
def test_a_flag_row_states_its_variable_and_its_real_default(action: argparse.Action) -> None:
    """The variable is the flag's, and a default in backticks reads, through the flag's own
    check, as the value the exporter uses when the flag is left out."""
    flag = action.option_strings[0]
    variable, default, _ = _flag_rows()[flag]
    assert variable == f"`{env_name(flag.removeprefix('--'))}`", flag
    if default.startswith("`"):
        check = action.type if callable(action.type) else str
        value = check(default.strip("`"))
        expected = DEFAULTS[action.dest]
        assert ([value] if isinstance(expected, list) else value) == expected, flag
    else:
        assert DEFAULTS[action.dest] is None, f"{flag}: the default {default} is not stated"
