"""Probe mode with a real Prometheus (issue 11): the shipped scrape configs
(deploy/prometheus/probe.yml and its two hashmod shards) discover simulated nodes from a
file_sd file and scrape the real exporter's /probe through relabeling; the shipped global
view (probe-global.yml) federates both shards and evaluates the rules that compare nodes.

Only what a test must change is changed: the file_sd path, the exporter's address, and the
scrape interval. Relabeling, parameters and paths are the shipped ones.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
import yaml

from ledger_simulator import SimulatedNetwork
from tests.support.monitoring import PROM_DIR
from tests.support.ports import closed_port_url
from tests.support.processes import ExporterProcess, ready_exporter
from tests.support.prometheus import PrometheusServer, PrometheusServers, Sample
from tests.support.simulator import tracked_pairs
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration
JOB = "ledger-probe"
NODES = 6


@pytest.fixture
def network() -> Iterator[SimulatedNetwork]:
    with SimulatedNetwork(nodes=NODES, chains=2, block_interval=0.5, seed=11) as net:
        yield net


@pytest.fixture
def exporter(network: SimulatedNetwork, tmp_path: Path) -> Iterator[ExporterProcess]:
    """A probe-only exporter allowed to probe exactly the simulated nodes' URLs."""
    base = network.node_urls["node-1"].split("/nodes/")[0].replace(".", r"\.")
    config = tmp_path / "exporter.yml"
    probe = {"allowed_targets": [rf"{base}/nodes/node-[0-9]+/"]}
    config.write_text(yaml.safe_dump({"scrape_timeout": "5s", "probe": probe}))
    with ready_exporter(config) as process:
        yield process


def write_targets(network: SimulatedNetwork, directory: Path) -> Path:
    """A file_sd file listing every node's URL, labelled with its name."""
    groups = [
        {"targets": [url], "labels": {"node": name}} for name, url in network.node_urls.items()
    ]
    path = directory / "targets" / "nodes.yml"
    path.parent.mkdir(parents=True)
    path.write_text(yaml.safe_dump(groups))
    return path


def probing_prometheus(
    prometheus: PrometheusServers, config_name: str, targets: Path, exporter: ExporterProcess
) -> PrometheusServer:
    """A Prometheus (not started yet) running a shipped config: its ledger-probe job pointed
    at this test's file and exporter, its rule files and its external labels."""
    document = yaml.safe_load((PROM_DIR / config_name).read_text(encoding="utf-8"))
    [job] = [copy.deepcopy(j) for j in document["scrape_configs"] if j["job_name"] == JOB]
    job["file_sd_configs"] = [{"files": [str(targets)], "refresh_interval": "1s"}]
    last = job["relabel_configs"][-1]
    assert last["target_label"] == "__address__", "the exporter's address is the last rule"
    last["replacement"] = f"127.0.0.1:{exporter.port}"
    job["scrape_interval"] = job["scrape_timeout"] = "2s"
    rules = [PROM_DIR / name for name in document["rule_files"]]
    server = prometheus.create(rule_files=rules)
    server.config["scrape_configs"] = [job]
    if "external_labels" in document["global"]:
        server.config["global"]["external_labels"] = document["global"]["external_labels"]
    return server


def hashmod_shard(value: str, modulus: int) -> int:
    """Prometheus's `hashmod`: the md5's last 8 bytes as a big-endian integer, mod modulus."""
    return int.from_bytes(hashlib.md5(value.encode()).digest()[8:], "big") % modulus


def count_is(count: int) -> Callable[[list[Sample]], bool]:
    """A wait_for predicate: the query gives exactly ``count`` samples."""
    return lambda result: len(result) == count


def discovered(server: PrometheusServer) -> tuple[int, int]:
    """(active, dropped) targets of the probe job, once every node has been discovered."""
    counts = [(0, 0)]

    def every_node() -> bool:
        data = server.api("targets")
        active = [t for t in data["activeTargets"] if t["labels"].get("job") == JOB]
        counts[0] = len(active), len(data["droppedTargets"])
        return sum(counts[0]) == NODES

    wait_until(every_node, interval=0.2, message=lambda: f"(active, dropped) {counts[0]}")
    return counts[0]


def test_file_sd_and_relabeling_give_every_nodes_series(
    network: SimulatedNetwork,
    exporter: ExporterProcess,
    tmp_path: Path,
    prometheus: PrometheusServers,
) -> None:
    targets = write_targets(network, tmp_path)
    with probing_prometheus(prometheus, "probe.yml", targets, exporter) as server:
        urls = network.node_urls
        found = server.wait_for(
            f'ledger_probe_success{{job="{JOB}"}} == 1',
            count_is(NODES),
            timeout=30,
        )
        assert {s["metric"]["instance"] for s in found} == set(urls.values())
        [target, *_] = server.targets()
        assert target["scrapeUrl"].startswith(f"{exporter.base}/probe?")
        assert "module=default" in target["scrapeUrl"]

        pairs = tracked_pairs(network)
        heights = server.wait_for("ledger_blockchain_height", count_is(len(pairs)), timeout=20)
        assert {(s["metric"]["node"], s["metric"]["blockchain"]) for s in heights} == pairs
        for sample in heights:  # each node's series come from its own probe
            assert sample["metric"]["instance"] == urls[sample["metric"]["node"]]
        assert server.values("ledger_node_up", "node") == {(name,): 1.0 for name in urls}
        assert server.query('{exported_node!=""}') == []  # relabeling left no clash
        # the probe-mode recording rules, evaluated on what the probes brought
        for rule in ("job:ledger_probe_success:sum", "job:ledger_probe_success:count"):
            [sample] = server.wait_for(f"{rule} == {NODES}", count_is(1), timeout=20)
            assert sample["metric"] == {"__name__": rule, "job": JOB}


