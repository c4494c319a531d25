"""The docs document every metric (docs/metrics.md), flag and config key (README) the code
has."""

from __future__ import annotations

import pytest

from exporter.cli import build_parser
from exporter.config.exporter import _TOP_KEYS
from exporter.config.nodes import NODE_KEYS
from exporter.expose import metrics
from tests.support import metrics_reference
from tests.support.testdata import REPO

README = (REPO / "README.md").read_text()


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
    assert f"`{flag}`" in README


@pytest.mark.parametrize("key", list(_TOP_KEYS) + [f"nodes[].{key}" for key in NODE_KEYS])
def test_every_config_key_is_documented(key: str) -> None:
    assert f"| `{key}` |" in README


def _package_map() -> dict[str, str]:
    """The rows of the README's "Where things live" table: first cell -> the whole row."""
    section = README.split("### Where things live\n", 1)[1].split("\n#", 1)[0]
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
