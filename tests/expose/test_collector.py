"""Golden files: recorded node answers + a config -> the exact bytes ``/metrics`` serves.

Each folder under ``testdata/golden`` holds ``config.yml``, the answers of each node under
``nodes/<host>/`` (``tests/support/golden.py`` says how they are laid out and served),
``expected.prom`` (text format) and ``expected.om`` (OpenMetrics). A real Exporter serves
``/metrics`` over the recorded answers, and the runtime series and wall-time values are
masked. Run with ``UPDATE_GOLDEN=1`` to rewrite the expected files after a deliberate change.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from exporter.app import Exporter
from exporter.config.exporter import load_config
from exporter.expose import metrics
from exporter.expose.metrics import RUNTIME_SAMPLE_NAMES
from exporter.expose.render import Renderer, text_format
from exporter.model.fields import HealthReading
from exporter.model.network import Agreement, ChainAgreement, NetworkView
from exporter.model.snapshot import NodeStatus, Snapshot
from tests.support.fakenode import FakeNode
from tests.support.golden import CASES, CLOCK, GOLDEN, assert_golden, poll_golden_case, serve_case
from tests.support.http import fetch
from tests.support.oracle import Samples, render_collectors, snapshot_collectors
from tests.support.prometheus import Promtool
from tests.support.waiting import wait_until

_VARYING = re.compile(
    r"^((?:ledger_node_scrape|ledger_node_request|ledger_exporter_cycle)_duration_seconds\S*) "
    r"\S+$",
    re.M,
)
#: build_info's labels that depend on the build and the Python running the tests (the
#: version is the package's, shown as it is); tests/test_build_info.py checks their values.
_BUILD = re.compile(r'^(ledger_exporter_build_info\{)branch="[^"]*",python_version="[^"]*",'
                    r'revision="[^"]*"', re.M)  # fmt: skip
_BUILD_MASK = r'\1branch="<branch>",python_version="<python>",revision="<revision>"'


def mask_varying(text: str) -> str:
    """Wall times and build_info's build-dependent labels, masked."""
    return _BUILD.sub(_BUILD_MASK, _VARYING.sub(r"\1 <duration>", text))


_RUNTIME = re.compile(r"^(?:# (?:HELP|TYPE) )?(?:process|python)_\w+.*\n", re.M)
OPENMETRICS = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"


@pytest.fixture(scope="module")
def golden_server() -> Iterator[FakeNode]:
    server = FakeNode().start()
    yield server
    server.stop()


def render_snapshot(snapshot: Snapshot) -> str:
    """The exporter's own families (no runtime metrics) by its writer, wall times masked."""
    return mask_varying(text_format(Renderer(), snapshot).decode())


def oracle_text(snapshot: Snapshot) -> str:
    """The same, by client_python's collectors (``tests/support/oracle.py``)."""
    return mask_varying(render_collectors(snapshot_collectors(snapshot)).decode())


def served_metrics(case: Path, server: FakeNode) -> tuple[str, str, str]:
    """What a real Exporter's ``/metrics`` serves for ``case``: text and OpenMetrics (masked),
    and the text as served."""
    config = serve_case(server, load_config(str(case / "config.yml")), case)
    exporter = Exporter(config, clock=lambda: CLOCK, monotonic=lambda: CLOCK)
    http = exporter.start("127.0.0.1:0")
    base = f"http://127.0.0.1:{http.port}"
    try:
        wait_until(exporter.ready, message="the exporter's first cycle")
        answers = [
            fetch(base + "/metrics", headers={"Accept": accept})
            for accept in ("text/plain;version=0.0.4", OPENMETRICS)
        ]
    finally:
        exporter.stop()
    assert [answer.status for answer in answers] == [200, 200]
    text, om = (answer.text for answer in answers)
    return _mask(text), _mask(om), text


def _mask(text: str) -> str:
    text = _RUNTIME.sub("", text)
    assert not any(name in text for name in RUNTIME_SAMPLE_NAMES)
    return mask_varying(text)


@pytest.mark.parametrize("case", CASES)
def test_golden_exposition_as_served(
    case: str, golden_server: FakeNode, promtool: Promtool
) -> None:
    folder = GOLDEN / case
    text, om, raw = served_metrics(folder, golden_server)
    promtool.check_metrics(raw)
    assert_golden(text, folder / "expected.prom")
    assert_golden(om, folder / "expected.om")
    assert om.endswith("# EOF\n")


@pytest.mark.parametrize("case", CASES)
def test_golden_text_matches_client_python(case: str, golden_server: FakeNode) -> None:
    """The oracle (client_python's collectors) agrees with the served golden bytes (the
    exporter's config was loaded at start, at the golden clock)."""
    snapshot = poll_golden_case(GOLDEN / case, golden_server)
    snapshot = replace(snapshot, config_reload_success_at=CLOCK)
    assert oracle_text(snapshot) == (GOLDEN / case / "expected.prom").read_text()


