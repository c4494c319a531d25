"""The polling loop over real sockets: concurrency, deadlines, partial results, reloads."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import replace
from typing import Any, cast

import pytest

from exporter.config.exporter import Config, NetworkChecks
from exporter.config.nodes import NodeConfig
from exporter.model.readings import read_chain
from exporter.model.snapshot import NodeStatus, Snapshot
from exporter.poll.client import NodeClient
from exporter.poll.cycle import Poller
from exporter.poll.engine import Done, Engine, Request, Response
from exporter.poll.node import (
    MIN_NODE_REQUESTS,
    BlockPlan,
    Countdown,
    NodePoll,
    requests_per_node,
)
from tests.support.documents import CONTRACT, WATCH, chain_doc, health_doc, serve_watched
from tests.support.fakenode import FakeNode, FakeNodes
from tests.support.ports import closed_port_url
from tests.support.waiting import wait_until


def _config(*nodes: NodeConfig, timeout: float = 1.0, concurrency: int = 8) -> Config:
    return Config(
        nodes=nodes,
        scrape_interval=timeout * 2,
        scrape_timeout=timeout,
        max_concurrency=concurrency,
    )


def _node(snapshot: Snapshot, name: str) -> NodeStatus:
    return next(node for node in snapshot.nodes if node.name == name)


def _one_cycle(nodes: list[NodeConfig], concurrency: int) -> Snapshot:
    """The snapshot of one cycle of ``nodes`` (3 s deadline), the poller stopped after."""
    poller = Poller(_config(*nodes, timeout=3.0, concurrency=concurrency), lambda _: None)
    try:
        return poller.run_cycle()
    finally:
        poller.stop()


def _errors(node: NodeStatus) -> dict[tuple[str, str], int]:
    return {(endpoint, reason): count for endpoint, reason, count in node.error_counts if count}


@pytest.fixture
def healthy(fake_nodes: FakeNodes) -> FakeNode:
    node = fake_nodes.start()
    node.play(health_doc(["c1", "c2"]), {"c1": chain_doc(100), "c2": chain_doc(50)})
    return node


def test_slow_and_dead_nodes_do_not_delay_the_healthy_one(
    healthy: FakeNode, fake_nodes: FakeNodes
) -> None:
    slow = fake_nodes.start()
    slow.set("/health", health_doc(["c1"]), held=True)  # never answers
    config = _config(
        NodeConfig("healthy", healthy.url),
        NodeConfig("slow", slow.url),
        NodeConfig("dead", closed_port_url()),
        timeout=0.5,
    )
    poller = Poller(config, lambda _: None)
    snapshot = poller.run_cycle()  # it ends although the slow node never answered
    poller.stop()
    assert slow.paths == ["/health"]
    wait_until(lambda: slow.hung_up == ["/health"], message="the slow node's request outlived it")
    assert _node(snapshot, "healthy").up
    assert [c.blockchain for c in _node(snapshot, "healthy").chains if c.up] == ["c1", "c2"]
    assert _errors(_node(snapshot, "slow")) == {("health", "timeout"): 1}
    assert _errors(_node(snapshot, "dead")) == {("health", "connection"): 1}
    assert not _node(snapshot, "slow").up and not _node(snapshot, "dead").up


def test_a_slow_chain_times_out_alone(healthy: FakeNode) -> None:
    healthy.set("/blockchains/c2", chain_doc(50), held=True)  # never answers
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
    assert "/blockchains/c1" not in healthy.paths


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
        self.waiting: list[Done] = []

    def submit(self, request: Request, done: Done) -> None:
        self.sent.append(request.url)
        self.waiting.append(done)

    def resize(self, connections: int, max_in_flight: int | None = None) -> None:
        pass

    def close_idle_connections(self) -> None:
        pass

    def in_flight(self) -> int:
        return len(self.waiting)

    def connections_opened(self) -> int:
        return 0

    def release(self) -> None:
        waiting, self.waiting = self.waiting, []
        for done in waiting:
            done(Response(200, b"{}"))


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

    def cycled_until_the_reloads_ended() -> bool:
        poller.run_cycle()
        return not reloader.is_alive()

    reloader.start()
    wait_until(cycled_until_the_reloads_ended, interval=0, message="the reloads never ended")
    stop.set()
    reloader.join(5)
    snapshot = poller.run_cycle()
    poller.stop()
    assert [node.name for node in snapshot.nodes] == [applied[-1].nodes[0].name]


def test_apply_switches_config_and_forgets_removed_nodes(
    healthy: FakeNode, fake_nodes: FakeNodes
) -> None:
    other = fake_nodes.start()
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
    wait_until(lambda: len(published) >= 3, message=lambda: f"{len(published)} published")
    poller.stop()
    thread.join(timeout=30)
    assert not thread.is_alive()
    assert len(published) >= 3
    assert all(snapshot.nodes[0].up for snapshot in published)


def test_a_runaway_chain_listing_is_capped(
    fake_nodes: FakeNodes, caplog: pytest.LogCaptureFixture
) -> None:
    node = fake_nodes.start()
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
    healthy: FakeNode, fake_nodes: FakeNodes
) -> None:
    hanging = fake_nodes.start()
    hanging.set("/health", health_doc([]), held=True)  # never answers
    slow = tuple(NodeConfig(f"slow-{i}", hanging.url) for i in range(6))
    good = tuple(NodeConfig(f"good-{i}", healthy.url) for i in range(3))
    poller = Poller(_config(*slow, *good, timeout=0.5, concurrency=4), lambda _: None)
    poller.run_cycle()  # the slow ones fill every slot: the good ones may time out here
    wait_until(lambda: not poller.requests_in_flight(), message="the first cycle's requests")
    second = poller.run_cycle()
    poller.stop()
    assert all(_node(second, node.name).up for node in good)
    assert all(chain.up for node in good for chain in _node(second, node.name).chains)
    assert not any(_node(second, node.name).up for node in slow)


def test_a_node_whose_chains_all_hang_holds_only_its_share_from_its_first_cycle(
    fake_nodes: FakeNodes,
) -> None:
    """A node has at most a sixteenth of the slots (at least four) in flight: one listing
    forty chains that all hang, in its first bad cycle (the suspect rule above only acts on
    the next), leaves the healthy nodes' chains read (found by an attack run)."""
    hostile = fake_nodes.start()
    chains = [f"c{i}" for i in range(40)]
    hostile.set("/health", health_doc(chains))
    for chain in chains:
        hostile.set(f"/blockchains/{chain}", chain_doc(1), held=True)
    healthy = [fake_nodes.start() for _ in range(3)]
    for node in healthy:  # answered after the hostile node's: their chains queue behind its
        node.set("/health", health_doc(["c1", "c2"]), delay=0.2)
        node.set("/blockchains/c1", chain_doc(100))
        node.set("/blockchains/c2", chain_doc(50))
    nodes = [NodeConfig("hostile", hostile.url)]
    nodes += [NodeConfig(f"good-{i}", node.url) for i, node in enumerate(healthy)]
    snapshot = _one_cycle(nodes, concurrency=16)
    good = [_node(snapshot, f"good-{i}") for i in range(3)]
    assert [[chain.up for chain in node.chains] for node in good] == [[True, True]] * 3
    assert not any(chain.up for chain in _node(snapshot, "hostile").chains)
    asked = [path for path in hostile.paths if path.startswith("/blockchains/")]
    assert len(asked) == requests_per_node(16) == MIN_NODE_REQUESTS


