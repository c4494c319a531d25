"""The polling loop over real sockets: concurrency, deadlines, partial results, reloads."""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from exporter.client import NodeClient, make_session
from exporter.config import Config, NodeConfig
from exporter.poller import Poller, _NodePoll
from exporter.snapshot import NodeStatus, Snapshot
from tests.conftest import FakeNode, chain_doc, closed_port_url, health_doc, new_fake_node


def _config(*nodes: NodeConfig, timeout: float = 1.0, concurrency: int = 8) -> Config:
    return Config(
        nodes=nodes,
        scrape_interval=timeout * 2,
        scrape_timeout=timeout,
        max_concurrency=concurrency,
    )


def _node(snapshot: Snapshot, name: str) -> NodeStatus:
    return next(node for node in snapshot.nodes if node.name == name)


def _errors(node: NodeStatus) -> dict[tuple[str, str], int]:
    return {(endpoint, reason): count for endpoint, reason, count in node.error_counts if count}


@pytest.fixture
def healthy(fake_nodes: list[FakeNode]) -> FakeNode:
    node = new_fake_node(fake_nodes)
    node.play(health_doc(["c1", "c2"]), {"c1": chain_doc(100), "c2": chain_doc(50)})
    return node


def test_slow_and_dead_nodes_do_not_delay_the_healthy_one(
    healthy: FakeNode, fake_nodes: list[FakeNode]
) -> None:
    slow = new_fake_node(fake_nodes)
    slow.set("/health", health_doc(["c1"]), delay=5.0)
    config = _config(
        NodeConfig("healthy", healthy.url),
        NodeConfig("slow", slow.url),
        NodeConfig("dead", closed_port_url()),
        timeout=0.5,
    )
    poller = Poller(config, lambda _: None)
    started = time.monotonic()
    snapshot = poller.run_cycle()
    elapsed = time.monotonic() - started
    poller.stop()
    assert elapsed < 2.0  # bounded by the 0.5 s deadline, not the slow node's 5 s
    assert _node(snapshot, "healthy").up
    assert [c.blockchain for c in _node(snapshot, "healthy").chains if c.up] == ["c1", "c2"]
    assert _errors(_node(snapshot, "slow")) == {("health", "timeout"): 1}
    assert _errors(_node(snapshot, "dead")) == {("health", "connection"): 1}
    assert not _node(snapshot, "slow").up and not _node(snapshot, "dead").up


def test_a_slow_chain_times_out_alone(healthy: FakeNode) -> None:
    healthy.set("/blockchains/c2", chain_doc(50), delay=3.0)
    poller = Poller(_config(NodeConfig("n", healthy.url), timeout=0.5), lambda _: None)
    node = _node(poller.run_cycle(), "n")
    poller.stop()
    chains = {chain.blockchain: chain for chain in node.chains}
    assert node.up and chains["c1"].up and not chains["c2"].up
    assert _errors(node) == {("blockchain", "timeout"): 1}
    assert chains["c2"].error is not None and chains["c2"].error.startswith("timeout")


def test_configured_chains_are_the_only_ones_polled(healthy: FakeNode) -> None:
    poller = Poller(_config(NodeConfig("n", healthy.url, blockchains=("c2",))), lambda _: None)
    node = _node(poller.run_cycle(), "n")
    poller.stop()
    assert [chain.blockchain for chain in node.chains] == ["c2"]
    assert "/blockchains/c1" not in healthy.requests


def test_configured_chains_of_a_down_node_are_down_without_counting_requests() -> None:
    config = _config(NodeConfig("n", closed_port_url(), blockchains=("c1", "c2")))
    poller = Poller(config, lambda _: None)
    node = _node(poller.run_cycle(), "n")
    poller.stop()
    assert [(chain.blockchain, chain.up) for chain in node.chains] == [("c1", False), ("c2", False)]
    assert _errors(node) == {("health", "connection"): 1}


def test_many_nodes_and_chains_on_a_small_pool_do_not_deadlock(healthy: FakeNode) -> None:
    nodes = tuple(NodeConfig(f"n{i}", healthy.url) for i in range(20))
    poller = Poller(_config(*nodes, timeout=5.0, concurrency=2), lambda _: None)
    snapshot = poller.run_cycle()
    poller.stop()
    assert all(node.up and all(chain.up for chain in node.chains) for node in snapshot.nodes)


