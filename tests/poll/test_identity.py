"""A node's pinned identity (``expect``) over real sockets: a node answering as another node is
down with ``reason="identity_mismatch"``, none of its readings kept, its chains never asked,
logged once per change with what was expected and seen (cut short), whatever it sends."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from exporter.bounds import DropKind
from exporter.config.exporter import Config
from exporter.config.nodes import Expectation, NodeConfig
from exporter.model.identity import SHOWN_CHARS
from exporter.model.snapshot import NodeStatus, Snapshot
from exporter.poll.cycle import Poller
from tests.support.documents import chain_doc, health_doc
from tests.support.fakenode import FakeNode, FakeNodes

NODE_ID = "02ab" * 8  # health_doc's nodeId
OTHER_ID = "03cd" * 8
MISMATCH = "node answers as another node"


def _poller(*nodes: NodeConfig) -> Poller:
    return Poller(Config(nodes=nodes, scrape_interval=6.0, scrape_timeout=3.0), lambda _: None)


def _node(snapshot: Snapshot, name: str) -> NodeStatus:
    return next(node for node in snapshot.nodes if node.name == name)


def _count(node: NodeStatus, reason: str = "identity_mismatch") -> int:
    return sum(c for e, r, c in node.error_counts if (e, r) == ("health", reason))


def _mismatch_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if MISMATCH in r.getMessage()]


def _serve(node: FakeNode, node_id: Any, chains: list[str]) -> None:
    health = health_doc(chains)
    health["nodeId"] = node_id
    node.play(health, {chain: chain_doc(10 + index) for index, chain in enumerate(chains)})


@pytest.fixture
def pinned(fake_nodes: FakeNodes) -> tuple[FakeNode, NodeConfig]:
    node = fake_nodes.start()
    _serve(node, NODE_ID, ["c1", "c2"])
    return node, NodeConfig("pinned", node.url, expect=Expectation(NODE_ID, ("c1",)))


def test_a_node_answering_as_itself_is_up(pinned: tuple[FakeNode, NodeConfig]) -> None:
    """Up, its expected chain read; the chain it lists beyond its expect.blockchains is
    counted as unexpected, never asked (what a node inventing chains costs stays bounded)."""
    fake, config = pinned
    poller = _poller(config)
    try:
        snapshot = poller.run_cycle()
    finally:
        poller.stop()
    node = _node(snapshot, "pinned")
    assert node.up and node.identity is None
    assert [chain.blockchain for chain in node.chains if chain.up] == ["c1"]
    assert not any("c2" in path for path in fake.paths)
    assert snapshot.network.unexpected_chains == (("pinned", 1),)
    assert _count(node) == 0
    dropped = dict(zip(DropKind, node.dropped, strict=True))
    assert dropped[DropKind.BLOCKCHAIN] == 0  # not read by choice: no value dropped


def test_another_node_is_down_unread_and_logged_once_per_change(
    pinned: tuple[FakeNode, NodeConfig], caplog: pytest.LogCaptureFixture
) -> None:
    fake, config = pinned
    poller = _poller(config)
    try:
        with caplog.at_level(logging.INFO, logger="ledger_exporter"):
            _serve(fake, OTHER_ID, ["c1", "c2"])
            for _ in range(3):
                snapshot = poller.run_cycle()
            node = _node(snapshot, "pinned")
            assert (node.up, node.chains, _count(node)) == (False, (), 3)
            assert node.error is not None and node.error.startswith("identity_mismatch: ")
            assert node.identity is not None and node.identity.seen_node_id == OTHER_ID
            assert snapshot.network.chains == ()  # nothing it said enters the network view
            assert [p for p in fake.paths if p.startswith("/blockchains")] == []  # not asked
            (line,) = _mismatch_lines(caplog)
            fields = line.__dict__["fields"]
            assert (fields["expected_node_id"], fields["seen_node_id"]) == (
                f"'{NODE_ID}'",
                f"'{OTHER_ID}'",
            )
            assert not [r for r in caplog.records if "is down" in r.getMessage()]

            _serve(fake, NODE_ID, ["c2"])  # itself, without an expected chain: a new line
            snapshot = poller.run_cycle()
            assert _count(_node(snapshot, "pinned")) == 4
            assert len(_mismatch_lines(caplog)) == 2
            assert _mismatch_lines(caplog)[1].__dict__["fields"] == {
                "node": "pinned",
                "missing_blockchains": "'c1'",
            }

            _serve(fake, NODE_ID, ["c1", "c2"])
            node = _node(poller.run_cycle(), "pinned")
            assert node.up and node.identity is None and len(node.chains) == 1  # c2: unexpected
            assert any("answers as expected again" in r.getMessage() for r in caplog.records)
            assert len(_mismatch_lines(caplog)) == 2
    finally:
        poller.stop()


@pytest.mark.parametrize(
    "node_id",
    [
        pytest.param("x" * 100_000, id="huge"),
        pytest.param(12345, id="number"),
        pytest.param(None, id="null"),
        pytest.param(["02ab" * 8], id="list"),
        pytest.param("\x1b[2J\u202e" + "y" * 200, id="controls"),
    ],
)
def test_whatever_a_hostile_node_sends_is_a_bounded_mismatch(
    pinned: tuple[FakeNode, NodeConfig], node_id: Any, caplog: pytest.LogCaptureFixture
) -> None:
    fake, config = pinned
    _serve(fake, node_id, ["c1"])
    poller = _poller(config)
    try:
        with caplog.at_level(logging.INFO, logger="ledger_exporter"):
            node = _node(poller.run_cycle(), "pinned")
    finally:
        poller.stop()
    assert (node.up, _count(node)) == (False, 1)
    (line,) = _mismatch_lines(caplog)
    seen = line.__dict__["fields"]["seen_node_id"]
    assert len(seen) <= (SHOWN_CHARS + 3) * 6 + 2  # cut, a character at most a \uXXXX escape
    assert "\x1b" not in seen and "\u202e" not in seen
    assert node.error is not None and len(node.error) < 400


def test_a_node_without_expect_is_not_judged(fake_nodes: FakeNodes) -> None:
    fake = fake_nodes.start()
    _serve(fake, 42, ["c1"])  # no readable nodeId: fine when none is pinned
    poller = _poller(NodeConfig("free", fake.url))
    try:
        node = _node(poller.run_cycle(), "free")
    finally:
        poller.stop()
    assert node.up and _count(node) == 0
