"""End to end over real sockets: what hostile nodes send cannot blind the exporter.

Ten healthy fake nodes are polled beside nodes that send lone UTF-16 surrogates (escaped and
as raw ED A0 80 bytes) in a chain id, ``nodeVersion`` and feature names, a 2 MB Go duration,
a 4 MB ``nodeVersion``, a chain named ``..``, and 20 chains of 100,000 feature flags each
(read until its read budget is spent). Every healthy node stays
up cycle after cycle, every poll ends, and ``/metrics`` (both formats) and ``/`` answer with
bounded bodies that say what was dropped.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from exporter.app import Exporter
from exporter.bounds import DEFAULT_MAX_FEATURES_PER_CHAIN
from exporter.config.exporter import Config
from exporter.config.nodes import NodeConfig
from exporter.model.snapshot import Snapshot
from tests.support.documents import chain_doc, health_doc
from tests.support.fakenode import FakeNode, FakeNodes
from tests.support.http import fetch
from tests.support.waiting import wait_until

HEALTHY = 10
FLAG_CHAINS = 20
FLAGS = 100_000
RAW_SURROGATE = b"\xed\xa0\x80"  # what a node's UTF-8 encoder makes of U+D800 if unchecked
OPENMETRICS = "application/openmetrics-text;version=1.0.0"
#: Far above what the bounded exposition needs (about 5,000 series), far below the
#: 2,000,000 feature series the flags node would give unbounded.
MAX_BODY_BYTES = 2_000_000


def _surrogate_node(node: FakeNode) -> None:
    """Surrogates in a chain id (escaped and raw), nodeVersion and feature names."""
    health = json.dumps(health_doc(["c1", "c\ud800", "RAW"], version="1.4.2\ud800"))
    node.set(
        "/health", health.replace("RAW", "c" + RAW_SURROGATE.decode("latin-1")).encode("latin-1")
    )
    features = {"enableTxProof": True, "bad\ud800": True}
    chain = json.dumps(chain_doc(10, features=features, keyType="RAW"))
    node.set(
        "/blockchains/c1", chain.replace("RAW", RAW_SURROGATE.decode("latin-1")).encode("latin-1")
    )


def _duration_bomb_node(node: FakeNode) -> None:
    """A 2 MB Go duration of "0s" parts (valid Go, and once 0.8 s of CPU to parse)."""
    node.set("/health", health_doc(["c1"]))
    consensus = {**chain_doc(10)["consensus"], "consensusTimeout": "0s" * 1_000_000}
    node.set("/blockchains/c1", chain_doc(10, consensus=consensus))


def _long_version_node(node: FakeNode) -> None:
    node.set("/health", health_doc(["c1"], version="v" * 4_000_000))
    node.set("/blockchains/c1", chain_doc(10))


def _flags_node(node: FakeNode) -> None:
    """20 chains of 100,000 feature flags: 2,000,000 series unbounded."""
    chains = [f"f{index:02d}" for index in range(FLAG_CHAINS)]
    node.set("/health", health_doc(chains))
    flags = {f"flag-{index:06d}": index % 3 == 0 for index in range(FLAGS)}
    body = json.dumps(chain_doc(10, features=flags)).encode()
    for chain in chains:
        node.set(f"/blockchains/{chain}", body)


def _dot_dot_node(node: FakeNode) -> None:
    """A chain named ``..``: unnormalised, it would ask the node's base path instead."""
    node.set("/health", health_doc(["..", "c1"]))
    node.set("/blockchains/%2E%2E", chain_doc(7))
    node.set("/blockchains/c1", chain_doc(10))
    node.set("/", chain_doc(999))  # what a normalised ``/blockchains/..`` would reach


HOSTILE = {
    "surrogates": _surrogate_node,
    "dot-dot": _dot_dot_node,
    "duration-bomb": _duration_bomb_node,
    "long-version": _long_version_node,
    "flags": _flags_node,
}


@pytest.fixture(scope="module")
def exporter_url() -> Iterator[tuple[str, Exporter, dict[str, FakeNode]]]:
    nodes = FakeNodes()
    configs = []
    for index in range(HEALTHY):
        node = nodes.start()
        node.play(health_doc(["c1", "c2"]), {"c1": chain_doc(100), "c2": chain_doc(200)})
        configs.append(NodeConfig(f"healthy-{index}", node.url))
    hostile: dict[str, FakeNode] = {}
    for name, serve in HOSTILE.items():
        node = hostile[name] = nodes.start()
        serve(node)
        configs.append(NodeConfig(name, node.url))
    # generous: the deadline is not what is tested; every node answers well within it
    config = Config(nodes=tuple(configs), scrape_interval=8.0, scrape_timeout=8.0)
    exporter = Exporter(config)
    server = exporter.start("127.0.0.1:0")
    try:
        yield f"http://127.0.0.1:{server.port}", exporter, hostile
    finally:
        exporter.stop()
        nodes.stop_all()


def _next_snapshot(exporter: Exporter, after: float | None) -> Snapshot:
    """The first snapshot completed after ``after`` (None: the first one)."""

    def published() -> Snapshot | None:
        snapshot = exporter.exposition().snapshot
        done = snapshot.completed_at is not None and snapshot.completed_at != after
        return snapshot if done else None

    found: Snapshot = wait_until(published, timeout=120, message="no polling cycle completed")
    return found


