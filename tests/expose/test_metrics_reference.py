"""docs/metrics.md, the metric reference: exactly what ``make docs`` generates from the code,
and it documents every family a real exporter serves over the simulator (/metrics with nodes
up and down, watch lists and dropped values; /probe), with the type and labels it serves,
and nothing the exporter does not serve."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from exporter.bounds import DropKind
from exporter.model.fields import CONTRACT_STATUSES, PERMISSIONS
from exporter.model.reasons import Reason
from exporter.model.watch_readings import WatchKind
from exporter.poll.history import ENDPOINTS
from tests.support import metrics_reference
from tests.support.http import fetch
from tests.support.ports import closed_port_url
from tests.support.processes import ExporterProcess, ready_exporter
from tests.support.simulator import simulate
from tests.support.testdata import REPO
from tests.support.waiting import wait_until
from tools import render_docs

#: The static labels config/example.yml gives its nodes.
STATIC_LABELS = {"region", "role"}


def test_the_committed_page_is_what_the_code_generates() -> None:
    committed = (REPO / render_docs.TARGET).read_text(encoding="utf-8")
    assert committed == render_docs.render(), "docs/metrics.md is stale: run `make docs`"


def test_the_check_mode_fails_on_a_stale_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert render_docs.main(["--check"]) == 0
    for path in (render_docs.ALERTS, render_docs.RULES, render_docs.TARGET):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text((REPO / path).read_text(encoding="utf-8"))
    (tmp_path / render_docs.DASHBOARDS).mkdir(parents=True)  # no dashboard: fewer readers
    monkeypatch.setattr(render_docs, "ROOT", tmp_path)
    assert render_docs.main(["--check"]) == 1
    assert "run `make docs`" in capsys.readouterr().err
    assert render_docs.main([]) == 0  # make docs
    assert render_docs.main(["--check"]) == 0
    assert 'dashboard "' not in (tmp_path / render_docs.TARGET).read_text(encoding="utf-8")


def test_label_values_listed_are_the_codes() -> None:
    """The label table's value lists (the catalogue's ``LABELS``) are the code's enums."""
    values = metrics_reference.label_values
    assert values("reason") == tuple(reason.value for reason in Reason)
    endpoints = (*ENDPOINTS, "block", *(kind.value for kind in WatchKind))
    assert values("endpoint") == endpoints
    assert values("kind") == tuple(kind.value for kind in DropKind)
    assert values("status") == CONTRACT_STATUSES
    assert values("permission") == PERMISSIONS


def test_the_mixin_readers_are_named() -> None:
    page = (REPO / render_docs.TARGET).read_text(encoding="utf-8")
    section = page.split("### `ledger_node_up`\n", 1)[1].split("\n### ", 1)[0]
    assert "alert `LedgerNodeDown`" in section
    assert "rule `job:ledger_node_up:sum`" in section
    assert 'dashboard "Ledger / Exporter", variable `$job`' in page


def test_an_alert_on_a_recording_rule_reads_the_rules_families(tmp_path: Path) -> None:
    rules = {
        "groups": [
            {
                "name": "g",
                "rules": [
                    {"record": "job:ledger_node_up:sum", "expr": "sum by (job) (ledger_node_up)"},
                    {"record": "job:ledger_node_up:min", "expr": "min(job:ledger_node_up:sum)"},
                ],
            }
        ]
    }
    alerts = {
        "groups": [
            {
                "name": "g",
                "rules": [
                    {
                        "alert": "Down",
                        "expr": "job:ledger_node_up:min < 1 and ledger_blockchain_up == 0",
                    }
                ],
            }
        ]
    }
    for path, document in ((render_docs.RULES, rules), (render_docs.ALERTS, alerts)):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(yaml.safe_dump(document), encoding="utf-8")
    (tmp_path / render_docs.DASHBOARDS).mkdir(parents=True)
    used = render_docs.users(tmp_path, {"ledger_node_up", "ledger_blockchain_up"})
    assert used == {
        "ledger_node_up": [
            "rule `job:ledger_node_up:sum`",
            "rule `job:ledger_node_up:min`",
            "alert `Down`",
        ],
        "ledger_blockchain_up": ["alert `Down`"],
    }


