"""The probe's poll of one node over real sockets through its own engine:
every outcome a cycle knows, bounded by the probe's deadline."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from exporter.config.nodes import NodeConfig
from exporter.model.reasons import Reason
from exporter.poll.probe_node import REQUESTS_PER_PROBE, EngineProber
from tests.support.documents import chain_doc, health_doc
from tests.support.fakenode import FakeNode, FakeNodes
from tests.support.ports import closed_port_url
from tests.support.waiting import wait_until


@pytest.fixture
def prober() -> Iterator[EngineProber]:
    engine = EngineProber(max_in_flight=4, max_bytes=1 << 20, max_chains=2)
    yield engine
    engine.close()


def test_reads_health_and_every_chain(fake_node: FakeNode, prober: EngineProber) -> None:
    node = fake_node
    node.play(health_doc(["c1", "c2"]), {"c1": chain_doc(10)})
    node.set("/blockchains/c2", {"error": "boom"}, status=500)
    result = prober.probe_node(NodeConfig("n", node.url), time.monotonic() + 10)
    assert result.error is None and result.health is not None
    chains = {chain.blockchain: chain for chain in result.chains}
    assert chains["c1"].reading is not None and chains["c1"].reading.height == 10
    assert chains["c2"].error is not None and chains["c2"].error.reason is Reason.HTTP_STATUS
    assert sorted(node.paths) == ["/blockchains/c1", "/blockchains/c2", "/health"]


def test_configured_chains_and_the_chain_cap(fake_node: FakeNode, prober: EngineProber) -> None:
    node = fake_node
    node.play(health_doc(["c1", "c2", "c3"]), {c: chain_doc(1) for c in ("c1", "c2", "c3")})
    capped = prober.probe_node(NodeConfig("n", node.url), time.monotonic() + 10)
    assert [c.blockchain for c in capped.chains] == ["c1", "c2"]
    assert capped.unpolled_chains == 1
    chosen = prober.probe_node(
        NodeConfig("n", node.url, blockchains=("c3",)), time.monotonic() + 10
    )
    assert [c.blockchain for c in chosen.chains] == ["c3"]


def test_down_node(prober: EngineProber) -> None:
    result = prober.probe_node(NodeConfig("n", closed_port_url()), time.monotonic() + 10)
    assert result.health is None
    assert result.error is not None and result.error.reason is Reason.CONNECTION


def test_a_chain_slower_than_the_deadline_is_a_timeout(
    fake_node: FakeNode, prober: EngineProber
) -> None:
    node = fake_node
    node.play(health_doc(["c1", "c2"]), {"c1": chain_doc(10)})
    node.set("/blockchains/c2", chain_doc(10), held=True)  # never answers
    result = prober.probe_node(NodeConfig("n", node.url), time.monotonic() + 1.0)
    chains = {chain.blockchain: chain for chain in result.chains}
    assert chains["c1"].reading is not None
    assert chains["c2"].reading is None
    assert chains["c2"].error is not None and chains["c2"].error.reason is Reason.TIMEOUT


def test_after_close_a_probe_ends_with_errors_not_an_exception(
    fake_node: FakeNode,
) -> None:
    node = fake_node
    node.play(health_doc(["c1"]), {"c1": chain_doc(10)})
    engine = EngineProber(max_in_flight=1, max_bytes=1 << 20, max_chains=5)
    engine.close()
    result = engine.probe_node(NodeConfig("n", node.url), time.monotonic() + 5)
    assert all(chain.reading is None for chain in result.chains)


def test_a_probe_whose_chains_hang_leaves_slots_to_the_probes_beside_it(
    fake_nodes: FakeNodes,
) -> None:
    """Each probe holds at most REQUESTS_PER_PROBE requests: a target listing forty chains
    that all hang cannot fill the probes' engine (2 probes x 4 slots) and starve a healthy
    target probed at the same time (found by an attack run)."""
    hostile, healthy = fake_nodes.start(), fake_nodes.start()
    chains = [f"c{i}" for i in range(40)]
    hostile.set("/health", health_doc(chains))
    for chain in chains:
        hostile.set(f"/blockchains/{chain}", chain_doc(1), held=True)
    healthy.play(health_doc(["c1"]), {"c1": chain_doc(7)})
    prober = EngineProber(max_in_flight=2, max_bytes=1 << 20, max_chains=100)
    try:
        with ThreadPoolExecutor(1) as pool:
            hung = pool.submit(
                prober.probe_node, NodeConfig("hostile", hostile.url), time.monotonic() + 60
            )
            wait_until(lambda: len(hostile.paths) > REQUESTS_PER_PROBE)
            result = prober.probe_node(NodeConfig("healthy", healthy.url), time.monotonic() + 10)
            asked = [path for path in hostile.paths if path.startswith("/blockchains/")]
            for chain in chains:  # the node recovers: the rest go out, four at a time
                hostile.set(f"/blockchains/{chain}", chain_doc(1))
            hostile.release()
            hung_result = hung.result(timeout=60)
    finally:
        prober.close()
    assert result.error is None
    assert [(c.blockchain, c.reading is not None) for c in result.chains] == [("c1", True)]
    assert len(asked) == REQUESTS_PER_PROBE
    assert [c.blockchain for c in hung_result.chains if c.reading is not None] == chains
