"""Maintenance entries through the poller and the writer: an entry applies while the wall
clock is before its ``until`` and stops applying by itself at the first cycle after it; a
reload adds or removes one at the next cycle; the node in maintenance is still polled; the
series are written as client_python writes them (``tests/support/oracle.py``), a node's with
its static labels. ``tests/e2e/test_maintenance.py`` does the same to the real process."""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest

from exporter.config.exporter import Config, parse_config
from exporter.config.maintenance import MaintenanceEntry
from exporter.config.nodes import NodeConfig
from exporter.expose import metrics
from exporter.expose.render import Renderer, text_format
from exporter.model.snapshot import NodeStatus, Snapshot
from exporter.poll.cycle import Poller
from tests.support.clock import Clock
from tests.support.documents import chain_doc, health_doc
from tests.support.fakenode import FakeNode
from tests.support.oracle import MaintenanceCollector, render_collectors

NOW = 1_795_888_800.0  # 2026-11-28T18:00:00Z


def test_an_entry_applies_until_its_until_passes_on_the_wall_clock(
    fake_node: FakeNode, caplog: pytest.LogCaptureFixture
) -> None:
    fake_node.play(health_doc(["c1"]), {"c1": chain_doc(10)})
    entry = MaintenanceEntry("n", "", NOW + 20, "kernel upgrade")
    chain_entry = MaintenanceEntry("", "c1", NOW + 100, "chain upgrade")
    config = Config(
        nodes=(NodeConfig("n", fake_node.url),),
        scrape_timeout=2.0,
        maintenance=(entry, chain_entry),
    )
    monotonic, wall = Clock(1000.0), Clock(NOW)
    poller = Poller(config, lambda snapshot: None, monotonic, wall=wall)
    try:
        with caplog.at_level(logging.INFO, logger="ledger_exporter"):
            first = poller.run_cycle()
            monotonic.advance(15)
            wall.advance(15)
            second = poller.run_cycle()
            monotonic.advance(15)
            wall.advance(15)  # 10 s past the node's until
            third = poller.run_cycle()
    finally:
        poller.stop()
    assert first.maintenance == second.maintenance == (entry, chain_entry)
    assert third.maintenance == (chain_entry,)
    assert all(snapshot.nodes[0].up for snapshot in (first, second, third))  # still polled
    assert len(fake_node.paths) >= 6  # /health and the chain, every cycle
    logged = [(r.getMessage(), r.__dict__["fields"]) for r in caplog.records]
    started = {"node": "n", "until": "2026-11-28T18:00:20Z", "reason": "kernel upgrade"}
    assert logged.count(("maintenance applies", started)) == 1
    assert logged.count(("maintenance ended", started)) == 1
    assert [message for message, _ in logged].count("maintenance applies") == 2


def test_a_reload_adds_and_removes_an_entry_at_the_next_cycle(fake_node: FakeNode) -> None:
    fake_node.play(health_doc(["c1"]), {"c1": chain_doc(10)})
    config = Config(nodes=(NodeConfig("n", fake_node.url),), scrape_timeout=2.0)
    entry = MaintenanceEntry("n", "", NOW + 3600, "kernel upgrade")
    poller = Poller(config, lambda snapshot: None, Clock(1000.0), wall=Clock(NOW))
    try:
        assert poller.run_cycle().maintenance == ()
        poller.apply(replace(config, maintenance=(entry,)))
        assert poller.run_cycle().maintenance == (entry,)
        poller.apply(config)
        assert poller.run_cycle().maintenance == ()
    finally:
        poller.stop()


def _node(name: str, labels: tuple[tuple[str, str], ...] = ()) -> NodeStatus:
    return NodeStatus(name, labels, None, "refused", (), 0.1, None)


def test_the_series_are_written_as_client_python_writes_them() -> None:
    snapshot = Snapshot(
        (_node("n1", (("site", "eu"),)), _node("n2")),
        maintenance=(
            MaintenanceEntry("n1", "", NOW, 'swap "disk" \\ rack 4'),
            MaintenanceEntry("gone", "", NOW, "a node no longer polled: no series"),
            MaintenanceEntry("", "c1", NOW, "chain upgrade"),
        ),
    )
    text = text_format(Renderer(), snapshot, metrics.MAINTENANCE_FAMILIES)
    assert text == render_collectors([MaintenanceCollector(snapshot)])
    samples = [line for line in text.decode().splitlines() if not line.startswith("#")]
    assert samples == [
        'ledger_node_maintenance{node="n1",reason="swap \\"disk\\" \\\\ rack 4",site="eu"} 1.0',
        'ledger_blockchain_maintenance{blockchain="c1",reason="chain upgrade"} 1.0',
    ]
    assert text_format(Renderer(), Snapshot((_node("n1"),)), metrics.MAINTENANCE_FAMILIES) == b""