def test_a_hung_poll_is_not_repeated_while_it_hangs(
    healthy: FakeNode, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = threading.Event()
    calls: list[str] = []

    def hanging_get(self: NodeClient, segments: Any, deadline: float) -> Any:
        calls.append("/".join(segments))
        release.wait(10)
        raise AssertionError("released")

    monkeypatch.setattr(NodeClient, "get_json", hanging_get)
    poller = Poller(_config(NodeConfig("n", healthy.url), timeout=0.2), lambda _: None)
    first = _node(poller.run_cycle(), "n")
    second = _node(poller.run_cycle(), "n")
    release.set()
    poller.stop()
    assert calls == ["health"]
    assert not first.up and not second.up
    assert second.error == "timeout: the previous poll of this node has not ended yet"


def test_apply_switches_config_and_forgets_removed_nodes(
    healthy: FakeNode, fake_nodes: list[FakeNode]
) -> None:
    other = new_fake_node(fake_nodes)
    other.play(health_doc(["c9"]), {"c9": chain_doc(5)})
    poller = Poller(_config(NodeConfig("a", healthy.url)), lambda _: None)
    assert [node.name for node in poller.run_cycle().nodes] == ["a"]
    poller.apply(_config(NodeConfig("b", other.url)))
    snapshot = poller.run_cycle()
    poller.stop()
    assert [node.name for node in snapshot.nodes] == ["b"]
    assert [chain.blockchain for chain in snapshot.nodes[0].chains] == ["c9"]


def test_run_publishes_every_interval_and_stops(healthy: FakeNode) -> None:
    published: list[Snapshot] = []
    config = Config(nodes=(NodeConfig("n", healthy.url),), scrape_interval=0.2, scrape_timeout=0.2)
    poller = Poller(config, published.append)
    thread = threading.Thread(target=poller.run)
    thread.start()
    deadline = time.monotonic() + 5
    while len(published) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    poller.stop()
    thread.join(timeout=5)
    assert not thread.is_alive()
    assert len(published) >= 3
    assert all(snapshot.nodes[0].up for snapshot in published)


def test_a_runaway_chain_listing_is_capped(
    fake_nodes: list[FakeNode], caplog: pytest.LogCaptureFixture
) -> None:
    node = new_fake_node(fake_nodes)
    chains = [f"c{i}" for i in range(5)]
    node.play(health_doc(chains), {chain: chain_doc(1) for chain in chains})
    config = Config(
        nodes=(NodeConfig("n", node.url), NodeConfig("pinned", node.url, blockchains=("c4",))),
        scrape_interval=2.0,
        scrape_timeout=1.0,
        max_blockchains_per_node=2,
    )
    poller = Poller(config, lambda _: None)
    with caplog.at_level(logging.INFO, logger="ledger_exporter"):
        first = poller.run_cycle()
        poller.run_cycle()
    poller.stop()
    capped = _node(first, "n")
    assert [chain.blockchain for chain in capped.chains] == ["c0", "c1"]
    assert capped.health is not None and capped.health.blockchain_count == 5
    assert [chain.blockchain for chain in _node(first, "pinned").chains] == ["c4"]
    warnings = [r for r in caplog.records if "max_blockchains_per_node" in r.getMessage()]
    assert len(warnings) == 1 and vars(warnings[0])["fields"]["unpolled_blockchains"] == 3


def test_nodes_that_hang_cannot_starve_the_healthy_ones(
    healthy: FakeNode, fake_nodes: list[FakeNode]
) -> None:
    hanging = new_fake_node(fake_nodes)
    hanging.set("/health", health_doc([]), delay=2.0)
    slow = tuple(NodeConfig(f"slow-{i}", hanging.url) for i in range(6))
    good = tuple(NodeConfig(f"good-{i}", healthy.url) for i in range(3))
    poller = Poller(_config(*slow, *good, timeout=0.5, concurrency=4), lambda _: None)
    poller.run_cycle()  # the slow ones fill every thread: the good ones may time out here
    while any(not poll.done.done() for poll in poller._running.values()):
        time.sleep(0.05)  # let the first cycle's hung requests end (the server sleeps 2 s)
    second = poller.run_cycle()
    poller.stop()
    assert all(_node(second, node.name).up for node in good)
    assert all(chain.up for node in good for chain in _node(second, node.name).chains)
    assert not any(_node(second, node.name).up for node in slow)


def test_errors_kept_in_results_hold_no_traceback(fake_nodes: list[FakeNode]) -> None:
    big = new_fake_node(fake_nodes)
    big.set("/health", b"x" * 4096)
    config = Config(nodes=(NodeConfig("big", big.url),), max_response_bytes=1024)
    poll = _NodePoll(
        config.nodes[0],
        NodeClient(make_session(1), config.nodes[0], 1024),
        ThreadPoolExecutor(1),
        10,
    )
    poll.start(time.monotonic() + 2, time.monotonic())
    poll.done.result(timeout=5)
    result = poll.result(time.monotonic())
    assert result.error is not None and result.error.reason.value == "too_large"
    assert result.error.__traceback__ is None  # a traceback would pin the refused body


def test_one_connection_pool_per_host() -> None:
    nodes = tuple(NodeConfig(f"n{i}", f"http://127.0.0.1:{7000 + i}/") for i in range(70))
    poller = Poller(_config(*nodes, concurrency=8), lambda _: None)
    adapter = poller._resources.session.get_adapter("http://127.0.0.1:7000/")
    poller.stop()
    assert adapter._pool_connections == 70 and adapter._pool_maxsize == 8  # type: ignore[attr-defined]
