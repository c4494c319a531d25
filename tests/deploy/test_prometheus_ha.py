"""The shipped Prometheus config for one server of a pair watching an exporter pair
(deploy/prometheus/ha.yml): promtool accepts it, its two exporter targets are one logical
exporter (one ``instance``, two ``exporter_replica``), and a real Prometheus 2.42 running it
gives the targets those labels, fills ``prometheus_replica`` from the environment, and sends
its alerts to both Alertmanagers without that label.

The real run changes only what must point at this test's processes: the targets' and
Alertmanagers' addresses, the rule files' paths and the intervals. Labels, relabeling and
external labels are the shipped ones.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml

from exporter.flags import DEFAULT_PORT
from ledger_simulator import SimulatedNetwork
from tests.support.alertmanager import RESEND_FLAG
from tests.support.http import fetch
from tests.support.monitoring import PROM_DIR
from tests.support.processes import ExporterProcess, ready_exporter
from tests.support.prometheus import PrometheusServers, Promtool
from tests.support.victoriametrics import AlertReceiver
from tests.support.waiting import wait_until

HA_CONFIG = PROM_DIR / "ha.yml"
JOB = "ledger-exporter"
FLAG = "--enable-feature=expand-external-labels"


def load() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(HA_CONFIG.read_text(encoding="utf-8"))
    return document


def exporter_groups(document: dict[str, Any]) -> list[dict[str, Any]]:
    """The static target groups of the exporter job."""
    [job] = [job for job in document["scrape_configs"] if job["job_name"] == JOB]
    groups: list[dict[str, Any]] = job["static_configs"]
    return groups


def test_promtool_check_config(promtool: Promtool) -> None:
    printed = promtool.check("check", "config", HA_CONFIG.name, cwd=PROM_DIR)
    assert "SUCCESS: 2 rule files found" in printed
    assert load()["rule_files"] == ["alerts.yml", "rules.yml"]


def test_the_two_replicas_are_one_logical_exporter() -> None:
    """One job, one target per group; the same `instance` (the pair's name: the rules'
    exporter identity is `job, instance`), a distinct `exporter_replica` (the mixin's
    replicaLabels), on the exporter's default port."""
    groups = exporter_groups(load())
    assert len(groups) == 2
    assert all(len(group["targets"]) == 1 for group in groups)
    labels = [group["labels"] for group in groups]
    assert all(set(one) == {"instance", "exporter_replica"} for one in labels)
    assert {one["instance"] for one in labels} == {"ledger-exporter"}
    assert sorted(one["exporter_replica"] for one in labels) == ["a", "b"]
    ports = {group["targets"][0].rpartition(":")[2] for group in groups}
    assert ports == {str(DEFAULT_PORT)}


def test_the_prometheus_pair_is_told_apart_and_its_alerts_are_not() -> None:
    """The external label comes from the environment (the flag the header names), and the
    alerts sent drop it, to both Alertmanagers."""
    document = load()
    assert document["global"]["external_labels"] == {"prometheus_replica": "${PROMETHEUS_REPLICA}"}
    alerting = document["alerting"]
    assert alerting["alert_relabel_configs"] == [
        {"action": "labeldrop", "regex": "prometheus_replica"}
    ]
    [alertmanagers] = alerting["alertmanagers"]
    [static] = alertmanagers["static_configs"]
    assert len(static["targets"]) == 2
    header = HA_CONFIG.read_text(encoding="utf-8").split("\nglobal:")[0]
    assert FLAG in header and "PROMETHEUS_REPLICA=" in header


@pytest.fixture
def network() -> Iterator[SimulatedNetwork]:
    with SimulatedNetwork(nodes=1, chains=1, block_interval=0.5, seed=45) as net:
        yield net