def test_errors_kept_in_results_hold_no_traceback(fake_nodes: FakeNodes) -> None:
    big = fake_nodes.start()
    big.set("/health", b"x" * 4096)
    config = Config(nodes=(NodeConfig("big", big.url),), max_response_bytes=1024)
    engine = Engine(1, "test")
    countdown = Countdown(1)
    client = NodeClient(engine, config.nodes[0], 1024)
    poll = NodePoll(config.nodes[0], client, 10, BlockPlan(), ended=countdown.count_down)
    poll.start(time.monotonic() + 2, time.monotonic())
    assert countdown.wait(5) and poll.finished
    engine.close()
    result = poll.result(time.monotonic())
    assert result.error is not None and result.error.reason.value == "too_large"
    assert result.error.__traceback__ is None  # a traceback would pin the refused body


def test_a_reload_closes_the_connections_to_hosts_no_longer_configured(
    fake_nodes: FakeNodes,
) -> None:
    kept, removed = fake_nodes.start(keep_alive=True), fake_nodes.start(keep_alive=True)
    for server in (kept, removed):
        server.play(health_doc(["c1", "c2"]), {"c1": chain_doc(1), "c2": chain_doc(2)})
    nodes = [NodeConfig("k", kept.url), *(NodeConfig(f"r{i}", removed.url) for i in range(6))]
    # the connection cache holds 64: room for every connection to both hosts
    poller = Poller(_config(*nodes, timeout=2.0, concurrency=64), lambda _: None)
    try:
        first = poller.run_cycle()
        opened = removed.open_connections
        poller.apply(_config(nodes[0], timeout=2.0, concurrency=64))
        second = poller.run_cycle()
        wait_until(
            lambda: removed.open_connections == 0,
            message=lambda: f"{removed.open_connections} connections to the removed host open",
        )
        third = poller.run_cycle()  # the kept host is still polled (over new connections)
    finally:
        poller.stop()
    assert all(node.up for snapshot in (first, second, third) for node in snapshot.nodes)
    assert opened > 0
    assert removed.connections_accepted == opened  # nothing sent to it after the reload


