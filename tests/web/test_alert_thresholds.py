"""The status page's thresholds and severities come from the mixin (issue 35): `make mixin`
renders them into the package (exporter/rules/thresholds.json), the page reads them once, and
a threshold changed in the mixin's _config moves the page's problems with the alert.

A rendering with overrides goes to a temporary directory (tools/render_mixin.py --config
--root), its thresholds.json is loaded and given to the page over hand-made snapshots."""

from __future__ import annotations

import json
from dataclasses import replace
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import yaml

from exporter.model.readings import read_chain, read_health
from exporter.model.snapshot import ChainStatus, NodeStatus, Snapshot
from exporter.web import alert_thresholds, problems
from exporter.web.alert_thresholds import AlertRules, Severity, Thresholds
from tests.support.documents import chain_doc, health_doc
from tests.support.testdata import REPO
from tools import render_mixin

NOW = 1_700_000_000.0
#: chain_doc's settings: txMaxTimeTrigger 2s + consensusTimeout 1m30s, work waiting
TRIGGER_AND_TIMEOUT = 92
OVERRIDES = {
    "blocksBehindThreshold": 25,
    "behindTime": "10m",
    "syncingTooLongFor": "10m",
    "stallGrace": "10m",
}


@pytest.fixture(scope="module")
def overridden(tmp_path_factory: pytest.TempPathFactory) -> AlertRules:
    """The rules of a rendering with ``OVERRIDES`` on the mixin's _config."""
    work = tmp_path_factory.mktemp("mixin")
    config = work / "config.json"
    config.write_text(json.dumps(OVERRIDES), encoding="utf-8")
    out = work / "out"
    assert render_mixin.main(["--config", str(config), "--root", str(out)]) == 0
    return alert_thresholds.load(out / render_mixin.THRESHOLDS)


def chain(name: str, **fields: Any) -> ChainStatus:
    fresh = ChainStatus(name, read_chain(chain_doc(100)), None, NOW - 3, 0)
    return replace(fresh, **fields)


def node(name: str, *chains: ChainStatus) -> NodeStatus:
    health = read_health(health_doc([c.blockchain for c in chains]))
    return NodeStatus(name, (), health, None, chains, 0.1, NOW - 5)


def flagged(thresholds: Thresholds) -> dict[str, tuple[str, str | None]]:
    """node -> (severity, alert) of each node's one problem, by ``thresholds``. One chain
    every node lists (a chain one node lists beside others is no chain the alerts speak of)."""
    syncing = replace(chain("c1"), reading=read_chain(chain_doc(100, syncing=True)))
    snapshot = Snapshot(
        (
            node("behind", chain("c1", blocks_behind=15)),
            node("late", chain("c1", blocks_behind=3, behind_seconds=400)),
            node("syncing", replace(syncing, syncing_since=NOW - 900)),
            node("stalled", chain("c1", height_changed_at=NOW - 400)),
        ),
        0.25,
        NOW,
    )
    found = problems.attention(snapshot, NOW, thresholds).lines()  # folded lines too
    return {
        problem.node: (problem.severity.label, problem.alert)
        for problem in found
        if problem.node is not None
    }


def test_a_threshold_changed_in_the_mixin_moves_the_pages_problems(
    overridden: AlertRules,
) -> None:
    assert flagged(problems.SHIPPED_THRESHOLDS) == {
        "behind": ("warning", "LedgerNodeBehind"),  # 15 > 10
        "late": ("warning", "LedgerNodeBehindTime"),  # 400 s > 5 minutes (issue 37)
        "syncing": ("info", None),  # 15 minutes, the alert waits 30
        "stalled": ("critical", "LedgerBlockHeightStalled"),  # 400s > 92s + 180s
    }
    assert flagged(overridden.thresholds) == {
        # 15 blocks behind is not more than 25, 400 s not more than 10 minutes: gone
        "syncing": ("warning", "LedgerBlockchainSyncingTooLong"),  # past 10 minutes: appears
        # 400s is within 92s + 600s: gone
    }