def _samples(body: bytes) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(body.decode("utf-8"))
        for sample in family.samples
    }


def _value(
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str
) -> float | None:
    return samples.get((name, tuple(sorted(labels.items()))))


def test_hostile_answers_leave_healthy_nodes_up_and_the_exposition_bounded(
    exporter_url: tuple[str, Exporter, dict[str, FakeNode]],
) -> None:
    url, exporter, hostile = exporter_url
    first = _next_snapshot(exporter, None)
    second = _next_snapshot(exporter, first.completed_at)
    for snapshot in (first, second):
        up = {node.name: node.up for node in snapshot.nodes}
        assert up == {node.name: True for node in snapshot.nodes}, up  # hostile ones too
        for node in snapshot.nodes:
            if node.name.startswith("healthy-"):
                assert [(c.blockchain, c.up) for c in node.chains] == [("c1", True), ("c2", True)]
            assert node.error is None  # never "the previous poll has not ended"

    answers = [
        fetch(f"{url}/metrics", headers={"Accept": "text/plain"}, timeout=30),
        fetch(f"{url}/metrics", headers={"Accept": OPENMETRICS}, timeout=30),
        fetch(f"{url}/", timeout=30),
    ]
    assert [answer.status for answer in answers] == [200] * 3
    text, openmetrics, page = (answer.body for answer in answers)
    for body in (text, openmetrics, page):
        assert len(body) < MAX_BODY_BYTES
        body.decode("utf-8")  # strict: no surrogate got through
    assert openmetrics.endswith(b"# EOF\n")

    samples = _samples(text)
    dropped = "ledger_exporter_dropped_values_total"
    # The flags node's answers are costly to read: its poll may spend its read budget before
    # every chain is read. Those it read keep their first 100 flags; the rest are refused
    # unread (too_large), never timed out, and never hold up the healthy nodes.
    flag_chains_read = sum(
        1
        for name, labels in samples
        if name == "ledger_blockchain_up" and ("node", "flags") in labels
        if samples[(name, labels)] == 1.0
    )
    assert flag_chains_read >= 1
    flags_kept = sum(
        1
        for name, labels in samples
        if name == "ledger_blockchain_feature_enabled" and ("node", "flags") in labels
    )
    assert flags_kept == flag_chains_read * DEFAULT_MAX_FEATURES_PER_CHAIN
    errors = "ledger_node_scrape_errors_total"
    for endpoint in ("health", "blockchain"):
        assert _value(samples, errors, node="flags", endpoint=endpoint, reason="timeout") == 0.0
    if flag_chains_read < FLAG_CHAINS:
        refused = _value(samples, errors, node="flags", endpoint="blockchain", reason="too_large")
        assert refused is not None and refused >= FLAG_CHAINS - flag_chains_read
    per_chain = FLAGS - DEFAULT_MAX_FEATURES_PER_CHAIN
    feature_drops = _value(samples, dropped, node="flags", kind="feature")
    assert feature_drops is not None and feature_drops % per_chain == 0
    assert feature_drops >= flag_chains_read * per_chain

    # the surrogate node: its readable chain is polled, the two others skipped and counted
    assert _value(samples, "ledger_blockchain_up", node="surrogates", blockchain="c1") == 1.0
    chains = {
        labels
        for name, labels in samples
        if name == "ledger_blockchain_up" and ("node", "surrogates") in labels
    }
    assert len(chains) == 1
    invalid = _value(
        samples,
        "ledger_node_scrape_errors_total",
        node="surrogates",
        endpoint="health",
        reason="invalid_response",
    )
    assert invalid is not None and invalid >= 1
    info = _value(
        samples,
        "ledger_node_info",
        node="surrogates",
        node_version="",
        node_id="02ab" * 8,
        peer_id="12D3KooWpeer",
    )
    assert info == 1.0
    assert (
        _value(
            samples,
            "ledger_blockchain_feature_enabled",
            node="surrogates",
            blockchain="c1",
            feature="enableTxProof",
        )
        == 1.0
    )

    # the duration bomb: no sample for the bomb, the rest of its chain as usual
    timeout = "ledger_blockchain_consensus_timeout_seconds"
    assert _value(samples, timeout, node="duration-bomb", blockchain="c1") is None
    assert _value(samples, timeout, node="healthy-0", blockchain="c1") == 90.0
    assert (
        _value(samples, "ledger_blockchain_height", node="duration-bomb", blockchain="c1") == 10.0
    )

    # the 4 MB version is not a label; it is counted as a dropped label value
    info = _value(
        samples,
        "ledger_node_info",
        node="long-version",
        node_version="",
        node_id="02ab" * 8,
        peer_id="12D3KooWpeer",
    )
    assert info == 1.0
    label_drops = _value(samples, dropped, node="long-version", kind="label_value")
    assert label_drops is not None and label_drops >= 1
    assert _value(samples, dropped, node="healthy-0", kind="label_value") == 0.0

    # the chain named "..": asked for as such, never the node's base path
    assert _value(samples, "ledger_blockchain_height", node="dot-dot", blockchain="..") == 7.0
    received = hostile["dot-dot"].paths
    assert "/blockchains/%2E%2E" in received
    assert "/" not in received and "/blockchains/.." not in received
