"""Seconds behind and reorganisations (issue 37) in the real process over real sockets: the
simulator's ``lag_time`` makes one node reach each height late and ``rewrite_hash`` rewrites
one of its past blocks; ``python -m exporter`` polls them every 500 ms.

What is asserted is what the exporter served, never how long the test took: a lag near the
configured delay within generous bounds (the exporter's answer is only as precise as its
poll, and two cores are shared with everything else), 0 at the head, the lag carried across
a restart by the state file, and exactly one more count per rewrite, on a moving chain and
on a stalled one."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ledger_simulator import SimulatedNetwork
from tests.support.http import fetch
from tests.support.ports import free_port
from tests.support.processes import stop_process
from tests.support.testdata import REPO
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

INTERVAL = 2.0  # the chain's block interval: a checkpoint stays put for about 8 polls
LAG = 20.0  # lag_time's delay, seconds: longer than a restart takes on a loaded machine
BEHIND = "ledger_blockchain_behind_seconds"
REORGS = "ledger_blockchain_reorgs_total"
CHECKPOINT = "ledger_network_blockchain_checkpoint_height"


class Running:
    """One exporter process: the samples it serves, and its log."""

    def __init__(self, process: subprocess.Popen[bytes], address: str, log: Path) -> None:
        self.process, self.address, self.log = process, address, log

    def samples(self, name: str) -> dict[str, float]:
        """``name``'s samples by their ``node`` label (or one sample under '')."""
        assert self.process.poll() is None, self.log.read_text()
        text = fetch(f"http://{self.address}/metrics").text
        return {
            sample.labels.get("node", ""): sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
            if sample.name == name
        }

    def until(
        self, name: str, done: Callable[[dict[str, float]], bool], what: str
    ) -> dict[str, float]:
        """``name``'s samples once ``done`` holds for them."""
        seen: dict[str, float] = {}

        def served() -> dict[str, float] | None:
            seen.clear()
            seen.update(self.samples(name))
            return dict(seen) if done(seen) else None

        found: dict[str, float] = wait_until(
            served,
            timeout=90,
            ignoring=(OSError,),
            message=lambda: f"{what}: {name} {seen}\n{self.log.read_text()[-3000:]}",
        )
        return found

    def cycles(self, count: int) -> None:
        """Wait until ``count`` more polling cycles have been served."""
        name = "ledger_node_last_success_timestamp_seconds"
        for _ in range(count):
            before = max(self.samples(name).values())

            def moved(seen: dict[str, float], before: float = before) -> bool:
                return max(seen.values(), default=0.0) > before

            self.until(name, moved, "a cycle")


@pytest.fixture(scope="module")
def net() -> Iterator[SimulatedNetwork]:
    with SimulatedNetwork(nodes=3, chains=1, block_interval=INTERVAL, seed=11, port=0) as n:
        yield n


@pytest.fixture(scope="module")
def keeping_up(net: SimulatedNetwork) -> list[str]:
    """The nodes that are not the chain's built-in laggard (several blocks late)."""
    laggard = net.topology.laggards[0]
    return [name for index, name in enumerate(net.node_names) if index != laggard]


@pytest.fixture
def config(net: SimulatedNetwork, tmp_path: Path) -> Path:
    path = tmp_path / "exporter.yml"
    nodes = "".join(f"  - name: {n}\n    url: {u}\n" for n, u in net.node_urls.items())
    path.write_text(f"scrape_interval: 500ms\nscrape_timeout: 500ms\nnodes:\n{nodes}")
    return path


@contextlib.contextmanager
def exporter(config: Path, log: Path, *flags: str) -> Iterator[Running]:
    address = f"127.0.0.1:{free_port()}"
    command = [sys.executable, "-m", "exporter", f"--config.file={config}"]
    command += [f"--web.listen-address={address}", *flags]
    with log.open("wb") as stderr:
        process = subprocess.Popen(command, stderr=stderr, cwd=REPO)
    running = Running(process, address, log)
    try:
        running.until(BEHIND, lambda seen: len(seen) == 3, "every node's lag served")
        yield running
    finally:
        stop_process(process)


