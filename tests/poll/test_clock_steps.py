"""Ages on the monotonic clock (issue 32, break 7), with injected clocks: the poller's wall
clock stepped 2 h ahead and back while its monotonic clock runs on moves the exported
timestamps (re-based, logged once) and no age, on the page or in the metrics; a restart
re-bases the state file's wall-clock times on the new process's own monotonic clock.
``tests/e2e/test_wall_clock_step.py`` does the same to the real process under libfaketime."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from exporter.config.exporter import Config
from exporter.config.nodes import NodeConfig
from exporter.expose.render import Renderer, text_format
from exporter.model.readings import read_chain, read_health
from exporter.model.snapshot import ChainStatus, Snapshot
from exporter.poll.cycle import Poller
from exporter.poll.history import History
from exporter.poll.results import ChainResult, NodeResult
from exporter.poll.state import StateFile, decode, encode
from tests.support.clock import Clock
from tests.support.documents import chain_doc, health_doc
from tests.support.fakenode import FakeNode
from tests.support.webapp import landing_page

NOW = 1_700_000_000.0
STEP = 7200.0
#: The fake node's chain: a vote session open (s1), work pending, a 1m30s consensus timeout
#: (stuck after 5 of them, 7m30s) and a 2 s trigger (stalled after 2s + 1m30s + 3m grace).
STUCK_AFTER = 450.0


def exported(snapshot: Snapshot, name: str) -> float:
    """The one sample of ``name`` the writer exports for ``snapshot``."""
    text = text_format(Renderer(), snapshot).decode()
    (value,) = [
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name
    ]
    return value


def chain_of(snapshot: Snapshot) -> ChainStatus:
    (node,) = snapshot.nodes
    (chain,) = node.chains
    return chain


def alerts(snapshot: Snapshot) -> str:
    """The status page of ``snapshot`` as of the end of its cycle."""
    assert snapshot.completed_at is not None
    return landing_page(snapshot, snapshot.completed_at)


def test_a_wall_clock_step_moves_the_timestamps_and_no_age(
    fake_node: FakeNode, caplog: pytest.LogCaptureFixture
) -> None:
    fake_node.play(health_doc(["c1"]), {"c1": chain_doc(10)})  # a height that never moves
    config = Config(nodes=(NodeConfig("n", fake_node.url),), scrape_timeout=2.0)
    monotonic, wall = Clock(1000.0), Clock(NOW)
    poller = Poller(config, lambda snapshot: None, monotonic, wall=wall)
    try:
        poller.run_cycle()
        monotonic.advance(30)
        wall.advance(30 + STEP)  # NTP steps the wall clock 2 h ahead
        with caplog.at_level(logging.INFO, logger="ledger_exporter"):
            ahead = poller.run_cycle()
        monotonic.advance(STUCK_AFTER)
        wall.advance(STUCK_AFTER - 2 * STEP)  # and then 2 h behind the real time
        behind = poller.run_cycle()
    finally:
        poller.stop()

    chain = chain_of(ahead)
    assert chain.consensus is not None and chain.consensus.session_age == 30.0
    page = alerts(ahead)
    assert "LedgerBlockHeightStalled" not in page and "LedgerVoteSessionStuck" not in page
    # the timestamps follow the wall clock as it is now: on it the height is 30 s old
    success = exported(ahead, "ledger_node_last_success_timestamp_seconds")
    changed = exported(ahead, "ledger_blockchain_height_last_change_timestamp_seconds")
    assert (success, changed) == (NOW + STEP + 30, NOW + STEP)
    (stepped,) = [r for r in caplog.records if "wall clock stepped" in r.getMessage()]
    assert stepped.__dict__["fields"] == {"step_seconds": STEP}

    chain = chain_of(behind)
    assert chain.consensus is not None and chain.consensus.session_age == 30 + STUCK_AFTER
    page = alerts(behind)
    # the step back hides nothing: 8 minutes without a block while work waits, on the one
    # node reading the chain, is its halt (which, as the rules, leaves its stall and stuck
    # session out)
    assert "LedgerBlockchainHalted" in page
    success = exported(behind, "ledger_node_last_success_timestamp_seconds")
    changed = exported(behind, "ledger_blockchain_height_last_change_timestamp_seconds")
    assert success - changed == 30 + STUCK_AFTER


def test_a_step_within_a_second_is_no_step(fake_node: FakeNode) -> None:
    """Reading the two clocks a moment apart is not a step: the timestamps stay put, so an
    unchanged memory is not written to the state file again."""
    fake_node.play(health_doc(["c1"]), {"c1": chain_doc(10)})
    config = Config(nodes=(NodeConfig("n", fake_node.url),), scrape_timeout=2.0)
    monotonic, wall = Clock(1000.0), Clock(NOW)
    poller = Poller(config, lambda snapshot: None, monotonic, wall=wall)
    try:
        first = poller.run_cycle()
        monotonic.advance(15)
        wall.advance(15.4)
        second = poller.run_cycle()
    finally:
        poller.stop()
    assert second.wall_offset == first.wall_offset == NOW - 1000.0


def _read(height: int) -> NodeResult:
    chain = ChainResult("c1", read_chain(chain_doc(height)))
    return NodeResult(NodeConfig("n", "http://x/"), read_health(health_doc([])), None, [chain], 0.1)


def test_a_restart_rebases_the_kept_times_on_its_own_monotonic_clock() -> None:
    """The state file keeps wall-clock times; the next process's monotonic clock started at
    its boot, unrelated to the last one's: ages go on from where they were."""
    before = History()
    before.record([_read(10)], now_mono=500.0)  # first sighting of height 10 and session s1
    kept = decode(encode(before.state(wall_offset=NOW - 500.0)))  # 500 s after a boot
    chain = kept.nodes["n"].chains["c1"]
    assert (chain.height_changed_at, chain.sessions) == (NOW, {"s1": NOW})

    # restarted 60 s later on a machine booted 5 s before: monotonic 5, wall NOW + 60
    offset = NOW + 55.0
    after = History(kept, wall_offset=offset)
    (node,) = after.record([_read(10)], now_mono=5.0)
    (status,) = node.chains
    assert status.consensus is not None and status.consensus.session_age == 60.0
    assert status.height_changed_at == -55.0  # before this boot: a monotonic time below 0
    assert after.state(wall_offset=offset) == kept  # unchanged: the file is not rewritten
    page = landing_page(Snapshot((node,), 0.1, 5.0, wall_offset=offset), 5.0)
    assert "1m 0s ago" in page  # the height changed a minute ago, not "never" or "&mdash;"


def test_the_state_file_keeps_wall_clock_times(fake_node: FakeNode, tmp_path: Path) -> None:
    """What the poller writes is on the wall clock, whatever its monotonic clock says."""
    fake_node.play(health_doc(["c1"]), {"c1": chain_doc(10)})
    config = Config(nodes=(NodeConfig("n", fake_node.url),), scrape_timeout=2.0)
    path = tmp_path / "state.json"
    poller = Poller(
        config, lambda snapshot: None, Clock(42.0), state=StateFile(str(path)), wall=Clock(NOW)
    )
    try:
        poller.run_cycle()
        assert poller.keep_state()
    finally:
        poller.stop()
    chain = decode(path.read_bytes()).nodes["n"].chains["c1"]
    assert (chain.height_changed_at, chain.sessions) == (NOW, {"s1": NOW})