@pytest.fixture
def replicas(network: SimulatedNetwork, tmp_path: Path) -> Iterator[list[ExporterProcess]]:
    """Two exporter processes polling the same node, each with its own state file."""
    nodes = [{"name": name, "url": url} for name, url in network.node_urls.items()]
    config = tmp_path / "exporter.yml"
    config.write_text(yaml.safe_dump({"scrape_interval": "1s", "nodes": nodes}))
    with (
        ready_exporter(config, f"--state.file={tmp_path / 'a.json'}") as a,
        ready_exporter(config, f"--state.file={tmp_path / 'b.json'}") as b,
    ):
        yield [a, b]


@pytest.fixture
def alertmanagers() -> Iterator[list[AlertReceiver]]:
    """Two stand-ins for the Alertmanager pair, keeping what Prometheus posts."""
    receivers = [AlertReceiver(), AlertReceiver()]
    yield receivers
    for receiver in receivers:
        receiver.stop()


@pytest.mark.integration
def test_a_real_prometheus_runs_it(
    prometheus: PrometheusServers,
    replicas: list[ExporterProcess],
    alertmanagers: list[AlertReceiver],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    shipped = load()
    config = copy.deepcopy(shipped)
    config["global"].update(scrape_interval="1s", evaluation_interval="1s")
    config["rule_files"] = [str(PROM_DIR / name) for name in shipped["rule_files"]]
    [job] = [j for j in config["scrape_configs"] if j["job_name"] == JOB]
    job.update(scrape_interval="1s", scrape_timeout="1s")
    for group, replica in zip(job["static_configs"], replicas, strict=True):
        group["targets"] = [f"127.0.0.1:{replica.port}"]
    config["scrape_configs"] = [job]
    [static] = config["alerting"]["alertmanagers"][0]["static_configs"]
    static["targets"] = [receiver.url.removeprefix("http://") for receiver in alertmanagers]
    monkeypatch.setenv("PROMETHEUS_REPLICA", "prometheus-a")
    # (a firing alert is sent again every second, not every minute: the first evaluation
    # comes before the Alertmanagers are discovered, and what it sends is dropped)
    server = prometheus.create(extra_flags=[FLAG, RESEND_FLAG])
    server.config = config
    server.start()

    targets = server.wait_for_targets_up([JOB])
    by_replica = {target["labels"]["exporter_replica"]: target for target in targets}
    assert sorted(by_replica) == ["a", "b"]
    for name, replica in zip("ab", replicas, strict=True):
        assert by_replica[name]["labels"] == {
            "job": JOB,
            "instance": "ledger-exporter",
            "exporter_replica": name,
        }
        assert by_replica[name]["scrapeUrl"] == f"http://127.0.0.1:{replica.port}/metrics"
    # each replica's series: the same exporter identity, the same node, two replicas
    up = server.wait_for('ledger_node_up{job="ledger-exporter"}', lambda found: len(found) == 2)
    assert {(s["metric"]["instance"], s["metric"]["exporter_replica"]) for s in up} == {
        ("ledger-exporter", "a"),
        ("ledger-exporter", "b"),
    }
    assert len({s["metric"]["node"] for s in up}) == 1

    # the external label, filled from the environment, on what leaves this server
    loaded = yaml.safe_load(server.api("status/config")["yaml"])
    assert loaded["global"]["external_labels"] == {"prometheus_replica": "prometheus-a"}
    federated = fetch(server.url + "/federate", params={"match[]": 'up{job="ledger-exporter"}'})
    assert federated.status == 200
    lines = [line for line in federated.text.splitlines() if line.startswith("up{")]
    assert len(lines) == 2 and all('prometheus_replica="prometheus-a"' in line for line in lines)

    # ...but not on its alerts, which both Alertmanagers receive
    for receiver in alertmanagers:
        [first, *_] = wait_until(
            partial(receiver.alerts, "LedgerWatchdog"),
            timeout=30,
            message="the watchdog never reached both Alertmanagers",
        )
        assert "prometheus_replica" not in first["labels"], json.dumps(first)