def test_connections_are_kept_alive_across_cycles(fake_nodes: FakeNodes) -> None:
    node = fake_nodes.start(keep_alive=True)
    node.play(health_doc(["c1", "c2"]), {"c1": chain_doc(1), "c2": chain_doc(2)})
    nodes = tuple(NodeConfig(f"n{i}", node.url) for i in range(4))
    poller = Poller(_config(*nodes, timeout=2.0, concurrency=4), lambda _: None)
    try:
        snapshots = [poller.run_cycle() for _ in range(4)]
        opened = poller.connections_opened()
    finally:
        poller.stop()
    assert all(n.up and all(c.up for c in n.chains) for s in snapshots for n in s.nodes)
    # /health and two chains per node and cycle, and from the second cycle on a checkpoint
    # block per chain: all over the same kept-alive connections
    assert len(node.paths) == 4 * 4 * 3 + 3 * 4 * 2
    assert node.connections_accepted <= 4  # at most one per slot, reused by every cycle
    assert opened == node.connections_accepted


def test_shutdown_ends_a_cycle_whose_nodes_hang(fake_nodes: FakeNodes) -> None:
    hanging = fake_nodes.start()
    hanging.set("/health", health_doc([]), held=True)  # never answers
    # a deadline far past the test: only the shutdown can end this cycle
    config = _config(NodeConfig("h", hanging.url), timeout=3600.0)
    published: list[Snapshot] = []
    poller = Poller(config, published.append)
    thread = threading.Thread(target=poller.run)
    thread.start()
    wait_until(lambda: hanging.paths, message="the cycle never asked the node")
    poller.stop()
    thread.join(timeout=30)
    assert not thread.is_alive()
    assert poller.requests_in_flight() == 0
    wait_until(lambda: hanging.hung_up == ["/health"], message="the request outlived shutdown")


# --- the network view: checkpoint blocks, councils, partitions --------------------------


def network_node(  # noqa: PLR0917 (a row of the tests' node table)
    fake_nodes: FakeNodes,
    name: str,
    links: list[str],
    height: int,
    council: list[str],
    block: tuple[int, dict[str, Any]] | None,
) -> FakeNode:
    """A node with peer id ``p-<name>`` listing ``links``, one chain ``c/1`` (a slash, so the id
    must be percent-encoded) and, when given, its block at a height."""
    node = fake_nodes.start()
    health = health_doc(["c/1"])
    health["network"] |= {"peerId": f"p-{name}", "networkPeers": [f"p-{p}" for p in links]}
    node.play(health, {"c%2F1": chain_doc(height, councilMembers=council)})
    if block is not None:
        node.set(f"/blockchains/c%2F1/blocks?height={block[0]}", block[1])
    return node