def test_lag_time_reads_as_seconds_behind_and_a_restart_keeps_it(
    net: SimulatedNetwork, keeping_up: list[str], config: Path, tmp_path: Path
) -> None:
    late = keeping_up[0]
    state = tmp_path / "state.json"
    try:
        with exporter(config, tmp_path / "first.log", f"--state.file={state}") as first:
            first.cycles(3)  # the head's first sightings from here on are the exporter's
            net.set_fault(late, "lag_time", delay_seconds=LAG)
            first.until(BEHIND, lambda seen: seen.get(late, 0) >= LAG / 2, f"{late} behind")
            readings = []
            for _ in range(8):  # cycle after cycle: near the delay, 0 at the head
                first.cycles(1)
                served = first.samples(BEHIND)
                if len(served) == 3:  # (a chain read that timed out on the shared cores: none)
                    readings.append(served)
            assert len(readings) >= 3, readings
            for served in readings:
                assert LAG / 2 <= served[late] <= 2 * LAG, served
                assert min(served.values()) == 0.0, served
            blocks = first.samples("ledger_blockchain_blocks_behind")
            assert blocks.get(late, 5) >= 5, blocks  # 20 s of 2 s blocks
            first.process.send_signal(signal.SIGTERM)
            assert first.process.wait(timeout=20) == 0, first.log.read_text()
        # the restart takes less than the lag: the block the node lacks was reached before
        # the first process stopped, and the state file says when
        with exporter(config, tmp_path / "second.log", f"--state.file={state}") as second:
            restarted = second.until(BEHIND, lambda seen: late in seen, f"{late} read")
            assert LAG / 2 <= restarted[late] <= 2 * LAG, restarted
            assert "memory restored from the state file" in second.log.read_text()
    finally:
        net.set_fault(late, "lag_time", enabled=False)


def test_a_rewritten_block_counts_once_on_a_moving_chain_and_on_a_stalled_one(
    net: SimulatedNetwork, keeping_up: list[str], config: Path, tmp_path: Path
) -> None:
    moving, stalled = keeping_up
    chain = net.chain_ids[0]
    zero = dict.fromkeys(net.node_names, 0.0)
    with exporter(config, tmp_path / "reorgs.log") as running:
        assert running.until(REORGS, lambda seen: len(seen) == 3, "the counters at 0") == zero
        # a moving chain: the block the exporter just compared is rewritten on one node
        (height,) = running.until(CHECKPOINT, bool, "a checkpoint").values()
        net.set_fault(moving, "rewrite_hash", height=int(height), chain=chain)
        running.until(REORGS, lambda seen: seen.get(moving) == 1, f"{moving}'s rewrite counted")
        running.until(CHECKPOINT, lambda seen: seen.get("", 0) >= height + 3, "the chain moving on")
        settled(running, {**zero, moving: 1.0})

        # a stalled chain: its checkpoint stays put and is read again every cycle
        for node in net.node_names:
            net.set_fault(node, "stall")
        try:
            running.cycles(3)
            (still,) = running.until(CHECKPOINT, bool, "the stalled checkpoint").values()
            net.set_fault(stalled, "rewrite_hash", height=int(still), chain=chain)
            running.until(
                REORGS, lambda seen: seen.get(stalled) == 1, f"{stalled}'s rewrite counted"
            )
            settled(running, {**zero, moving: 1.0, stalled: 1.0})  # read again: no new count
            assert running.samples(CHECKPOINT).get("", still) == still
            net.set_fault(stalled, "rewrite_hash", enabled=False, chain=chain)  # back again
            running.until(REORGS, lambda seen: seen.get(stalled) == 2, "the rewrite back counted")
            settled(running, {**zero, moving: 1.0, stalled: 2.0})
        finally:
            for node in net.node_names:
                net.set_fault(node, "stall", enabled=False)
            net.set_fault(moving, "rewrite_hash", enabled=False, chain=chain)


def settled(running: Running, expected: dict[str, float]) -> None:
    """Over 8 more cycles no counter goes past ``expected``, and a cycle serves it whole (a
    chain read that timed out on the shared cores serves none of its node's)."""
    whole = []
    for _ in range(8):
        running.cycles(1)
        served = running.samples(REORGS)
        assert all(count <= expected[node] for node, count in served.items()), served
        whole += [served] if len(served) == len(expected) else []
    assert whole and all(served == expected for served in whole), whole