def test_two_hashmod_shards_hold_every_node_exactly_once(
    network: SimulatedNetwork,
    exporter: ExporterProcess,
    tmp_path: Path,
    prometheus: PrometheusServers,
) -> None:
    targets = write_targets(network, tmp_path)
    urls = network.node_urls
    expected = {
        shard: {name for name, url in urls.items() if hashmod_shard(url, 2) == shard}
        for shard in (0, 1)
    }
    servers = [
        probing_prometheus(prometheus, f"probe-shard-{shard}.yml", targets, exporter)
        for shard in (0, 1)
    ]
    for server in servers:
        server.start()
    held: dict[int, set[str]] = {}
    for shard, server in enumerate(servers):
        active, dropped = discovered(server)
        assert (active, dropped) == (len(expected[shard]), NODES - len(expected[shard]))
        found = server.wait_for("ledger_node_up == 1", count_is(len(expected[shard])), timeout=30)
        held[shard] = {sample["metric"]["node"] for sample in found}
    assert held == expected
    assert held[0] | held[1] == set(urls)
    assert not held[0] & held[1]
    assert_global_view(prometheus, servers, network, held)


def assert_global_view(
    prometheus: PrometheusServers,
    shards: list[PrometheusServer],
    network: SimulatedNetwork,
    held: dict[int, set[str]],
) -> None:
    """The shipped probe-global.yml, federating both shards, evaluates the rules that compare
    nodes over all of them: every node's lag behind its chain's highest node."""
    document = yaml.safe_load((PROM_DIR / "probe-global.yml").read_text(encoding="utf-8"))
    [job] = document["scrape_configs"]
    job["static_configs"] = [{"targets": [shard.url.removeprefix("http://") for shard in shards]}]
    job["scrape_interval"] = job["scrape_timeout"] = "2s"
    server = prometheus.create(rule_files=[PROM_DIR / name for name in document["rule_files"]])
    server.config["scrape_configs"] = [job]
    with server:
        pairs = tracked_pairs(network)
        lag = server.wait_for(
            "node_blockchain:ledger_blockchain_height:lag", count_is(len(pairs)), timeout=30
        )
        assert {(s["metric"]["node"], s["metric"]["blockchain"]) for s in lag} == pairs
        shard_of = {node: str(shard) for shard, nodes in held.items() for node in nodes}
        assert {s["metric"]["node"]: s["metric"]["shard"] for s in lag} == {
            node: shard_of[node] for node, _ in pairs
        }
        server.wait_for(f"job:ledger_probe_success:sum == {NODES}", count_is(1), timeout=20)


def test_kubernetes_scrapeconfig_relabeling_in_a_real_prometheus(
    prometheus: PrometheusServers,
) -> None:
    """The relabeling of deploy/kubernetes/probe/scrapeconfig.yaml, run by Prometheus on the
    labels Kubernetes SD gives a Service (set by hand: no cluster here). The scrape goes to
    a closed local port: what matters is the URL and labels Prometheus builds."""
    spec = yaml.safe_load(
        (PROM_DIR.parent / "kubernetes" / "probe" / "scrapeconfig.yaml").read_text()
    )["spec"]
    keys = {"sourceLabels": "source_labels", "targetLabel": "target_label"}
    rules = [{keys.get(k, k): v for k, v in rule.items()} for rule in spec["relabelings"]]
    port = closed_port_url().split(":")[2].rstrip("/")
    rules[-1]["replacement"] = f"127.0.0.1:{port}"

    def service(name: str, port_name: str) -> dict[str, Any]:
        meta = {
            "__meta_kubernetes_namespace": "ledger",
            "__meta_kubernetes_service_name": name,
            "__meta_kubernetes_service_port_name": port_name,
            "__meta_kubernetes_service_port_number": "7740",
        }
        return {"targets": [f"{name}.ledger.svc:7740"], "labels": meta}

    job = {
        "job_name": spec["jobName"],
        "metrics_path": spec["metricsPath"],
        "params": spec["params"],
        "scrape_interval": "1s",
        "scrape_timeout": "1s",
        "static_configs": [service("validator-2", "api"), service("validator-2", "metrics")],
        "relabel_configs": rules,
    }
    server = prometheus.create()
    server.config["scrape_configs"] = [job]
    with server:
        wait_until(server.targets, interval=0.2, message="no target discovered")
        [target] = server.targets()  # the `metrics` port was dropped
        target_url = "http://validator-2.ledger.svc:7740/"
        assert target["labels"] == {"instance": target_url, "job": spec["jobName"]}
        expected = urlencode({"module": "default", "node": "validator-2", "target": target_url})
        assert target["scrapeUrl"] == f"http://127.0.0.1:{port}/probe?{expected}"
