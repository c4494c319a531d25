"""The optional minimum node version (``_config.minimumNodeVersion``): off by default, and when
set, LedgerNodeVersionBelowMinimum fires for exactly the versions below it. PromQL cannot
compare versions, so the mixin writes a regex (mixin/lib/versions.libsonnet); promtool runs it
on versions around the boundary, and the regex itself is checked against a numeric comparison
of many versions."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

import _gojsonnet
import pytest
import yaml

from tests.support.prometheus import Promtool
from tools import render_mixin

ALERT = "LedgerNodeVersionBelowMinimum"
MINIMUM = "1.4.2"
#: Around 1.4.2: each component one below, equal and one above, shorter and longer versions,
#: a `v` prefix, a pre-release suffix and numbers that sort wrongly as text.
BELOW = ["1.4.1", "1.4.0", "1.3.99", "0.9", "1.4", "1", "v1.4.1", "1.3.10.7", "1.4.1-rc3"]
NOT_BELOW = ["1.4.2", "1.4.10", "1.4.3", "1.5.0", "1.10.0", "2.0.0", "v1.4.2", "1.4.2-rc1"]
NOT_BELOW += ["1.4.2.1", "10.0", "1.40.0", "1.4.20"]


def alerts_with(overrides: str) -> dict[str, dict[str, Any]]:
    """The mixin's alerts with ``overrides`` (a whole evaluation: tens of seconds on a busy
    machine, so only the default and one minimum are rendered, each once per process)."""
    rendered = render_mixin.evaluate(overrides)["alerts"]["groups"]
    return {rule["alert"]: rule for group in rendered for rule in group["rules"]}


def below_regex(minimum: str) -> str:
    """The regex the mixin writes for ``minimum`` (lib/versions.libsonnet alone)."""
    snippet = "(import 'lib/versions.libsonnet').belowRegex(std.extVar('minimum'))"
    text = _gojsonnet.evaluate_snippet(
        "minimum", snippet, jpathdir=[str(render_mixin.MIXIN_DIR)], ext_vars={"minimum": minimum}
    )
    regex: str = json.loads(text)
    return regex


def numeric_below(version: str, minimum: str) -> bool:
    """The comparison the regex stands for: dotted numbers from the left, zero-padded."""
    numbers = re.match(r"v?([0-9]+(?:\.[0-9]+)*)", version)
    assert numbers, version
    left = [int(part) for part in numbers[1].split(".")]
    right = [int(part) for part in minimum.split(".")]
    width = max(len(left), len(right))
    return left + [0] * (width - len(left)) < right + [0] * (width - len(right))


def test_off_by_default() -> None:
    assert ALERT not in alerts_with("{}")
    rule = alerts_with(f'{{minimumNodeVersion: "{MINIMUM}"}}')[ALERT]
    quoted = re.search(r'node_version=~"((?:\\.|[^"\\])*)"', rule["expr"])
    assert quoted, rule["expr"]
    assert quoted[1].replace("\\\\", "\\") == below_regex(MINIMUM)  # the PromQL string's escapes


def test_a_minimum_nothing_is_below_has_no_regex() -> None:
    """(and so no alert: fleet.libsonnet renders it only for a regex)"""
    assert below_regex("0.0") == ""


def test_a_minimum_not_dotted_numbers_is_refused_naming_the_key() -> None:
    with pytest.raises(RuntimeError, match=r"minimumNodeVersion '1\.x': use dotted"):
        below_regex("1.x")


@pytest.mark.parametrize("minimum", ["1.4.2", "10.20.30", "2", "0.0.1", "1.10", "3.0.10"])
def test_regex_matches_exactly_the_versions_below(minimum: str) -> None:
    pattern = below_regex(minimum)
    numbers = itertools.chain(
        itertools.product(range(12), repeat=3),
        itertools.product(range(12), repeat=2),
        ((n,) for n in range(25)),
        [(9, 19, 29), (10, 19, 99), (10, 20, 29), (10, 20, 30), (10, 20, 31), (3, 0, 100)],
    )
    wrong = []
    for parts in numbers:
        version = ".".join(map(str, parts))
        for written in (version, f"v{version}", f"{version}-rc1"):
            if bool(re.fullmatch(pattern, written)) != numeric_below(written, minimum):
                wrong.append(written)
    assert not wrong, f"{minimum}: {wrong[:10]}"


def test_promtool_fires_for_the_versions_below_the_minimum(
    promtool: Promtool, tmp_path: Path
) -> None:
    rule = alerts_with(f'{{minimumNodeVersion: "{MINIMUM}"}}')[ALERT]
    rules = {"groups": [{"name": "ledger-fleet", "rules": [rule]}]}
    (tmp_path / "alerts.yml").write_text(yaml.safe_dump(rules), encoding="utf-8")
    versions = BELOW + NOT_BELOW
    series = [
        {
            "series": (
                f'ledger_node_info{{job="ledger-exporter", instance="e1", node="node-{index}", '
                f'node_version="{version}", node_id="n{index}", peer_id="p{index}"}}'
            ),
            "values": "1x20",
        }
        for index, version in enumerate(versions)
    ]
    expected = [
        {
            "exp_labels": {
                "severity": "warning",
                "job": "ledger-exporter",
                "instance": "e1",
                "node": f"node-{index}",
                "node_version": version,
                "node_id": f"n{index}",
                "peer_id": f"p{index}",
            },
            "exp_annotations": {
                "summary": f"A ledger node runs a version below the minimum of {MINIMUM}.",
                "description": (
                    f"Ledger node node-{index} runs version {version}, below the minimum of "
                    f"{MINIMUM} the network supports."
                ),
                "runbook_url": rule["annotations"]["runbook_url"],
            },
        }
        for index, version in enumerate(versions)
        if version in BELOW
    ]
    test = {
        "rule_files": ["alerts.yml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": series,
                "alert_rule_test": [
                    {"eval_time": "9m", "alertname": ALERT, "exp_alerts": []},
                    {"eval_time": "11m", "alertname": ALERT, "exp_alerts": expected},
                ],
            }
        ],
    }
    (tmp_path / "minimum.test.yml").write_text(yaml.safe_dump(test), encoding="utf-8")
    promtool.check("test", "rules", "minimum.test.yml", cwd=tmp_path)