def test_network_checks_find_the_fork_the_council_and_the_cut_off_node(
    fake_nodes: FakeNodes,
) -> None:
    council, other = ["a", "b", "c"], ["a", "b", "x"]
    main, fork = {"height": 95, "hash": "h95"}, {"height": 95, "hash": "forked"}
    nodes = {
        "n1": network_node(fake_nodes, "n1", ["n2"], 100, council, (95, main)),
        "n2": network_node(fake_nodes, "n2", ["n1", "n3"], 101, council, (95, main)),
        # the same block, its hash under the other default field
        "n3": network_node(fake_nodes, "n3", [], 102, council, (95, {"blockHash": "h95"})),
        "forked": network_node(fake_nodes, "forked", ["n1"], 100, council, (95, fork)),
        "council": network_node(fake_nodes, "council", ["n2"], 100, other, (95, main)),
        "cut": network_node(fake_nodes, "cut", [], 100, council, (95, main)),
        # its block endpoint fails: no agreement sample, an error counted, chain still up
        "broken": network_node(fake_nodes, "broken", ["n1"], 100, council, None),
    }
    nodes["broken"].set("/blockchains/c%2F1/blocks?height=95", {"error": "boom"}, status=500)
    config = _config(*(NodeConfig(name, fake.url) for name, fake in nodes.items()), timeout=5)
    poller = Poller(config, lambda snapshot: None)
    try:
        first = poller.run_cycle()  # no checkpoint yet: no block requests
        assert first.network.chains[0].checkpoint_height is None
        assert not any("blocks" in r for fake in nodes.values() for r in fake.paths)
        snapshot = poller.run_cycle()
    finally:
        poller.stop()
    (chain,) = snapshot.network.chains
    assert (chain.blockchain, chain.checkpoint_height, chain.checkpoint_hashes) == ("c/1", 95, 2)
    assert dict(chain.block_agrees) == {
        "n1": True,
        "n2": True,
        "n3": True,
        "forked": False,
        "council": True,
        "cut": True,
    }
    assert chain.council_views == 2
    assert [n for n, agrees in chain.council_agrees if not agrees] == ["council"]
    assert snapshot.network.partitions == 2
    assert dict(snapshot.network.polled_peers)["cut"] == 0
    assert dict(snapshot.network.polled_peers)["n1"] == 3  # n2 both ways; forked, broken list it
    broken = next(n for n in snapshot.nodes if n.name == "broken")
    assert broken.chains[0].up
    assert ("block", "http_status", 1) in broken.error_counts
    healthy = next(n for n in snapshot.nodes if n.name == "n1")
    assert ("block", "http_status", 0) in healthy.error_counts


def test_depth_zero_sends_no_block_request(fake_nodes: FakeNodes) -> None:
    node = network_node(fake_nodes, "n1", [], 100, ["a"], (95, {"hash": "h"}))
    config = replace(_config(NodeConfig("n1", node.url)), network_checks=NetworkChecks(0))
    poller = Poller(config, lambda snapshot: None)
    try:
        poller.run_cycle()
        snapshot = poller.run_cycle()
    finally:
        poller.stop()
    assert not any("blocks" in request for request in node.paths)
    assert snapshot.network.chains[0].checkpoint_height is None
    assert not any(endpoint == "block" for endpoint, _, _ in snapshot.nodes[0].error_counts)


def test_a_node_below_the_checkpoint_is_not_asked_for_its_block(
    fake_nodes: FakeNodes,
) -> None:
    ahead = network_node(fake_nodes, "ahead", [], 100, ["a"], (95, {"hash": "h"}))
    syncing = network_node(fake_nodes, "syncing", [], 10, ["a"], None)
    syncing.set("/blockchains/c%2F1", chain_doc(10, syncing=True, councilMembers=["a"]))
    config = _config(NodeConfig("ahead", ahead.url), NodeConfig("syncing", syncing.url))
    poller = Poller(config, lambda snapshot: None)
    try:
        poller.run_cycle()
        snapshot = poller.run_cycle()
    finally:
        poller.stop()
    assert any("blocks?height=95" in r for r in ahead.paths)
    assert not any("blocks" in r for r in syncing.paths)
    assert dict(snapshot.network.chains[0].block_agrees) == {"ahead": True}


@pytest.mark.parametrize(("count", "ended", "zero"), [(0, 0, True), (2, 1, False), (2, 2, True)])
def test_countdown_reaches_zero_once_every_poll_ended(count: int, ended: int, zero: bool) -> None:
    countdown = Countdown(count)
    for _ in range(ended):
        countdown.count_down()
    assert countdown.wait(0.0) is zero


# --- a callback that raises never leaves a poll unfinished ------------------------------------


