"""Every shipped promtool test, run again for an HA pair: each input series an exporter
scrape yields (``up`` included; recorded series and ``ALERTS`` are Prometheus's own) becomes
two, one per replica (``exporter_replica="a"``/``"b"``, the mixin's default replicaLabels),
and promtool must give the same expected alerts and samples. The rules fold the replicas
(mixin/lib/replicas.libsonnet), so a pair raises what one exporter raises, once; only the
alerts the mixin marks per replica (``perReplicaAlerts``) are expected once per replica,
labelled with it. The month-long budget files are left out (``SAME_FOLD_AS_SLO``)."""

from __future__ import annotations

import copy
import functools
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.monitoring import PROM_DIR
from tests.support.prometheus import Promtool, promtool_env
from tests.support.testdata import REPO
from tools import render_mixin

#: The label and values of the pair (config.libsonnet's default replicaLabels).
REPLICA_LABEL = "exporter_replica"
REPLICAS = ("a", "b")
#: Files already written for a pair (their series carry the replica label).
PAIR_FILES = frozenset({"replicas.test.yml"})
#: The budget's slow burns over a month: the same recording expressions as slo.test.yml's
#: (the fold is one expression at every window, which slo.test.yml runs for a pair), each
#: a minute of promtool's CPU more for a pair; run for one exporter by test_rules.py.
SAME_FOLD_AS_SLO = frozenset({"slo_leak.test.yml", "slo_month.test.yml"})
UNIT_TEST_FILES = sorted(
    path for path in (PROM_DIR / "tests").glob("*.yml")
    if path.name not in PAIR_FILES | SAME_FOLD_AS_SLO
)  # fmt: skip
#: Series Prometheus makes itself, never scraped from an exporter.
NOT_SCRAPED = frozenset({"ALERTS", "ALERTS_FOR_STATE"})
#: A series in promtool's notation: `name{labels}`, `name` or `{__name__="name", ...}`.
_SERIES = re.compile(r"\s*(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)?\s*(?:\{(?P<labels>.*)\})?\s*", re.S)
_NAME_LABEL = re.compile(r"""__name__\s*=\s*["'](?P<name>[^"']*)["']""")


@functools.cache
def per_replica_alerts() -> frozenset[str]:
    """The alerts that stay per replica, as the mixin marks them (alerts/exporter.libsonnet)."""
    return frozenset(render_mixin.evaluate()["perReplicaAlerts"])


def scraped(series: str) -> bool:
    """Whether an input series is one an exporter's scrape yields (to be doubled)."""
    match = _SERIES.fullmatch(series)
    assert match, f"unreadable input series {series!r}"
    labels = match["labels"] or ""
    named = _NAME_LABEL.search(labels)
    name = match["name"] or (named["name"] if named else "")
    return ":" not in name and name not in NOT_SCRAPED and REPLICA_LABEL not in labels


def for_replica(series: str, replica: str) -> str:
    """The series with the replica's label added."""
    match = _SERIES.fullmatch(series)
    assert match
    labels = (match["labels"] or "").strip()
    joined = f'{REPLICA_LABEL}="{replica}"' + (f", {labels}" if labels else "")
    return f"{match['name'] or ''}{{{joined}}}"


def doubled_alerts(expected: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A per-replica alert's expectations: each once per replica, labelled with it."""
    return [
        {**alert, "exp_labels": {**alert.get("exp_labels", {}), REPLICA_LABEL: replica}}
        for alert in expected
        for replica in REPLICAS
    ]


def for_a_pair(document: dict[str, Any], per_replica: frozenset[str]) -> dict[str, Any]:
    """A promtool test file rewritten for two replicas, its rule files by absolute path."""
    pair = copy.deepcopy(document)
    pair["rule_files"] = [str((PROM_DIR / "tests" / f).resolve()) for f in pair["rule_files"]]
    for case in pair["tests"]:
        case["input_series"] = _doubled_series(case.get("input_series", []))
        for check in case.get("alert_rule_test", []):
            if check["alertname"] in per_replica and check.get("exp_alerts"):
                check["exp_alerts"] = doubled_alerts(check["exp_alerts"])
    return pair


def _doubled_series(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each scraped series once per replica; Prometheus's own series as they are."""
    out: list[dict[str, Any]] = []
    for entry in entries:
        if scraped(entry["series"]):
            out.extend({**entry, "series": for_replica(entry["series"], r)} for r in REPLICAS)
        else:
            out.append(entry)
    return out


def test_series_notation_is_rewritten_per_replica() -> None:
    assert scraped('ledger_node_up{job="ledger-exporter", node="n1"}')
    assert scraped("up")
    assert not scraped('node:ledger_node_up:error_ratio5m{node="n1"}')
    assert not scraped('ALERTS{alertname="LedgerNodeDown"}')
    assert not scraped('{__name__="ALERTS", alertname="LedgerNodeDown"}')
    assert not scraped('ledger_node_up{exporter_replica="a", node="n1"}')
    assert for_replica('up{job="x"}', "b") == 'up{exporter_replica="b", job="x"}'
    assert for_replica("up", "a") == 'up{exporter_replica="a"}'


def test_the_per_replica_alerts_are_the_exporters_own() -> None:
    per_replica = per_replica_alerts()
    assert {"LedgerExporterReplicaDown", "LedgerExporterReplicaNodeUnreachable"} <= per_replica
    assert "LedgerExporterConfigReloadFailed" in per_replica
    assert not per_replica & {"LedgerExporterDown", "LedgerNodeDown", "LedgerBlockchainHalted"}


@pytest.mark.parametrize("path", UNIT_TEST_FILES, ids=lambda path: path.name)
def test_every_shipped_promtool_test_passes_for_two_replicas(
    promtool: Promtool, tmp_path: Path, path: Path
) -> None:
    """One promtool run per file, so that the workers share them."""
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    written = tmp_path / path.name
    written.write_text(yaml.safe_dump(for_a_pair(document, per_replica_alerts())), encoding="utf-8")
    result = subprocess.run(
        [promtool.path, "test", "rules", str(written)],
        cwd=tmp_path, capture_output=True, text=True, check=False, timeout=900,
        env=promtool_env(),
    )  # fmt: skip
    assert result.returncode == 0, (
        f"promtool test rules (two replicas):\n{result.stdout}{result.stderr}"
    )


def test_every_unit_test_file_is_run_for_a_pair_or_said_why() -> None:
    every = {path.name for path in (PROM_DIR / "tests").glob("*.yml")}
    assert every == {p.name for p in UNIT_TEST_FILES} | PAIR_FILES | SAME_FOLD_AS_SLO
    assert every > SAME_FOLD_AS_SLO and "slo.test.yml" in {p.name for p in UNIT_TEST_FILES}


def test_the_runbooks_name_the_per_replica_alerts() -> None:
    """docs/alerts.md's "HA pairs of exporters" lists the alerts that stay per replica: the
    mixin's list, no more and no less."""
    page = (REPO / "docs" / "alerts.md").read_text(encoding="utf-8")
    section = page.split("\n## HA pairs of exporters\n", 1)[1].split("\n## ", 1)[0]
    paragraph = section.split("The alerts about an exporter process itself stay per replica", 1)[1]
    paragraph = paragraph.split("\n\n", 1)[0]
    assert set(re.findall(r"`(Ledger\w+)`", paragraph)) == per_replica_alerts()
