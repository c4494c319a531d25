"""Golden files for /probe: the recorded node answers of ``testdata/golden/<case>/`` probed one
node at a time give ``testdata/golden-probe/<case>.prom`` (``UPDATE_GOLDEN=1`` rewrites it).

Each probe's node and chain samples must also be exactly the daemon's for the same answers
(``testdata/golden/<case>/expected.prom``): probe mode leaves out what needs history or other
nodes, and adds only its own two series.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from exporter.config.exporter import load_config
from exporter.config.nodes import NodeConfig
from exporter.model.snapshot import Snapshot
from exporter.poll.probe_node import EngineProber
from exporter.poll.results import NodeResult
from exporter.web.probe_endpoint import probe_status, render_probe
from tests.support.fakenode import FakeNode
from tests.support.golden import GOLDEN, PROBE_GOLDEN, assert_golden, serve_case
from tests.support.oracle import probe_collectors, render_collectors

CASES = ("documented", "failures", "odd-values", "hostile-strings")
_DURATION = re.compile(r"^((?:ledger_probe|ledger_node_scrape)_duration_seconds\S*) \S+$", re.M)
#: Families only the daemon has: counters, times and comparisons need history or other nodes.
DAEMON_ONLY = (
    "ledger_exporter_",
    "ledger_node_scrape_errors_total",
    "ledger_node_last_success_timestamp_seconds",
    "ledger_node_retry_after_total",  # the daemon holds nodes back; a probe asks once
    # the transport (the last handshake, the phases): the daemon's, kept across cycles
    "ledger_node_tls_",
    "ledger_node_request_duration_seconds",
    "ledger_blockchain_blocks_behind",
    "ledger_blockchain_behind_seconds",  # issue 37: the head's clock is the daemon's
    "ledger_blockchain_height_last_change_timestamp_seconds",
    # consensus health followed across cycles (issue 21)
    "ledger_blockchain_vote_session_age_seconds",
    "ledger_blockchain_vote_round_changes_total",
    "ledger_blockchain_leader_failed_rounds_total",
    "ledger_blockchain_council_changes_total",
    "ledger_blockchain_reorgs_total",  # checkpoint blocks followed across cycles (issue 37)
    # cross-node: they compare the polled nodes, which one probe cannot
    "ledger_blockchain_checkpoint_agrees",
    "ledger_blockchain_council_agrees",
    "ledger_blockchain_consensus_agrees",
    "ledger_node_polled_peers",
    # a chain listed by no other up node needs the other nodes (docs/probe-mode.md says what
    # replaces it)
    "ledger_node_unexpected_blockchains",
)


def served_nodes(server: FakeNode, case: Path) -> list[NodeConfig]:
    """The case's nodes, their recorded answers served by ``server`` over real sockets, as the
    daemon's golden test serves them; a node without a folder refuses connections."""
    return list(serve_case(server, load_config(str(case / "config.yml")), case).nodes)


def probe_results(case: Path, static_labels: bool = False) -> list[NodeResult]:
    """Each node of ``case`` probed, its recorded answers served over real sockets. A probe
    has no static labels (Prometheus adds target labels); ``static_labels`` keeps the
    config's, to compare with the daemon's series."""
    config = load_config(str(case / "config.yml"))
    engine = EngineProber(
        4, config.max_response_bytes, config.max_blockchains_per_node, bounds=config.bounds
    )
    server = FakeNode().start()
    results: list[NodeResult] = []
    try:
        for node in served_nodes(server, case):
            labels = node.labels if static_labels else ()
            probed = NodeConfig(node.name, node.url, labels, node.blockchains)
            results.append(engine.probe_node(probed, time.monotonic() + 10))
    finally:
        engine.close()
        server.stop()
    return results


def probe_case(case: Path, static_labels: bool = False) -> dict[str, str]:
    """Node name -> the text exposition of its probe, durations masked."""
    return {
        result.node.name: _DURATION.sub(r"\1 <duration>", render_probe(result, 0.0, False).decode())
        for result in probe_results(case, static_labels)
    }


def samples(text: str) -> set[str]:
    return {line for line in text.splitlines() if line and not line.startswith("#")}


@pytest.mark.parametrize("case", CASES)
def test_probe_golden_exposition(case: str) -> None:
    answers = probe_case(GOLDEN / case)
    actual = "".join(f"# --- probe of {name}\n{text}" for name, text in answers.items())
    assert_golden(actual, PROBE_GOLDEN / f"{case}.prom")


@pytest.mark.parametrize("case", CASES)
def test_probe_series_are_the_daemons_for_the_same_answers(case: str) -> None:
    daemon = samples((GOLDEN / case / "expected.prom").read_text())
    answers = probe_case(GOLDEN / case, static_labels=True)
    for name, text in answers.items():
        node_label = f'node="{name}"'
        up = next(s for s in daemon if s.startswith("ledger_node_up{") and node_label in s)
        ours = {s for s in samples(text) if not s.startswith("ledger_probe_")}
        theirs = {
            s
            for s in daemon
            if node_label in s
            and not s.startswith(DAEMON_ONLY)
            and not s.startswith("ledger_node_up")
        }
        if "ledger_probe_success 1.0" in text:
            assert ours - {s for s in ours if s.startswith("ledger_node_up")} == theirs, name
            assert up.endswith(" 1.0") and up in ours
        else:  # the node could not be read: only the probe's own series
            assert ours == set(), name
            assert up.endswith(" 0.0")


@pytest.mark.parametrize("case", CASES)
def test_probe_bytes_are_client_pythons(case: str) -> None:
    """/probe goes through the writer of /metrics; client_python's collectors over the same
    probe (``tests/support/oracle.py``) write the same bytes, in both formats."""
    for result in probe_results(GOLDEN / case, static_labels=True):
        snapshot = Snapshot(nodes=(probe_status(result),) if result.health is not None else ())
        for om in (False, True):
            expected = render_collectors(probe_collectors(snapshot, 0.25), openmetrics_format=om)
            assert render_probe(result, 0.25, om) == expected + (b"# EOF\n" if om else b"")


def test_probe_status_keeps_no_history() -> None:
    engine = EngineProber(4, 1 << 20, 100)
    server = FakeNode().start()
    try:
        node = served_nodes(server, GOLDEN / "documented")[0]
        status = probe_status(engine.probe_node(node, time.monotonic() + 10))
    finally:
        engine.close()
        server.stop()
    assert status.up and not list(status.error_counts) and status.last_success is None
    assert status.chains and all(
        c.blocks_behind is None
        and c.behind_seconds is None
        and c.height_changed_at is None
        and c.reorgs is None
        for c in status.chains
    )
