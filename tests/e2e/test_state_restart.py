"""``--state.file`` in the real process (issue 19): SIGTERM, then a start on the same file keeps
a stalled chain's ``height_last_change`` clock; a height that changed gets a new one; a reload
keeps the clock as before; a corrupt file of its own is one log line, moved aside, and a fresh
start.

A simulated network (in this process, on the real clock) with node-2 stalled, polled every
second by ``python -m exporter``."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ledger_simulator import SimulatedNetwork
from tests.support.http import fetch, get_json
from tests.support.ports import free_port
from tests.support.processes import stop_process
from tests.support.testdata import REPO
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

CHANGED = "ledger_blockchain_height_last_change_timestamp_seconds"


class Running:
    """One exporter process: its address, its log, and the samples it serves."""

    def __init__(self, process: subprocess.Popen[bytes], address: str, log: Path) -> None:
        self.process, self.address, self.log = process, address, log

    def changed(self) -> dict[str, float]:
        """Per node, the height-change time of its (one) chain."""
        text = fetch(f"http://{self.address}/metrics").text
        return {
            sample.labels["node"]: sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
            if sample.name == CHANGED
        }

    def until(self, done: Callable[[dict[str, float]], bool], what: str) -> dict[str, float]:
        """The clocks served once ``done`` holds for them (connection errors: not yet)."""
        seen: dict[str, float] = {}

        def served() -> dict[str, float] | None:
            assert self.process.poll() is None, self.log.read_text()
            seen.update(self.changed())
            return dict(seen) if done(seen) else None

        found: dict[str, float] = wait_until(
            served,
            timeout=30,
            ignoring=(OSError,),  # not listening yet
            message=lambda: f"{what}: {seen}\n{self.log.read_text()}",
        )
        return found

    def cycles(self, count: int) -> None:
        """Wait until ``count`` more polling cycles have been served (each cycle moves the
        nodes' last-success times)."""
        for _ in range(count):
            before = self.last_success()

            def moved(before: float = before) -> bool:
                return self.last_success() > before

            wait_until(moved, timeout=30, message="a cycle")

    def last_success(self) -> float:
        text = fetch(f"http://{self.address}/metrics").text
        return max(
            sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
            if sample.name == "ledger_node_last_success_timestamp_seconds"
        )

    def reload(self) -> None:
        answer = fetch(f"http://{self.address}/-/reload", method="POST")
        assert answer.status == 200, answer.text


@contextlib.contextmanager
def exporter(
    config: Path, log: Path, flags: tuple[str, ...] = (), env: Mapping[str, str] | None = None
) -> Iterator[Running]:
    address = f"127.0.0.1:{free_port()}"
    command = [sys.executable, "-m", "exporter", f"--config.file={config}"]
    command += [f"--web.listen-address={address}", *flags]
    with log.open("wb") as stderr:
        process = subprocess.Popen(command, stderr=stderr, cwd=REPO, env=env)
    running = Running(process, address, log)
    try:
        running.until(lambda seen: len(seen) == 3, "every node's clock served")
        yield running
    finally:
        stop_process(process)


def stop(running: Running) -> None:
    """SIGTERM, as systemd, Docker and Kubernetes stop it; it must exit cleanly."""
    running.process.send_signal(signal.SIGTERM)
    assert running.process.wait(timeout=20) == 0, running.log.read_text()


def state_lines(log: Path) -> list[str]:
    return [line for line in log.read_text().splitlines() if "state file" in line]


def test_a_restart_keeps_a_stalled_chains_clock(tmp_path: Path) -> None:
    state = tmp_path / "state" / "ledger-exporter.json"
    state.parent.mkdir()
    with SimulatedNetwork(nodes=3, chains=1, block_interval=0.5, seed=11, port=0) as net:
        net.set_fault("node-2", "stall")
        config = tmp_path / "exporter.yml"
        nodes = "".join(f"  - name: {n}\n    url: {u}\n" for n, u in net.node_urls.items())
        config.write_text(f"scrape_interval: 1s\nscrape_timeout: 1s\nnodes:\n{nodes}")

        with exporter(config, tmp_path / "first.log", (f"--state.file={state}",)) as first:
            before = first.until(lambda seen: seen["node-1"] > seen["node-2"], "node-1 moves")
            stop(first)
        kept = json.loads(state.read_text())
        assert kept["format"] == "ledger-exporter-state" and kept["version"] == 1
        assert set(kept["nodes"]) == {"node-1", "node-2", "node-3"}
        assert "http" not in state.read_text()  # no URL in it
        (first_start,) = state_lines(first.log)
        assert "no state file yet" in first_start

        # node-1's height moves on while no exporter runs
        chain = net.chain_ids[0]
        kept_height = kept["nodes"]["node-1"]["blockchains"][chain]["height"]
        status = f"{net.node_urls['node-1'].rstrip('/')}/blockchains/{chain}"
        wait_until(lambda: get_json(status)["blockHeight"] > kept_height, message="a new block")
        environment = {**os.environ, "LEDGER_EXPORTER_STATE_FILE": str(state)}
        with exporter(config, tmp_path / "second.log", env=environment) as second:
            after = second.changed()
            assert after["node-2"] == before["node-2"]  # same node, chain, height: kept
            assert after["node-1"] > before["node-1"]  # a new height: a new clock
            (restored,) = state_lines(second.log)
            assert "memory restored from the state file" in restored
            second.reload()
            second.process.send_signal(signal.SIGHUP)
            second.cycles(2)  # two cycles on the reloaded config
            assert second.changed()["node-2"] == before["node-2"]
            net.set_fault("node-2", "stall", enabled=False)
            second.until(lambda seen: seen["node-2"] > before["node-2"], "node-2 moves again")
            stop(second)

        damaged = state.read_bytes()[:-40]  # its own, cut short
        state.write_bytes(damaged)
        with exporter(config, tmp_path / "third.log", (f"--state.file={state}",)) as third:
            assert third.changed()["node-2"] > before["node-2"]
            stop(third)
        (ignored,) = state_lines(third.log)
        assert "state file not used, moved aside; starting with no memory" in ignored
        assert "problem=corrupt" in ignored
        (aside,) = state.parent.glob("ledger-exporter.json.corrupt-*")
        assert aside.read_bytes() == damaged  # kept, named in the log
        assert f"moved_to={aside}" in ignored
        assert json.loads(state.read_text())["version"] == 1  # a new one written whole
