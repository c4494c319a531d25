"""``ledger_exporter_state_file_write_failures_total`` in the real process: a state file in a
read-only directory (a read-only bind mount in a mount namespace of the exporter's own, since
root writes through permission bits) counts every write that fails, while the exporter keeps
polling and serving; a writable one serves the counter at 0; without ``--state.file`` there
is none. LedgerExporterStateFileWriteFailing reads it (deploy/prometheus/tests/). The same
process serves ``ledger_exporter_cycle_timeout_seconds``, the config's scrape_timeout."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from tests.support.documents import chain_doc, health_doc
from tests.support.fakenode import FakeNode
from tests.support.http import fetch
from tests.support.processes import ExporterProcess
from tests.support.programs import require_program
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration

FAILURES = "ledger_exporter_state_file_write_failures_total"
CHAIN = "ab" * 32


def counter(process: ExporterProcess) -> float | None:
    """The failures counter /metrics serves (None: no such series)."""
    found = re.search(rf"^{FAILURES} (\S+)$", fetch(f"{process.base}/metrics").text, re.M)
    return None if found is None else float(found[1])


@pytest.fixture
def config(tmp_path: Path, fake_node: FakeNode) -> Path:
    """One node with one chain, polled twice a second: until a write succeeds, every cycle
    tries again."""
    fake_node.set("/health", health_doc([CHAIN]))
    fake_node.set(f"/blockchains/{CHAIN}", chain_doc(100))
    path = tmp_path / "exporter.yml"
    nodes = [{"name": "node-1", "url": fake_node.url, "blockchains": [CHAIN]}]
    settings = {"scrape_interval": "500ms", "scrape_timeout": "400ms", "nodes": nodes}
    path.write_text(yaml.safe_dump(settings), encoding="utf-8")
    return path


def test_writes_into_a_read_only_directory_are_counted(config: Path, tmp_path: Path) -> None:
    readonly = tmp_path / "state"
    readonly.mkdir()
    remount = 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"'
    wrapper = [require_program("unshare"), "--mount", "sh", "-c", remount, str(readonly)]
    exporter = ExporterProcess(config, f"--state.file={readonly}/state.json", wrapped_in=wrapper)
    try:
        exporter.wait_ready()
        wait_until(
            lambda: (counter(exporter) or 0) >= 3,
            timeout=60,
            message=lambda: f"write failures not counted: {counter(exporter)}\n{exporter.log()}",
        )
        assert fetch(f"{exporter.base}/-/healthy").status == 200  # polling and serving on
        log = exporter.log()
        assert log.count("cannot write the state file") == 1, log  # said once, counted each
        assert "Read-only file system" in log
        assert not (readonly / "state.json").exists()
    finally:
        exporter.stop()


def test_a_writable_state_file_serves_the_counter_at_zero(config: Path, tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    exporter = ExporterProcess(config, f"--state.file={state}")
    try:
        exporter.wait_ready()
        wait_until(state.exists, timeout=30, message="the state file was never written")
        assert counter(exporter) == 0
        # the cycle's deadline beside its duration (LedgerExporterCycleNearTimeout's ratio)
        text = fetch(f"{exporter.base}/metrics").text
        assert re.search(r"^ledger_exporter_cycle_timeout_seconds 0\.4$", text, re.M), text
    finally:
        exporter.stop()
    plain = ExporterProcess(config)
    try:
        plain.wait_ready()
        assert counter(plain) is None  # no state file: nothing to count
    finally:
        plain.stop()