def test_a_probe_only_exporter_exports_a_chains_entry() -> None:
    """In probe mode without nodes, a chain's entry is still on the daemon's /metrics (the
    inhibit rules match it by blockchain); a node entry cannot name a probed target."""
    config = parse_config(
        "probe:\n  allowed_targets: ['http://127\\\\.0\\\\.0\\\\.1:[0-9]+/']\n"
        "maintenance:\n  - {blockchain: c1, until: 2026-11-28T18:00:20Z, reason: upgrade}\n"
    )
    poller = Poller(config, lambda snapshot: None, Clock(1000.0), wall=Clock(NOW))
    try:
        snapshot = poller.run_cycle()
    finally:
        poller.stop()
    text = text_format(Renderer(), snapshot, metrics.MAINTENANCE_FAMILIES).decode()
    assert 'ledger_blockchain_maintenance{blockchain="c1",reason="upgrade"} 1.0' in text


@pytest.mark.parametrize("step", [-7200.0, +7200.0])
def test_once_started_a_window_keeps_its_length_whatever_the_wall_clock_does(
    fake_node: FakeNode, caplog: pytest.LogCaptureFixture, step: float
) -> None:
    """A window of 30 s started: a wall-clock step back 2 h does not extend it, a step on 2 h
    does not end it; the step itself is logged as always."""
    fake_node.play(health_doc(["c1"]), {"c1": chain_doc(10)})
    entry = MaintenanceEntry("n", "", NOW + 30, "kernel upgrade")
    config = Config(
        nodes=(NodeConfig("n", fake_node.url),), scrape_timeout=2.0, maintenance=(entry,)
    )
    monotonic, wall = Clock(1000.0), Clock(NOW)
    poller = Poller(config, lambda snapshot: None, monotonic, wall=wall)
    try:
        with caplog.at_level(logging.INFO, logger="ledger_exporter"):
            assert poller.run_cycle().maintenance == (entry,)
            monotonic.advance(15)
            wall.advance(15 + step)
            assert poller.run_cycle().maintenance == (entry,)  # 15 s of 30 left
            monotonic.advance(20)
            wall.advance(20)
            assert poller.run_cycle().maintenance == ()  # 30 s passed on the monotonic clock
            monotonic.advance(15)
            wall.advance(15)
            assert poller.run_cycle().maintenance == ()  # never starts again
    finally:
        poller.stop()
    messages = [r.getMessage() for r in caplog.records]
    assert any("wall clock stepped" in message for message in messages)
    assert messages.count("maintenance applies") == 1
    assert messages.count("maintenance ended") == 1


def test_an_entry_for_a_chain_no_node_lists_is_warned_of_once(
    fake_node: FakeNode, caplog: pytest.LogCaptureFixture
) -> None:
    fake_node.play(health_doc(["c1"]), {"c1": chain_doc(10)})
    listed = MaintenanceEntry("", "c1", NOW + 3600, "chain upgrade")
    typo = MaintenanceEntry("", "c-one", NOW + 3600, "chain upgrade")
    config = Config(
        nodes=(NodeConfig("n", fake_node.url),), scrape_timeout=2.0, maintenance=(listed, typo)
    )
    poller = Poller(config, lambda snapshot: None, Clock(1000.0), wall=Clock(NOW))
    try:
        with caplog.at_level(logging.INFO, logger="ledger_exporter"):
            poller.run_cycle()
            poller.run_cycle()
            warned = [r for r in caplog.records if "no polled node lists" in r.getMessage()]
            assert len(warned) == 1
            assert warned[0].levelname == "WARNING"
            assert warned[0].__dict__["fields"] == {"count": 1, "blockchains": "c-one"}
            fake_node.play(health_doc(["c1", "c-one"]), {"c1": chain_doc(10)})
            poller.run_cycle()
    finally:
        poller.stop()
    assert any("is listed by a polled node now" in r.getMessage() for r in caplog.records)
