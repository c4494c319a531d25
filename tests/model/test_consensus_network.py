"""Consensus health across the polled nodes (issue 21): consensus configurations compared by
value, and the council members polled and up, from a node's ``nodeId`` remembered across
cycles and, with the state file, across restarts. Then the whole path over real sockets:
fake nodes -> poller -> writer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from exporter.config.exporter import Config
from exporter.config.nodes import NodeConfig
from exporter.expose.render import Renderer, text_format
from exporter.model.network import ChainObservation, NodeObservation, network_view
from exporter.poll.cycle import Poller
from exporter.poll.state import StateFile
from tests.support.clock import Clock
from tests.support.documents import chain_doc, health_doc
from tests.support.fakenode import FakeNode, FakeNodes
from tests.support.oracle import Samples

NOW = 1_700_000_000.0
KEYS = {"a": "key-a", "b": "key-b", "c": "key-c", "d": "key-d"}


def observed(node: str, council: frozenset[str] | None, view: bytes | None) -> NodeObservation:
    chain = ChainObservation("c1", 10.0, False, council, None, view)
    return NodeObservation(node, None, (), (chain,))


def test_consensus_views_and_the_odd_node_out() -> None:
    nodes = [observed(n, None, b"same") for n in "abc"] + [observed("d", None, b"other")]
    (chain,) = network_view(nodes, {}, 0).chains
    assert chain.consensus_views == 2
    assert list(chain.consensus_agrees) == [("a", True), ("b", True), ("c", True), ("d", False)]


def test_no_majority_configuration_names_no_node() -> None:
    nodes = [observed("a", None, b"x"), observed("b", None, b"y"), observed("c", None, None)]
    (chain,) = network_view(nodes, {}, 0).chains
    assert chain.consensus_views == 2  # c sent no consensus object: no view, no sample
    assert list(chain.consensus_agrees) == [("a", False), ("b", False)]


def test_council_members_polled_count_down_members_and_up_only_readers() -> None:
    council = frozenset({"key-a", "key-b", "key-d", "key-unpolled"})
    up = [observed(n, council, None) for n in "ab"] + [observed("c", frozenset({"x"}), None)]
    # d is down (not observed) but its nodeId is remembered; c is up but no member
    (chain,) = network_view(up, {}, 0, KEYS).chains
    assert (chain.council_members_polled, chain.council_members_up) == (3, 2)


def test_without_a_majority_council_the_members_are_unknown() -> None:
    up = [observed("a", frozenset({"key-a"}), None), observed("b", frozenset({"key-b"}), None)]
    (chain,) = network_view(up, {}, 0, KEYS).chains
    assert (chain.council_members_polled, chain.council_members_up) == (None, None)


# --- over real sockets ------------------------------------------------------------------


def serve(node: FakeNode, key: str, council: list[str], **chain: Any) -> None:
    health = health_doc(["c1"]) | {"nodeId": key}
    node.play(health, {"c1": chain_doc(10, councilMembers=council, **chain)})


def cycle(config: Config, clock: Clock, path: Path) -> Samples:
    """One cycle of a fresh poller on the state file ``path`` (a start after a restart),
    the state written after it, as the writer exposes it."""
    poller = Poller(config, lambda snapshot: None, clock, state=StateFile(str(path)), wall=clock)
    try:
        snapshot = poller.run_cycle()
        poller.keep_state()
    finally:
        poller.stop()
    return Samples(text_format(Renderer(), snapshot))


def test_a_member_down_across_a_restart_still_counts_as_polled(
    fake_nodes: FakeNodes, tmp_path: Path
) -> None:
    nodes = {name: fake_nodes.start() for name in "abc"}
    council = [KEYS[name] for name in "abc"]
    for name, node in nodes.items():
        serve(node, KEYS[name], council)
    config = Config(
        nodes=tuple(NodeConfig(name, node.url) for name, node in nodes.items()),
        scrape_interval=2.0,
        scrape_timeout=1.0,
    )
    clock, path = Clock(NOW), tmp_path / "state.json"
    chain = {"blockchain": "c1"}
    first = cycle(config, clock, path)
    assert first.get_sample_value("ledger_network_blockchain_council_members_polled", chain) == 3
    assert first.get_sample_value("ledger_network_blockchain_council_members_up", chain) == 3
    nodes["c"].stop()  # down before the restart: this process never reads its nodeId
    clock.advance(60)
    after = cycle(config, clock, path)
    assert after.get_sample_value("ledger_network_blockchain_council_members_polled", chain) == 3
    assert after.get_sample_value("ledger_network_blockchain_council_members_up", chain) == 2
    assert after.get_sample_value("ledger_node_up", {"node": "c"}) == 0


def test_session_age_and_drift_as_exposed(fake_nodes: FakeNodes, tmp_path: Path) -> None:
    nodes = {name: fake_nodes.start() for name in "abc"}
    council = list(KEYS.values())
    open_session = {"s1": {"sessionId": "s1", "round": 1, "currentLeader": "key-a"}}
    for name, node in nodes.items():
        serve(node, KEYS[name], council, voteSessions=open_session)
    drifted = chain_doc(10, councilMembers=council, voteSessions=open_session)
    drifted["consensus"] = drifted["consensus"] | {"consensusTimeout": "2m"}
    nodes["c"].play(health_doc(["c1"]) | {"nodeId": KEYS["c"]}, {"c1": drifted})
    config = Config(
        nodes=tuple(NodeConfig(name, node.url) for name, node in nodes.items()),
        scrape_interval=2.0,
        scrape_timeout=1.0,
    )
    clock, path = Clock(NOW), tmp_path / "state.json"
    cycle(config, clock, path)
    clock.advance(45)
    moved = {"s1": {"sessionId": "s1", "round": 3, "currentLeader": "key-c"}}
    serve(nodes["a"], KEYS["a"], council, voteSessions=moved)
    samples = cycle(config, clock, path)  # a restart too: the age survives, counters do not
    a = {"node": "a", "blockchain": "c1"}
    assert samples.get_sample_value("ledger_blockchain_vote_session_age_seconds", a) == 45
    assert samples.get_sample_value("ledger_blockchain_vote_round_changes_total", a) == 0
    assert (
        samples.get_sample_value("ledger_network_blockchain_consensus_views", {"blockchain": "c1"})
        == 2
    )
    for name, agrees in (("a", 1), ("b", 1), ("c", 0)):
        labels = {"node": name, "blockchain": "c1"}
        assert samples.get_sample_value("ledger_blockchain_consensus_agrees", labels) == agrees
    leader = a | {"leader": "key-d"}
    assert samples.get_sample_value("ledger_blockchain_leader_failed_rounds_total", leader) == 0
