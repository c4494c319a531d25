"""The direct renderer writes exactly what client_python writes for the same snapshot."""

from __future__ import annotations

from array import array
from dataclasses import replace

import pytest
from prometheus_client import exposition, openmetrics
from prometheus_client.registry import CollectorRegistry

from exporter.collector import snapshot_collectors
from exporter.readings import ChainReading
from exporter.render import (
    CHUNK_LINES,
    Renderer,
    chunk_counts,
    openmetrics_format,
    text_format,
)
from exporter.snapshot import ErrorCounts, Snapshot
from tests.test_collector import CASES, GOLDEN, poll_golden_case


def _client_python(snapshot: Snapshot, om: bool) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    for collector in snapshot_collectors(snapshot):
        registry.register(collector)
    if om:
        rendered: bytes = openmetrics.exposition.generate_latest(registry)  # type: ignore[no-untyped-call]
        return rendered.removesuffix(b"# EOF\n")
    return exposition.generate_latest(registry)


@pytest.mark.parametrize("case", CASES)
def test_same_bytes_as_client_python(case: str) -> None:
    snapshot = poll_golden_case(GOLDEN / case)
    renderer = Renderer()
    for _ in range(2):  # the second time through the label cache
        assert text_format(renderer, snapshot) == _client_python(snapshot, om=False)
        assert openmetrics_format(renderer, snapshot) == _client_python(snapshot, om=True)


def test_label_cache_forgets_series_no_longer_written() -> None:
    snapshot = poll_golden_case(GOLDEN / "documented")
    renderer = Renderer()
    text_format(renderer, snapshot)
    assert renderer.cached_series() > 0
    text_format(renderer, Snapshot())
    assert renderer.cached_series() == 0


def test_escaping_of_label_values() -> None:
    snapshot = poll_golden_case(GOLDEN / "documented")
    odd = replace(snapshot.nodes[0], name='a"b\\c\nd', labels=(("zone", "x\ny"),))
    weird = replace(snapshot, nodes=(odd,))
    assert text_format(Renderer(), weird) == _client_python(weird, om=False)
    assert openmetrics_format(Renderer(), weird) == _client_python(weird, om=True)


def _plain(reading: ChainReading) -> ChainReading:
    return replace(reading, features=(), key_type="ed25519")


def _changed(snapshot: Snapshot, relabel: bool) -> Snapshot:
    """``snapshot`` one cycle later: every node down to its first chain, without feature
    flags and with another key type, its identity changed and a block error counted; the
    first node relabelled if ``relabel``."""

    nodes = []
    for index, node in enumerate(snapshot.nodes):
        chains = tuple(
            replace(c, reading=_plain(c.reading) if c.reading else None) for c in node.chains[:1]
        )
        health = node.health and replace(node.health, node_version="9.9.9")
        labels = (("zone", "moved"),) if relabel and index == 0 else node.labels
        counts = node.error_counts  # one endpoint more: the node's first block request
        wider = ErrorCounts(
            (*counts.keys, ("block", "timeout")), counts.counts + array("Q", [7]).tobytes()
        )
        nodes.append(replace(node, labels=labels, chains=chains, health=health, error_counts=wider))
    return replace(snapshot, nodes=tuple(nodes))


@pytest.mark.parametrize("relabel", [False, True])
@pytest.mark.parametrize("case", CASES)
def test_label_cache_follows_changed_nodes(case: str, relabel: bool) -> None:
    before = poll_golden_case(GOLDEN / case)
    after = _changed(before, relabel)
    renderer, fresh = Renderer(), Renderer()
    text_format(renderer, before)
    assert text_format(renderer, after) == _client_python(after, om=False)
    assert openmetrics_format(renderer, after) == _client_python(after, om=True)
    text_format(fresh, after)
    assert 0 < renderer.cached_series() == fresh.cached_series()


def test_families_longer_than_a_chunk_are_written_whole() -> None:
    snapshot = poll_golden_case(GOLDEN / "documented")
    many = tuple(
        replace(node, name=f"{node.name}-{index}")
        for index in range(CHUNK_LINES + 1)
        for node in snapshot.nodes
    )
    big = replace(snapshot, nodes=many, network=replace(snapshot.network, polled_peers=()))
    assert max(chunk_counts(Renderer(), big).values()) > 1
    assert text_format(Renderer(), big) == _client_python(big, om=False)
    assert openmetrics_format(Renderer(), big) == _client_python(big, om=True)