def test_durations_are_seconds_and_severities_the_rendered_rules(overridden: AlertRules) -> None:
    shipped = problems.SHIPPED_THRESHOLDS
    assert overridden.thresholds == replace(
        shipped,
        blocks_behind_threshold=25,
        behind_time_seconds=600,
        syncing_too_long_seconds=600,
        stall_grace_seconds=600,
    )
    reading = read_chain(chain_doc(100))
    assert problems.stall_threshold(reading, overridden.thresholds) == TRIGGER_AND_TIMEOUT + 600
    assert problems.stall_threshold(reading) == TRIGGER_AND_TIMEOUT + 180
    assert overridden.severities == alert_thresholds.SHIPPED.severities  # no setting moves one


def test_the_installed_package_data_loads() -> None:
    """The file the package ships (found as installed, by importlib.resources) is the
    rendering of the mixin, and holds every shipped alert's severity."""
    installed = resources.files("exporter") / "rules" / "thresholds.json"
    document = json.loads(installed.read_text(encoding="utf-8"))
    assert document == json.loads(render_mixin.render()[render_mixin.THRESHOLDS])
    assert alert_thresholds.load() == alert_thresholds.SHIPPED
    rules = yaml.safe_load((REPO / "deploy" / "prometheus" / "alerts.yml").read_text())
    worst = ["none", "info", "warning", "critical"]  # several rules of one alert: its worst
    labels: dict[str, str] = {}
    for rule in (r for g in rules["groups"] for r in g["rules"]):
        known = labels.get(rule["alert"], "none")
        labels[rule["alert"]] = max(known, rule["labels"]["severity"], key=worst.index)
    labels = {alert: severity for alert, severity in labels.items() if severity != "none"}
    shipped = {
        alert: severity.label for alert, severity in alert_thresholds.SHIPPED.severities.items()
    }
    assert shipped == labels
    assert alert_thresholds.SHIPPED.severity("LedgerNodeDown") is Severity.CRITICAL


def _document(**changes: Any) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((REPO / render_mixin.THRESHOLDS).read_text())
    for key, value in changes.items():
        part, _, field = key.partition("__")
        if value is None and not field:
            del document[part]
        elif value is None:
            del document[part][field]
        else:
            document[part][field] = value
    return document


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"thresholds__stallGraceSeconds": None}, "thresholds missing ['stallGraceSeconds']"),
        ({"thresholds__stallGrace": 3}, "unknown ['stallGrace']"),
        ({"thresholds__blocksBehindThreshold": "10"}, "blocksBehindThreshold is '10', not a"),
        ({"thresholds__blocksBehindThreshold": True}, "blocksBehindThreshold is True, not a"),
        ({"thresholds__syncingTooLongSeconds": -1}, "syncingTooLongSeconds is -1, not a"),
        ({"severities__LedgerNodeDown": "page"}, "alert 'LedgerNodeDown' has severity 'page'"),
        ({"runbooks__LedgerNodeDown": None}, "name other alerts ['LedgerNodeDown']"),
        ({"runbooks__LedgerNodeDown": "javascript:x"}, "has runbook 'javascript:x', not a URL"),
        ({"runbooks__LedgerNodeDown": 3}, "has runbook 3, not a URL"),
        ({"runbooks__": None}, "'severities', 'runbooks', 'for', 'byHalt' must be objects"),
        ({"byHalt__LedgerNodeDown": {"advancing": "warning"}}, "'LedgerNodeDown' has byHalt"),
        (
            {"byHalt__LedgerNodeGone": {"advancing": "info", "halted": "critical"}},
            "'LedgerNodeGone' has byHalt",
        ),
    ],
)
def test_a_broken_file_is_refused_naming_what_and_how_to_fix(
    changes: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match="run `make mixin`") as raised:
        alert_thresholds.parse(_document(**changes), "thresholds.json")
    assert str(raised.value).startswith("thresholds.json: ")
    assert message in str(raised.value)


def test_a_missing_or_garbled_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"cannot be read .*run `make mixin`"):
        alert_thresholds.load(tmp_path / "thresholds.json")
    garbled = tmp_path / "garbled.json"
    garbled.write_text("{", encoding="utf-8")
    with pytest.raises(ValueError, match=r"garbled.json: not JSON"):
        alert_thresholds.load(garbled)


def test_an_alert_the_rules_lack_is_named() -> None:
    with pytest.raises(KeyError, match="LedgerNoSuchAlert is not a shipped alert"):
        alert_thresholds.SHIPPED.severity("LedgerNoSuchAlert")