# --- every family a real exporter serves is documented, with its type and labels ----------


def served(text: str) -> dict[str, tuple[str, set[str]]]:
    """Family (sample name) -> its type and every label its samples carry."""
    found: dict[str, tuple[str, set[str]]] = {}
    for family in text_string_to_metric_families(text):
        name = family.name + ("_total" if family.type == "counter" else "")
        labels = {label for sample in family.samples for label in sample.labels}
        found[name] = (family.type, labels)
    return found


@pytest.fixture
def exporter(tmp_path: Path) -> Iterator[tuple[ExporterProcess, str]]:
    """The example config over a simulator process, plus a node that is down (and in
    maintenance) from a node file, a chain in maintenance, bounds low enough to drop values,
    a state file, and /probe allowed on the simulator; with the simulator's ``node-1`` URL."""
    with simulate() as (_, urls):
        config = yaml.safe_load((REPO / "config" / "example.yml").read_text(encoding="utf-8"))
        for node in config["nodes"]:
            node["url"] = urls[node["url"].rstrip("/").rsplit("/", 1)[1]]
        # a node from a node file (maintenance names it): the file's own gauge is served
        (tmp_path / "nodes.d").mkdir()
        down = [{"name": "down-1", "url": closed_port_url()}]
        (tmp_path / "nodes.d" / "down.yml").write_text(yaml.safe_dump(down), encoding="utf-8")
        config["node_files"] = ["nodes.d/*.yml"]
        config |= {"scrape_interval": "1s", "scrape_timeout": "1s", "max_features_per_chain": 1}
        base = re.escape(urls["node-1"].split("/nodes/")[0])
        config["probe"] = {"allowed_targets": [base + "/.*"], "modules": {"default": {}}}
        far = "2100-01-01T00:00:00Z"  # entries that apply for the whole test
        config["maintenance"] = [
            {"node": "down-1", "until": far, "reason": "disk swap"},
            {"blockchain": "some-chain", "until": far, "reason": "chain upgrade"},
        ]
        path = tmp_path / "config.yml"
        path.write_text(yaml.safe_dump(config), encoding="utf-8")
        with ready_exporter(path, f"--state.file={tmp_path / 'state.json'}") as process:
            yield process, urls["node-1"]


#: What only /probe serves; /metrics serves every other documented family in the run above.
PROBE_ONLY = {"ledger_probe_success", "ledger_probe_duration_seconds"}
#: What only a node polled over https has (the example config's are http):
#: tests/e2e/test_transport.py reads them from an https simulator.
HTTPS_ONLY = {"ledger_node_tls_cert_expiry_timestamp_seconds", "ledger_node_tls_info"}
#: What only an exporter serving TLS has (this one serves plain HTTP):
#: tests/e2e/test_live_reload.py reads it over TLS.
SERVING_TLS_ONLY = {"ledger_exporter_tls_cert_expiry_timestamp_seconds"}


@pytest.mark.integration
def test_every_family_served_is_documented(exporter: tuple[ExporterProcess, str]) -> None:
    process, node_url = exporter
    documented = metrics_reference.families()
    expected = documented.keys() - PROBE_ONLY - HTTPS_ONLY - SERVING_TLS_ONLY
    seen: dict[str, tuple[str, set[str]]] = {}

    def complete() -> dict[str, tuple[str, set[str]]] | None:
        seen.update(found := served(fetch(process.base + "/metrics", timeout=20).text))
        return found if found.keys() >= expected else None

    metrics = wait_until(
        complete,
        timeout=180,
        message=lambda: f"/metrics never served {sorted(expected - seen.keys())}: {process.log()}",
    )
    probe_url = process.base + "/probe?" + urlencode({"target": node_url, "module": "default"})
    probe = served(fetch(probe_url, timeout=20).text)
    assert probe.keys() >= PROBE_ONLY
    for where, found in (("/metrics", metrics), ("/probe", probe)):
        for name, (kind, labels) in found.items():
            assert name in documented, f"{where} serves {name}, missing from docs/metrics.md"
            assert kind == documented[name].kind, f"{where} {name}: {kind}"
            extra = labels - documented[name].labels - STATIC_LABELS
            assert not extra, f"{where} {name} has labels {extra} docs/metrics.md does not list"
