"""What a polling cycle does with a failure it did not expect: only the part it happened in is
left out (one node, the network view, one maintenance entry), the other nodes are polled and
read as always, the failure is counted by stage and logged once while it recurs; a cycle that
fails as a whole republishes the last snapshot with the count, which then grows stale
(exporter.app: /-/ready and the node series). ``tests/e2e/test_cycle_failures.py`` does the
same to the real process."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

import pytest

from exporter.app import Exporter
from exporter.config.exporter import Config
from exporter.config.maintenance import MaintenanceEntry
from exporter.config.nodes import NodeConfig
from exporter.model.snapshot import CycleStage, NodeStatus, Snapshot
from exporter.poll import cycle, history, node
from exporter.poll.cycle import Poller, stale_after
from exporter.poll.cycle_failures import MAX_LOGGED_PER_CYCLE, CycleFailures
from exporter.poll.results import NodeResult
from tests.support.clock import Clock
from tests.support.documents import chain_doc, health_doc
from tests.support.fakenode import FakeNode, FakeNodes

FAILED = "polling cycle step failed"


def _failures(snapshot: Snapshot) -> dict[str, int]:
    return {stage.value: n for stage, n in zip(CycleStage, snapshot.cycle_failures, strict=True)}


def _lines(caplog: pytest.LogCaptureFixture) -> list[dict[str, object]]:
    return [r.__dict__["fields"] for r in caplog.records if FAILED in r.getMessage()]


def _by_name(snapshot: Snapshot) -> dict[str, NodeStatus]:
    return {status.name: status for status in snapshot.nodes}


@pytest.fixture
def two_nodes(fake_nodes: FakeNodes) -> Config:
    nodes = []
    for name in ("a", "b"):
        fake = fake_nodes.start()
        fake.play(health_doc(["c1"]), {"c1": chain_doc(10)})
        nodes.append(NodeConfig(name, fake.url))
    return Config(nodes=tuple(nodes), scrape_interval=4.0, scrape_timeout=2.0)


def test_a_node_whose_result_raises_is_down_alone_and_logged_once(
    two_nodes: Config, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    real = node.NodePoll.result
    failing = {"a"}

    def result(self: node.NodePoll, now: float) -> object:
        if self.node.name in failing:
            raise ValueError("year 10000 is out of range")
        return real(self, now)

    monkeypatch.setattr(node.NodePoll, "result", result)
    poller = Poller(two_nodes, lambda snapshot: None)
    try:
        with caplog.at_level(logging.INFO, logger="ledger_exporter"):
            for _ in range(3):
                snapshot = poller.run_cycle()
            statuses = _by_name(snapshot)
            assert not statuses["a"].up and statuses["b"].up
            assert statuses["b"].chains[0].up  # the other node is read as always
            assert statuses["a"].error is not None and "ValueError" in statuses["a"].error
            scrape_errors = sum(count for _, _, count in statuses["a"].error_counts)
            assert scrape_errors == 0  # the exporter's failure, not the node's
            assert _failures(snapshot) == {
                "node": 3, "network": 0, "watch": 0, "maintenance": 0, "cycle": 0
            }  # fmt: skip
            assert _lines(caplog) == [
                {"stage": "node", "error": "ValueError: year 10000 is out of range", "subject": "a"}
            ]
            failing.clear()
            assert _by_name(poller.run_cycle())["a"].up  # back: forgotten
            failing.add("a")
            poller.run_cycle()
            assert len(_lines(caplog)) == 2  # it came back: logged again
    finally:
        poller.stop()


def test_a_node_whose_status_raises_in_the_history_is_down_alone(
    two_nodes: Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = history.History._node_status

    def node_status(self: history.History, result: NodeResult, *args: Any) -> NodeStatus:
        if result.node.name == "b":
            raise OverflowError("date value out of range")
        return real(self, result, *args)

    monkeypatch.setattr(history.History, "_node_status", node_status)
    poller = Poller(two_nodes, lambda snapshot: None)
    try:
        snapshot = poller.run_cycle()
    finally:
        poller.stop()
    statuses = _by_name(snapshot)
    assert statuses["a"].up and not statuses["b"].up
    assert _failures(snapshot)["node"] == 1


def test_a_failing_network_view_leaves_out_its_series_only(
    two_nodes: Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    def network_view(*args: object, **kwargs: object) -> object:
        raise KeyError("a chain")

    monkeypatch.setattr(cycle, "network_view", network_view)
    poller = Poller(two_nodes, lambda snapshot: None)
    try:
        snapshot = poller.run_cycle()
    finally:
        poller.stop()
    assert all(status.up for status in snapshot.nodes)
    assert snapshot.network.chains == () and snapshot.network.partitions is None
    assert _failures(snapshot)["network"] == 1


def test_a_maintenance_entry_that_raises_does_not_apply_and_the_others_do(
    two_nodes: Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = MaintenanceEntry("a", "", 2e9, "bad")
    good = MaintenanceEntry("b", "", 2e9, "good")

    def applies_at(self: MaintenanceEntry, wall: float) -> bool:
        if self.reason == "bad":
            raise OverflowError("timestamp out of range")
        return wall < self.until

    monkeypatch.setattr(MaintenanceEntry, "applies_at", applies_at)
    poller = Poller(replace(two_nodes, maintenance=(bad, good)), lambda snapshot: None)
    try:
        snapshot = poller.run_cycle()
    finally:
        poller.stop()
    assert snapshot.maintenance == (good,)
    assert _failures(snapshot)["maintenance"] == 1


def test_a_cycle_failing_whole_republishes_the_last_snapshot_with_the_count(
    two_nodes: Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    published: list[Snapshot] = []
    poller = Poller(two_nodes, published.append)
    first = poller.run_cycle()
    poller._last = first  # as run() keeps it
    try:
        poller._cycle_failed(RuntimeError("the snapshot cannot be made"))
    finally:
        poller.stop()
    (again,) = published
    assert again.nodes == first.nodes and again.completed_at == first.completed_at
    assert _failures(again)["cycle"] == 1


def test_the_distinct_failures_logged_a_cycle_are_bounded(
    caplog: pytest.LogCaptureFixture,
) -> None:
    failures = CycleFailures()
    with caplog.at_level(logging.INFO, logger="ledger_exporter"):
        failures.new_cycle()
        for index in range(100):
            failures.note(CycleStage.NODE, f"n{index}", ValueError("x" * 5000))
    assert failures.counts()[0] == 100
    lines = _lines(caplog)
    assert len(lines) == MAX_LOGGED_PER_CYCLE
    assert all(len(str(line["error"])) < 300 for line in lines)  # the message cut short


def test_the_stale_bound_is_three_intervals_and_a_timeout() -> None:
    assert stale_after(Config(nodes=(), scrape_interval=15.0, scrape_timeout=10.0)) == 55.0


def test_a_snapshot_past_its_bound_is_not_ready_and_drops_the_node_series(
    fake_node: FakeNode,
) -> None:
    """The exporter's own view of staleness, on its monotonic clock: ready and the node
    series while the last cycle is recent, neither once it is older than stale_after; a new
    cycle brings both back."""
    fake_node.play(health_doc(["c1"]), {"c1": chain_doc(10)})
    clock = Clock(1000.0)
    config = Config(
        nodes=(NodeConfig("n", fake_node.url),), scrape_interval=2.0, scrape_timeout=1.0
    )
    exporter = Exporter(config, monotonic=clock)
    poller = Poller(config, lambda snapshot: None, clock)
    try:
        exporter._publish(poller.run_cycle())
        assert exporter.ready()
        assert b"ledger_node_up{" in exporter.exposition().body(False, False)
        clock.advance(stale_after(config))
        assert exporter.ready()  # at the bound: still
        clock.advance(0.5)
        assert not exporter.ready()
        body = exporter.exposition().body(False, False)
        assert b"ledger_node_up{" not in body and b"ledger_blockchain_height{" not in body
        assert b"ledger_exporter_last_successful_cycle_timestamp_seconds " in body
        assert exporter.exposition() is exporter.exposition()  # made once
        exporter._publish(poller.run_cycle())
        assert exporter.ready()
        assert b"ledger_node_up{" in exporter.exposition().body(False, False)
    finally:
        poller.stop()
        exporter.stop()
