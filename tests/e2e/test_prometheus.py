"""A real Prometheus scraping the real ``ledger-exporter`` process that polls a simulated
network (issue 3): what a user's Prometheus stores and answers over its HTTP API.

Prometheus asks for OpenMetrics first, so this also proves the OpenMetrics exposition is
ingested without a scrape error. It fails without the ``prometheus`` binary (``make tools``
installs it).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from exporter.bounds import DropKind
from exporter.expose import metrics
from exporter.model.snapshot import CycleStage
from ledger_simulator import SimulatedNetwork
from tests.support.processes import ExporterProcess, ready_exporter
from tests.support.prometheus import PrometheusServer, PrometheusServers
from tests.support.simulator import tracked_pairs

pytestmark = pytest.mark.integration

JOB = "ledger-exporter"
# timeout, connection, http_status, invalid_json, invalid_response, too_large, tls, certificate
# (verification failed) and identity_mismatch (not the pinned node), each from the first cycle
REASONS = 9
ENDPOINTS = 3  # health, blockchain and block (a checkpoint is known after the first cycle)
HTTP_PHASES = 4  # resolve, connect, processing, transfer: no tls phase over plain http


@pytest.fixture
def network() -> Iterator[SimulatedNetwork]:
    with SimulatedNetwork(nodes=3, chains=2, block_interval=0.5, seed=7) as net:
        yield net


@pytest.fixture
def exporter(network: SimulatedNetwork, tmp_path: Path) -> Iterator[ExporterProcess]:
    """``python -m exporter --config.file ...`` polling every simulated node each second."""
    config = tmp_path / "config.yml"
    nodes = [{"name": name, "url": url} for name, url in network.node_urls.items()]
    config.write_text(
        yaml.safe_dump({"scrape_interval": "1s", "scrape_timeout": "800ms", "nodes": nodes})
    )
    with ready_exporter(config) as process:
        yield process


def laggard_pairs(network: SimulatedNetwork) -> set[tuple[str, str]]:
    """The (node, chain) pairs of each chain's laggard, a node 4 to 10 blocks behind."""
    laggards = network.topology.laggards
    return {
        (node, chain)
        for node, chain in tracked_pairs(network)
        if laggards[network.topology.chain_index(chain)] == network.topology.node_index(node)
    }


#: Series present only while a vote session is open.
SESSION_SERIES = (
    "ledger_blockchain_vote_round",
    "ledger_blockchain_vote_session_age_seconds",
    "ledger_blockchain_vote_consensus_required",
)


#: Families this exporter never writes: the simulator here serves plain http (the node TLS
#: families), it has no --state.file, no web config serving TLS and no node_files.
ABSENT_HERE = (
    metrics.NODE_TLS_CERT_EXPIRY,
    metrics.NODE_TLS_INFO,
    metrics.STATE_FILE_WRITE_FAILURES,
    metrics.TLS_CERT_EXPIRY,
    metrics.NODE_FILE_READ_OK,
)


def expected_series_counts(network: SimulatedNetwork) -> dict[str, int]:
    """Series per metric name for a healthy network (vote_round comes and goes)."""
    nodes, pairs = len(network.node_names), tracked_pairs(network)
    features = sum(len(network.blockchain(node, chain)["features"]) for node, chain in pairs)
    counts: dict[str, int] = {}
    for spec in metrics.ALL:
        if spec in metrics.PROBE_ONLY:
            continue  # /probe answers those, not /metrics
        if spec in metrics.MAINTENANCE_FAMILIES:
            continue  # nor maintenance entries
        if spec in metrics.WATCH_FAMILIES:
            continue  # this exporter's config has no watch list
        if spec in ABSENT_HERE:
            continue
        if spec.name.startswith("ledger_exporter_"):
            counts[spec.name] = 1
        elif spec.name.startswith("ledger_node_"):
            counts[spec.name] = nodes
        else:
            counts[spec.name] = len(pairs)
    counts["ledger_node_scrape_errors_total"] = nodes * ENDPOINTS * REASONS
    counts["ledger_exporter_dropped_values_total"] = nodes * len(DropKind)
    counts["ledger_exporter_cycle_failures_total"] = len(CycleStage)  # each stage from 0
    chains = len({chain for _, chain in pairs})
    for spec in metrics.NETWORK_FAMILIES:  # per chain, once, or per node as their labels say
        if "node" not in spec.labels:
            counts[spec.name] = chains if "blockchain" in spec.labels else 1
    counts["ledger_blockchain_feature_enabled"] = features
    counts["ledger_blockchain_leader_failed_rounds_total"] = sum(  # a series per council key
        len(set(network.blockchain(node, chain)["councilMembers"])) for node, chain in pairs
    )
    for coming_and_going in SESSION_SERIES:
        del counts[coming_and_going]
    return counts