def test_golden_cases_exist() -> None:
    assert {"documented", "odd-values", "failures"} <= set(CASES)


def test_values_read_back_by_client_python() -> None:
    """The written samples, read back by client_python's parser, are the golden mapping's."""
    snapshot = poll_golden_case(GOLDEN / "documented")
    registry = Samples(text_format(Renderer(), snapshot))
    labels = {"node": "validator-1", "region": "eu-west", "role": "validator"}
    chain = {**labels, "blockchain": "8f2a9c"}
    assert registry.get_sample_value("ledger_node_up", labels) == 1.0
    assert registry.get_sample_value("ledger_blockchain_height", chain) == 120443.0
    assert registry.get_sample_value("ledger_blockchain_vote_round", chain) == 3.0
    assert registry.get_sample_value("ledger_blockchain_consensus_timeout_seconds", chain) == 90.0
    assert registry.get_sample_value(
        "ledger_blockchain_last_message_timestamp_seconds", chain
    ) == pytest.approx(1714564803.25)
    spaced = {**labels, "blockchain": "chain/with space"}
    assert registry.get_sample_value("ledger_blockchain_consensus_timeout_seconds", spaced) == 7200
    assert registry.get_sample_value("ledger_blockchain_vote_round", spaced) is None
    assert registry.get_sample_value("ledger_blockchain_vote_sessions", spaced) == 0.0


def test_odd_values_never_become_samples() -> None:
    snapshot = poll_golden_case(GOLDEN / "odd-values")
    text = render_snapshot(snapshot)
    c1 = 'blockchain="c1",node="odd-1"'
    for absent in (
        "ledger_blockchain_last_message_timestamp_seconds",  # no time zone
        "ledger_blockchain_in_council",  # "true" is a string
        "ledger_blockchain_voting",  # 1 is not a boolean
        "ledger_blockchain_pending_messages",  # negative
        "ledger_blockchain_delayed_messages",  # "NaN"
        "ledger_blockchain_council_members",  # a string, not a list
        "ledger_blockchain_vote_sessions",  # null
        "ledger_blockchain_tx_max_time_trigger_seconds",  # a number, not a duration string
        "ledger_blockchain_consensus_timeout_seconds",  # negative
        "ledger_blockchain_peers",  # null
    ):
        assert f"{absent}{{{c1}}}" not in text, absent
    assert f"ledger_blockchain_height{{{c1}}} 1000.0" in text
    assert f"ledger_blockchain_tx_karma_threshold{{{c1}}} 12.5" in text


def test_network_view_series_carry_node_labels_and_skip_unread_nodes() -> None:
    health = HealthReading(None, None, "p1", 1.0, 1.0, ("c1",))
    nodes = tuple(
        NodeStatus(name, labels, health, None, (), 0.1, CLOCK)
        for name, labels in (("n1", (("region", "eu"),)), ("n2", ()), ("n3", ()))
    )
    view = NetworkView(
        chains=(
            ChainAgreement(
                "c1",
                95,
                2,
                Agreement.of((("n1", True), ("n2", False))),
                1,
                Agreement.of((("n1", True), ("n3", True))),
                96,
            ),
        ),
        partitions=2,
        polled_peers=(("n1", 1), ("n2", 1), ("n3", 0)),
    )
    snapshot = Snapshot(nodes, 1.0, CLOCK, network=view)
    value = Samples(text_format(Renderer(), snapshot, metrics.NETWORK_FAMILIES)).get_sample_value
    assert value("ledger_network_blockchain_checkpoint_height", {"blockchain": "c1"}) == 95
    assert value("ledger_network_blockchain_checkpoint_hashes", {"blockchain": "c1"}) == 2
    assert value("ledger_network_blockchain_council_views", {"blockchain": "c1"}) == 1
    n1 = {"node": "n1", "region": "eu", "blockchain": "c1"}
    assert value("ledger_blockchain_checkpoint_agrees", n1) == 1
    assert value("ledger_blockchain_checkpoint_agrees", {"node": "n2", "blockchain": "c1"}) == 0
    assert value("ledger_blockchain_checkpoint_agrees", {"node": "n3", "blockchain": "c1"}) is None
    assert value("ledger_blockchain_council_agrees", {"node": "n2", "blockchain": "c1"}) is None
    assert value("ledger_network_peer_partitions") == 2
    assert value("ledger_node_polled_peers", {"node": "n3"}) == 0
    assert value("ledger_node_polled_peers", {"node": "n1", "region": "eu"}) == 1


def test_no_network_view_gives_no_network_series() -> None:
    text = text_format(Renderer(), Snapshot(), metrics.NETWORK_FAMILIES).decode()
    assert "ledger_network" not in text and "ledger_node_polled_peers" not in text