def _raise(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("a reader failed")


def _raise_for_chains(original: Any) -> Any:
    def get(client: NodeClient, segments: list[str], *args: Any, **kwargs: Any) -> None:
        if segments[0] == "blockchains":
            raise RuntimeError("sending failed")
        original(client, segments, *args, **kwargs)

    return get


@pytest.mark.parametrize(
    ("target", "endpoint"),
    [
        ("exporter.poll.node.read_health", "health"),
        ("exporter.poll.watch_poll.plan_requests", "health"),  # planned from the /health answer
        ("exporter.poll.node.read_chain", "blockchain"),
        ("exporter.poll.node.read_block_hash", "block"),
        ("exporter.poll.watch_poll.read_answer", "contract"),
        ("exporter.poll.client.NodeClient.get", "blockchain"),  # a chain's request not sent
        ("exporter.poll.node.NodePoll.chain_answered", "blockchain"),  # past the reader's guard
        ("exporter.poll.watch_poll.WatchAnswer.__call__", "contract"),
    ],
)
def test_a_raising_callback_ends_its_part_and_the_node_is_asked_again(
    target: str, endpoint: str, fake_nodes: FakeNodes, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = serve_watched(fake_nodes.start(), ["c1"])
    fake.set("/blockchains/c1/blocks?height=5", {"hash": "h5"})
    if target.endswith(".get"):
        monkeypatch.setattr(NodeClient, "get", _raise_for_chains(NodeClient.get))
    else:
        monkeypatch.setattr(target, _raise)
    config = replace(
        _config(NodeConfig("n", fake.url), timeout=3.0),
        watch=WATCH,
        network_checks=NetworkChecks(checkpoint_depth=5),
    )
    poller = Poller(config, lambda _: None)
    try:
        snapshots = [poller.run_cycle() for _ in range(3)]
        in_flight = poller.requests_in_flight()
    finally:
        poller.stop()
    nodes = [_node(snapshot, "n") for snapshot in snapshots]
    assert fake.paths.count("/health") == 3  # asked again every cycle
    assert in_flight == 0
    path = {"block": "/blockchains/c1/blocks?height=5", "contract": CONTRACT}.get(endpoint)
    assert path is None or path in fake.paths  # the reader was reached
    assert not any(node.error and "has not ended" in node.error for node in nodes)
    assert _errors(nodes[-1]).get((endpoint, "invalid_response"), 0) >= 1
    if endpoint == "health":
        assert nodes[-1].error is not None
        assert nodes[-1].error.startswith("invalid_response: ")


def test_a_chain_id_that_cannot_be_requested_does_not_hang_the_poll(
    fake_nodes: FakeNodes,
) -> None:
    fake = fake_nodes.start()
    fake.play(health_doc(["c1", "\ud800"]), {"c1": chain_doc(100)})
    poller = Poller(_config(NodeConfig("n", fake.url), timeout=3.0), lambda _: None)
    try:
        snapshots = [poller.run_cycle() for _ in range(2)]
    finally:
        poller.stop()
    assert fake.paths.count("/health") == 2
    for snapshot in snapshots:
        node = _node(snapshot, "n")
        assert node.up, node.error
        assert [c.up for c in node.chains if c.blockchain == "c1"] == [True]
        assert not any(c.error and "timeout" in c.error for c in node.chains)


# --- a node whose answers are costly to read cannot hold the engine for the others -----------


def _costly_reader(original: Any, seconds: float) -> Any:
    """read_chain, but a document marked "costly" burns ``seconds`` of CPU first (as a
    7 MiB document of tiny values would), on the thread that reads it."""

    def read(document: Any, *args: Any) -> Any:
        if isinstance(document, dict) and document.get("costly"):
            started = time.thread_time()
            while time.thread_time() - started < seconds:
                pass
        return original(document, *args)

    return read


def test_a_node_whose_answers_are_costly_to_read_spends_its_budget_not_the_others_time(
    fake_nodes: FakeNodes, monkeypatch: pytest.MonkeyPatch
) -> None:
    chains = [f"c{i}" for i in range(12)]
    costly = fake_nodes.start()
    costly.play(health_doc(chains), {c: chain_doc(1, costly=True) for c in chains})
    healthy = [fake_nodes.start() for _ in range(3)]
    for fake in healthy:
        fake.play(health_doc(["c1", "c2"]), {"c1": chain_doc(1), "c2": chain_doc(2)})
        fake.set("/health", health_doc(["c1", "c2"]), delay=0.2)  # comes while costly reads
    monkeypatch.setattr("exporter.poll.node.read_chain", _costly_reader(read_chain, 0.3))
    # the typed fast path keeps no "costly" marker: every chain status is read the slow way
    monkeypatch.setattr("exporter.poll.node.decode_chain_status", lambda body: None)
    nodes = [NodeConfig("costly", costly.url)]
    nodes += [NodeConfig(f"h{i}", fake.url) for i, fake in enumerate(healthy)]
    # 12 answers of 0.3 s each would hold the engine's thread past the 3 s deadline
    snapshot = _one_cycle(nodes, concurrency=64)
    for i in range(3):
        node = _node(snapshot, f"h{i}")
        assert node.up and all(chain.up for chain in node.chains), [c.error for c in node.chains]
    node = _node(snapshot, "costly")
    assert node.up  # its /health was read, and the one chain that spent the budget
    assert [chain.up for chain in node.chains].count(True) == 1
    assert _errors(node) == {("blockchain", "too_large"): 11}
    refused = [chain.error for chain in node.chains if not chain.up]
    assert all(error and "s of CPU" in error for error in refused), refused
