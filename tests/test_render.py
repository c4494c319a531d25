"""The direct renderer writes exactly what client_python writes for the same snapshot."""

from __future__ import annotations

import pytest
from prometheus_client import exposition, openmetrics
from prometheus_client.registry import CollectorRegistry

from exporter.collector import snapshot_collectors
from exporter.render import Renderer, openmetrics_format, text_format
from exporter.snapshot import Snapshot
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
        families = renderer.samples(snapshot)
        assert text_format(families) == _client_python(snapshot, om=False)
        assert openmetrics_format(families) == _client_python(snapshot, om=True)


def test_label_cache_forgets_series_no_longer_written() -> None:
    snapshot = poll_golden_case(GOLDEN / "documented")
    renderer = Renderer()
    renderer.samples(snapshot)
    assert renderer._labels
    renderer.samples(Snapshot())
    assert renderer._labels == {}


def test_escaping_of_label_values() -> None:
    from dataclasses import replace

    snapshot = poll_golden_case(GOLDEN / "documented")
    odd = replace(snapshot.nodes[0], name='a"b\\c\nd', labels=(("zone", "x\ny"),))
    weird = replace(snapshot, nodes=(odd,))
    families = Renderer().samples(weird)
    assert text_format(families) == _client_python(weird, om=False)
    assert openmetrics_format(families) == _client_python(weird, om=True)
