"""The README documents every metric, flag and config key the code has."""

from __future__ import annotations

import re

import pytest

from exporter.cli import build_parser
from exporter.config.exporter import _TOP_KEYS
from exporter.config.nodes import NODE_KEYS
from exporter.expose import metrics
from tests.conftest import REPO

README = (REPO / "README.md").read_text()


@pytest.mark.parametrize("name", [spec.name for spec in metrics.ALL])
def test_every_metric_is_documented(name: str) -> None:
    assert f"| `{name}` |" in README


def test_no_undocumented_metric_names_in_the_readme() -> None:
    documented = set(re.findall(r"^\| `(ledger_[a-z_]+)` \|", README, re.M))
    assert documented == {spec.name for spec in metrics.ALL}


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
