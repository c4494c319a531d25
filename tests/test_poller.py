"""The polling loop over real sockets: concurrency, deadlines, partial results, reloads."""

from __future__ import annotations

import logging
import socket
import threading
import time
from concurrent.futures import Future
from dataclasses import replace
from typing import Any, cast

import pytest

from exporter.client import NodeClient
from exporter.config import Config, NodeConfig
from exporter.engine import Engine, Request, Response
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


class HangingEngine:
    """An engine whose requests never end (as if the node hung past every deadline), to
    check the poller's own guards independently of libcurl's timeouts."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.futures: list[Future[Response]] = []

    def submit(self, request: Request) -> Future[Response]:
        self.sent.append(request.url)
        future: Future[Response] = Future()
        self.futures.append(future)
        return future

    def resize(self, connections: int, max_in_flight: int | None = None) -> None:
        pass

    def in_flight(self) -> int:
        return sum(not future.done() for future in self.futures)

    def connections_opened(self) -> int:
        return 0

    def release(self) -> None:
        for future in self.futures:
            future.set_result(Response(200, b"{}"))


def test_a_hung_poll_is_not_repeated_while_it_hangs(healthy: FakeNode) -> None:
    engine = HangingEngine()
    config = _config(NodeConfig("n", healthy.url), timeout=0.2)
    poller = Poller(config, lambda _: None, engine=cast(Engine, engine))
    first = _node(poller.run_cycle(), "n")
    second = _node(poller.run_cycle(), "n")
    assert poller.requests_in_flight() == 1
    engine.release()
    third = _node(poller.run_cycle(), "n")
    poller.stop()
    assert engine.sent == [healthy.url + "health"] * 2  # the third cycle only
    assert not first.up and not second.up
    assert second.error == "timeout: the previous poll of this node has not ended yet"
    assert third.error != second.error


def test_a_hung_poll_stays_guarded_and_counted_across_a_reload(healthy: FakeNode) -> None:
    engine = HangingEngine()
    config = _config(NodeConfig("n", healthy.url), NodeConfig("m", healthy.url), timeout=0.2)
    poller = Poller(config, lambda _: None, engine=cast(Engine, engine))
    poller.run_cycle()
    poller.apply(replace(config, nodes=(config.nodes[0],), scrape_timeout=0.3))
    after = _node(poller.run_cycle(), "n")
    in_flight = poller.requests_in_flight()
    engine.release()
    poller.stop()
    assert len(engine.sent) == 2  # n and m once each; n not asked again after the reload
    assert after.error == "timeout: the previous poll of this node has not ended yet"
    assert in_flight == 2  # m left the config, but its hung request is still counted


def test_a_reload_during_cycles_is_never_dropped(healthy: FakeNode) -> None:
    """apply() from another thread while cycles take the pending config: the last config
    applied is the one in force once the cycles settle."""
    poller = Poller(_config(NodeConfig("n", healthy.url), timeout=0.5), lambda _: None)
    applied: list[Config] = []
    stop = threading.Event()

    def reload_often() -> None:
        for index in range(200):
            if stop.is_set():
                return
            config = _config(NodeConfig(f"n{index}", healthy.url), timeout=0.5)
            applied.append(config)
            poller.apply(config)

    reloader = threading.Thread(target=reload_often)
    reloader.start()
    deadline = time.monotonic() + 30
    while reloader.is_alive() and time.monotonic() < deadline:
        poller.run_cycle()
    stop.set()
    reloader.join(5)
    snapshot = poller.run_cycle()
    poller.stop()
    assert [node.name for node in snapshot.nodes] == [applied[-1].nodes[0].name]


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


def test_a_reload_resizes_the_engine(healthy: FakeNode) -> None:
    poller = Poller(_config(NodeConfig("n", healthy.url), concurrency=8), lambda _: None)
    engine = poller._engine
    before = engine.max_in_flight
    poller.apply(_config(NodeConfig("n", healthy.url), concurrency=3))
    snapshot = poller.run_cycle()
    after = engine.max_in_flight
    poller.stop()
    assert (before, after) == (8, 3)
    assert snapshot.nodes[0].up


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
    poller.run_cycle()  # the slow ones fill every slot: the good ones may time out here
    deadline = time.monotonic() + 10
    while poller.requests_in_flight() and time.monotonic() < deadline:
        time.sleep(0.05)  # let the first cycle's requests end
    second = poller.run_cycle()
    poller.stop()
    assert all(_node(second, node.name).up for node in good)
    assert all(chain.up for node in good for chain in _node(second, node.name).chains)
    assert not any(_node(second, node.name).up for node in slow)


def test_errors_kept_in_results_hold_no_traceback(fake_nodes: list[FakeNode]) -> None:
    big = new_fake_node(fake_nodes)
    big.set("/health", b"x" * 4096)
    config = Config(nodes=(NodeConfig("big", big.url),), max_response_bytes=1024)
    engine = Engine(1, "test")
    poll = _NodePoll(config.nodes[0], NodeClient(engine, config.nodes[0], 1024), 10)
    poll.start(time.monotonic() + 2, time.monotonic())
    assert poll.done.wait(5)
    engine.close()
    result = poll.result(time.monotonic())
    assert result.error is not None and result.error.reason.value == "too_large"
    assert result.error.__traceback__ is None  # a traceback would pin the refused body


class CountingServer(FakeNode):
    """A FakeNode that counts the TCP connections it accepts."""

    def __init__(self) -> None:
        super().__init__()
        self.accepted = 0
        accept = self.server.get_request

        def counting_accept() -> tuple[socket.socket, Any]:
            self.accepted += 1
            return accept()

        self.server.get_request = counting_accept  # type: ignore[method-assign]
        handler: Any = self.server.RequestHandlerClass
        handler.protocol_version = "HTTP/1.1"  # keep-alive, as a node's API server does


def test_connections_are_kept_alive_across_cycles() -> None:
    node = CountingServer()
    node.start()
    try:
        node.play(health_doc(["c1", "c2"]), {"c1": chain_doc(1), "c2": chain_doc(2)})
        nodes = tuple(NodeConfig(f"n{i}", node.url) for i in range(4))
        poller = Poller(_config(*nodes, timeout=2.0, concurrency=4), lambda _: None)
        snapshots = [poller.run_cycle() for _ in range(4)]
        opened = poller.connections_opened()
        poller.stop()
    finally:
        node.stop()
    assert all(n.up and all(c.up for c in n.chains) for s in snapshots for n in s.nodes)
    assert len(node.requests) == 4 * 4 * 3
    assert node.accepted <= 4  # at most one connection per slot, reused by every cycle
    assert opened == node.accepted


def test_shutdown_ends_a_cycle_whose_nodes_hang(fake_nodes: list[FakeNode]) -> None:
    hanging = new_fake_node(fake_nodes)
    hanging.set("/health", health_doc([]), delay=5.0)
    config = _config(NodeConfig("h", hanging.url), timeout=30.0)
    published: list[Snapshot] = []
    poller = Poller(config, published.append)
    thread = threading.Thread(target=poller.run)
    thread.start()
    deadline = time.monotonic() + 5
    while not hanging.requests and time.monotonic() < deadline:
        time.sleep(0.02)
    started = time.monotonic()
    poller.stop()
    thread.join(timeout=10)
    assert not thread.is_alive()
    assert time.monotonic() - started < 2.0
    assert poller.requests_in_flight() == 0