def test_prometheus_scrapes_and_stores_every_node_and_chain(
    prometheus: PrometheusServers, network: SimulatedNetwork, exporter: ExporterProcess
) -> None:
    server = prometheus.start({JOB: [f"127.0.0.1:{exporter.port}"]})
    [target] = server.wait_for_scrapes(timeout=20)
    assert target["lastError"] == ""
    assert target["scrapeUrl"] == f"{exporter.base}/metrics"
    assert server.values(f'up{{job="{JOB}"}}') == {(): 1.0}
    assert server.values(f'scrape_samples_scraped{{job="{JOB}"}}')[()] > 0
    assert server.values("ledger_node_up", "node") == {(n,): 1.0 for n in network.node_names}

    first = server.values("ledger_blockchain_height", "node", "blockchain")
    assert set(first) == tracked_pairs(network) and len(first) == 5
    server.wait_for(
        "ledger_blockchain_height",
        lambda result: (
            len(result) == len(first)
            and all(
                float(s["value"][1]) > first[s["metric"]["node"], s["metric"]["blockchain"]]
                for s in result
            )
        ),
        timeout=10,
    )

    counts = server.values(
        f'count by (__name__) ({{__name__=~"ledger_.+", job="{JOB}"}})', "__name__"
    )
    vote_rounds = counts.pop(("ledger_blockchain_vote_round",), 0)
    for coming_and_going in SESSION_SERIES[1:]:  # with the sessions, as vote_round
        assert counts.pop((coming_and_going,), 0) == vote_rounds
    # The checkpoint follows the height a majority reached (issue 19): a chain's laggard more
    # than checkpoint_depth blocks behind is not asked for its block, so it has no agreement
    # sample, its node's block counters and request phases start only with its first block
    # request, and its reorganisations counter with its first checkpoint block read.
    agreeing = counts.pop(("ledger_blockchain_checkpoint_agrees",))
    reorgs = counts.pop(("ledger_blockchain_reorgs_total",))
    phases = counts.pop(("ledger_node_request_duration_seconds",))
    errors = counts.pop(("ledger_node_scrape_errors_total",))
    expected = expected_series_counts(network)
    laggards = laggard_pairs(network)
    assert len(tracked_pairs(network)) - len(laggards) <= agreeing <= len(tracked_pairs(network))
    reorganising = server.values("ledger_blockchain_reorgs_total", "node", "blockchain")
    assert tracked_pairs(network) - laggards <= set(reorganising) <= tracked_pairs(network)
    assert reorgs == len(reorganising) and set(reorganising.values()) == {0.0}
    always_asked = {node for node, _ in tracked_pairs(network) - laggards}
    asked = server.values(
        'count by (node) (ledger_node_scrape_errors_total{endpoint="block"})', "node"
    )
    assert always_asked <= {node for (node,) in asked}
    assert (
        errors
        == expected.pop("ledger_node_scrape_errors_total")
        - (len(network.node_names) - len(asked)) * REASONS
    )
    nodes = len(network.node_names)
    assert phases == ((ENDPOINTS - 1) * nodes + len(asked)) * HTTP_PHASES
    for popped in ("checkpoint_agrees", "reorgs_total"):
        del expected[f"ledger_blockchain_{popped}"]
    del expected["ledger_node_request_duration_seconds"]
    assert counts == {(name,): n for name, n in expected.items()}
    assert vote_rounds <= len(first)
    assert_ingested_as_openmetrics(server)


def assert_ingested_as_openmetrics(server: PrometheusServer) -> None:
    """OpenMetrics names a counter family without ``_total`` (the text format keeps it), so
    Prometheus's metadata shows which parser read the scrape."""
    family = server.metadata(JOB, "ledger_node_scrape_errors")
    assert [found["type"] for found in family] == ["counter"], "not read as OpenMetrics"
    assert server.metadata(JOB, "ledger_node_scrape_errors_total") == []
    [target] = server.targets()
    assert target["health"] == "up" and target["lastError"] == ""
